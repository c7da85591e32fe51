"""Which row of X each slot of the client's row buffer holds (:mod:`corevector.chunked.ops`), in NumPy
arrays of a few bytes a slot.

A dict of Python ints and a list of free slots cost about 100 bytes a slot: 24 MB on the client for the
262,144 slots of a fit, a sixth of a 10^7 x 2 X's own bytes.  Here the map from rows to slots is a sorted
array of the rows held with their slots beside them, updated a batch at a time (a window of draws landing
or leaving, a full scan's violators), and the free slots are a stack in an array, handed out in the order
a list's ``pop()`` would give them (the slots are the local engine's indices, so the order is kept).
"""
from __future__ import annotations

import numpy as np

__all__ = ["RowSlots", "unique_rows", "positions_in", "by_block"]


def unique_rows(rows, *, own=False) -> np.ndarray:
    """np.unique of row indices (int64, ascending) by a sort: NumPy 2.4's np.unique hashes integers unless
    asked for an inverse, 0.52 s for 2^20 draws from 10^7 rows against 0.02 s sorted.  ``own``: ``rows`` is
    the caller's int64 array to sort in place (no copy of a stash's 2^19 draws), and the result int32 where
    the rows allow (a stash keeps its rows while it serves: half the bytes)."""
    if own and isinstance(rows, np.ndarray) and rows.dtype == np.int64 and rows.ndim == 1:
        rows.sort()
        s = rows
    else:
        s = np.sort(np.asarray(rows, dtype=np.int64).ravel())
    if len(s) == 0:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    if own and s[-1] < 2**31:
        return s[keep].astype(np.int32)
    return s[keep]


def positions_in(keys, queries):
    """(pos, hit): for each query, a position in the ascending array ``keys`` (clamped into it) and whether
    the key there is the query -- the lookup of held rows, stashed rows, kept rows and core vectors."""
    queries = np.asarray(queries)
    if len(keys) == 0:
        return np.zeros(len(queries), dtype=np.intp), np.zeros(len(queries), dtype=bool)
    pos = np.minimum(np.searchsorted(keys, queries), len(keys) - 1)
    return pos, keys[pos] == queries


def by_block(bounds, rows):
    """[(b, rows - bounds[b])] for the blocks b holding some of the ascending ``rows`` (block b: rows
    [bounds[b], bounds[b + 1])) -- the per-block parts of a read of a Dask source's rows, or of a pick from
    a stash's parts.  The parts keep the rows' integer type, and nothing else of their length is made: a
    stash's 2^19 rows passed through three int64 temporaries of that length here)."""
    rows = np.asarray(rows)
    edges = np.searchsorted(rows, bounds)
    return [(b, np.subtract(rows[edges[b]:edges[b + 1]], bounds[b], dtype=rows.dtype))
            for b in range(len(bounds) - 1) if edges[b + 1] > edges[b]]


class RowSlots:
    """Slots 0 .. cap-1: ``row_of`` (-1: free), ``refs`` (windows of draws holding the slot's row),
    ``pinned`` (core vectors keep their rows), the free stack and the sorted map from rows to slots."""

    def __init__(self, cap):
        self.cap = int(cap)
        self.row_of = np.full(cap, -1, dtype=np.int64)
        self.refs = np.zeros(cap, dtype=np.int16)  # at most the three windows in flight
        self.pinned = np.zeros(cap, dtype=bool)
        self._free = np.arange(cap - 1, -1, -1, dtype=np.int32)  # the top of the stack is at n_free - 1
        self.n_free = int(cap)
        self._rows = np.zeros(0, dtype=np.int64)   # rows held, ascending
        self._slots = np.zeros(0, dtype=np.int32)  # their slots

    def __len__(self):
        return len(self._rows)

    def lookup(self, rows) -> np.ndarray:
        """The slots of ``rows`` (-1 where a row is not held)."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(self._rows) == 0 or len(rows) == 0:
            return np.full(len(rows), -1, dtype=np.int64)
        p, hit = positions_in(self._rows, rows)
        return np.where(hit, self._slots[p].astype(np.int64), -1)

    def get(self, row):
        """The slot of one row, or None."""
        q = int(self.lookup([row])[0])
        return None if q < 0 else q

    def claim(self, rows) -> np.ndarray:
        """Free slots for ``rows`` (unique, none held), in the order successive pops of the stack give."""
        rows = np.asarray(rows, dtype=np.int64)
        k = len(rows)
        qs = self._free[self.n_free - k:self.n_free][::-1].astype(np.int64)
        self.n_free -= k
        self.row_of[qs] = rows
        order = np.argsort(rows, kind="stable")
        at = np.searchsorted(self._rows, rows[order])
        self._rows = np.insert(self._rows, at, rows[order])
        self._slots = np.insert(self._slots, at, qs[order].astype(np.int32))
        return qs

    def drop(self, qs):
        """Free the slots ``qs`` (held, distinct): their rows leave the map, the slots go on the stack in
        this order."""
        qs = np.asarray(qs, dtype=np.int64)
        if len(qs) == 0:
            return
        keep = np.ones(len(self._rows), dtype=bool)
        keep[np.searchsorted(self._rows, self.row_of[qs])] = False
        self._rows, self._slots = self._rows[keep], self._slots[keep]
        self.row_of[qs] = -1
        self._free[self.n_free:self.n_free + len(qs)] = qs
        self.n_free += len(qs)
