# The screens of the scans and when each runs (fastimpl._engine).
#
# A scan needs exact d^2 only where a decision is made: at the maximum (and the candidates within TIE
# of it) and beyond d2_over.  On the coordinate path the scans first compute every candidate's d^2
# through a screen -- the single-precision exp of cv_radial_dot_screen, or, for a Gaussian kernel
# wide against the data in d <= 3, the Taylor expansion of _taylor.h -- then compute again, in
# double, only the candidates whose d^2 may reach either; the others keep values that are certainly
# below both.  Every decision, and every value it reads, is the exact path's, so results do not change.
#
# The screens themselves live in the support's store (_PointStore in _krows.pyx: enable_f32,
# enable_taylor, weighted_screen, taylor_sum); this unit owns the choice of screen per scan, its error
# bound and the screened values' floor, and the state behind them (_Screens), plus enabling them on the
# bounding box of the inputs (enable_screens).  The scans (_scans.pxi) call it.

#: sampled scans run unscreened after one whose screening recomputed more than half its candidates
cdef Py_ssize_t SCREEN_RETRY = 16
#: the screens of a scan: none (every candidate in double), the single-precision exp of the support
#: store's weighted_screen, or the store's Taylor expansion (_taylor.h)
cdef enum:
    SCREEN_NONE = 0
    SCREEN_FLOAT = 1
    SCREEN_TAYLOR = 2
#: when the Taylor screen runs where the store allows it: 0 where it costs less than the kernel sums it
#: replaces (the costs below), 1 always, -1 never (tests set it with _set_taylor_policy)
cdef int TAYLOR_POLICY = 0
#: measured costs in ns (AVX-512, one core): a Gaussian term of a kernel sum in double at d <= 3; a
#: moment's term of the Taylor screen's build, per support vector; a moment's term of its evaluation, per
#: candidate
cdef double COST_KERNEL_TERM = 0.9
cdef double COST_TAYLOR_BUILD = 0.25
cdef double COST_TAYLOR_EVAL = 0.06


def _set_taylor_policy(int policy):
    """Set when the scans screen by Taylor expansion (0: by cost, 1: always where allowed, -1: never);
    returns the old policy (tests force both paths)."""
    global TAYLOR_POLICY
    old = TAYLOR_POLICY
    TAYLOR_POLICY = policy
    return old


@cython.final
cdef class _Screens:
    """Which screen each scan runs, and its bound.

    Screening pays only where the screened values spread beyond their error bound (d^2 far below the
    maximum).  When the margin is tiny against that bound (wide kernels at large C) nearly every
    candidate is computed twice; a chunk or sample that recomputes more than half its candidates turns
    screening off (for the rest of that full scan; for the next SCREEN_RETRY sampled scans).  Results
    are the same either way: every value a decision reads is exact on both paths."""
    cdef int full_on                # full scans screen (written by any thread of one: a benign race, 0 stays 0)
    cdef Py_ssize_t off[3]          # sampled scans left to run without each screen (SCREEN_*)
    cdef double scanned             # candidates scanned since the support was last packed
    cdef double per_pack            # of them, over the last packs (the Taylor screen's amortisation)
    cdef int last                   # the screen of the last scan (SCREEN_*), for tests
    cdef double fin_scale           # bounds |l_z - c0| + 2 alpha_z c_z over the inputs (err)

    def __cinit__(self):
        self.full_on = 1
        self.off[SCREEN_FLOAT] = 0
        self.off[SCREEN_TAYLOR] = 0
        self.scanned = 0.0
        self.per_pack = 0.0

    cdef inline void new_support(self) noexcept nogil:
        """The support was packed again: what the scans at it are expected to cover is the candidates of
        the last supports."""
        self.per_pack = 0.5 * (self.per_pack + self.scanned)
        self.scanned = 0.0

    cdef int choose(self, _PointStore sv, Py_ssize_t nsv, Py_ssize_t cnt, bint sampled) noexcept nogil:
        """The screen for a scan of ``cnt`` inputs against the support ``sv`` (nsv points): the Taylor
        expansion where the store allows it and it costs less than the kernel sums it replaces, else the
        single-precision exp where the store has it, else none.  The Taylor moments are built once per
        support and weights, so their cost is weighed against the candidates expected at this support:
        this scan's, or as many as the last supports saw.  A sampled scan skips a screen that recomputed
        more than half of a recent sample (off)."""
        cdef double nt, direct, taylor, expect = max(<double> cnt, self.per_pack)
        self.scanned += cnt
        if sv.tmode and TAYLOR_POLICY >= 0 and nsv > 0 and not (sampled and self.off[SCREEN_TAYLOR]):
            nt = <double> sv.tnt
            direct = expect * nsv * COST_KERNEL_TERM
            taylor = expect * nt * COST_TAYLOR_EVAL + (0.0 if sv.tvalid else nsv * nt * COST_TAYLOR_BUILD)
            if TAYLOR_POLICY == 1 or taylor < direct:
                return SCREEN_TAYLOR
        if sv.screens() and not (sampled and self.off[SCREEN_FLOAT]):
            return SCREEN_FLOAT
        return SCREEN_NONE

    cdef void count_off(self) noexcept nogil:
        """One sampled scan less for each screen that is off."""
        if self.off[SCREEN_FLOAT] > 0:
            self.off[SCREEN_FLOAT] -= 1
        if self.off[SCREEN_TAYLOR] > 0:
            self.off[SCREEN_TAYLOR] -= 1

    cdef inline double err(self, int screen, double marg, _PointStore sv, Py_ssize_t nsv, double svabs,
                           double label_bias) noexcept nogil:
        """A bound on |d^2_screen - d^2| (d^2 = ... - 2 s_z sum_t alpha_t s_t k_tz, |s_z| = 1), or -1 for
        SCREEN_NONE: the screen's error per term times sum |alpha_t s_t| (``svabs``), doubled, plus the
        round-off of two sums of nsv terms, plus that of _finish_d2 on both values (a few ulps of its
        largest part: the margin ``marg`` = alpha'Q alpha, which the scan has at hand, 2 (K~alpha)_z,
        l_z - c0).  The last is negligible against the single-precision screen but not against the Taylor
        screen's ~1e-12 when the targets of CVR are large."""
        cdef double term
        if screen == SCREEN_NONE:
            return -1.0
        term = sv.taylor_term_err() if screen == SCREEN_TAYLOR else sv.screen_term_err()
        return (2.0 * svabs * (term + 4.0 * DBL_EPSILON * (nsv + 1))
                + 8.0 * DBL_EPSILON * (fabs(marg) + 2.0 * svabs * (1.0 + fabs(label_bias))
                                       + self.fin_scale))

    cdef void prepare(self, int screen, _PointStore sv, const double* coef) noexcept nogil:
        """Build the Taylor screen's moments for the current support, if it is to run and they are stale."""
        if screen == SCREEN_TAYLOR and not sv.tvalid:
            sv.taylor_build(coef)
        self.last = screen

    cdef inline double floor(self, double vmax, double err, double over, double c0) noexcept nogil:
        """Screened values v (d^2 - c0) below this are certainly below both the TIE band of the exact
        maximum (>= vmax - err, with vmax the screened maximum of the same candidates) and ``over``."""
        cdef double band = vmax - err - TIE * (fabs(vmax) + err + fabs(c0))
        return min(band, over) - err

    cdef object state(self):
        """(full scans still screen, sampled scans left without the float screen, ... without the Taylor
        screen, the last scan's screen: 'taylor', 'float' or None)."""
        return (bool(self.full_on), int(self.off[SCREEN_FLOAT]), int(self.off[SCREEN_TAYLOR]),
                {SCREEN_TAYLOR: "taylor", SCREEN_FLOAT: "float"}.get(self.last))


cdef void enable_screens(FastMEBOps ops) except *:
    """Let the support's store screen with single-precision distances and by Taylor expansion, both
    centred on the bounding box of the inputs (every candidate and support vector lies in it; the store
    says whether the kernel and the box allow either).  Dense input only."""
    cdef double lo[16]
    cdef double hi[16]
    cdef Py_ssize_t i, e, d = ops.d
    if d < 1 or d > 16 or ops.m == 0:
        return
    with nogil:
        for e in range(d):
            lo[e] = ops.X[0, e]
            hi[e] = ops.X[0, e]
        for i in range(1, ops.m):
            for e in range(d):
                if ops.X[i, e] < lo[e]:
                    lo[e] = ops.X[i, e]
                elif ops.X[i, e] > hi[e]:
                    hi[e] = ops.X[i, e]
    ops.sup.store.enable_f32(lo, hi)
    ops.sup.store.enable_taylor(lo, hi)
    ops.screens.fin_scale = _finish_scale(ops)


cdef double _finish_scale(FastMEBOps ops) except? -1.0:
    """A bound on |l_z - c0| + 2 alpha_z c_z over every candidate z, for the rounding of _finish_d2 in
    _Screens.err (radial kernels: k(x, x) = 1; alpha_z <= 1 on the simplex): one pass over the inputs'
    offsets (CVR's targets) and ridges (sample weights)."""
    cdef double cmax = fabs(ops.diag_add), omax = 0.0
    cdef Py_ssize_t q
    with nogil:
        if ops.pdiag != NULL:
            cmax = 0.0
            for q in range(ops.m):
                cmax = max(cmax, fabs(ops.pdiag[q]))
        if ops.offset != NULL:
            for q in range(ops.m):
                omax = max(omax, fabs(ops.offset[q]))
    return omax + 1.0 + fabs(ops.label_bias) + 3.0 * cmax + fabs(ops.c0)
