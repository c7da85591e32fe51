"""How long OpenMP threads spin before they sleep: set before the extensions load GNU libgomp.

Between two parallel regions, libgomp's threads spin-wait (by default up to 300,000 turns, several
milliseconds) before they sleep.  The engine opens thousands of short regions per fit (the sampled scans
of a large core set, the confirmation blocks), so that spinning is CPU time spent on nothing, and on a
busy machine it takes cores from the work itself: on the dense checkerboard (1M points, C = 100, two
threads, load ~4.5), 21.6-22.5 s CPU with the default spin, 19.3 s with 10,000 turns (about half a
millisecond), 20.0 s with OMP_WAIT_POLICY=PASSIVE; wall time 16.3 s against 17.1-17.3.

libgomp reads its settings once, when it is loaded.  So the spin count is set only if the user set
neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY, only while the first extension loads, and removed again at
once: child processes and libraries that bring their own OpenMP runtime later see the environment as
the user left it.  If libgomp was loaded before corevector (by another extension), its settings stand.
"""
import contextlib
import os
import threading

SPIN_COUNT = "10000"
_CONTROLLER = None
#: blas_single_threaded's nesting: how many blocks are open (in any thread), and the limit the first set
_DEPTH, _LIMITER = 0, None
_DEPTH_LOCK = threading.Lock()


def _new_lock_in_child():
    # a thread other than the forking one may have held the lock at the fork; it does not exist in the child
    global _DEPTH_LOCK
    _DEPTH_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


@contextlib.contextmanager
def blas_single_threaded():
    """BLAS limited to one thread while the block runs (threadpoolctl), restored after.  The engine calls
    BLAS from inside its own OpenMP regions (tiles of a GEMM, chunks of a scan), each sized to its work;
    a BLAS that started threads of its own there would oversubscribe the cores, and its threads spin
    between calls: CPU time that no fit uses, and on a busy machine time taken from the fit itself.

    Blocks nest, in any threads: the outermost one sets the limit and the last one to leave restores it.
    A fit of many small problems (letter's 325 one-vs-one pairs) enters it once per problem, and each
    threadpoolctl call lists the loaded libraries again (0.15 ms; 4% of letter's fit)."""
    global _LIMITER, _DEPTH
    with _DEPTH_LOCK:
        if _DEPTH == 0:
            _LIMITER = _controller().limit(limits=1, user_api="blas")
        _DEPTH += 1
    try:
        yield
    finally:
        with _DEPTH_LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                _LIMITER.restore_original_limits()
                _LIMITER = None


def _controller():
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


@contextlib.contextmanager
def openmp_single_threaded():
    """This thread's OpenMP regions on one thread while the block runs, restored after, through the kept
    controller: threadpool_limits() lists the loaded libraries again on each call (8-11 ms)."""
    limiter = _controller().limit(limits=1, user_api="openmp")
    try:
        yield
    finally:
        limiter.restore_original_limits()


def openmp_threads():
    """The OpenMP threads this thread's parallel regions would use (the most any loaded runtime reports),
    from one ThreadpoolController kept for the process: threadpool_info() lists the loaded libraries
    again on each call (2 ms), a kept controller only asks them (10 us)."""
    return max((i.get("num_threads", 1) for i in _controller().info() if i.get("user_api") == "openmp"), default=1)


@contextlib.contextmanager
def spin_count_while_loading():
    """GOMP_SPINCOUNT = SPIN_COUNT while the block loads the first extension (libgomp's constructor reads the
    environment then), unless the user set GOMP_SPINCOUNT or OMP_WAIT_POLICY; removed again after it."""
    ours = "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ
    if ours:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        yield
    finally:
        if ours:
            del os.environ["GOMP_SPINCOUNT"]
