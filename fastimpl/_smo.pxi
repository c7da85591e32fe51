# The core-set QP by SMO (fastimpl._engine): warm-started, second-order working-set selection
# (refimpl.simplex_qp.smo_simplex), on the core set's alpha and gradient g = 2 Q alpha - (l - c0), which
# FastMEBOps holds, with rows of Q from its cache (FastMEBOps.qrow).  No buffers of its own: a step's three
# O(|S|) passes are the vectorised loops of _simd_smo.h.  grad_stats and most_violating are shared with
# the active set (_active_set.pxi), whose stopping gap is SMO's.
#
# On a large core set, once a solve goes on past its first DUO_START_STEPS steps, it runs on two threads
# (_Duo): the loop runs in one, the master, which hands the second, the worker, the upper part of each
# pass -- the new Q row's entries, the two passes of the choice of j, the gradient update -- and does the
# lower part itself.  Every value is formed as in one thread (each
# entry of a row or of the gradient by itself; the minima and maxima of the halves combined exactly; the
# first index at or above the threshold taken from the lower half first), so the solve makes the same
# steps and the model is the same bit for bit.  Why: an SMO step is a few O(|S|) passes, 20-120 us at
# 20,000 core vectors, too short for an OpenMP region each; a hand-off between two spinning threads costs
# well under a microsecond.  A hand-off the master waits long for means the worker's core is taken by
# another process; after DUO_MAX_STALLS of them, once the waits have cost DUO_WAIT_SHARE of the solve's
# time (a virtual machine's cores also pause now and then), the solve continues in the master alone for
# DUO_RETRY_STEPS steps (doubling at each stalled try) and then on two threads again, and the next 1, 2, 4,
# ... solves (doubling while they stall, up to DUO_MAX_BACKOFF) run in one thread before it tries again: a
# spinning worker on a taken core also takes time from the master (three threads on two cores).

cdef extern from "_simd.h":
    void cv_grad_update(double* g, const double* Qi, const double* Qj, const double* alpha, double two_t,
                        Py_ssize_t n, double* gmin, double* gmax, double* gabs) noexcept nogil
    Py_ssize_t cv_wss2(const double* g, const double* Qi, const double* Qd, const double* alpha, double gi,
                       double Qii, double tau, double tie, Py_ssize_t n, double* best_out) noexcept nogil
    double cv_wss2_max(const double* g, const double* Qi, const double* Qd, const double* alpha, double gi,
                       double Qii, double tau, Py_ssize_t n) noexcept nogil
    Py_ssize_t cv_wss2_first(const double* g, const double* Qi, const double* Qd, const double* alpha, double gi,
                             double Qii, double tau, double thr, Py_ssize_t n) noexcept nogil
    double cv_wss2_threshold(double best, double tie) noexcept nogil
    Py_ssize_t cv_first_le(const double* g, Py_ssize_t n, double thr) noexcept nogil

cdef extern from "_duo.h":
    long cv_duo_load(const long* p) noexcept nogil
    void cv_duo_store(long* p, long v) noexcept nogil
    void cv_duo_pause() noexcept nogil
    double cv_duo_now_ns() noexcept nogil

#: SMO runs on two threads from this many core vectors on (a step's passes then take tens of microseconds
#: against well under one for the hand-offs)
cdef Py_ssize_t DUO_MIN_SIZE = 4096
#: a solve runs its first steps in one thread, and only one that goes on past them on two
cdef Py_ssize_t DUO_START_STEPS = 64
#: a new Q row's entries are split between the threads from this many on
cdef Py_ssize_t DUO_MIN_ROW = 2048
#: a hand-off the master waited longer for than this counts as a stall: the worker's core was taken
cdef double DUO_STALL_NS = 200_000.0
#: stalls after which the solve goes on in the master's thread alone, once the waits have taken this share
#: of the solve's time
cdef int DUO_MAX_STALLS = 3
cdef double DUO_WAIT_SHARE = 0.1
#: the most solves in one thread between two tries after stalls
cdef int DUO_MAX_BACKOFF = 64
#: ... and within a solve that gave its worker up, the steps it makes in one thread before it tries two again
#: (doubling up to DUO_MAX_RETRY_STEPS): a solve of tens of thousands of steps is seconds long, and a few
#: stalls early in it sent the rest to one thread (CASP fold 3, idle: the fit's last solve, 87,000 steps,
#: 6.3 s of 13 s, after three waits of about 10 ms in its first 130 ms)
cdef Py_ssize_t DUO_RETRY_STEPS = 1024
cdef Py_ssize_t DUO_MAX_RETRY_STEPS = 65536
#: when SMO runs on two threads: 0 from DUO_MIN_SIZE core vectors on, 1 always, -1 never (tests set it)
cdef int DUO_POLICY = 0
#: what the two-thread solves did, since the module loaded (read by _duo_stats): solves, hand-offs, the
#: master's waits in ns, stalls, solves that went on in one thread
cdef long long DUO_SOLVES = 0, DUO_HANDOFFS = 0, DUO_QUITS = 0, DUO_STALLS = 0, DUO_RETRIES = 0
cdef double DUO_WAIT_NS = 0.0

cdef enum:
    DUO_ROW = 1
    DUO_WSS_MAX = 2
    DUO_WSS_FIRST = 3
    DUO_UPDATE = 4
    DUO_QUIT = 5


def _duo_stats():
    """(solves, hand-offs, the master's waits in s, stalls, times a solve gave its worker up, times it took two
    threads again) of the two-thread SMO."""
    return DUO_SOLVES, DUO_HANDOFFS, DUO_WAIT_NS * 1e-9, DUO_STALLS, DUO_QUITS, DUO_RETRIES


def _set_duo_policy(int policy):
    """Set when SMO runs on two threads (0: by size, 1: always, splitting every row, -1: never); returns the
    old policy (tests compare them: the same steps and the same model)."""
    global DUO_POLICY
    old = DUO_POLICY
    DUO_POLICY = policy
    return old


def _set_duo_start(Py_ssize_t min_size, Py_ssize_t start_steps):
    """Set the core-set size from which SMO runs on two threads and the steps it makes in one thread first;
    returns the old pair (tests run the default policy's hand-over on small problems)."""
    global DUO_MIN_SIZE, DUO_START_STEPS
    old = (DUO_MIN_SIZE, DUO_START_STEPS)
    DUO_MIN_SIZE = min_size
    DUO_START_STEPS = start_steps
    return old


def _set_duo_stalls(double stall_ns, int max_stalls):
    """Set the stall test (stall_ns < 0: every hand-off stalls) and the stalls that end a solve's second
    thread; returns the old pair (tests force the fall-back to one thread mid-solve)."""
    global DUO_STALL_NS, DUO_MAX_STALLS
    old = (DUO_STALL_NS, DUO_MAX_STALLS)
    DUO_STALL_NS = stall_ns
    DUO_MAX_STALLS = max_stalls
    return old


def _set_duo_retry(Py_ssize_t steps, Py_ssize_t max_steps):
    """Set the steps a solve makes in one thread after giving its worker up before it tries two again (and
    their cap); returns the old pair (tests make a short solve retry)."""
    global DUO_RETRY_STEPS, DUO_MAX_RETRY_STEPS
    old = (DUO_RETRY_STEPS, DUO_MAX_RETRY_STEPS)
    DUO_RETRY_STEPS = max(steps, 1)
    DUO_MAX_RETRY_STEPS = max(max_steps, DUO_RETRY_STEPS)
    return old


cdef struct _Duo:
    long go              # serial number of the last task the master handed over
    long done            # ... and of the last one the worker finished
    int task
    bint active          # the worker takes tasks (else every part runs in the master)
    bint posted          # the current task was handed over
    bint gave_up         # the stalls sent the solve back to one thread
    int stalls
    double t0, waited    # the solve's start and the master's waits, in ns
    Py_ssize_t size, mid # the worker's part of a pass: core positions [mid, size)
    Py_ssize_t i, lo, hi # DUO_ROW: row i's entries [lo, hi) into r
    double* r
    const double* Qi
    const double* Qj
    double gi, Qii, thr, two_t
    double best          # the worker's results
    Py_ssize_t first
    double gmin, gmax, gabs
    Py_ssize_t steps     # the solve's (the master's)


cdef void _duo_part(FastMEBOps ops, _Duo* duo, int task) noexcept nogil:
    """The worker's part of ``task`` (run by the master when the worker is not taking tasks)."""
    cdef Py_ssize_t mid = duo.mid, n = duo.size - duo.mid
    if task == DUO_ROW:
        _row_into(ops, duo.i, duo.lo, duo.hi, duo.r)
    elif task == DUO_WSS_MAX:
        duo.best = cv_wss2_max(ops.grad + mid, duo.Qi + mid, ops.Qd + mid, ops.alpha + mid, duo.gi, duo.Qii, TAU, n)
    elif task == DUO_WSS_FIRST:
        duo.first = mid + cv_wss2_first(ops.grad + mid, duo.Qi + mid, ops.Qd + mid, ops.alpha + mid, duo.gi,
                                         duo.Qii, TAU, duo.thr, n)
    elif task == DUO_UPDATE:
        cv_grad_update(ops.grad + mid, duo.Qi + mid, duo.Qj + mid, ops.alpha + mid, duo.two_t, n,
                       &duo.gmin, &duo.gmax, &duo.gabs)


cdef void duo_work(FastMEBOps ops, _Duo* duo) noexcept nogil:
    """The worker: each task the master hands over, until DUO_QUIT."""
    cdef long seen = 0, go
    cdef int task
    while True:
        go = cv_duo_load(&duo.go)
        if go == seen:
            cv_duo_pause()
            continue
        seen = go
        task = duo.task
        if task != DUO_QUIT:
            _duo_part(ops, duo, task)
        cv_duo_store(&duo.done, go)
        if task == DUO_QUIT:
            return


cdef inline void _duo_post(_Duo* duo, int task) noexcept nogil:
    cdef long go = duo.go + 1   # (the master is go's only writer, so it reads it plainly)
    duo.task = task
    cv_duo_store(&duo.go, go)   # release: the task's fields above are visible to the worker's acquire load


cdef void duo_quit(_Duo* duo) noexcept nogil:
    """Stop the worker (it is idle: called between tasks); the master does every part from here on."""
    if duo.active:
        duo.active = False
        _duo_post(duo, DUO_QUIT)


cdef inline void duo_begin(_Duo* duo, int task) noexcept nogil:
    """Hand ``task`` to the worker if it takes tasks (the master then does its own part)."""
    duo.posted = duo.active
    if duo.posted:
        _duo_post(duo, task)


cdef void duo_end(FastMEBOps ops, _Duo* duo, int task) noexcept nogil:
    """The worker's part of ``task`` done: waited for, or run here.  A long wait counts as a stall."""
    cdef long spins = 0
    cdef double t0 = 0.0
    cdef double waited
    global DUO_HANDOFFS, DUO_WAIT_NS, DUO_STALLS, DUO_QUITS
    if not duo.posted:
        _duo_part(ops, duo, task)
        return
    DUO_HANDOFFS += 1
    while cv_duo_load(&duo.done) != duo.go:
        spins += 1
        if spins == 256:
            t0 = cv_duo_now_ns()
        cv_duo_pause()
    waited = cv_duo_now_ns() - t0 if spins >= 256 else 0.0
    DUO_WAIT_NS += waited
    duo.waited += waited
    if DUO_STALL_NS < 0 or (spins >= 256 and waited > DUO_STALL_NS):
        duo.stalls += 1
        DUO_STALLS += 1
        # a few stalls in a long solve are the machine's hiccups; stalls that cost a share of the time are
        # another process on the worker's core
        if duo.stalls >= DUO_MAX_STALLS and (DUO_STALL_NS < 0
                                             or duo.waited > DUO_WAIT_SHARE * (cv_duo_now_ns() - duo.t0)):
            DUO_QUITS += 1
            duo.gave_up = True
            duo_quit(duo)


cdef double* duo_qrow(FastMEBOps ops, _Duo* duo, Py_ssize_t i, Py_ssize_t keep) noexcept nogil:
    """FastMEBOps.qrow, the entries a row lacks split between the threads where _row_into gives them
    (_rows_by_range)."""
    cdef Py_ssize_t lo, m2, size = ops.size
    cdef double* r
    if duo == NULL or not duo.active or not _rows_by_range(ops):
        return ops.qrow(i, keep)
    r = ops.cache.slot(i, size, keep, &lo)
    if r == NULL or lo >= size:
        return r
    if size - lo < (DUO_MIN_ROW if DUO_POLICY == 0 else 16):
        ops._fill_row(i, lo, size, r)
    else:
        m2 = lo + (((size - lo) // 2) & ~7)
        duo.i = i
        duo.lo = m2
        duo.hi = size
        duo.r = r
        duo_begin(duo, DUO_ROW)
        _row_into(ops, i, lo, m2, r)
        duo_end(ops, duo, DUO_ROW)
        ops.n_eval += size - lo
    ops.cache.rlen[i] = size
    return r


cdef Py_ssize_t duo_wss2(FastMEBOps ops, _Duo* duo, const double* Qi, double gi, double Qii) noexcept nogil:
    """cv_wss2 over the core set, its two passes split between the threads (duo: NULL for one thread)."""
    cdef Py_ssize_t j, mid
    cdef double best
    if duo == NULL:
        return cv_wss2(ops.grad, Qi, ops.Qd, ops.alpha, gi, Qii, TAU, TIE, ops.size, &best)
    mid = duo.mid
    duo.Qi = Qi
    duo.gi = gi
    duo.Qii = Qii
    duo_begin(duo, DUO_WSS_MAX)
    best = cv_wss2_max(ops.grad, Qi, ops.Qd, ops.alpha, gi, Qii, TAU, mid)
    duo_end(ops, duo, DUO_WSS_MAX)
    if duo.best > best:
        best = duo.best
    if best == -INFINITY:
        return -1
    duo.thr = cv_wss2_threshold(best, TIE)
    duo_begin(duo, DUO_WSS_FIRST)
    j = cv_wss2_first(ops.grad, Qi, ops.Qd, ops.alpha, gi, Qii, TAU, duo.thr, mid)
    duo_end(ops, duo, DUO_WSS_FIRST)
    if j < mid:
        return j
    return duo.first if duo.first < duo.size else -1


cdef void duo_update(FastMEBOps ops, _Duo* duo, const double* Qi, const double* Qj, double two_t,
                     double* gmin, double* gmax, double* gabs) noexcept nogil:
    """cv_grad_update over the core set, split between the threads (duo: NULL for one thread)."""
    if duo == NULL:
        cv_grad_update(ops.grad, Qi, Qj, ops.alpha, two_t, ops.size, gmin, gmax, gabs)
        return
    duo.Qi = Qi
    duo.Qj = Qj
    duo.two_t = two_t
    duo_begin(duo, DUO_UPDATE)
    cv_grad_update(ops.grad, Qi, Qj, ops.alpha, two_t, duo.mid, gmin, gmax, gabs)
    duo_end(ops, duo, DUO_UPDATE)
    if duo.gmin < gmin[0]:
        gmin[0] = duo.gmin
    if duo.gmax > gmax[0]:
        gmax[0] = duo.gmax
    if duo.gabs > gabs[0]:
        gabs[0] = duo.gabs


cdef bint duo_pays(FastMEBOps ops) noexcept nogil:
    if DUO_POLICY < 0 or omp_get_max_threads() < 2:
        return False
    return DUO_POLICY > 0 or ops.size >= DUO_MIN_SIZE

cdef void grad_stats(FastMEBOps ops, double* gmin, double* gmax, double* gabs) noexcept nogil:
    """min g, max_{alpha>0} g and max |g| over the core set (SMO fuses this pass into its update)."""
    cdef Py_ssize_t t
    cdef double g
    gmin[0] = INFINITY
    gmax[0] = -INFINITY
    gabs[0] = 0.0
    for t in range(ops.size):
        g = ops.grad[t]
        if g < gmin[0]:
            gmin[0] = g
        if fabs(g) > gabs[0]:
            gabs[0] = fabs(g)
        if ops.alpha[t] > 0 and g > gmax[0]:
            gmax[0] = g


cdef Py_ssize_t most_violating(FastMEBOps ops, double gmin, double gabs) noexcept nogil:
    """refimpl.simplex_qp.most_violating: the first t with g_t within TIE of the minimum."""
    cdef Py_ssize_t t = cv_first_le(ops.grad, ops.size, gmin + TIE * (gabs + fabs(ops.c0)))
    return t if t < ops.size else 0


cdef Py_ssize_t smo_solve(FastMEBOps ops, double tol, Py_ssize_t max_steps) noexcept nogil:
    """Warm-started SMO with second-order working-set selection (refimpl.simplex_qp.smo_simplex).

    Same selections and the same arithmetic as the reference, organised for speed: the three O(|S|)
    passes of a step (the most violating i, the second-order j, the gradient update with the
    statistics of the next step) are the vectorised loops of _simd_smo.h, and Q rows come from the LRU
    cache; on a large core set the passes run on two threads (_Duo, duo_pays).  Returns the steps made
    (-2: out of memory)."""
    cdef _Duo duo
    cdef _Duo* dp = &duo
    cdef int tid
    cdef Py_ssize_t first = 0
    if not duo_pays(ops):
        return smo_steps(ops, tol, max_steps, NULL)
    if ops.duo_skip > 0:
        ops.duo_skip -= 1
        return smo_steps(ops, tol, max_steps, NULL)
    if DUO_POLICY == 0:
        # the first steps in one thread: most solves of a classification fit end within them, and a
        # parallel region costs more than they would gain.  The loop picks up where it stopped, from
        # the same gradient (its statistics are recomputed exactly), so the steps are those of one run.
        first = smo_steps(ops, tol, min(DUO_START_STEPS, max_steps), NULL)
        if first < DUO_START_STEPS or first >= max_steps:
            return first
    global DUO_SOLVES, DUO_RETRIES
    DUO_SOLVES += 1
    cdef Py_ssize_t done = first, alone, retry = DUO_RETRY_STEPS
    while True:
        memset(dp, 0, sizeof(_Duo))
        dp.size = ops.size
        dp.mid = (ops.size // 2) & ~7
        dp.t0 = cv_duo_now_ns()
        with cython.parallel.parallel(num_threads=2):
            tid = cython.parallel.threadid()
            if tid == 0:
                dp.active = omp_get_num_threads() >= 2
                dp.steps = smo_steps(ops, tol, max_steps - done, dp)
                duo_quit(dp)
            elif tid == 1:     # (num_threads=2: there is no other; a second worker would take the same tasks)
                duo_work(ops, dp)
        if dp.steps < 0:
            return dp.steps
        done += dp.steps
        if not dp.gave_up or done >= max_steps:
            break
        # the worker given up (smo_steps returned at the end of that step): retry steps in one thread, then
        # two again, from the same gradient -- the steps of one run, as after the first steps above
        alone = smo_steps(ops, tol, min(retry, max_steps - done), NULL)
        if alone < 0:
            return alone
        done += alone
        if alone < retry or done >= max_steps:
            break
        retry = min(2 * retry, DUO_MAX_RETRY_STEPS)
        DUO_RETRIES += 1
    if dp.gave_up:
        ops.duo_skip = max(ops.duo_backoff, 1)
        ops.duo_backoff = min(2 * ops.duo_skip, DUO_MAX_BACKOFF)
    else:
        ops.duo_backoff = 1
    return done


cdef Py_ssize_t smo_steps(FastMEBOps ops, double tol, Py_ssize_t max_steps, _Duo* duo) noexcept nogil:
    """The loop of smo_solve (duo: the second thread's hand-offs, or NULL)."""
    cdef Py_ssize_t steps = 0, i, j, size = ops.size
    cdef double gmin = INFINITY, gmax = -INFINITY, gabs = 0.0, gi
    cdef double diff, curv, step, tstep, Qii, ai_old
    cdef double* Qi
    cdef double* Qj
    cdef double* grad = ops.grad
    cdef double* alpha = ops.alpha
    cdef double* Qd = ops.Qd
    grad_stats(ops, &gmin, &gmax, &gabs)
    while True:
        i = most_violating(ops, gmin, gabs)
        gi = grad[i]
        if gmax - gi <= tol or steps >= max_steps:
            return steps
        Qi = duo_qrow(ops, duo, i, -1)
        if Qi == NULL:
            return -2
        Qii = Qd[i]
        j = duo_wss2(ops, duo, Qi, gi, Qii)
        if j < 0:  # no coordinate may decrease against i (the first of the support, as the reference)
            j = 0
            while j < size - 1 and not (alpha[j] > 0):
                j += 1
        diff = grad[j] - gi
        curv = Qii + Qd[j] - 2.0 * Qi[j]
        if curv <= TAU:
            curv = TAU
        step = diff / (2.0 * curv)
        if step >= alpha[j]:
            tstep = alpha[j]
            alpha[j] = 0.0
        else:
            tstep = step
            alpha[j] -= tstep
        ai_old = alpha[i]
        alpha[i] += tstep
        Qj = duo_qrow(ops, duo, j, i)
        if Qj == NULL:
            return -2
        duo_update(ops, duo, Qi, Qj, 2.0 * tstep, &gmin, &gmax, &gabs)
        steps += 1
        if duo != NULL and duo.gave_up:  # (smo_solve goes on in one thread, and tries two again)
            return steps
