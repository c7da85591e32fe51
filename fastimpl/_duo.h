/* The hand-off between the two threads of the two-thread SMO (fastimpl/_smo.pxi): a task counter the
 * master publishes with release order and the worker acknowledges, spin-waits with the CPU's pause hint,
 * and a monotonic clock for the master's stall test.  Two threads only: a counter each way needs no lock. */
#ifndef COREVECTOR_DUO_H
#define COREVECTOR_DUO_H
#include <time.h>

static inline long cv_duo_load(const long *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void cv_duo_store(long *p, long v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static inline void cv_duo_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* nanoseconds of CLOCK_MONOTONIC */
static inline double cv_duo_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e9 * (double) t.tv_sec + (double) t.tv_nsec;
}
#endif
