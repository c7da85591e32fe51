"""A large real-looking data set made here: Fashion-MNIST under random small deformations, written to zarr.

In the spirit of infinite MNIST / MNIST-8M (Loosli, Canu and Bottou, "Training invariant support vector
machines using selective sampling", 2007): every generated image is one of the 60,000 Fashion-MNIST training
images (Debian's ``dataset-fashion-mnist``, found as :func:`refimpl.datasets.load_dataset` finds it) under a
seeded random transformation -- an elastic deformation (Simard, Steinkraus and Platt 2003: a random
displacement field, uniform in [-1, 1] per pixel, smoothed by a Gaussian of ``sigma`` pixels and scaled by
``alpha``), a rotation of at most ``max_rotation`` degrees and a shift of at most ``max_shift`` pixels, one
bilinear resampling of the 28 x 28 grid for all three -- with its label kept.

Rows ``[k * batch, (k + 1) * batch)`` depend only on ``(seed, k)``, so the set is written chunk by chunk
(:func:`write_zarr`, in parallel if asked), is the same however it is written, and any slice of it can be
made again.  Pixels are float32 in [0, 1] (784 columns); labels int8 (a separate array ``y``).

Layout: ``X`` in zarr chunks of ``chunk_rows`` rows; with zarr v3 the chunks are grouped into shards of
``shard_rows`` rows (one file each) so that a random row costs a read of its chunk, not of a shard.  A
chunked fit reads the rows of its draws by passes over the store (thousands of random rows a pass: every
chunk), so chunks are not small: zarr's cost per chunk dominated a pass with chunks of 64 rows (10^6 rows,
81,000 of them read: 6.2 s a pass; 2.0 s with chunks of 1,024 rows, 3.2 MB).
``python -m corevector.infinite PATH N`` writes N rows.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

__all__ = ["source_images", "deformed", "write_zarr"]

#: transformation defaults (pixels, degrees): small enough that the label stays right
ALPHA, SIGMA, MAX_ROTATION, MAX_SHIFT = 8.0, 4.0, 8.0, 2.0


def source_images(split="train"):
    """(images (n, 28, 28) float32 in [0, 1], labels int8) of Fashion-MNIST's training (60,000) or test
    (10,000) split."""
    import os
    from pathlib import Path

    from refimpl.datasets import load_dataset

    # where reports.mmda.ensure_fashion_mnist unpacks Debian's package without root (`bash run.sh report`)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "corevector" / "fashion-mnist"
    folder = cache / "usr" / "share" / "datasets" / "fashion-mnist"
    if folder.is_dir() and "COREVECTOR_FASHION_MNIST" not in os.environ:
        os.environ["COREVECTOR_FASHION_MNIST"] = str(folder)
    try:
        X, y = load_dataset("fashion_mnist")
    except ValueError as exc:
        raise ValueError(f"{exc}; `python -m reports.run --only mmda` unpacks it without root") from None
    sl = slice(0, 60000) if split == "train" else slice(60000, 70000)
    return X[sl].reshape(-1, 28, 28).astype(np.float32), y[sl].astype(np.int8)


def deformed(images, labels, start, count, seed, alpha=ALPHA, sigma=SIGMA, max_rotation=MAX_ROTATION,
             max_shift=MAX_SHIFT):
    """Rows [start, start + count) of the generated set: (X (count, 784) float32, y (count,) int8).  Row i
    is source image ``choice(i)`` under transformation ``i``, both drawn from ``(seed, start)``; ``start``
    must be a multiple of the writer's batch for rows to be the same however they are written."""
    from scipy.ndimage import gaussian_filter, map_coordinates

    rng = np.random.default_rng([seed, start])
    src = rng.integers(0, len(images), size=count)
    field = rng.uniform(-1.0, 1.0, size=(2, count, 28, 28)).astype(np.float32)
    field = gaussian_filter(field, sigma=(0, 0, sigma, sigma), mode="constant") * alpha
    theta = np.deg2rad(rng.uniform(-max_rotation, max_rotation, size=count)).astype(np.float32)
    shift = rng.uniform(-max_shift, max_shift, size=(2, count)).astype(np.float32)
    r, c = np.meshgrid(np.arange(28, dtype=np.float32) - 13.5, np.arange(28, dtype=np.float32) - 13.5,
                       indexing="ij")
    cos, sin = np.cos(theta)[:, None, None], np.sin(theta)[:, None, None]
    rows = cos * r - sin * c + 13.5 + shift[0][:, None, None] + field[0]
    cols = sin * r + cos * c + 13.5 + shift[1][:, None, None] + field[1]
    k = np.broadcast_to(np.arange(count, dtype=np.float32)[:, None, None], rows.shape)
    stack = images[src]
    out = map_coordinates(stack, [k, rows, cols], order=1, mode="constant", cval=0.0, prefilter=False)
    return np.clip(out, 0.0, 1.0).reshape(count, 784).astype(np.float32), labels[src]


def _zarr_arrays(path, n, chunk_rows, shard_rows):
    import zarr

    root = zarr.open_group(str(path), mode="w")
    kw = {}
    major = int(zarr.__version__.split(".")[0])
    if major >= 3:
        kw = dict(shards=(shard_rows, 784), compressors=None)
    else:
        kw = dict(compressor=None)
    X = root.create_array("X", shape=(n, 784), chunks=(chunk_rows, 784), dtype="f4", **kw) if major >= 3 else \
        root.create_dataset("X", shape=(n, 784), chunks=(chunk_rows, 784), dtype="f4", **kw)
    y = root.create_array("y", shape=(n,), chunks=(shard_rows,), dtype="i1") if major >= 3 else \
        root.create_dataset("y", shape=(n,), chunks=(shard_rows,), dtype="i1")
    root.attrs.update(dict(source="Fashion-MNIST train, deformed (corevector.infinite)"))
    return root, X, y


def _write_part(path, start, count, seed, params):
    import zarr

    images, labels = source_images("train")
    root = zarr.open_group(str(path), mode="r+")
    Xp, yp = deformed(images, labels, start, count, seed, **params)
    root["X"][start:start + count] = Xp
    root["y"][start:start + count] = yp
    return count


def write_zarr(path, n, *, seed=0, chunk_rows=1024, shard_rows=16384, client=None, verbose=False, **params):
    """Write n generated rows to the zarr group ``path`` (arrays ``X`` and ``y``), one shard at a time;
    with a ``dask.distributed`` client, the shards are separate tasks on its workers.  Returns the group."""
    if shard_rows % chunk_rows:
        raise ValueError(f"shard_rows ({shard_rows}) must be a multiple of chunk_rows ({chunk_rows})")
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    root, _, _ = _zarr_arrays(path, n, chunk_rows, shard_rows)
    parts = [(s, min(shard_rows, n - s)) for s in range(0, n, shard_rows)]
    t0 = time.perf_counter()
    if client is not None:
        futures = [client.submit(_write_part, str(path), s, c, seed, params, pure=False) for s, c in parts]
        client.gather(futures)
    else:
        images, labels = source_images("train")
        for k, (s, c) in enumerate(parts):
            Xp, yp = deformed(images, labels, s, c, seed, **params)
            root["X"][s:s + c] = Xp
            root["y"][s:s + c] = yp
            if verbose:
                done = s + c
                rate = done / (time.perf_counter() - t0)
                print(f"{done:,} rows, {rate:,.0f} rows/s, {math.ceil((n - done) / rate)} s left", flush=True)
    return root


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path")
    ap.add_argument("n", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=0, help="write with a LocalCluster of this many workers")
    args = ap.parse_args(argv)
    client = None
    if args.workers:
        from distributed import Client, LocalCluster
        client = Client(LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None))
    write_zarr(args.path, args.n, seed=args.seed, client=client, verbose=True)


if __name__ == "__main__":
    main()
