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

SPIN_COUNT = "10000"
_BLAS = None


@contextlib.contextmanager
def blas_single_threaded():
    """BLAS limited to one thread while the block runs (threadpoolctl), restored after.  The engine calls
    BLAS from inside its own OpenMP regions (tiles of a GEMM, chunks of a scan), each sized to its work;
    a BLAS that started threads of its own there would oversubscribe the cores, and its threads spin
    between calls: CPU time that no fit uses, and on a busy machine time taken from the fit itself."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController
        _BLAS = ThreadpoolController()
    with _BLAS.limit(limits=1, user_api="blas"):
        yield

_ours = "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ
if _ours:
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
try:
    from . import _engine  # noqa: F401  (links libgomp: its constructor reads the environment now)
finally:
    if _ours:
        del os.environ["GOMP_SPINCOUNT"]
