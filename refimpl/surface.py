"""Implicit surfaces with CVR: a point cloud as the one-set f^-1(1) (000_88c8f8810bf6206d.txt, Sec. 4.2).

The scheme of the paper (after Schölkopf, Giesen & Spalinger 2005, as cited there):

* Only points *on* the surface are given.  Fitting the zero set f^-1(0) with an SVR is degenerate
  (w = 0, b = 0 fits every target 0), so the surface is modelled as the **one-set** f^-1(1): every
  point gets the target y = 1, and the bias b is penalised (the L2-SVR of eq. (6), see
  :mod:`refimpl.cvr`), so "f = 1 everywhere" through b alone costs b^2 = 1 and the kernel part
  carries the shape.  Away from the points the Laplacian expansion decays to b < 1, and inside the
  closed surface it sums the contributions of all sides (f > 1): f - 1 changes sign across the
  surface.
* **Multi-scale**: three CVRs with the Laplacian kernel k(x, y) = exp(-||x - y|| / sigma) and
  decreasing sigma.  Level 1 fits y = 1 with the largest sigma (a crude model); level l = 2, 3 fits
  the residual r_l(x_i) = 1 - f_{l-1}(x_i) of the sum of the previous levels, f_{l-1} = g_1 + ... +
  g_{l-1}.  The model is f = g_1 + g_2 + g_3 and the surface is the zero level of f - 1.
* **Target scale**.  The L2-SVR is not scale invariant (the 2 C epsbar term is linear in the
  targets, the rest quadratic): fitting targets s y with (C, mu) equals fitting y with (C / s,
  mu / s) up to the factor s.  Each level therefore fits its residual divided by its RMS s_l and
  the result is multiplied by s_l, so that a level's (C, mu) does not depend on how small the
  previous levels left the residual.
* **Parameters** (measured on the bunny, see ``reports/surface.py``; sigmas in units of the
  bounding-box diagonal): sigma = (0.15, 0.07, 0.035), C = (1, 100, 150), mu = 1e-6.
  - Level 1 needs C >~ 1: the one-set costs ||w||^2 + b^2 ~ 1 and the tube 2 C epsbar, so below
    C ~ 1 the tube width absorbs the constant target (epsbar -> 1, f -> 0: the degenerate
    solution the penalised bias is meant to avoid).  At C = 1 epsbar is a few 1e-3 and f exceeds 1
    inside the bunny by about 1e-2 (sigma 0.3), falling below 1 outside.  Larger C fits tighter
    with many more core vectors.
  - The residual levels fit zero-mean, rough targets: with C = 1 their tube covers everything
    (epsbar ~ 1.5, nothing fitted); C = 100-300 cuts the residual RMS 2-6x per level (C3 = 300
    instead of 150: residual RMS 4.1e-4 instead of 6.4e-4, 31% more CPU time on the 50,000-point
    bunny).
  - mu is the mean slack (eq. (9)).  If it exceeds the natural residual, epsbar = -mu/2 and every
    point is a support vector on both sides (kernel ridge regression); mu = 1e-6 keeps epsbar > 0
    and the model sparse.  Smaller mu barely changes the model and slows the QP.
  - Level-1 sigma 0.3 joins the ears by a membrane (the one-set has no off-surface points to say
    the gap between them is outside); 0.15 separates them.
* **Mesh**: f - 1 on a regular grid over the (padded) bounding box, then marching cubes
  (scikit-image).  Only blocks near the surface are evaluated at full resolution (see
  :func:`sample_grid`).

Coordinates are normalised before fitting (:func:`normalization`): centred on the bounding-box
centre and scaled to a unit bounding-box *diagonal*, so the sigmas are fractions of the diagonal
and the defaults work for any scan, whatever its units.

Point-cloud files: :func:`read_points` reads the vertices of a PLY (ascii, binary little/big
endian), an XYZ (whitespace columns x y z [...]) or an OFF file; faces are ignored.  Meshes are
written as PLY (ascii or binary) or OBJ (:func:`write_mesh`) and read back by :func:`read_mesh`.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from .kernels import KernelSpec, kernel_expansion

#: default sigmas of the three levels, as fractions of the bounding-box diagonal
DEFAULT_SIGMAS = (0.15, 0.07, 0.035)
#: default C of the three levels and mu (each level fits its target divided by the target's RMS)
DEFAULT_C = (1.0, 100.0, 150.0)
DEFAULT_MU = 1e-6
#: the grid extends this fraction of the diagonal beyond the bounding box on every side
GRID_PADDING = 0.05


# ----------------------------------------------------------------------------------------------
# point-cloud and mesh files
# ----------------------------------------------------------------------------------------------
_PLY_TYPES = {
    "char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1",
    "short": "i2", "int16": "i2", "ushort": "u2", "uint16": "u2",
    "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4",
    "float": "f4", "float32": "f4", "double": "f8", "float64": "f8",
}


def _bad(path, msg):
    return ValueError(f"{os.fspath(path)}: {msg}")


@dataclass
class _PlyElement:
    name: str
    count: int
    props: list = field(default_factory=list)  # (name, dtype) or (name, count dtype, item dtype)


def _parse_ply_header(path, raw):
    end = raw.find(b"end_header")
    if not raw.startswith(b"ply") or end < 0:
        raise _bad(path, "not a PLY file (no 'ply' magic or no 'end_header')")
    nl = raw.find(b"\n", end)
    body = nl + 1 if nl >= 0 else len(raw)
    fmt, elements = None, []
    for line in raw[:end].decode("ascii", errors="replace").splitlines()[1:]:
        tok = line.split()
        if not tok or tok[0] in ("comment", "obj_info"):
            continue
        try:
            if tok[0] == "format":
                fmt = tok[1]
            elif tok[0] == "element":
                elements.append(_PlyElement(tok[1], int(tok[2])))
            elif tok[0] == "property":
                if not elements:
                    raise _bad(path, "property before any element")
                if tok[1] == "list":
                    elements[-1].props.append((tok[4], _PLY_TYPES[tok[2]], _PLY_TYPES[tok[3]]))
                else:
                    elements[-1].props.append((tok[2], _PLY_TYPES[tok[1]]))
            else:
                raise _bad(path, f"unknown PLY header line {line!r}")
        except (IndexError, KeyError) as exc:
            raise _bad(path, f"malformed PLY header line {line!r}") from exc
    if fmt not in ("ascii", "binary_little_endian", "binary_big_endian"):
        raise _bad(path, f"unsupported PLY format {fmt!r}")
    if any(e.count < 0 for e in elements):
        raise _bad(path, "negative element count")
    return fmt, elements, body


def _read_ply(path, want_faces=False):
    with open(path, "rb") as f:
        raw = f.read()
    fmt, elements, pos = _parse_ply_header(path, raw)
    names = [e.name for e in elements]
    if "vertex" not in names:
        raise _bad(path, "no 'vertex' element")
    verts, faces = None, None
    if fmt == "ascii":
        lines = raw[pos:].decode("ascii", errors="replace").splitlines()
        lines = [ln for ln in lines if ln.strip()]
        at = 0
        for e in elements:
            rows = lines[at:at + e.count]
            if len(rows) < e.count:
                raise _bad(path, f"truncated: {e.name} has {len(rows)} of {e.count} rows")
            at += e.count
            if e.name == "vertex":
                verts = _ascii_vertices(path, e, rows)
            elif e.name == "face" and want_faces:
                faces = _ascii_faces(path, e, rows)
    else:
        order = "<" if fmt == "binary_little_endian" else ">"
        for e in elements:
            if all(len(p) == 2 for p in e.props):
                dt = np.dtype([(p[0], order + p[1]) for p in e.props])
                if pos + e.count * dt.itemsize > len(raw):
                    raise _bad(path, f"truncated binary PLY in element {e.name!r}")
                data = np.frombuffer(raw, dtype=dt, count=e.count, offset=pos)
                pos += e.count * dt.itemsize
                if e.name == "vertex":
                    verts = _xyz_columns(path, data)
            else:
                if e.name == "vertex":
                    raise _bad(path, "list properties in the vertex element are not supported")
                data, pos = _binary_lists(path, raw, pos, e, order)
                if e.name == "face":
                    faces = data
            if verts is not None and not want_faces:
                break
    return verts, faces


def _xyz_columns(path, data):
    try:
        return np.column_stack([np.asarray(data[c], dtype=np.float64) for c in "xyz"])
    except (ValueError, KeyError) as exc:
        raise _bad(path, "the vertex element needs properties x, y, z") from exc


def _ascii_vertices(path, e, rows):
    props = [p[0] for p in e.props]
    if not all(c in props for c in "xyz") or any(len(p) != 2 for p in e.props):
        raise _bad(path, "the vertex element needs scalar properties x, y, z")
    cols = [props.index(c) for c in "xyz"]
    try:
        table = np.array([r.split()[:len(props)] for r in rows], dtype=np.float64)
    except ValueError as exc:
        raise _bad(path, "malformed vertex row") from exc
    if e.count and table.shape != (e.count, len(props)):
        raise _bad(path, "malformed vertex row")
    table = table.reshape(e.count, len(props))
    # a value is what its declared type holds ('float' is float32, as in a binary file)
    return np.column_stack([table[:, c].astype(e.props[c][1]).astype(np.float64) for c in cols])


def _ascii_faces(path, e, rows):
    out = []
    for r in rows:
        tok = r.split()
        try:
            k = int(tok[0])
            out.append([int(t) for t in tok[1:1 + k]])
        except (ValueError, IndexError) as exc:
            raise _bad(path, "malformed face row") from exc
    return _triangles(path, out)


def _binary_lists(path, raw, pos, e, order):
    """An element with list properties (faces): vectorised when every row is a triangle of one list."""
    if len(e.props) == 1:
        _, ct, it = e.props[0]
        dt = np.dtype([("n", order + ct), ("v", order + it, (3,))])
        if pos + e.count * dt.itemsize <= len(raw):
            data = np.frombuffer(raw, dtype=dt, count=e.count, offset=pos)
            if np.all(data["n"] == 3):
                return data["v"].astype(np.int64), pos + e.count * dt.itemsize
    rows = []
    try:
        for _ in range(e.count):
            row = []
            for p in e.props:
                if len(p) == 2:
                    pos += np.dtype(p[1]).itemsize
                    continue
                ct, it = np.dtype(order + p[1]), np.dtype(order + p[2])
                k = int(np.frombuffer(raw, dtype=ct, count=1, offset=pos)[0])
                pos += ct.itemsize
                row = np.frombuffer(raw, dtype=it, count=k, offset=pos).tolist()
                pos += k * it.itemsize
            rows.append(row)
    except ValueError as exc:
        raise _bad(path, f"truncated binary PLY in element {e.name!r}") from exc
    return _triangles(path, rows), pos


def _triangles(path, polys):
    """Polygons -> triangles (fans)."""
    tris = []
    for p in polys:
        if len(p) < 3:
            raise _bad(path, "a face has fewer than 3 vertices")
        tris.extend([p[0], p[j], p[j + 1]] for j in range(1, len(p) - 1))
    return np.array(tris, dtype=np.int64).reshape(-1, 3)


def _read_xyz(path):
    try:
        data = np.loadtxt(path, dtype=np.float64, ndmin=2, comments="#")
    except ValueError as exc:
        raise _bad(path, f"malformed XYZ file ({exc})") from exc
    if data.size == 0:
        return np.empty((0, 3))
    if data.shape[1] < 3:
        raise _bad(path, f"an XYZ file needs at least 3 columns, found {data.shape[1]}")
    return np.ascontiguousarray(data[:, :3])


def _read_off(path, want_faces=False):
    with open(path, "r", errors="replace") as f:
        lines = [ln.split("#", 1)[0].strip() for ln in f]
    lines = [ln for ln in lines if ln]
    if not lines or not lines[0].startswith("OFF"):
        raise _bad(path, "not an OFF file (no 'OFF' header)")
    head = lines[0][3:].split()
    rest = lines[1:]
    if not head:
        if not rest:
            raise _bad(path, "missing OFF counts")
        head, rest = rest[0].split(), rest[1:]
    try:
        nv, nf = int(head[0]), int(head[1])
    except (ValueError, IndexError) as exc:
        raise _bad(path, "malformed OFF counts line") from exc
    if nv < 0 or nf < 0 or len(rest) < nv + (nf if want_faces else 0):
        raise _bad(path, f"truncated OFF file: expected {nv} vertices and {nf} faces")
    try:
        verts = np.array([r.split()[:3] for r in rest[:nv]], dtype=np.float64).reshape(nv, 3)
    except ValueError as exc:
        raise _bad(path, "malformed OFF vertex line") from exc
    faces = None
    if want_faces:
        polys = []
        for r in rest[nv:nv + nf]:
            tok = r.split()
            try:
                polys.append([int(t) for t in tok[1:1 + int(tok[0])]])
            except (ValueError, IndexError) as exc:
                raise _bad(path, "malformed OFF face line") from exc
        faces = _triangles(path, polys)
    return verts, faces


def _read_obj(path):
    verts, polys = [], []
    with open(path, "r", errors="replace") as f:
        for line in f:
            tok = line.split()
            try:
                if tok and tok[0] == "v":
                    verts.append([float(t) for t in tok[1:4]])
                elif tok and tok[0] == "f":
                    polys.append([int(t.split("/")[0]) - 1 for t in tok[1:]])
            except ValueError as exc:
                raise _bad(path, f"malformed OBJ line {line.strip()!r}") from exc
    if any(len(v) != 3 for v in verts):
        raise _bad(path, "an OBJ vertex needs 3 coordinates")
    return np.array(verts, dtype=np.float64).reshape(-1, 3), _triangles(path, polys)


def _ext(path):
    return os.path.splitext(os.fspath(path))[1].lower()


def read_points(path) -> np.ndarray:
    """The (n, 3) float64 vertices of a .ply, .xyz (also .txt, .pts) or .off file; faces are ignored.

    Raises ValueError naming the file when it is malformed or of an unknown type, and when it holds
    non-finite coordinates.
    """
    ext = _ext(path)
    if ext == ".ply":
        pts, _ = _read_ply(path)
    elif ext in (".xyz", ".txt", ".pts"):
        pts = _read_xyz(path)
    elif ext == ".off":
        pts, _ = _read_off(path)
    else:
        raise _bad(path, f"unknown point-cloud file type {ext!r} (expected .ply, .xyz or .off)")
    if not np.all(np.isfinite(pts)):
        raise _bad(path, "non-finite coordinates")
    return np.ascontiguousarray(pts, dtype=np.float64)


def read_mesh(path):
    """(verts (n, 3), faces (k, 3) int64) of a .ply, .obj or .off mesh (polygons split into triangles)."""
    ext = _ext(path)
    if ext == ".ply":
        verts, faces = _read_ply(path, want_faces=True)
    elif ext == ".obj":
        verts, faces = _read_obj(path)
    elif ext == ".off":
        verts, faces = _read_off(path, want_faces=True)
    else:
        raise _bad(path, f"unknown mesh file type {ext!r} (expected .ply, .obj or .off)")
    faces = np.empty((0, 3), dtype=np.int64) if faces is None else faces
    if faces.size and (faces.min() < 0 or faces.max() >= len(verts)):
        raise _bad(path, "a face refers to a vertex that does not exist")
    return verts, faces


def write_ply(path, verts, faces=None, binary=True):
    """PLY with float32 vertices x, y, z and (if given) int32 triangle faces; binary little endian or ascii."""
    verts = np.asarray(verts, dtype=np.float64).reshape(-1, 3)
    faces = np.empty((0, 3), dtype=np.int64) if faces is None else np.asarray(faces).reshape(-1, 3)
    head = ["ply", f"format {'binary_little_endian' if binary else 'ascii'} 1.0", "comment corevector",
            f"element vertex {len(verts)}", "property float x", "property float y", "property float z"]
    if len(faces):
        head += [f"element face {len(faces)}", "property list uchar int vertex_indices"]
    head.append("end_header")
    with open(path, "wb") as f:
        f.write(("\n".join(head) + "\n").encode("ascii"))
        if binary:
            f.write(verts.astype("<f4").tobytes())
            if len(faces):
                rec = np.empty(len(faces), dtype=[("n", "u1"), ("v", "<i4", (3,))])
                rec["n"] = 3
                rec["v"] = faces
                f.write(rec.tobytes())
        else:
            # float32 values written with 9 significant digits read back exactly
            np.savetxt(f, verts.astype(np.float32), fmt="%.9g")
            if len(faces):
                np.savetxt(f, np.column_stack([np.full(len(faces), 3), faces]), fmt="%d")


def write_obj(path, verts, faces):
    verts = np.asarray(verts, dtype=np.float64).reshape(-1, 3)
    faces = np.asarray(faces).reshape(-1, 3)
    with open(path, "w") as f:
        f.write("# corevector implicit surface\n")
        np.savetxt(f, verts, fmt="v %.17g %.17g %.17g")  # exact float64
        np.savetxt(f, faces + 1, fmt="f %d %d %d")


def write_mesh(path, verts, faces, binary=True):
    """Write a triangle mesh as .ply (binary unless ``binary=False``) or .obj, by the file's extension."""
    ext = _ext(path)
    if ext == ".ply":
        write_ply(path, verts, faces, binary=binary)
    elif ext == ".obj":
        write_obj(path, verts, faces)
    else:
        raise ValueError(f"{os.fspath(path)}: unknown mesh file type {ext!r} (expected .ply or .obj)")


def bunny_path() -> str:
    """Path of the Stanford bunny scan shipped in the ``pymeshfix`` package (examples/StanfordBunny.ply).

    50,000 vertices (a VTK export of the Stanford bunny, z up).  Only the data file is read; no code of
    pymeshfix (AGPL) is used.  Install with the project's ``data`` extra.
    """
    try:
        import importlib.util
        spec = importlib.util.find_spec("pymeshfix")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        raise ImportError("the Stanford bunny comes from the 'pymeshfix' package: pip install 'corevector[data]'")
    path = os.path.join(os.path.dirname(spec.origin), "examples", "StanfordBunny.ply")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found in the installed pymeshfix")
    return path


def load_bunny() -> np.ndarray:
    """The (50000, 3) vertices of the bunny scan of :func:`bunny_path`."""
    return read_points(bunny_path())


# ----------------------------------------------------------------------------------------------
# the multi-scale model
# ----------------------------------------------------------------------------------------------
def normalization(points):
    """(center, scale) with (points - center) / scale centred on the bounding box, unit diagonal."""
    lo, hi = points.min(axis=0), points.max(axis=0)
    diag = float(np.linalg.norm(hi - lo))
    if not diag > 0:
        raise ValueError("points: all points coincide (the bounding box has zero size)")
    return (lo + hi) / 2.0, diag


@dataclass
class Level:
    """One CVR of the multi-scale model: g(x) = scale * (sum_t coef_t k_sigma(sv_t, x) + intercept)."""

    sigma: float
    support_vectors: np.ndarray
    coef: np.ndarray
    intercept: float
    scale: float              # the RMS of this level's targets (residuals); the CVR fits targets / scale
    n_core_vectors: int       # augmented points in the core set (as the paper's #CVs)
    n_support_vectors: int    # rows with lambda_i != lambda*_i (#SVs)
    fit_time: float           # seconds, wall clock, of the CVR fit
    cpu_time: float           # CPU seconds (all threads) of the CVR fit
    C: float = float("nan")
    mu: float = float("nan")
    n_iter: int = 0
    certified_ratio: float = float("nan")
    epsilon_bar: float = float("nan")
    residual_rms_before: float = float("nan")  # RMS of 1 - f on the points before this level
    residual_rms_after: float = float("nan")   # ... and after adding it

    @property
    def kernel(self) -> KernelSpec:
        return KernelSpec("laplacian", 1.0 / self.sigma)

    def evaluate(self, X, expansion=kernel_expansion):
        return self.scale * (expansion(self.kernel, self.support_vectors, self.coef, X) + self.intercept)


def fit_level_ref(X, y, sigma, C, mu, eps=1e-6, sample_size=59, random_state=None, n_confirm=30):
    """One CVR of the reference engine: (support, coef, intercept, diagnostics) for targets y."""
    from . import cvr
    from .meb import fit_meb
    spec = KernelSpec("laplacian", 1.0 / sigma)
    problem = cvr.cvr_problem(X, y, spec, C, mu)
    result = fit_meb(problem, eps, sample_size=sample_size, random_state=random_state, n_confirm=n_confirm)
    model = cvr.recover(problem, result, y, C, mu)
    return model.support, model.coef, model.intercept, dict(
        n_core_vectors=len(result.core_set), n_iter=result.n_iter,
        certified_ratio=result.certified_ratio, epsilon_bar=model.epsilon_bar)


def fit_multiscale(X, sigmas, C, mu, fit_level=None, expansion=kernel_expansion, **fit_kwargs):
    """The three-level scheme of 000 Sec. 4.2 on normalised points X (n, 3); returns the list of Levels.

    ``C`` and ``mu`` are numbers or one per level.

    ``fit_level(X, y, sigma, C, mu, **fit_kwargs) -> (support, coef, intercept, diagnostics)`` fits one
    CVR (default :func:`fit_level_ref`); ``expansion`` evaluates kernel expansions.
    """
    fit_level = fit_level_ref if fit_level is None else fit_level
    X = np.ascontiguousarray(X, dtype=np.float64)
    f = np.zeros(X.shape[0])  # the model so far on the points
    levels = []
    Cs = np.broadcast_to(np.asarray(C, dtype=np.float64), (len(sigmas),))
    mus = np.broadcast_to(np.asarray(mu, dtype=np.float64), (len(sigmas),))
    for sigma, C_l, mu_l in zip(sigmas, Cs, mus):
        r = 1.0 - f  # level 1: the one-set targets y = 1
        scale = float(np.sqrt(np.mean(r * r)))
        if not scale > 0:  # the points are fitted exactly: nothing left for this level
            scale = 1.0
        t0, c0 = time.perf_counter(), time.process_time()
        support, coef, intercept, diag = fit_level(X, r / scale, float(sigma), float(C_l), float(mu_l),
                                                   **fit_kwargs)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        lev = Level(sigma=float(sigma), support_vectors=X[support], coef=np.asarray(coef, dtype=np.float64),
                    intercept=float(intercept), scale=scale, n_support_vectors=len(support),
                    fit_time=wall, cpu_time=cpu, residual_rms_before=scale, C=float(C_l), mu=float(mu_l),
                    **diag)
        f = f + lev.evaluate(X, expansion)
        lev.residual_rms_after = float(np.sqrt(np.mean((1.0 - f) ** 2)))
        levels.append(lev)
    return levels


def evaluate(levels, X, expansion=kernel_expansion):
    """f(X) = sum of the levels (normalised coordinates)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    out = np.zeros(X.shape[0])
    for lev in levels:
        out += lev.evaluate(X, expansion)
    return out


# ----------------------------------------------------------------------------------------------
# grid sampling and marching cubes
# ----------------------------------------------------------------------------------------------
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
        # the step-h cells inside active step-s cells, and the step-h nodes at their corners
        child = np.repeat(np.repeat(np.repeat(active, 2, 0), 2, 1), 2, 2)
        fine = tuple(slice(0, None, h) for _ in range(3))
        need = np.zeros(vals[fine].shape, dtype=bool)
        for dx in (0, 1):
            for dy in (0, 1):
                for dz in (0, 1):
                    need[dx:dx + child.shape[0], dy:dy + child.shape[1], dz:dz + child.shape[2]] |= child
        need &= ~known[fine]
        idx = np.nonzero(need)
        if len(idx[0]):
            pts = np.column_stack([axes[a][idx[a] * h] for a in range(3)])
            sub = vals[fine]
            sub[idx] = func(pts)
            vals[fine] = sub
            kn = known[fine]
            kn[idx] = True
            known[fine] = kn
            evaluated += len(idx[0])
        # the rest of the step-h lattice: interpolated from step-s corners of one sign
        up = _upsample(vals[lat])
        sub = vals[fine]
        kn = known[fine]
        sub[~kn] = up[~kn]
        vals[fine] = sub
        candidates = child
        s = h
    return vals, evaluated


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
# mesh quality helpers (used by tests and the report)
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


# ----------------------------------------------------------------------------------------------
# rendering
# ----------------------------------------------------------------------------------------------
def _rotation(elev_deg, azim_deg):
    """Camera rotation: world z up; view from azimuth ``azim`` (about z) and elevation ``elev``."""
    a, e = np.radians(azim_deg), np.radians(elev_deg)
    rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    # camera looks along -y' after rotation: screen x = x', screen y = z', depth = y'
    rx = np.array([[1, 0, 0], [0, np.cos(e), -np.sin(e)], [0, np.sin(e), np.cos(e)]])
    return rx @ rz


def render(path, verts, faces, views=((15, -60), (15, 30)), up="z", size=5.0, title=None, points=None):
    """PNG of the mesh from the given (elevation, azimuth) views: flat Lambert shading, painter's order.

    Matplotlib 2-D polygons sorted back to front (no mplot3d), one panel a view; ``up`` is the world
    axis drawn upwards.  ``points`` (optional) are shown in an extra panel as a depth-shaded scatter.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    verts = np.asarray(verts, dtype=np.float64)
    faces = np.asarray(faces)
    perm = {"z": [0, 1, 2], "y": [2, 0, 1], "x": [1, 2, 0]}[up]
    V = verts[:, perm]
    centre = (V.min(0) + V.max(0)) / 2 if len(V) else np.zeros(3)
    V = V - centre
    panels = len(views) + (points is not None)
    fig, axes = plt.subplots(1, panels, figsize=(size * panels, size), squeeze=False)
    light = np.array([0.4, -0.8, 0.6])
    light /= np.linalg.norm(light)
    lim = 0.55 * float(np.ptp(V, axis=0).max()) if len(V) else 1.0
    for ax, (elev, azim) in zip(axes[0], views):
        R = _rotation(elev, azim)
        P = V @ R.T  # screen x = P0, depth = P1 (away from viewer positive), screen y = P2
        if len(faces):
            tri = P[faces]
            nrm = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
            nrm /= np.maximum(np.linalg.norm(nrm, axis=1, keepdims=True), 1e-300)
            # faces are oriented outwards; two-sided lighting keeps inner sheets visible if any
            shade = 0.15 + 0.85 * np.abs(nrm @ light)
            order = np.argsort(-tri[:, :, 1].mean(1))  # far first
            polys = tri[order][:, :, [0, 2]]
            col = plt.cm.bone(0.25 + 0.7 * shade[order])
            ax.add_collection(PolyCollection(polys, facecolors=col, edgecolors="none", antialiased=False))
        if len(P):  # frame each view on its own projection
            (x0, y0), (x1, y1) = P[:, [0, 2]].min(0), P[:, [0, 2]].max(0)
            half = 0.52 * max(x1 - x0, y1 - y0)
            ax.set_xlim((x0 + x1) / 2 - half, (x0 + x1) / 2 + half)
            ax.set_ylim((y0 + y1) / 2 - half, (y0 + y1) / 2 + half)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(f"elev {elev}°, azim {azim}°", fontsize=9)
    if points is not None:
        ax = axes[0][-1]
        Pp = (np.asarray(points)[:, perm] - centre) @ _rotation(*views[0]).T
        o = np.argsort(-Pp[:, 1])
        ax.scatter(Pp[o, 0], Pp[o, 2], s=0.2, c=-Pp[o, 1], cmap="viridis", linewidths=0)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(f"input points ({len(points):,})", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
