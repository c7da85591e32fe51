"""Point-cloud and triangle-mesh files: the inputs and outputs of the implicit surfaces of :mod:`refimpl.surface`.

Reading: :func:`read_points` gives the vertices of a PLY (ascii, binary little/big endian), an XYZ
(whitespace columns x y z [...]; also .txt, .pts) or an OFF file, faces ignored; :func:`read_mesh`
gives vertices and triangles of a PLY, OBJ or OFF file (polygons split into triangle fans).  A
malformed file raises ValueError naming the file.

Writing: :func:`write_mesh` writes PLY (binary little endian or ascii, float32 vertices) or OBJ
(float64 vertices, exact), by the file's extension.

Data: :func:`load_bunny` reads the Stanford bunny scan shipped in the ``pymeshfix`` package.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

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
    """(vertices, triangles or None) of a PLY file; faces are parsed only with ``want_faces``."""
    with open(path, "rb") as f:
        raw = f.read()
    fmt, elements, pos = _parse_ply_header(path, raw)
    if "vertex" not in [e.name for e in elements]:
        raise _bad(path, "no 'vertex' element")
    if fmt == "ascii":
        return _read_ply_ascii(path, raw, pos, elements, want_faces)
    order = "<" if fmt == "binary_little_endian" else ">"
    return _read_ply_binary(path, raw, pos, elements, want_faces, order)


def _read_ply_ascii(path, raw, pos, elements, want_faces):
    """The body of an ascii PLY: one non-empty line a row, the elements in header order."""
    verts, faces = None, None
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
            faces = _counted_polygons(path, rows, "face row")
    return verts, faces


def _read_ply_binary(path, raw, pos, elements, want_faces, order):
    """The body of a binary PLY (byte ``order`` '<' or '>'), read element by element up to what is wanted."""
    verts, faces = None, None
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


def _counted_polygons(path, rows, what):
    """Triangles of text rows 'k i_1 ... i_k' (ascii PLY and OFF faces); ``what`` names a row in errors."""
    polys = []
    for r in rows:
        tok = r.split()
        try:
            polys.append([int(t) for t in tok[1:1 + int(tok[0])]])
        except (ValueError, IndexError) as exc:
            raise _bad(path, f"malformed {what}") from exc
    return _triangles(path, polys)


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
    faces = _counted_polygons(path, rest[nv:nv + nf], "OFF face line") if want_faces else None
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
