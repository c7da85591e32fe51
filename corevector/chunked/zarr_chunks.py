"""Rows of a zarr 3 array read from its chunks' bytes in windows of rows, whatever the chunks' size
(:class:`ChunkReader`): what :class:`~corevector.chunked.local_source.LocalSource` reads a zarr store by
when the store allows it.

zarr's own read of rows [lo, hi) fetches every chunk they touch whole, decodes it whole, in a pool of
threads and as many chunks at once as its ``async.concurrency`` (10), and copies the rows into a new
output array.  So a block must be whole chunks (else each block decodes its chunks again), and a store in
chunks of 64 MB (4,194,304 rows at d = 2) made the caller hold 367 MB (240% of a 160 MB X): the chunk's
compressed bytes, its decoded copy, zarr's output buffer and our blocks, twice over with the block read
ahead.  A store in small chunks costs zarr's fixed cost per chunk instead (64 KB chunks: 2.9x the
in-memory fit's time).

Here a read takes the rows it needs and nothing else, through the store's own ``get`` (any zarr store:
local files, memory, fsspec's), into the caller's output array:

* **uncompressed chunks** (codecs ``bytes`` alone): the byte range of the rows, no decoding at all;
* **zstd-compressed chunks** (``bytes`` + ``zstd``, zarr 3's default): the chunk's compressed bytes read by
  ranges of ``READ_BYTES`` and decompressed as a stream (the ``zstandard`` package), straight into the
  output.  A pass over the rows keeps one stream open (a :class:`Cursor`), so the rows of a 64 MB chunk are
  decoded once a pass, a window at a time, and what is held is the window, zstd's own window of history
  (a few MB) and ``READ_BYTES`` of compressed input;
* a chunk not written (zarr's fill value): filled.

Other layouts -- other codecs (blosc, gzip, filters, checksums), sharded or transposed arrays, chunks that
split the columns, zarr 2 stores -- are read by zarr's own API in whole chunks (:func:`chunk_reader` is
then None), and a store whose chunks are large then warns, naming the chunk size
(:func:`~corevector.chunked.local_source.large_chunk_warning`).
"""
from __future__ import annotations

import numpy as np

__all__ = ["ChunkReader", "Cursor", "chunk_reader", "READ_BYTES"]

#: bytes of a chunk's compressed stream read per request (and the decompressor's input buffer)
READ_BYTES = 1 << 20


def _codec_names(arr):
    """('bytes', endian) and the compressor's name of a zarr 3 array's codecs, or None if they are any other."""
    meta = getattr(arr, "metadata", None)
    codecs = getattr(meta, "codecs", None)
    if getattr(meta, "zarr_format", None) != 3 or not isinstance(codecs, (tuple, list)) or not codecs:
        return None
    from zarr.codecs import BytesCodec, ZstdCodec
    first, rest = codecs[0], tuple(codecs[1:])
    if type(first) is not BytesCodec:
        return None
    endian = getattr(first.endian, "value", first.endian)
    if not rest:
        return endian, None
    if len(rest) == 1 and type(rest[0]) is ZstdCodec:
        return endian, "zstd"
    return None


def chunk_reader(arr):
    """A :class:`ChunkReader` of the zarr array ``arr``, or None when its layout is not one it reads (see the
    module docstring) or the ``zstandard`` package, which a compressed one needs, is missing."""
    try:
        import zarr  # noqa: F401
    except ImportError:
        return None
    try:
        names = _codec_names(arr)
    except (AttributeError, ImportError):
        return None
    if names is None:
        return None
    endian, codec = names
    shape = tuple(int(s) for s in arr.shape)
    chunks = getattr(arr, "chunks", None)
    if len(shape) not in (1, 2) or not isinstance(chunks, tuple) or tuple(chunks[1:]) != shape[1:]:
        return None
    if getattr(arr, "shards", None) is not None:
        return None
    dtype = np.dtype(arr.dtype)
    if dtype.kind not in "fiub" or dtype.hasobject:
        return None
    if codec == "zstd":
        try:
            import zstandard  # noqa: F401
        except ImportError:
            return None
    try:
        return ChunkReader(arr, endian, codec)
    except (AttributeError, ImportError, TypeError):  # a zarr release whose array does not say what it needs
        return None


class _Ranges:
    """The compressed bytes of one chunk as a stream (``read(n)``), by byte-range requests to the store."""

    def __init__(self, reader, key):
        self.reader, self.key, self.at, self.done = reader, key, 0, False

    def read(self, n=-1):
        if self.done:
            return b""
        n = READ_BYTES if n is None or n < 0 else max(int(n), 1)
        data = self.reader.get(self.key, self.at, self.at + n)
        if data is None:
            raise FileNotFoundError(f"chunk {self.key} vanished while it was read")
        got = len(data)
        self.at += got
        if got < n:
            self.done = True
        return data


class Cursor:
    """One pass's reading position: the chunk whose stream is open and the rows of it decoded so far.  A pass
    reads ascending rows (blocks in order, a stash's sorted rows), so each chunk's stream is decoded once a
    pass; a read behind the position starts the chunk's stream again."""

    def __init__(self, reader):
        self.reader = reader
        self.chunk, self.row, self.stream = -1, 0, None

    def close(self):
        if self.stream is not None:
            self.stream.close()
        self.chunk, self.row, self.stream = -1, 0, None


class ChunkReader:
    """Rows [lo, hi) of a zarr 3 array in C order whose chunks span every column, with codecs ``bytes``
    (uncompressed) or ``bytes`` + ``zstd``, read by byte ranges (see the module docstring)."""

    def __init__(self, arr, endian, codec):
        from zarr.core.buffer import default_buffer_prototype
        self.arr, self.codec = arr, codec
        self.shape = tuple(int(s) for s in arr.shape)
        self.dtype = np.dtype(arr.dtype)
        self.chunk_rows = int(arr.chunks[0])
        self.row_shape = self.shape[1:]
        self.row_bytes = self.dtype.itemsize * int(np.prod(self.row_shape, dtype=np.int64))
        stored = self.dtype
        if self.dtype.itemsize > 1 and endian is not None:
            stored = self.dtype.newbyteorder("<" if endian == "little" else ">")
        self.stored = stored
        self.fill = arr.fill_value
        self._proto = default_buffer_prototype()
        self._store = arr.store_path.store
        self._base = arr.store_path
        self._meta = arr.metadata
        from zarr.abc.store import RangeByteRequest
        self._range = RangeByteRequest
        try:  # (zarr 3.1's synchronous reads; earlier zarr 3 releases go through zarr's event loop)
            from zarr.abc.store import SupportsGetSync
            self._sync = isinstance(self._store, SupportsGetSync)
        except ImportError:
            self._sync = False

    # ------------------------------------------------------------ the store
    def key(self, c):
        coords = (c,) + (0,) * (len(self.shape) - 1)
        return (self._base / self._meta.encode_chunk_key(coords)).path

    def get(self, key, start=None, end=None):
        """The bytes [start, end) of ``key`` as a uint8 array (all of them without a range), None if absent."""
        rng = None if start is None else self._range(int(start), int(end))
        if self._sync:
            buf = self._store.get_sync(key, prototype=self._proto, byte_range=rng)
        else:
            from zarr.core.sync import sync
            buf = sync(self._store.get(key, prototype=self._proto, byte_range=rng))
        return None if buf is None else buf.as_numpy_array().view(np.uint8).reshape(-1)

    # ------------------------------------------------------------ rows
    def cursor(self):
        return Cursor(self)

    def read(self, lo, hi, cursor=None, out=None):
        """Rows [lo, hi) (0 <= lo <= hi <= m) into ``out`` (a new array of the array's dtype if None)."""
        lo, hi = int(lo), int(hi)
        if not 0 <= lo <= hi <= self.shape[0]:
            raise ValueError(f"rows [{lo}, {hi}) are not rows of an array of {self.shape[0]} rows")
        if out is None:
            out = np.empty((hi - lo,) + self.row_shape, dtype=self.dtype)
        own = cursor is None
        cursor = cursor or self.cursor()
        try:
            c = self.chunk_rows
            for k in range(lo // c, -(-hi // c) if hi > lo else lo // c):
                c0 = k * c
                a, b = max(lo, c0), min(hi, c0 + c)
                self._rows_of_chunk(k, a - c0, b - c0, out[a - lo:b - lo], cursor)
        finally:
            if own:
                cursor.close()
        return out

    def _rows_of_chunk(self, k, a, b, out, cursor):
        """Rows [a, b) of chunk k (rows within the chunk) into ``out``."""
        rb = self.row_bytes
        flat = out.reshape(-1).view(np.uint8) if out.dtype == self.stored else None
        if self.codec is None:
            data = self.get(self.key(k), a * rb, b * rb)
            if data is None:
                out[...] = self.fill
                return
            if len(data) < (b - a) * rb:
                raise ValueError(f"chunk {self.key(k)} holds {len(data)} bytes from row {a}, "
                                 f"not the {(b - a) * rb} of rows {a}-{b - 1}")
            if flat is not None:
                flat[:] = data
            else:
                out[...] = data.view(self.stored).reshape(out.shape)
            return
        # zstd: the chunk's stream, positioned at row a
        if cursor.chunk != k or cursor.row > a:
            cursor.close()
            key = self.key(k)
            first = self.get(key, 0, READ_BYTES)
            if first is None:
                out[...] = self.fill
                return
            import zstandard
            src = _Ranges(self, key)
            src.at = len(first)
            src.done = len(first) < READ_BYTES
            cursor.stream = zstandard.ZstdDecompressor().stream_reader(
                _Prefixed(first, src), read_size=READ_BYTES, closefd=False)
            cursor.chunk, cursor.row = k, 0
        if cursor.stream is None:  # a chunk not written
            out[...] = self.fill
            return
        if cursor.row < a:
            self._skip(cursor, (a - cursor.row) * rb)
            cursor.row = a
        if flat is not None:
            self._fill(cursor, memoryview(flat), (b - a) * rb)
        else:
            tmp = np.empty((b - a) * rb, dtype=np.uint8)
            self._fill(cursor, memoryview(tmp), len(tmp))
            out[...] = tmp.view(self.stored).reshape(out.shape)
        cursor.row = b

    def _fill(self, cursor, view, n):
        got = 0
        while got < n:
            k = cursor.stream.readinto(view[got:n])
            if not k:
                raise ValueError(f"the zstd stream of chunk {self.key(cursor.chunk)} ended after {got} of {n} bytes")
            got += k

    def _skip(self, cursor, n):
        scratch = memoryview(np.empty(min(n, READ_BYTES), dtype=np.uint8))
        while n > 0:
            k = min(n, len(scratch))
            self._fill(cursor, scratch, k)
            n -= k


class _Prefixed:
    """A stream of ``first`` (bytes already read) then ``rest``'s."""

    def __init__(self, first, rest):
        self.first, self.rest = first, rest

    def read(self, n=-1):
        if self.first is not None:
            out, self.first = self.first, None
            if len(out):
                return out
        return self.rest.read(n)
