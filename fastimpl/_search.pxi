# Binary search in a sorted array of point indices: the core set's sorted index (FastMEBOps.czs), which
# answers "is z a core vector, and at which position" in O(log |S|) for the scans and the driver.

cdef inline Py_ssize_t _lower_bound(const Py_ssize_t* a, Py_ssize_t n, Py_ssize_t z) noexcept nogil:
    """The first position in the sorted a[0:n] whose value is >= z (n if none)."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < z:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline Py_ssize_t _bsearch(const Py_ssize_t* a, Py_ssize_t n, Py_ssize_t z) noexcept nogil:
    """Position of z in the sorted a[0:n], or -1."""
    cdef Py_ssize_t lo = _lower_bound(a, n, z)
    return lo if (lo < n and a[lo] == z) else -1
