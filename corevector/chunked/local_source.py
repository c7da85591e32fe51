"""A memory map, zarr array or HDF5 dataset read by blocks in the calling process (:class:`LocalSource`), and
the block boundaries every chunked source uses (:func:`array_bounds`); the data side of a chunked fit when
no cluster reads the rows.

A block is about ``BLOCK_BYTES`` as float64 and at least ``MIN_BLOCK_ROWS`` rows.  A zarr 3 store of
uncompressed or zstd chunks spanning every column (zarr's default layout) is read by windows of rows
(:mod:`~corevector.chunked.zarr_chunks`): its blocks are whole chunks when chunks are smaller than a block,
and cut a larger chunk into blocks of that size (never straddling two chunks), so the caller holds the
block in use, the one read ahead and one request's compressed bytes whatever the chunks (10^7 x 2, eps
10^-2 to 10^-6: the caller grew by 30-37 MB, 20-24% of X, for chunks from 64 KB to 64 MB, of which 9.5 MB
are the labels' signs an in-memory fit holds too).  Any other store (other codecs, sharded, HDF5) is read by its
own API in blocks of whole chunks, each decoded whole, and the caller holds about six blocks' bytes at once
(the block in use, the one read ahead, zarr's output buffer, decoded chunks and compressed bytes): 64 MB
chunks made it 367 MB, 240% of X.  Such a store with chunks over ``LARGE_CHUNK_BYTES`` warns
(:class:`LargeChunkWarning`), naming its chunk size.

A chunk of a zarr or HDF5 store that fails to read or decode (damaged bytes, a codec's error) raises one
:class:`DamagedStoreError` naming the store, the array and the rows of that chunk (:func:`read_rows`), in
this process and on a cluster's workers alike (:func:`~corevector.chunked.dask_source.dask_from_zarr`).
"""
from __future__ import annotations

import mmap
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .row_slots import by_block
from .source import Combined, Source
from .zarr_chunks import chunk_reader

__all__ = ["LocalSource", "array_bounds", "block_bounds", "read_rows", "DamagedStoreError", "BLOCK_BYTES",
           "MIN_BLOCK_ROWS", "LARGE_CHUNK_BYTES", "LargeChunkWarning"]

#: rows per block read in the calling process: about this many bytes as float64, at least MIN_BLOCK_ROWS
#: (wide rows: a block's kernel work stays a matrix product)
BLOCK_BYTES, MIN_BLOCK_ROWS = 2**20, 4096


def array_bounds(arr, nbytes=None):
    """:func:`block_bounds` of an array (a memmap, zarr array or HDF5 dataset): its rows and columns, its chunks'
    rows if it has chunks."""
    shape = tuple(int(s) for s in arr.shape)
    chunks = getattr(arr, "chunks", None)
    chunk_rows = int(chunks[0]) if isinstance(chunks, tuple) and chunks and chunks[0] else None
    return block_bounds(shape[0], shape[1] if len(shape) > 1 else 1, chunk_rows, nbytes)


def block_bounds(m, d, chunk_rows=None, nbytes=None, split=False):
    """Row boundaries of blocks of about ``nbytes`` (BLOCK_BYTES; as float64), a multiple of the store's
    chunk rows; ``split``: chunks larger than that are cut into blocks of about that size (a block never
    straddles two chunks: the rows of a chunk that fails to read are that chunk's)."""
    rows = max(MIN_BLOCK_ROWS, (nbytes or BLOCK_BYTES) // (8 * max(d, 1)))
    if chunk_rows and split and chunk_rows > rows:
        starts = np.arange(0, m, chunk_rows)
        inner = np.arange(0, chunk_rows, rows)
        return np.unique(np.r_[np.minimum((starts[:, None] + inner[None, :]).ravel(), m), m]).astype(np.int64)
    if chunk_rows:
        rows = max(chunk_rows, rows // chunk_rows * chunk_rows)
    return np.unique(np.r_[np.arange(0, m, rows), m]).astype(np.int64)


#: chunks of more bytes than this, of a store read by zarr's or h5py's own API (not zarr_chunks's byte ranges),
#: warn (LargeChunkWarning): each is decoded whole, and the caller holds about six of them at once
LARGE_CHUNK_BYTES = 8 * 2**20


class LargeChunkWarning(UserWarning):
    """A store whose chunks are decoded whole, and are large: what the caller holds follows the chunks."""


def large_chunk_warning(arr):
    """Warn (:class:`LargeChunkWarning`) when a zarr or HDF5 store read in whole chunks has chunks over
    LARGE_CHUNK_BYTES: the message names the chunk size and the layouts read by windows of rows instead."""
    import warnings
    chunks = getattr(arr, "chunks", None)
    if not isinstance(chunks, tuple) or not chunks:
        return
    nbytes = int(np.prod([int(c) for c in chunks], dtype=np.int64)) * np.dtype(arr.dtype).itemsize
    if nbytes <= LARGE_CHUNK_BYTES:
        return
    store, name = _store_and_array(arr)
    warnings.warn(
        f"{store}: array {name!r} has chunks of {nbytes / 2**20:.0f} MB ({chunks}), which are decoded whole: "
        f"a fit reading it in this process holds about six chunks at once ({6 * nbytes / 2**20:.0f} MB). A zarr 3 "
        "store with codecs 'bytes' alone or 'bytes' + 'zstd' (zarr's default), chunks spanning every column, is "
        "read by windows of rows whatever its chunks; otherwise rechunk it into chunks of about 1 MB "
        f"(corevector.chunked.local_source.LARGE_CHUNK_BYTES is {LARGE_CHUNK_BYTES / 2**20:.0f} MB)",
        LargeChunkWarning, stacklevel=4)


class DamagedStoreError(OSError):
    """Rows of a zarr or HDF5 store that cannot be read: a chunk that fails to decode, or to be read at all."""


def _store_and_array(arr):
    """(the store's path, the array's name in it) of a zarr array or an h5py dataset."""
    if hasattr(arr, "file") and hasattr(arr.file, "filename"):  # h5py
        return arr.file.filename, arr.name
    store = getattr(arr, "store", None)
    where = getattr(store, "root", None) or getattr(arr, "store_path", None) or store
    return str(where), getattr(arr, "name", None) or getattr(arr, "path", "?")


def _failing_chunk(arr, lo, hi):
    """The rows [a, b) of the first chunk in [lo, hi) that cannot be read (else lo, hi)."""
    chunks = getattr(arr, "chunks", None)
    c = int(chunks[0]) if isinstance(chunks, tuple) and chunks and chunks[0] else 0
    for a in range(lo - lo % c, hi, c) if c else ():
        b = min(a + c, int(arr.shape[0]))
        try:
            arr[a:b]
        except Exception:  # noqa: BLE001 -- the chunk that fails
            return a, b
    return lo, hi


def damaged(arr, lo, hi, exc):
    """The :class:`DamagedStoreError` of rows [lo, hi) of ``arr`` that failed with ``exc``: the store, the
    array and the rows of the chunk that fails."""
    store, name = _store_and_array(arr)
    a, b = _failing_chunk(arr, lo, hi)
    what = " ".join(str(exc).split()) or type(exc).__name__
    return DamagedStoreError(f"{store}: array {name!r}: rows {a}-{b - 1} cannot be read (a damaged chunk?): "
                             f"{type(exc).__name__}: {what[:200]}")


def _read_with(reader, cursor, arr, lo, hi):
    """Rows [lo, hi) by the chunk reader (zarr_chunks.ChunkReader); a failure raises :class:`DamagedStoreError`."""
    try:
        return reader.read(lo, hi, cursor)
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 -- a codec's or the store's own error, whatever its type
        cursor.close()
        raise damaged(arr, lo, hi, exc) from None


def read_rows(arr, lo, hi):
    """``arr[lo:hi]`` as an array; a zarr or HDF5 read that fails raises :class:`DamagedStoreError`."""
    if isinstance(arr, np.ndarray):
        return np.asarray(arr[lo:hi])
    try:
        return np.asarray(arr[lo:hi])
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 -- a codec's own error, whatever its type
        raise damaged(arr, lo, hi, exc) from None


def _mapped_pages(arr):
    """(the mmap.mmap under a read-only, C-ordered memory map, the address of its first byte), or None."""
    if not (isinstance(arr, np.ndarray) and arr.flags.c_contiguous and hasattr(mmap, "MADV_DONTNEED")):
        return None
    base = arr
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    if base is None or base.closed:
        return None
    with memoryview(base) as buf:
        if not buf.readonly:
            # a copy-on-write map ('c') keeps the caller's writes in its private pages, which DONTNEED
            # would discard (and a writable one, 'r+', may be written): only read-only maps are released
            return None
    view = np.frombuffer(base, dtype=np.uint8)
    addr = view.ctypes.data
    del view
    return base, addr


class LocalSource(Source):
    """A memmap, a zarr array or an HDF5 dataset read by blocks in the calling process.

    A read-only memory map's pages leave the process's resident set once a pass has read them (madvise
    DONTNEED: the kernel's page cache keeps them, the next pass maps them again), so a fit from a memory map
    holds at most a block's pages, not the whole file (10^7 x 2 float32: the caller grew by the file's 76 MB
    and its fit's 50 more)."""

    def __init__(self, arr):
        self.arr = arr
        self.shape = tuple(int(s) for s in arr.shape)
        self.dtype = np.dtype(arr.dtype)
        # a zarr 3 store of uncompressed or zstd chunks is read by windows of rows, whatever its chunks
        # (zarr_chunks): blocks of BLOCK_BYTES; other stores by zarr's or h5py's API, in whole chunks
        self._reader = None if isinstance(arr, np.ndarray) else chunk_reader(arr)
        if self._reader is not None:
            self.bounds = block_bounds(self.shape[0], self.shape[1] if len(self.shape) > 1 else 1,
                                       self._reader.chunk_rows, split=True)
        else:
            self.bounds = array_bounds(arr)
            large_chunk_warning(arr)
        self.is_dask = False
        self._pages = _mapped_pages(arr)
        self._pass = threading.local()

    def _open_pass(self, cursor):
        """(A pass's reading thread:) its reads go on from ``cursor``."""
        self._pass.cursor = cursor

    def release(self, lo=0, hi=None):
        """Drop the whole pages of rows [lo, hi) of a read-only memory map from the resident set (no-op for
        other sources)."""
        if self._pages is None:
            return
        mm, addr = self._pages
        row = self.arr.strides[0] if self.arr.ndim > 1 else self.arr.itemsize
        start = self.arr.ctypes.data - addr + int(lo) * row
        end = self.arr.ctypes.data - addr + int(self.shape[0] if hi is None else hi) * row
        page = mmap.PAGESIZE
        start, end = -(-start // page) * page, end // page * page
        if end > start and not mm.closed:
            mm.madvise(mmap.MADV_DONTNEED, start, end - start)

    def read(self, b):
        lo, hi = int(self.bounds[b]), int(self.bounds[b + 1])
        if self._reader is None:
            return read_rows(self.arr, lo, hi)
        cursor = getattr(self._pass, "cursor", None)  # a pass's reading thread keeps its position (_blocks)
        if cursor is None:
            cursor = self._reader.cursor()
            try:
                return _read_with(self._reader, cursor, self.arr, lo, hi)
            finally:
                cursor.close()
        return _read_with(self._reader, cursor, self.arr, lo, hi)

    def fetch(self, rows):
        if len(rows) == 0:
            return np.zeros((0,) + self.shape[1:], dtype=self.dtype)
        # one block at a time (zarr would otherwise read every chunk concurrently; a memory map's pages are
        # released block by block), the next read while this one is indexed, into one output array (no parts
        # to concatenate: a stash is many rows).  The rows are in range: ChunkedRows.source_rows checks them
        out = np.empty((len(rows),) + self.shape[1:], dtype=self.dtype)
        parts = by_block(self.bounds, rows)
        at = 0
        # (the generator first in zip: its last release runs)
        for block, (_, loc) in zip(self._blocks([b for b, _ in parts]), parts):
            np.take(block, loc, axis=0, out=out[at:at + len(loc)])  # (no gathered copy of its own)
            at += len(loc)
        return out

    def map(self, fn, shared, per_block, blocks, combine=None):
        parts = [fn(block, shared, pb) for block, pb in zip(self._blocks(blocks), per_block)]
        return parts if combine is None or len(parts) < 2 else [Combined(combine)(shared, *parts)]

    def _blocks(self, blocks):
        """The blocks, each read while ``fn`` works on the one before (zarr and HDF5: decoding releases the
        GIL, and so do the engine's scans), so that a pass costs its reads or its work, not their sum (10^7 x 2
        zarr, 10 blocks: 0.23 s of reads a pass).  A memory map's rows are read where they are used."""
        blocks = list(blocks)
        if isinstance(self.arr, np.ndarray) or len(blocks) < 2:
            for b in blocks:
                yield self.read(b)
                self.release(self.bounds[b], self.bounds[b + 1])
            return
        # (one pass, one reading position: a zarr chunk's stream is decoded once a pass, by the pool's thread)
        cursor = None if self._reader is None else self._reader.cursor()
        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="corevector-read",
                                    initializer=self._open_pass, initargs=(cursor,)) as pool:
                nxt = pool.submit(self.read, blocks[0])
                for i in range(len(blocks)):
                    block = nxt.result()
                    if i + 1 < len(blocks):
                        nxt = pool.submit(self.read, blocks[i + 1])
                    yield block
                    del block
        finally:
            if cursor is not None:
                cursor.close()

    def scatter(self, objs):
        return objs

