"""Data that stay where they are: Dask arrays, zarr arrays, HDF5 datasets and memory maps as inputs.

The estimators ``MEB``, ``CVDD``, ``CVMClassifier`` and ``CVR`` (the classes decorated with
:func:`~corevector.chunked.methods.accepts_chunked`) accept, in ``fit``, ``predict``, ``decision_function``,
``score`` and the other per-row methods:

* a ``dask.array.Array``, on a ``dask.distributed`` client or on the local scheduler;
* a zarr array or an h5py dataset, read by chunks (on the workers, through :func:`dask_from_zarr`, when a
  distributed client is running);
* an ``np.memmap`` (or a memory-mapped ``.npy``, ``np.load(..., mmap_mode='r')``).  A float64 C-ordered
  map is what the in-memory engines read anyway, in place and without a copy, so it takes the in-memory
  path; any other (float32, Fortran order) is read by chunks here, never converted whole.

None of them is read whole into the caller's memory beyond what a fit holds anyway (on small data, where that
is no more than its windows of rows read ahead would hold, the fit keeps every row: ``ops.RESIDENT_ROWS``),
and the fit is the in-memory fit's core set and α.

**Where the work starts.**  A fit starts in :mod:`corevector.chunked.fit` (its docstring walks through the
steps and the module of each); a prediction in :mod:`corevector.chunked.methods`.  The modules, from the
data up:

* :mod:`~corevector.chunked.detect` -- which inputs are chunked (:func:`needs_chunked`), whether Dask is there;
* :mod:`~corevector.chunked.source` -- :class:`~corevector.chunked.source.Source`, what every data source is,
  and the rows it keeps after a fit; :mod:`~corevector.chunked.local_source` (read in this process) and
  :mod:`~corevector.chunked.dask_source` (read on a cluster's workers, surviving lost workers), with
  :mod:`~corevector.chunked.zarr_chunks` (a zarr store's rows read by windows, whatever its chunks);
* :mod:`~corevector.chunked.rows` -- :class:`ChunkedRows`, the estimators' ``X``: views, rows on request, a
  function mapped over the blocks; :mod:`~corevector.chunked.stats`, the statistics of one pass;
* :mod:`~corevector.chunked.checks` -- scikit-learn's input checks and the kernel width from that pass;
* :mod:`~corevector.chunked.ops` -- ``ChunkedMEBOps``, the core-set loop's numerics over a source, with
  :mod:`~corevector.chunked.row_slots` (the rows held), :mod:`~corevector.chunked.staged_rows` (rows read
  ahead), :mod:`~corevector.chunked.full_scans` (the loop's full scans over every block, merged) and
  :mod:`~corevector.chunked.scans` (what a full scan runs beside each block);
* :mod:`~corevector.chunked.fit` and :mod:`~corevector.chunked.methods` -- the entry points above.

The compiled numerics are reached only through :func:`corevector.numerics.numerics`, as everywhere.
"""
from .checks import kernel_spec, validate
from .dask_source import dask_from_zarr
from .detect import EXTRA_MESSAGE, distributed_client, is_dask, needs_chunked, require_dask
from .rows import MATERIALIZE_BYTES, ChunkedRows

__all__ = ["needs_chunked", "ChunkedRows", "dask_from_zarr", "validate", "kernel_spec", "EXTRA_MESSAGE",
           "distributed_client", "is_dask", "require_dask", "MATERIALIZE_BYTES"]
