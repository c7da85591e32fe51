"""Rows read by one pass over a chunked source for later use: a stash of draws (corevector.chunked.ops).

On a Dask cluster a stash stays on the workers that read it (:class:`StagedRows`): the pass reads each
block's drawn rows beside the block and keeps them there, and the caller later fetches only the rows a
window of draws needs, one round trip a window.  So the bytes sent to the caller are the rows the loop
uses, not the whole stash: a stash is read ahead of need, and at the end of a fit most of the last one is
never used (at 10^8 rows that tail was a third of the rows sent).  Elsewhere (zarr, HDF5 and memory maps
read in the caller, or Dask's local scheduler) the rows are read into the caller (:class:`HeldRows`).
"""
from __future__ import annotations

import numpy as np

from .row_slots import by_block

__all__ = ["HeldRows", "StagedRows", "held_in_caller", "stage"]


def held_in_caller(source) -> bool:
    """Whether a stash of the source's rows is read into the caller (:class:`HeldRows`), not left on the
    workers of a distributed client (:class:`StagedRows`)."""
    return getattr(source, "client", None) is None


class HeldRows:
    """Rows held in the caller's memory: ``pick(pos)`` is ``values[pos]``."""

    remote = False

    def __init__(self, values):
        self.values = values
        self.nbytes = values.nbytes

    def pick(self, pos):
        return self.values[pos]


def _rows_of_block(block, local, dtype):
    return np.asarray(np.asarray(block)[local], dtype=dtype)


def _pick_of_part(part, local):
    return part[local]


class StagedRows:
    """The rows ``rows`` (sorted, unique source rows) of a Dask source, read by one pass (one task a block
    that holds some of them) and kept on the workers as the futures of the blocks' parts.  ``pick(pos)``
    fetches ``rows[pos]`` (``pos`` ascending): one task a part that holds some of them, one round trip.
    A worker lost meanwhile costs a recomputation (the parts' futures keep their graph), retried as the
    source's scans are (``corevector.chunked.dask_source.ATTEMPTS``)."""

    remote = True

    def __init__(self, source, rows, dtype):
        import dask
        self.source, self.dtype = source, np.dtype(dtype)
        # positions within a block as int32 where blocks allow: they travel in the graph (half its bytes,
        # which the scheduler -- in the caller's process on a LocalCluster -- holds until the pass has run)
        small = len(source.bounds) < 2 or int(np.max(np.diff(source.bounds))) < 2**31
        parts = [(b, loc.astype(np.int32, copy=False) if small else loc) for b, loc in by_block(source.bounds, rows)]
        self.offsets = np.r_[0, np.cumsum([len(loc) for _, loc in parts])].astype(np.int64)
        source._scheduler_lost()
        self.parts = source.client.compute(
            [dask.delayed(_rows_of_block, pure=False)(source.blocks[b], loc, self.dtype) for b, loc in parts])
        self.nbytes = 0  # none of it is in the caller

    def pick(self, pos):
        pos = np.asarray(pos, dtype=np.int64)
        d = self.source.shape[1:]
        if len(pos) == 0:
            return np.zeros((0,) + d, dtype=self.dtype)
        asks = by_block(self.offsets, pos)
        client = self.source.client
        return np.concatenate(self.source.retry(
            lambda: client.gather([client.submit(_pick_of_part, self.parts[j], loc, pure=False) for j, loc in asks])))


def stage(source, rows, dtype, take):
    """A stash of the source rows ``rows`` (sorted, unique) in ``dtype``: left on the workers when the
    source is a Dask array on a distributed client, else read by ``take`` into the caller."""
    if not held_in_caller(source) and len(rows):
        return StagedRows(source, rows, dtype)
    return HeldRows(np.asarray(take(rows), dtype=dtype))
