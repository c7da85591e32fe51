# The allocation table of the engine's units (fastimpl._engine: FastMEBOps, _RowCache, _Support, _FreeSet).
#
# A unit registers every raw buffer it owns once, in its __cinit__ (its memory starts zeroed, so every
# pointer is NULL until allocated): ``owned_add(&self.own, <void**> &self.buf, element size)``.  An element
# size > 0 marks a buffer of one entry per core vector, which ``owned_grow`` reallocates with the others
# when the core set outgrows its capacity; size 0, a buffer the unit sizes itself.  The unit's __dealloc__
# calls ``owned_free``, which frees each registered buffer exactly once and sets its pointer to NULL.  A
# new buffer is one line in its unit's __cinit__: nothing else frees it.

cdef enum:
    OWNED_MAX = 16    # slots per table (FastMEBOps registers 11 buffers, the other units 6 or fewer)


cdef struct _Owned:
    void** slot[OWNED_MAX]
    size_t elem[OWNED_MAX]
    int n


cdef int owned_add(_Owned* t, void** slot, size_t elem) except -1:
    if t.n >= OWNED_MAX:
        raise RuntimeError("fastimpl._engine: an allocation table is full; raise OWNED_MAX")
    t.slot[t.n] = slot
    t.elem[t.n] = elem
    t.n += 1
    return 0


cdef int owned_grow(_Owned* t, Py_ssize_t newcap) except -1:
    """Reallocate the buffers of one entry per core vector to ``newcap`` entries."""
    cdef int i
    cdef void* p
    for i in range(t.n):
        if t.elem[i] > 0:
            p = realloc(t.slot[i][0], newcap * t.elem[i])
            if p == NULL:  # the old buffer is still owned (and freed by owned_free)
                raise MemoryError("core-set arrays")
            t.slot[i][0] = p
    return 0


cdef void owned_free(_Owned* t) noexcept:
    cdef int i
    for i in range(t.n):
        free(t.slot[i][0])
        t.slot[i][0] = NULL
    t.n = 0
