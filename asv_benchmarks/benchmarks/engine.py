"""The core-set engine's scan on its own: squared distances from the ball's center to m candidates (a full scan,
as the certificate's) and to 59 random candidates (a sampled scan, the loop's step 2), against the core set a fit
of the checkerboard (001 Sec. 5.1: gamma = 1, C = 1e4, eps = 1e-6; the estimators' loop, solver='auto') ended
with, over (impl, m):
``FastMEBOps.scan`` (fastimpl/_engine.pyx) and ``refimpl.meb.MEBOps.scan``.  A fit spends a share of its time
here; a change of the scan shows here whole."""
import time
import warnings

import numpy as np

from .common import (M_GRID, RADIUS_TOO_COARSE, REPEAT, ROUNDS, SEED, by_size, calls_per_sample, checkerboard,
                     cpu_seconds, loaded, one_thread, set_number)

C, GAMMA, EPS = 1e4, 1.0, 1e-6


def fitted_ops(impl, m):
    """The engine's numerics (FastMEBOps or MEBOps) as a fit of the checkerboard of m points left them."""
    from refimpl import cvm, meb
    from refimpl.kernels import make_kernel_spec
    X, y = checkerboard(m, SEED)
    problem = cvm.two_class_problem(X, y, make_kernel_spec(X, "rbf", GAMMA), C)
    if impl == "fast":
        from fastimpl._engine import FastMEBOps as base, fit_meb
    else:
        base, fit_meb = meb.MEBOps, meb.fit_meb
    try:  # the estimators' loop (solver='auto': the batched loop), as CVMCheckerboard's fits run it
        from corevector.engine_policy import with_policy
        fit_meb = with_policy(fit_meb)
    except ImportError:  # a checkout from before corevector/engine_policy.py: fit_meb's own 'auto'
        pass
    kept = []

    def ops_class(problem, cache_size):
        kept.append(base(problem, cache_size))
        return kept[-1]
    ops_class.__name__ = base.__name__
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=RADIUS_TOO_COARSE[1], category=RADIUS_TOO_COARSE[0])
        fit_meb(problem, EPS, sample_size=59, random_state=0, stop="radius", ops_class=ops_class)
    return kept[0]


class EngineScan:
    """time_full_scan (m candidates) and time_sampled_scan (59) of the fitted engine; track_core_set_size."""

    param_names = ["impl", "m"]
    params = (["ref", "fast"], M_GRID)
    max_m = by_size({"ref": 100_000, "fast": 100_000}, {"ref": 100_000, "fast": 1_000_000})
    timeout = 1200
    timer = staticmethod(time.process_time)
    rounds = ROUNDS
    repeat = REPEAT
    warmup_time = 0.0

    def setup(self, impl, m):
        if m > self.max_m[impl]:
            raise NotImplementedError(f"{impl} is not run above m={self.max_m[impl]:g}")
        one_thread()
        self.ops, self.sample, numbers = loaded((impl, m), lambda: self._build(impl, m))
        set_number(self.time_full_scan, numbers[0])
        set_number(self.time_sampled_scan, numbers[1])

    def _build(self, impl, m):
        ops = fitted_ops(impl, m)
        sample = np.random.default_rng(1).integers(0, m, size=59)
        numbers = []
        for call in (lambda: ops.scan(None, 0, np.inf), lambda: ops.scan(sample, 0, np.inf)):
            call()
            numbers.append(calls_per_sample(min(cpu_seconds(call)[0] for _ in range(3))))
        return ops, sample, numbers

    def time_full_scan(self, impl, m):
        self.ops.scan(None, 0, np.inf)

    def time_sampled_scan(self, impl, m):
        self.ops.scan(self.sample, 0, np.inf)

    def track_core_set_size(self, impl, m):
        return int(self.ops.n_core())
    track_core_set_size.unit = "vectors"
