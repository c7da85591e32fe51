"""refimpl.driver, the core-set loop shared by every formulation and both engines, against hand-written
formulas and hand-derived call sequences.

fast == ref cannot see a bug here (both engines run this code), and the bound/oracle tests see it only
through its effect on a fitted model.  So the helpers (stop rules, margin scale, inner tolerance, KKT
gap, initial pair, violator selection) are checked against the formulas of the driver's docstrings
written out again, and the loop itself runs on ``ToyOps``: a scripted numerics object whose points have
fixed squared distances, which records every call, so that the expected sequence of scans, additions and
solves can be derived by hand (001 Sec. 4 steps 1-5, the confirmation samples, the batched variant).
"""
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from refimpl import driver
from refimpl.driver import (HYBRID_NU, INNER_EPS_MAX, MAX_ADD, THETA, Ball, Scan, d2_threshold, initial_pair,
                            inner_tolerance, kkt_gap, make_rng, margin_scale, run_core_set_loop, stop_accepts,
                            warn_if_radius_too_coarse)

TINY = np.finfo(float).tiny


def ball(R2=2.0, margin=0.5, c0=1.25, d2_sv_min=1.9, d2_core_max=2.1):
    return Ball.make(R2, margin, c0, d2_sv_min, d2_core_max)


# ------------------------------------------------------------------------------------------------
# the helpers
# ------------------------------------------------------------------------------------------------
def test_margin_scale_is_the_non_constant_part_of_the_dual_objective():
    assert margin_scale(2.0, 1.25) == 0.75
    assert margin_scale(1.0, 1.25) == 0.25          # |R^2 - c0|, also when R^2 < c0
    assert margin_scale(3.0, None) == 3.0           # no constant part: S = R^2
    assert margin_scale(-3.0, None) == 3.0
    assert margin_scale(0.0, None) == TINY          # never zero: the rules divide by it
    assert margin_scale(1.0, 1.0) == TINY


def test_ball_make_sets_S_and_the_functional_margin_scale_tau():
    b = Ball.make(2.0, 0.5, 1.25, 1.9, 2.1)
    assert (b.R2, b.margin, b.d2_sv_min, b.d2_core_max) == (2.0, 0.5, 1.9, 2.1)
    assert b.S == 0.75
    assert b.tau == abs(2.0 - 1.25 - 0.5) / 2 == 0.125
    b = Ball.make(0.5, 2.0, 1.0, 0.0, 0.0)          # |R^2 - c0 - margin| / 2 with a negative inside
    assert b.tau == 1.25 and b.S == 0.5
    b = Ball.make(3.0, 1.0, None, 0.0, 0.0)         # no c0: tau = |R^2 - margin| / 2, S = R^2
    assert b.tau == 1.0 and b.S == 3.0
    assert Ball.make(1.5, 0.5, 1.0, 0.0, 0.0).tau == TINY   # floored, never zero


@pytest.mark.parametrize("eps", [0.3, 1e-3])
def test_d2_threshold_of_each_rule(eps):
    b = ball()
    slack = (1 + eps) ** 2 - 1
    assert d2_threshold("radius", eps, b) == pytest.approx((1 + eps) ** 2 * 2.0, rel=1e-15)
    assert d2_threshold("margin", eps, b) == pytest.approx(2.0 + slack * 0.75, rel=1e-15)
    assert d2_threshold("gap", eps, b) == pytest.approx(1.9 + 2 * eps * 0.75, rel=1e-15)
    # hybrid: the radius rule capped at 2 nu tau (tau = 0.125 here): the cap binds at eps = 0.3,
    # the radius part at eps = 1e-3
    expected = 2.0 + min(slack * 2.0, 2 * HYBRID_NU * 0.125)
    assert d2_threshold("hybrid", eps, b) == pytest.approx(expected, rel=1e-15)
    assert (2 * HYBRID_NU * 0.125 < slack * 2.0) == (eps == 0.3)
    assert HYBRID_NU == 1.0


def test_stop_accepts_is_inclusive_at_the_threshold():
    b = ball()
    for stop in driver.STOPS:
        thr = d2_threshold(stop, 0.1, b)
        assert stop_accepts(stop, 0.1, b, thr)
        assert not stop_accepts(stop, 0.1, b, np.nextafter(thr, np.inf))
        assert stop_accepts(stop, 0.1, b, thr - 1.0)


def test_inner_tolerance_of_each_rule():
    b = ball()                                       # R^2 = 2, S = 0.75
    assert inner_tolerance("radius", 0.1, b) == pytest.approx(0.1 * 2.0, rel=1e-15)
    for stop in ("margin", "gap"):
        assert inner_tolerance(stop, 1e-3, b) == pytest.approx(1e-3 * 0.75, rel=1e-15)
        # never looser than INNER_EPS_MAX of S
        assert inner_tolerance(stop, 0.5, b) == pytest.approx(INNER_EPS_MAX * 0.75, rel=1e-15)
    assert INNER_EPS_MAX == 1e-2
    # hybrid: the smaller of eps R^2 and min(eps, INNER_EPS_MAX) S
    assert inner_tolerance("hybrid", 1e-3, b) == pytest.approx(min(1e-3 * 2.0, 1e-3 * 0.75), rel=1e-15)
    assert inner_tolerance("hybrid", 0.5, b) == pytest.approx(min(0.5 * 2.0, 1e-2 * 0.75), rel=1e-15)
    small_R = Ball.make(0.1, 0.5, 1.0, 0.0, 0.0)    # R^2 = 0.1 < S = 0.9: the radius part is the smaller
    assert inner_tolerance("hybrid", 1e-3, small_R) == pytest.approx(1e-3 * 0.1, rel=1e-15)
    for stop in ("margin", "gap"):                  # ... which the margin-relative rules ignore
        assert inner_tolerance(stop, 1e-3, small_R) == pytest.approx(1e-3 * 0.9, rel=1e-15)
    assert inner_tolerance("radius", 1e-3, Ball.make(0.0, 0.0, None, 0.0, 0.0)) == 1e-3 * TINY


def test_kkt_gap_is_the_scaled_maximal_violation():
    b = ball()                                       # d2_sv_min = 1.9, S = 0.75
    assert kkt_gap(b, 2.3) == pytest.approx((2.3 - 1.9) / (2 * 0.75), rel=1e-15)
    assert np.isnan(kkt_gap(b, np.inf)) and np.isnan(kkt_gap(b, np.nan))


def test_warn_if_radius_too_coarse_only_when_the_slack_swamps_S():
    import warnings
    b = Ball.make(2.0, 0.5, 1.0, 0.0, 0.0)          # S = 1: the 'radius' slack (2 eps + eps^2) 2 vs 0.1
    with pytest.warns(ConvergenceWarning, match="stop='radius' with eps=0.1"):
        warn_if_radius_too_coarse("radius", 0.1, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_radius_too_coarse("radius", 0.02, b)   # slack 0.0808 <= 0.1 S
        warn_if_radius_too_coarse("margin", 0.1, b)    # only the radius rule is concerned
        warn_if_radius_too_coarse("hybrid", 0.1, b)
    # the limit is 0.1 S exactly: eps with ((1+eps)^2 - 1) R^2 just above and just below it
    eps_at = np.sqrt(1 + 0.1 / 2.0) - 1
    with pytest.warns(ConvergenceWarning):
        warn_if_radius_too_coarse("radius", eps_at * 1.001, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_radius_too_coarse("radius", eps_at * 0.999, b)


def test_make_rng_accepts_the_sklearn_forms():
    g = np.random.default_rng(5)
    assert make_rng(g) is g
    assert make_rng(7).integers(0, 2**31, 4).tolist() == np.random.default_rng(7).integers(0, 2**31, 4).tolist()
    assert make_rng(np.int64(7)).integers(0, 2**31, 4).tolist() == make_rng(7).integers(0, 2**31, 4).tolist()
    a = make_rng(np.random.RandomState(3)).integers(0, 2**31, 4).tolist()
    assert a == make_rng(np.random.RandomState(3)).integers(0, 2**31, 4).tolist()
    seed = np.random.RandomState(3).randint(0, 2**31 - 1)
    assert a == np.random.default_rng(seed).integers(0, 2**31, 4).tolist()
    assert isinstance(make_rng(None), np.random.Generator)
    for bad in ("0", 1.5, [1]):
        with pytest.raises(TypeError, match="random_state"):
            make_rng(bad)


def _pair_problem(x, labels=None):
    """Points on a line; furthest_from is the exact argmax of |x_z - x_l| (first on ties)."""
    x = np.asarray(x, dtype=float)
    prob = SimpleNamespace(n=len(x), labels=None if labels is None else np.asarray(labels))
    seen = []

    def furthest_from(z, idx):
        idx = np.asarray(idx)
        seen.append((int(z), idx.copy()))
        return int(idx[int(np.argmax(np.abs(x[idx] - x[z])))])
    return prob, furthest_from, seen


@pytest.mark.parametrize("seed", range(6))
def test_initial_pair_full_scan(seed):
    """001 Sec. 4.1.1: z_a furthest from a random z, z_b furthest from z_a (over all other points)."""
    x = np.array([0.0, 3.0, -7.0, 1.0, 9.0, 2.5])
    prob, far, seen = _pair_problem(x)
    z = int(np.random.default_rng(seed).integers(0, 6))
    z_a, z_b = initial_pair(prob, np.random.default_rng(seed), None, far)
    assert z_a == int(np.argmax(np.abs(x - x[z])))
    others = [i for i in range(6) if i != z_a]
    assert z_b == others[int(np.argmax(np.abs(x[others] - x[z_a])))]
    assert seen[0][0] == z and seen[0][1].tolist() == list(range(6))
    assert seen[1][0] == z_a and seen[1][1].tolist() == others


@pytest.mark.parametrize("seed", range(6))
def test_initial_pair_takes_z_b_from_the_other_class(seed):
    """With labels, z_b is restricted to the class opposite z_a (the SimpleSVM heuristic)."""
    x = np.array([0.0, 3.0, -7.0, 1.0, 9.0, 2.5, 8.0])
    y = np.array([1, 1, -1, -1, 1, -1, 1])
    prob, far, seen = _pair_problem(x, y)
    z_a, z_b = initial_pair(prob, np.random.default_rng(seed), None, far)
    opposite = np.flatnonzero(y != y[z_a])
    assert y[z_b] != y[z_a]
    assert z_b == opposite[int(np.argmax(np.abs(x[opposite] - x[z_a])))]
    assert seen[1][1].tolist() == opposite.tolist()


def test_initial_pair_sampled_and_its_fallbacks():
    # sampled: both searches run over sample_size random candidates
    x = np.arange(50.0)
    prob, far, seen = _pair_problem(x)
    initial_pair(prob, np.random.default_rng(0), 7, far)
    assert len(seen[0][1]) == 7 and len(seen[1][1]) <= 7
    # the sample misses the other class (one point of class -1 in 200): a full scan of that class
    y = np.ones(200)
    y[123] = -1
    prob, far, seen = _pair_problem(np.arange(200.0), y)
    hits = 0
    for seed in range(5):
        z_a, z_b = initial_pair(prob, np.random.default_rng(seed), 3, far)
        if z_a != 123:
            assert z_b == 123
            hits += 1
    assert hits
    # ... also when z_a is in the class labelled -1 (the other class is "greater", not "smaller")
    prob, far, seen = _pair_problem(np.arange(200.0), -y)
    for seed in range(5):
        z_a, z_b = initial_pair(prob, np.random.default_rng(seed), 3, far)
        if z_a != 123:
            assert z_b == 123
    # both classes in the sample (whichever class z_a is in): z_b is the furthest of the sampled other
    # class, not of the whole class
    y = np.where(np.arange(200) % 2 == 0, 1.0, -1.0)
    prob, far, seen = _pair_problem(np.arange(200.0), y)
    classes = set()
    for seed in range(12):
        seen.clear()
        z_a, z_b = initial_pair(prob, np.random.default_rng(seed), 7, far)
        classes.add(y[z_a])
        cands = seen[1][1]
        assert 1 <= len(cands) <= 7 and np.all(y[cands] != y[z_a]) and z_b in cands
    assert classes == {1.0, -1.0}
    # one class only: no candidate is left for z_b, which is then the next point (mod n)
    prob, far, _ = _pair_problem([0.0, 4.0, 1.0, 2.0, 3.0], [1, 1, 1, 1, 1])
    for seed in range(5):
        z_a, z_b = initial_pair(prob, np.random.default_rng(seed), None, far)
        assert z_b == (z_a + 1) % 5


def test_sample_violators():
    ops = SimpleNamespace(in_core=lambda z: z in {4, 9})
    # a full scan (idx None): its top list without core vectors, in index order
    scan = Scan(best=7, d2=5.0, top=np.array([7, 4, 2, 11]), top_d2=np.array([5.0, 4.0, 3.0, 2.5]))
    assert driver._sample_violators(scan, None, 2.0, ops, 64) == [2, 7, 11]
    # a sample: violators (d2 > threshold, strictly) in draw order, duplicates and core vectors dropped
    idx = np.array([3, 4, 8, 3, 12, 8, 9, 1])
    d2 = np.array([2.5, 9.0, 2.0, 2.5, 3.0, 2.0, 7.0, 1.0])
    scan = Scan(best=4, d2=9.0, sample_d2=d2)
    assert driver._sample_violators(scan, idx, 2.0, ops, 64) == [3, 12]
    assert driver._sample_violators(scan, idx, 1.0, ops, 64) == [3, 8, 12]
    # more than k: the k furthest (ties to the earlier draw), then back in draw order
    idx = np.array([10, 11, 12, 13, 14])
    scan = Scan(best=13, d2=6.0, sample_d2=np.array([3.0, 5.0, 3.0, 6.0, 4.0]))
    assert driver._sample_violators(scan, idx, 2.0, ops, 2) == [11, 13]
    assert driver._sample_violators(scan, idx, 2.0, ops, 3) == [11, 13, 14]
    assert driver._sample_violators(scan, idx, 2.0, ops, 4) == [10, 11, 13, 14]


# ------------------------------------------------------------------------------------------------
# the loop, on scripted numerics
# ------------------------------------------------------------------------------------------------
class ToyOps:
    """A center that never moves: point z lies at squared distance v[z] unless it is a core vector,
    which lies at R2 + core_excess(last inner tol).  The initial pair is {0, 1} (points 0 and 1 are far
    apart on a line, every other point sits at 0.5 between them).  Every call is recorded."""

    def __init__(self, v, R2=1.0, margin=0.25, c0=None, steps=1, core_excess=lambda tol: 0.0):
        self.v = np.asarray(v, dtype=float)
        self.n = len(self.v)
        self.x = np.full(self.n, 0.5)
        self.x[0], self.x[1] = -100.0, 101.0
        self.init_problem = SimpleNamespace(n=self.n, labels=None, mirror=False)
        self.R2, self.margin, self.c0 = R2, margin, c0
        self.steps, self.core_excess = steps, core_excess
        self.core, self.log, self.last_tol, self.n_eval = [], [], None, 0

    def furthest_from(self, z, idx):
        idx = np.asarray(idx)
        return int(idx[int(np.argmax(np.abs(self.x[idx] - self.x[z])))])

    def start(self, z_a, z_b):
        self.log.append(("start", z_a, z_b))
        self.core = [z_a, z_b]

    def add(self, zs):
        self.log.append(("add", [int(z) for z in zs]))
        self.core += [int(z) for z in zs]

    def in_core(self, z):
        return int(z) in self.core

    def n_core(self):
        return len(self.core)

    def n_support(self):
        return len(self.core)

    def step_bound(self):
        return 10 * len(self.core)

    def solve(self, tol, method, bound):
        self.log.append(("solve", tol, method, bound))
        self.last_tol = tol
        return bound if self.steps == "bound" else self.steps

    def d2(self, idx):
        d = self.v[idx].copy()
        core = np.isin(idx, self.core)
        d[core] = self.R2 + self.core_excess(self.last_tol)
        return d

    def ball(self):
        dc = self.d2(np.asarray(self.core))
        return Ball.make(self.R2, self.margin, self.c0, float(dc.min()), float(dc.max()))

    def scan(self, idx, k, d2_over):
        full = idx is None
        idx = np.arange(self.n) if full else np.asarray(idx)
        d2 = self.d2(idx)
        self.log.append(("scan", None if full else idx.copy(), k, d2_over, d2))
        p = int(np.argmax(d2))
        if not full:
            return Scan(int(idx[p]), float(d2[p]), sample_d2=d2)
        over = np.flatnonzero(d2 > d2_over)
        top = over[np.lexsort((over, -d2[over]))][:k]
        return Scan(int(idx[p]), float(d2[p]), top=top, top_d2=d2[top])

    def calls(self, name):
        return [c for c in self.log if c[0] == name]


def run(ops, eps=0.1, **kw):
    kw.setdefault("random_state", 0)
    return run_core_set_loop(ops, eps, **kw)


def test_full_scans_add_the_furthest_point_until_none_is_outside():
    """batch=False, sample_size=None (the papers' loop with exact scans): each iteration adds the
    furthest point beyond (1+eps)^2 R^2, in decreasing order of distance (ties to the lower index),
    each followed by a solve at the inner tolerance eps R^2; the clean scan that ends the loop is the
    certificate (no second full scan)."""
    n = 30
    v = np.full(n, 0.9)
    v[[5, 17, 9, 22]] = [3.0, 2.0, 2.0, 1.3]      # (1.1)^2 = 1.21: these four are outside
    v[11] = 1.2                                     # just inside
    ops = ToyOps(v)
    out = run(ops, 0.1, sample_size=None, stop="radius", method_for=lambda o: "m")
    assert out.converged and out.n_iter == 4
    assert ops.log[0] == ("start", 1, 0) or ops.log[0] == ("start", 0, 1)
    assert [c[1] for c in ops.calls("add")] == [[5], [9], [17], [22]]
    solves = ops.calls("solve")
    assert len(solves) == 5 and out.n_solves == 5 and out.n_capped == 0 and not out.last_capped
    assert all(c[1] == pytest.approx(0.1 * 1.0) and c[2] == "m" for c in solves)
    assert [c[3] for c in solves] == [20, 30, 40, 50, 60]   # step_bound() at each core-set size
    scans = ops.calls("scan")
    assert len(scans) == 5 and all(c[1] is None and c[2] == 0 for c in scans)
    assert all(c[3] == pytest.approx(1.21) for c in scans)
    assert out.r_cert2 == pytest.approx(1.2) and out.ball.R2 == 1.0
    h = out.history
    assert h["core_set_size"] == [2, 3, 4, 5, 6] and h["radius"] == [1.0] * 5
    assert h["inner_steps"] == [1] * 5 and h["inner_capped"] == [False] * 5 and len(h["elapsed"]) == 5
    assert all(np.diff(h["elapsed"]) >= 0)


def test_sample_size_at_least_n_is_a_full_scan():
    v = np.full(20, 0.5)
    for s in (20, 25):
        ops = ToyOps(v)
        out = run(ops, sample_size=s)
        assert out.converged and [c[1] for c in ops.calls("scan")] == [None]
    ops = ToyOps(v)
    run(ops, sample_size=19, n_confirm=0)
    assert len(ops.calls("scan")[0][1]) == 19


@pytest.mark.parametrize("n,expected", [
    (10_000, [59, 59, 118, 236, 472, 885, None]),   # 1 + 30 clean samples in blocks 1, 2, 4, 8, 15; then the certificate
    (1_770, [59, None]),                             # 30 more samples would draw >= n points: one full scan instead
    (1_000, [59, None]),
    (1_771, [59, 59, 118, 236, 472, 885, None]),
])
def test_confirmation_samples_come_in_doubling_blocks(n, expected):
    """A clean sample of 59 is followed by n_confirm = 30 more at the same center, drawn in blocks of
    1, 2, 4, ... samples; when the draws left would cover n points, one full scan replaces them and is
    the certificate."""
    ops = ToyOps(np.full(n, 0.5))
    out = run(ops, sample_size=59, n_confirm=30)
    scans = ops.calls("scan")
    assert [None if c[1] is None else len(c[1]) for c in scans] == expected
    assert out.converged and out.n_iter == 0
    # the certificate scan asks for nothing beyond the maximum; a confirming full scan tests the threshold
    assert scans[-1][3] == (pytest.approx(1.21) if expected == [59, None] else np.inf)
    assert out.r_cert2 == pytest.approx(1.0)        # the core vectors sit on the sphere, all others inside
    assert all(c[2] == 0 for c in scans)            # batch=False asks for no top list


def test_confirmation_with_few_samples_left():
    ops = ToyOps(np.full(119, 0.5))                 # 2 more samples of 59 draw 118 < 119 points
    run(ops, sample_size=59, n_confirm=2)
    assert [None if c[1] is None else len(c[1]) for c in ops.calls("scan")] == [59, 59, 59, None]
    for n in (118, 100):                            # ... >= n points: a full scan
        ops = ToyOps(np.full(n, 0.5))
        run(ops, sample_size=59, n_confirm=2)
        assert [None if c[1] is None else len(c[1]) for c in ops.calls("scan")] == [59, None]
    ops = ToyOps(np.full(500, 0.5))                 # no confirmation asked
    run(ops, sample_size=59, n_confirm=0)
    assert [None if c[1] is None else len(c[1]) for c in ops.calls("scan")] == [59, None]


@pytest.mark.parametrize("seed", range(4))
def test_a_failed_confirmation_adds_the_furthest_point_of_its_first_failing_sample(seed):
    """batch=False: when a confirmation block fails, the 59-point sample holding its first violator is
    scanned again and its furthest point joins the core set."""
    n = 20_000
    rng = np.random.default_rng(100 + seed)
    v = rng.uniform(0.0, 1.0, n)
    bad = rng.choice(np.arange(2, n), 40, replace=False)
    v[bad] = rng.uniform(1.5, 3.0, 40)
    ops = ToyOps(v)
    out = run(ops, sample_size=59, n_confirm=30, random_state=seed)
    assert out.converged
    log = ops.log
    checked = 0
    for i, c in enumerate(log[:-2]):
        # a confirmation block of several samples followed by a 59-point scan: the block failed (a clean
        # block is followed by a larger one or by the certificate)
        if c[0] != "scan" or c[1] is None or len(c[1]) <= 59:
            continue
        nxt = log[i + 1]
        if nxt[0] != "scan" or nxt[1] is None or len(nxt[1]) != 59:
            continue
        first = int(np.flatnonzero(c[4] > c[3])[0]) // 59 * 59
        assert nxt[1].tolist() == c[1][first:first + 59].tolist()
        assert log[i + 2] == ("add", [int(nxt[1][int(np.argmax(nxt[4]))])])
        checked += 1
    assert checked >= 1
    assert out.n_iter == len(ops.calls("add"))


def test_a_core_vector_outside_the_ball_is_resolved_tighter_not_added_again():
    """batch=False with a user tol looser than the rule: the core vectors end 2 tol outside R^2, the
    furthest point is a core vector, and the loop re-solves 10x tighter instead of adding a duplicate."""
    v = np.full(40, 0.5)
    ops = ToyOps(v, core_excess=lambda tol: 0.0 if tol is None else 2.0 * tol)
    out = run(ops, 0.1, sample_size=None, tol=0.5, stop="radius")
    tols = [c[1] for c in ops.calls("solve")]
    # 0.5 -> excess 1.0 > 0.21; 0.05 -> excess 0.1 <= 0.21: converged after one re-solve
    assert tols == pytest.approx([0.5, 0.05])
    assert ops.calls("add") == [] and out.converged and out.n_iter == 1


def test_max_iter_stops_the_loop_with_a_warning_and_a_certificate():
    v = np.linspace(2.0, 3.0, 50)                   # every point is outside: the loop never stops
    ops = ToyOps(v)
    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        out = run(ops, sample_size=None, max_iter=3)
    assert not out.converged and out.n_iter == 3 and len(ops.core) == 5
    assert len(out.history["core_set_size"]) == 4
    last = ops.calls("scan")[-1]                    # the certificate: one more full scan, top list off
    assert last[1] is None and last[2] == 0 and last[3] == np.inf
    assert out.r_cert2 == pytest.approx(v[[i for i in range(50) if i not in ops.core]].max())
    ops = ToyOps(v)
    with pytest.warns(ConvergenceWarning):
        out = run(ops, sample_size=None, max_iter=3, certify=False)
    assert np.isnan(out.r_cert2) and len(ops.calls("scan")) == 4


def test_capped_solves_are_counted():
    ops = ToyOps(np.r_[0.5, 0.5, 3.0, 0.5], steps="bound")
    out = run(ops, sample_size=None)
    assert out.n_solves == 2 and out.n_capped == 2 and out.last_capped
    assert out.history["inner_capped"] == [True, True] and out.history["inner_steps"] == [20, 30]


def test_batch_adds_every_violator_and_solves_to_theta_of_the_gap():
    """batch=True with full scans: every violator (up to MAX_ADD, furthest first) joins at once, in index
    order, and the QP is solved only to THETA times the outer gap d_max^2 - R^2 (never tighter than
    the final tolerance); once no point is outside, the core set's own QP is finished at the final
    tolerance, and 10x tighter if it was finished already."""
    n = 200
    v = np.full(n, 0.5)
    out_idx = np.arange(10, 10 + MAX_ADD + 6)
    v[out_idx] = np.linspace(1.5, 2.5, len(out_idx))
    ops = ToyOps(v, core_excess=lambda tol: 0.0)
    out = run(ops, 0.1, sample_size=None, batch=True, stop="radius")
    adds = [c[1] for c in ops.calls("add")]
    assert adds[0] == sorted(out_idx[-MAX_ADD:].tolist())       # the MAX_ADD furthest
    assert adds[1] == sorted(out_idx[:-MAX_ADD].tolist())       # then the rest
    tols = [c[1] for c in ops.calls("solve")]
    assert tols[0] == pytest.approx(0.1)                        # the first solve: final tolerance eps R^2
    assert tols[1] == pytest.approx(max(0.1, THETA * (2.5 - 1.0)))
    assert tols[2] == pytest.approx(max(0.1, THETA * (v[out_idx[:-MAX_ADD]].max() - 1.0)))
    assert THETA == 0.5 and MAX_ADD == 64
    assert out.converged and out.n_iter == 2
    assert all(c[2] == MAX_ADD for c in ops.calls("scan")[:-1] if c[1] is None)


@pytest.mark.parametrize("n,sample_size", [(30, None), (1_000_000, 59)])
def test_batch_finishes_the_core_set_qp_before_stopping(n, sample_size):
    """batch=True: a clean scan of the other points is not enough while a core vector lies outside the
    threshold (with sampling the sample rarely holds a core vector: the ball's d2_core_max says so); the
    QP is then finished at the final tolerance (no point added), and re-solved 10x tighter while the
    core vectors still fail; only then do the confirmation samples start."""
    v = np.full(n, 0.5)
    ops = ToyOps(v, core_excess=lambda tol: 0.0 if tol is not None and tol < 0.02 else 0.5)
    out = run(ops, 0.1, sample_size=sample_size, batch=True, stop="radius", tol=0.05, n_confirm=30)
    tols = [c[1] for c in ops.calls("solve")]
    # start: 0.05 (core 0.5 outside) -> finish at 0.05 (finished=False before) -> 10x tighter: 0.005
    assert tols == pytest.approx([0.05, 0.05, 0.005])
    assert ops.calls("add") == [] and out.converged and out.n_iter == 2
    if sample_size:
        sizes = [None if c[1] is None else len(c[1]) for c in ops.calls("scan")]
        assert sizes == [59, 59, 59, 59, 118, 236, 472, 885, None]


def test_method_for_names_each_solve():
    seen = []

    def method_for(ops):
        seen.append(ops.n_core())
        return f"m{ops.n_core()}"
    v = np.full(20, 0.5)
    v[7] = 5.0
    ops = ToyOps(v)
    run(ops, sample_size=None, method_for=method_for)
    assert seen == [2, 3] and [c[2] for c in ops.calls("solve")] == ["m2", "m3"]


@pytest.mark.parametrize("n,sample_size", [(40, None), (5000, 59), (1000, 59)])
def test_points_exactly_on_the_threshold_pass_everywhere(n, sample_size):
    """The stop test is d^2 <= threshold (inclusive) in every scan the loop makes: the loop's sample, the
    confirmation blocks, the full scan that replaces them (n = 1000 < 30 x 59) and a full-scan loop.
    Every point here lies exactly on the 'radius' threshold."""
    thr = d2_threshold("radius", 0.1, Ball.make(1.0, 0.25, None, 1.0, 1.0))
    ops = ToyOps(np.full(n, thr))
    out = run(ops, 0.1, sample_size=sample_size, stop="radius", n_confirm=30)
    assert out.converged and out.n_iter == 0 and ops.calls("add") == []
    assert out.r_cert2 == thr


def test_batch_core_vectors_exactly_on_the_threshold_pass():
    """batch=True also accepts the core set itself when its furthest vector lies exactly on the threshold."""
    thr = d2_threshold("radius", 0.1, Ball.make(1.0, 0.25, None, 1.0, 1.0))
    ops = ToyOps(np.full(50, 0.5), core_excess=lambda tol: thr - 1.0)
    assert ops.R2 + (thr - 1.0) == thr
    out = run(ops, 0.1, sample_size=None, stop="radius", batch=True)
    assert out.converged and out.n_iter == 0 and len(ops.calls("solve")) == 1


def test_the_max_iter_warning_points_at_the_callers_line():
    """stacklevel: the ConvergenceWarning of the loop names the code that called fit_meb (here, this
    file), not refimpl.meb or the driver."""
    from helpers import random_problem
    from refimpl.meb import fit_meb as _papers_fit_meb
    from corevector.engine_policy import with_policy
    fit_meb = with_policy(_papers_fit_meb)  # the estimators' solver='auto' by default
    problem = random_problem("two_class", "rbf", m=60, seed=0, gamma=0.5)
    with pytest.warns(ConvergenceWarning, match="max_iter=1") as rec:
        fit_meb(problem, 1e-6, sample_size=None, max_iter=1, random_state=0, stop="margin")
    assert [w.filename for w in rec if "max_iter" in str(w.message)] == [__file__]


def test_every_sample_is_a_uniform_draw_over_all_points():
    """The loop's samples and the confirmation blocks draw indices from all of [0, n): the first and the
    last point can be drawn, nothing outside (the initial pair's candidates likewise)."""
    n, drawn, cands = 2000, [], []
    for seed in range(20):
        ops = ToyOps(np.full(n, 0.5))
        run(ops, sample_size=59, n_confirm=30, random_state=seed)
        drawn += [c[1] for c in ops.calls("scan") if c[1] is not None]
        prob, far, seen = _pair_problem(np.arange(200.0))
        initial_pair(prob, np.random.default_rng(seed), 59, far)
        cands += [s[1] for s in seen]
    # the loop's own samples: every point outside, so each iteration draws a new sample (no confirmation)
    loop_draws = []
    for seed in range(5):
        ops = ToyOps(np.full(500, 2.0))
        with pytest.warns(ConvergenceWarning, match="max_iter"):
            run(ops, sample_size=59, max_iter=40, random_state=seed)
        loop_draws += [c[1] for c in ops.calls("scan") if c[1] is not None]
    loop_draws = np.concatenate(loop_draws)
    assert len(loop_draws) == 5 * 41 * 59 and loop_draws.min() == 0 and loop_draws.max() == 499
    drawn, cands = np.concatenate(drawn), np.concatenate(cands)
    assert drawn.min() == 0 and drawn.max() == n - 1
    assert cands.min() == 0 and cands.max() == 199


# ------------------------------------------------------------------------------------------------
# fit_meb and fit_constrained_meb: the wrappers that run the loop on their numerics
# ------------------------------------------------------------------------------------------------
def test_the_engines_defaults_are_the_papers():
    """001 Sec. 4.1.2: 59 random candidates per iteration (a 95% chance of one in the top 5%), the
    (1+eps) radius test, one clean sample ends the loop (no confirming samples); 10,000 iterations at most,
    quiet, certified; the papers' one-vector-per-iteration loop with SMO unless the caller asks for the
    batched one (corevector.engine_policy's solver='auto', the estimators' default)."""
    import inspect

    from refimpl.constrained_meb import fit_constrained_meb
    from refimpl.meb import fit_meb

    for f in (fit_meb, fit_constrained_meb, run_core_set_loop):
        p = inspect.signature(f).parameters
        assert (p["sample_size"].default, p["n_confirm"].default, p["max_iter"].default) == (59, 0, 10_000)
        assert (p["stop"].default, p["verbose"].default, p["certify"].default, p["tol"].default) == \
            ("radius", False, True, None)
    assert inspect.signature(run_core_set_loop).parameters["batch"].default is False
    p = inspect.signature(fit_meb).parameters
    assert (p["solver"].default, p["batch"].default, p["wide"].default, p["prune"].default) == \
        ("smo", False, False, False)


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_only_solver_auto_runs_the_batched_loop(impl):
    """solver='smo' and 'active_set' run the papers' loop (at most one new core vector per iteration);
    'auto' the batched one, which adds every violator of a scan at once."""
    from helpers import engine, random_problem
    problem = random_problem("two_class", "rbf", m=150, C=10.0, seed=4, gamma=0.5)
    for solver in ("smo", "active_set", "auto"):
        res = engine(impl)(problem, 1e-3, sample_size=None, random_state=0, solver=solver, stop="margin")
        steps = np.diff(res.history["core_set_size"] + [len(res.core_set)])
        assert res.converged
        assert (steps.max() > 1) == (solver == "auto"), (solver, steps)


def test_the_step_bound_warning_points_at_the_callers_line():
    """An unreachable inner tol (SMO crawls on the checkerboard at C = 1e4) stops the final QP at its step
    bound; fit_meb's warning names the code that called it."""
    from refimpl import cvm
    from refimpl.datasets import checkerboard
    from refimpl.kernels import make_kernel_spec
    from refimpl.meb import fit_meb as _papers_fit_meb
    from corevector.engine_policy import with_policy
    fit_meb = with_policy(_papers_fit_meb)  # the estimators' solver='auto' by default
    X, y = checkerboard(400, random_state=0)
    problem = cvm.two_class_problem(X, np.where(y == y[0], 1.0, -1.0), make_kernel_spec(X, "rbf", gamma=1.0), 1e4)
    with pytest.warns(ConvergenceWarning) as rec:
        res = fit_meb(problem, 1e-3, sample_size=None, solver="smo", tol=1e-300, max_iter=40, random_state=0)
    assert [w.filename for w in rec if "step bound" in str(w.message)] == [__file__]
    # the bound of meb.py, 200 SMO steps per core vector plus 1,000: no QP went past it, the capped ones
    # (the last one at least) stopped exactly there
    h = res.history
    bounds = [200 * t + 1000 for t in h["core_set_size"]]
    assert h["inner_capped"][-1] and all(s <= b for s, b in zip(h["inner_steps"], bounds))
    assert h["inner_capped"] == [s == b for s, b in zip(h["inner_steps"], bounds)]


@pytest.mark.parametrize("impl", ["fast", "ref"])
@pytest.mark.parametrize("kernel,m,sample_size", [("rbf", 6, None), ("linear", 6, None), ("linear", 100, 20)])
def test_coincident_points_have_radius_zero_and_no_ratio(impl, kernel, m, sample_size):
    """The MEB of identical points has R^2 = 0: the certified ratio r_cert^2 / R^2 is then undefined (nan),
    not an error.  Under the linear kernel at the origin every distance is 0 and so is the constant c0: the
    scans' tie window [best - TIE (|best| + |c0|), best] is the single value 0, which every point reaches."""
    from helpers import engine
    from refimpl import cvm
    from refimpl.kernels import make_kernel_spec
    X = np.zeros((m, 2))
    problem = cvm.svdd_problem(X, make_kernel_spec(X, kernel, gamma=1.0))
    res = engine(impl)(problem, 1e-3, sample_size=sample_size, random_state=0)
    assert res.converged and res.radius2 == 0.0 and np.isnan(res.certified_ratio)
    assert res.r_cert2 == 0.0


def test_solver_auto_switches_to_smo_past_the_documented_support_sizes():
    """solver='auto' keeps the active set while at most 1,000 core vectors carry weight, or 8,000 when the
    ridge 1/C is below 1e-3 of the largest diagonal entry eta (SMO crawls there), then SMO for good; the
    other solvers are used throughout.  Two-class rbf: eta = 2 + 1/C, so the ridge is below 1e-3 from
    C ~ 500 on."""
    from helpers import random_problem
    from corevector.engine_policy import solver_policy
    for C, limit in ((1.0, 1000), (400.0, 1000), (600.0, 8000), (1e4, 8000)):
        problem = random_problem("two_class", "rbf", m=20, C=C, seed=0, gamma=0.5)
        pick = solver_policy("auto", problem)
        seq = [pick(SimpleNamespace(n_support=lambda k=k: k)) for k in (2, limit, limit + 1, limit, 3)]
        assert seq == ["active_set", "active_set", "smo", "smo", "smo"], C
        for solver in ("smo", "active_set"):
            pick = solver_policy(solver, problem)
            assert {pick(SimpleNamespace(n_support=lambda k=k: k)) for k in (2, 10**5)} == {solver}


@pytest.mark.parametrize("impl", ["fast", "ref"])
@pytest.mark.parametrize("solver", ["smo", "active_set"])
def test_ties_go_to_the_lowest_index(impl, solver):
    """The hard MEB of points that all appear twice (rows m..2m-1 repeat rows 0..m-1): a duplicate is the
    same point phi(x) of feature space, at exactly the distance of its first copy, so the furthest-point
    scans (full scans, one vector per iteration) must only ever pick first copies.  (Not the L2-SVMs: their
    delta_ij / C term makes a duplicate another point of the augmented space.)"""
    from helpers import engine
    from refimpl import cvm
    from refimpl.kernels import make_kernel_spec
    A = np.random.default_rng(8).normal(size=(60, 2))
    X = np.vstack([A, A])
    problem = cvm.svdd_problem(X, make_kernel_spec(X, "rbf", gamma=0.5))
    res = engine(impl)(problem, 1e-6, sample_size=None, random_state=0, solver=solver, stop="radius")
    assert res.converged and len(res.core_set) > 5
    assert np.all(np.asarray(res.core_set) < 60), res.core_set


@pytest.mark.parametrize("solver", ["smo", "auto"])
def test_sampled_ties_go_to_the_first_draw_in_both_engines(solver):
    """With 59-point samples of the duplicated points above, a sample often holds two copies of its
    furthest point (or one index twice): both engines take the first of the tied candidates in draw
    order, so they pick the same core vectors."""
    from helpers import engine
    from refimpl import cvm
    from refimpl.kernels import make_kernel_spec
    A = np.random.default_rng(8).normal(size=(40, 2))
    X = np.vstack([A, A, A])
    problem = cvm.svdd_problem(X, make_kernel_spec(X, "rbf", gamma=0.5))
    kw = dict(sample_size=59, random_state=3, solver=solver, stop="radius")
    a, b = engine("ref")(problem, 1e-6, **kw), engine("fast")(problem, 1e-6, **kw)
    np.testing.assert_array_equal(a.core_set, b.core_set)


def test_the_engines_take_their_options_by_keyword_only():
    """Only the problem (or numerics) and eps are positional, and they may also be named: a positional
    option (``fit_meb(p, 0.1, 59)``) is a TypeError instead of being read as some other option."""
    import inspect

    from refimpl.constrained_meb import fit_constrained_meb
    from refimpl.meb import fit_meb as _papers_fit_meb
    from corevector.engine_policy import with_policy
    fit_meb = with_policy(_papers_fit_meb)  # the estimators' solver='auto' by default
    for f in (fit_meb, fit_constrained_meb, run_core_set_loop):
        kinds = [p.kind for p in inspect.signature(f).parameters.values()]
        assert kinds[:2] == [inspect.Parameter.POSITIONAL_OR_KEYWORD] * 2, f
        assert all(k is inspect.Parameter.KEYWORD_ONLY for k in kinds[2:]), f


def _linear_meb_ops(impl, X):
    """The hard MEB of the rows of X under the linear kernel, phi(x) = x, on the numerics of ``impl``."""
    from refimpl import cvm
    from refimpl.kernels import make_kernel_spec
    from refimpl.meb import MEBOps
    problem = cvm.svdd_problem(X, make_kernel_spec(X, "linear", gamma=1.0))
    if impl == "ref":
        return MEBOps(problem)
    from fastimpl._engine import FastMEBOps
    return FastMEBOps(problem)


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_furthest_from_is_the_squared_distance_in_feature_space(impl):
    """Step 1's searches maximise ||phi(z) - phi(z_l)||^2 (001 Sec. 4.1.1); under the linear kernel that is
    the Euclidean distance of the rows, written out here (a varying diagonal: ||x||^2 is not constant)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 3)) * np.linspace(0.2, 3.0, 40)[:, None]
    X[:3] = [[1.0, 0, 0], [3.0, 0, 0], [-1.5, 0, 0]]   # from x_0: x_2 at 2.5, x_1 at 2 (but the larger norm)
    ops = _linear_meb_ops(impl, X)
    assert ops.furthest_from(0, np.array([1, 2])) == 2
    for z in range(0, 40, 3):
        idx = rng.choice(40, 6, replace=False)
        expect = idx[np.argmax(((X[idx] - X[z]) ** 2).sum(1))]
        assert ops.furthest_from(z, idx) == expect


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_near_ties_are_relative_to_the_size_of_the_distances(impl):
    """Two points whose squared distances to the center (1e8 and 1e8 + 1e-6) differ by 1e-14 of their size,
    far below TIE = 1e-12 relative but far above the round-off of the sum: a tie, which the scans give to
    the first candidate (lowest index in a full scan, first drawn in a sample), whatever the order of the
    two values."""
    from refimpl.simplex_qp import TIE
    r = 1e4
    X = np.array([[0.0, 0.0], [1.0, 0.0], [r, 0.0], [0.0, np.sqrt(r * r + 1e-6)], [0.0, 1.0]])
    d2 = (X ** 2).sum(1)
    assert 0 < d2[3] - d2[2] < TIE * d2[2] / 10             # the tie, and float64 resolves it
    ops = _linear_meb_ops(impl, X)
    ops.start(0, 1)                                         # alpha = e_0: the center is x_0 = 0
    assert ops.scan(None, 0, np.inf).best == 2
    assert ops.scan(np.array([2, 3]), 0, np.inf).best == 2
    assert ops.scan(np.array([4, 3, 2]), 0, np.inf).best == 3
    assert ops.scan(np.array([4, 3, 2]), 0, np.inf).d2 == pytest.approx(d2[3], rel=1e-15)


def _count_kernel_entries(monkeypatch, problem):
    """Count the entries of every block of K~ that ``problem`` computes."""
    count = [0]
    block = problem.block

    def counted(rows, cols):
        out = block(rows, cols)
        count[0] += out.size
        return out
    monkeypatch.setattr(problem, "block", counted)
    return count


@pytest.mark.parametrize("solver", ["smo", "auto"])
@pytest.mark.parametrize("sample_size", [None, 20])
def test_kernel_evaluations_count_the_entries_the_reference_computes(monkeypatch, solver, sample_size):
    """MEBResult.kernel_evaluations is the number of entries of K~ the reference evaluated (each counted
    here as its block is computed)."""
    from helpers import random_problem
    from refimpl.meb import fit_meb as _papers_fit_meb
    from corevector.engine_policy import with_policy
    fit_meb = with_policy(_papers_fit_meb)  # the estimators' solver='auto' by default
    problem = random_problem("two_class", "rbf", m=150, C=10.0, seed=4, gamma=0.5)
    count = _count_kernel_entries(monkeypatch, problem)
    res = fit_meb(problem, 1e-3, sample_size=sample_size, random_state=0, solver=solver, stop="margin")
    assert res.converged and count[0] > 0
    assert res.kernel_evaluations == count[0]


def test_the_progress_bar_carries_the_label(capsys):
    """verbose=True shows a bar named by ``label``, or "MEB (<numerics>)" without one; verbose=False
    prints nothing."""
    from helpers import random_problem
    from refimpl.meb import fit_meb as _papers_fit_meb
    from corevector.engine_policy import with_policy
    fit_meb = with_policy(_papers_fit_meb)  # the estimators' solver='auto' by default
    problem = random_problem("two_class", "rbf", m=60, C=10.0, seed=4, gamma=0.5)
    fit_meb(problem, 1e-2, sample_size=None, random_state=0, stop="margin")
    assert capsys.readouterr().err == ""
    fit_meb(problem, 1e-2, sample_size=None, random_state=0, stop="margin", verbose=True)
    assert "MEB (MEBOps)" in capsys.readouterr().err
    fit_meb(problem, 1e-2, sample_size=None, random_state=0, stop="margin", verbose=True, label="my fit")
    err = capsys.readouterr().err
    assert "my fit" in err and "MEBOps" not in err


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_full_scan_top_list_is_strictly_beyond_d2_over(impl):
    """Scan.top of a full scan: the k furthest points with d^2 > d2_over, largest first.  With d2_over set
    to a point's own squared distance (read from a scan of all n points as a sample, the same arithmetic),
    that point is not in the list and every further one is."""
    X = np.random.default_rng(6).normal(size=(50, 2))
    ops = _linear_meb_ops(impl, X)
    ops.start(0, 1)
    d2 = np.asarray(ops.scan(np.arange(50), 0, np.inf).sample_d2)
    order = np.argsort(-d2, kind="stable")
    j = int(order[5])
    top = list(ops.scan(None, 10, float(d2[j])).top)
    assert top == [int(i) for i in order[:5]]
