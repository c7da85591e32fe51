"""The zero level of a function on a box as a closed triangle mesh (the meshing step of :mod:`refimpl.surface`).

* :func:`grid_axes`: a grid of cubic cells over a padded bounding box;
* :func:`sample_grid`: the function on every grid node, evaluated exactly only in a narrow band
  around the level set (coarse to fine) and interpolated, with the right sign, elsewhere;
* :func:`marching_cubes`: the triangle mesh of {values = level} (scikit-image), faces oriented
  down the gradient;
* :func:`boundary_edge_count`, :func:`connected_components`: checks of the mesh's topology.
"""
from __future__ import annotations

import numpy as np

#: the grid extends this fraction of the diagonal beyond the bounding box on every side
GRID_PADDING = 0.05


def grid_axes(lo, hi, resolution, padding=GRID_PADDING, multiple=1):
    """Three node coordinate vectors of a cubic-cell grid over [lo, hi] padded by ``padding`` x diagonal.

    ``resolution`` is the number of cells along the longest side; the cell size h is the same on
    every axis.  The number of cells along each axis is rounded up to a multiple of ``multiple``
    (the grid grows symmetrically), as :func:`sample_grid`'s narrow band needs.
    """
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    pad = padding * float(np.linalg.norm(hi - lo))
    lo, hi = lo - pad, hi + pad
    h = float((hi - lo).max()) / resolution
    cells = np.ceil((hi - lo) / h - 1e-9).astype(int)
    cells = -(-cells // multiple) * multiple
    mid = (lo + hi) / 2.0
    return [mid[a] + h * (np.arange(cells[a] + 1) - cells[a] / 2.0) for a in range(3)], h


def _points(ax, ix, iy, iz):
    gx, gy, gz = np.meshgrid(ax[0][ix], ax[1][iy], ax[2][iz], indexing="ij")
    return np.column_stack([gx.ravel(), gy.ravel(), gz.ravel()])


def _mixed_cells(v):
    """Cells (of the node array v) whose 8 corners do not all have the same sign of v."""
    pos = v > 0
    nb = [k - 1 for k in v.shape]
    any_, all_ = np.zeros(nb, dtype=bool), np.ones(nb, dtype=bool)
    for dx in (0, 1):
        for dy in (0, 1):
            for dz in (0, 1):
                p = pos[dx:dx + nb[0], dy:dy + nb[1], dz:dz + nb[2]]
                any_ |= p
                all_ &= p
    return any_ & ~all_


def _dilate(mask):
    """mask grown by one cell in each of the 26 directions."""
    out = mask.copy()
    pad = np.pad(mask, 1)
    nb = mask.shape
    for dx in (0, 1, 2):
        for dy in (0, 1, 2):
            for dz in (0, 1, 2):
                out |= pad[dx:dx + nb[0], dy:dy + nb[1], dz:dz + nb[2]]
    return out


def _upsample(v):
    """Node values on a lattice twice as fine: linear interpolation along each axis (midpoints)."""
    for a in range(3):
        shape = list(v.shape)
        shape[a] = 2 * shape[a] - 1
        out = np.empty(shape)
        sl = [slice(None)] * 3
        sl[a] = slice(0, None, 2)
        out[tuple(sl)] = v
        sl[a] = slice(1, None, 2)
        lo = [slice(None)] * 3
        hi = [slice(None)] * 3
        lo[a], hi[a] = slice(0, -1), slice(1, None)
        out[tuple(sl)] = 0.5 * (v[tuple(lo)] + v[tuple(hi)])
        v = out
    return v


def sample_grid(func, axes, block=8, narrow_band=True, dilate_all=False):
    """func on every node of the grid ``axes``: an (nx, ny, nz) array, and the number of nodes evaluated.

    ``narrow_band=False`` evaluates every node.  Otherwise (coarse to fine; ``block`` a power of 2
    dividing the number of cells along every axis, see :func:`grid_axes`):

    1. evaluate ``func`` on the lattice of every ``block``-th node;
    2. a cell of the current lattice (step s) is *active* when its 8 corners do not share one sign;
       on the coarsest lattice (and on every lattice with ``dilate_all``) the active set is grown by
       one cell in every direction (26 neighbours), to catch the surface where it bulges into a
       coarse cell between its corners;
    3. evaluate the nodes of the lattice of step s/2 inside the active cells; every other node of that
       lattice gets the linear interpolation of its step-s cell's corners -- which all share one sign
       (the cell is not active), so the interpolated values keep it; the step-s/2 cells inside active
       step-s cells become the candidates of step 2, and so on down to step 1.

    Marching cubes then sees exact values in the cells the surface crosses (and their step-2 parents)
    and sign-consistent values elsewhere; the cost is O(N^2) evaluations for an N^3 grid instead of N^3.
    The assumption: the surface does not cross a coarse cell and its neighbours without changing
    the sign of one of their corners -- features thinner than about ``block`` cells that pass between
    coarse nodes can be lost (check with ``narrow_band=False`` or a smaller block).  The mesh is
    closed in any case (marching cubes on a complete scalar field).
    """
    n = [len(a) for a in axes]
    if not narrow_band:
        vals = func(_points(axes, *(np.arange(k) for k in n)))
        return vals.reshape(n), int(np.prod(n))
    if block < 1 or block & (block - 1) or any((k - 1) % block for k in n):
        raise ValueError(f"block must be a power of 2 dividing the cell counts {[k - 1 for k in n]}, got {block}")
    vals = np.zeros(n)
    known = np.zeros(n, dtype=bool)
    s = block
    lat = tuple(slice(0, None, s) for _ in range(3))
    vals[lat] = func(_points(axes, *(np.arange(0, k, s) for k in n))).reshape(vals[lat].shape)
    known[lat] = True
    evaluated = int(known.sum())
    candidates = np.ones([(k - 1) // s for k in n], dtype=bool)
    while s > 1:
        lat = tuple(slice(0, None, s) for _ in range(3))
        active = _mixed_cells(vals[lat]) & candidates
        if s == block or dilate_all:
            active = _dilate(active) & candidates
        h = s // 2
        # the step-h cells inside active step-s cells
        child = np.repeat(np.repeat(np.repeat(active, 2, 0), 2, 1), 2, 2)
        evaluated += _evaluate_cell_corners(func, axes, vals, known, child, h)
        # the rest of the step-h lattice: interpolated from step-s corners of one sign
        fine = tuple(slice(0, None, h) for _ in range(3))
        up = _upsample(vals[lat])
        sub = vals[fine]
        kn = known[fine]
        sub[~kn] = up[~kn]
        vals[fine] = sub
        candidates = child
        s = h
    return vals, evaluated


def _evaluate_cell_corners(func, axes, vals, known, cells, h):
    """func at the not yet known corners of ``cells`` (a mask of the step-h lattice's cells), written
    into ``vals`` and marked in ``known``; returns the number of evaluations."""
    fine = tuple(slice(0, None, h) for _ in range(3))
    need = np.zeros(vals[fine].shape, dtype=bool)
    for dx in (0, 1):
        for dy in (0, 1):
            for dz in (0, 1):
                need[dx:dx + cells.shape[0], dy:dy + cells.shape[1], dz:dz + cells.shape[2]] |= cells
    need &= ~known[fine]
    idx = np.nonzero(need)
    if not len(idx[0]):
        return 0
    pts = np.column_stack([axes[a][idx[a] * h] for a in range(3)])
    sub = vals[fine]
    sub[idx] = func(pts)
    vals[fine] = sub
    kn = known[fine]
    kn[idx] = True
    known[fine] = kn
    return len(idx[0])


def marching_cubes(values, axes, level=0.0):
    """Triangle mesh (verts (n, 3) in the grid's coordinates, faces (k, 3)) of {values = level}.

    Faces are oriented so that their normals point towards decreasing ``values`` (outwards for
    f - 1, which is positive inside).  Returns empty arrays when the level is not crossed.
    """
    from skimage import measure
    if not (values.min() < level < values.max()):
        return np.empty((0, 3)), np.empty((0, 3), dtype=np.int64)
    h = [float(a[1] - a[0]) if len(a) > 1 else 1.0 for a in axes]
    verts, faces, _, _ = measure.marching_cubes(values, level=level, spacing=tuple(h))
    verts = verts + np.array([a[0] for a in axes])
    # skimage winds the triangles so that their normals point up the gradient (measured: inwards
    # for f - 1); reversed, they point down it, out of the object
    return verts, np.ascontiguousarray(faces[:, ::-1], dtype=np.int64)


# ----------------------------------------------------------------------------------------------
# mesh topology checks (used by tests and the report)
# ----------------------------------------------------------------------------------------------
def boundary_edge_count(faces) -> int:
    """Number of edges used by exactly one triangle (0 for a closed, watertight mesh)."""
    faces = np.asarray(faces)
    if not len(faces):
        return 0
    e = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
    _, counts = np.unique(e, axis=0, return_counts=True)
    return int(np.sum(counts == 1))


def connected_components(n_verts, faces) -> np.ndarray:
    """Component label of every vertex (vertices joined by triangle edges)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components as cc
    faces = np.asarray(faces)
    i = np.concatenate([faces[:, 0], faces[:, 1], faces[:, 2]])
    j = np.concatenate([faces[:, 1], faces[:, 2], faces[:, 0]])
    g = coo_matrix((np.ones(len(i)), (i, j)), shape=(n_verts, n_verts))
    return cc(g, directed=False)[1]
