"""Point-cloud and triangle-mesh files: the inputs and outputs of the implicit surfaces of :mod:`refimpl.surface`.

Reading: :func:`read_points` gives the vertices of a PLY (ascii, binary little/big endian), an OBJ, an XYZ
(whitespace columns x y z [...]; also .txt, .pts) or an OFF file, faces ignored -- every format
:func:`write_mesh` writes; :func:`read_mesh` gives vertices and triangles of a PLY, OBJ or OFF file
(polygons split into triangle fans).  A malformed file raises ValueError naming the file (and the line, in
a text file); memory stays in proportion to what the file holds (declared counts are checked against it,
text lines are capped at 64 MB, a PLY header at 1 MB).

Writing: :func:`write_mesh` writes PLY (binary little endian or ascii, float32 vertices) or OBJ
(float64 vertices, exact), by the file's extension.

Data: :func:`load_bunny` reads the Stanford bunny scan shipped in the ``pymeshfix`` package.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

_PLY_TYPES = {
    "char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1",
    "short": "i2", "int16": "i2", "ushort": "u2", "uint16": "u2",
    "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4",
    "float": "f4", "float32": "f4", "double": "f8", "float64": "f8",
}


def _bad(path, msg, lineno=None):
    where = f" line {lineno}" if lineno is not None else ""
    return ValueError(f"{os.fspath(path)}{where}: {' '.join(str(msg).split())}")


#: a PLY header longer than this is not a PLY header; a text line longer than MAX_LINE_BYTES is an error
MAX_PLY_HEADER_BYTES = 1 << 20
MAX_LINE_BYTES = 64 << 20
#: vertex and face indices are C ints in every format here
_INDEX_MAX = 2**31 - 1


def _text_lines(path):
    """(line number, str) of a text file, each line at most MAX_LINE_BYTES (longer: an error naming it);
    bytes that are not UTF-8 become U+FFFD and fail as numbers where numbers are expected."""
    with open(path, "rb") as f:
        lineno = 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > MAX_LINE_BYTES:
                raise _bad(path, f"longer than {MAX_LINE_BYTES} bytes", lineno)
            yield lineno, raw.decode("utf-8", errors="replace")


def _floats(path, tokens, lineno, what):
    """The finite numbers ``tokens`` of line ``lineno``; a malformed or non-finite one is an error naming it."""
    try:
        vals = [float(t) for t in tokens if "_" not in t or _no_float(t)]
    except ValueError:
        raise _bad(path, f"malformed {what}", lineno) from None
    if not all(math.isfinite(v) for v in vals):
        raise _bad(path, "non-finite coordinates", lineno)
    return vals


def _no_float(t):
    raise ValueError(t)


def _index(path, token, lineno, what):
    try:
        v = int(token) if "_" not in token else _no_float(token)
    except ValueError:
        raise _bad(path, f"malformed {what}", lineno) from None
    if abs(v) > _INDEX_MAX:
        raise _bad(path, f"index {v} in a {what} is out of range", lineno)
    return v


@dataclass
class _PlyElement:
    name: str
    count: int
    props: list = field(default_factory=list)  # (name, dtype) or (name, count dtype, item dtype)


def _parse_ply_header(path, f):
    """(format, elements, header lines) of the PLY file open in ``f`` (positioned after the header)."""
    head = f.read(MAX_PLY_HEADER_BYTES)
    end = head.find(b"end_header")
    if not head.startswith(b"ply") or end < 0:
        raise _bad(path, "not a PLY file (no 'ply' magic or no 'end_header' in its first "
                         f"{MAX_PLY_HEADER_BYTES} bytes)")
    nl = head.find(b"\n", end)
    body = nl + 1 if nl >= 0 else len(head)
    f.seek(body)
    fmt, elements = None, []
    lines = head[:end].decode("ascii", errors="replace").splitlines()
    for lineno, line in enumerate(lines[1:], start=2):
        tok = line.split()
        if not tok or tok[0] in ("comment", "obj_info"):
            continue
        try:
            if tok[0] == "format":
                fmt = tok[1]
            elif tok[0] == "element":
                if len(tok) != 3:
                    raise IndexError
                elements.append(_PlyElement(tok[1], _index(path, tok[2], lineno, "element count")))
            elif tok[0] == "property":
                if not elements:
                    raise _bad(path, "property before any element", lineno)
                if tok[1] == "list":
                    if _PLY_TYPES[tok[2]][0] not in "iu" or _PLY_TYPES[tok[3]][0] not in "iu":
                        raise _bad(path, "a list property needs integer count and item types", lineno)
                    elements[-1].props.append((tok[4], _PLY_TYPES[tok[2]], _PLY_TYPES[tok[3]]))
                else:
                    elements[-1].props.append((tok[2], _PLY_TYPES[tok[1]]))
            else:
                raise _bad(path, f"unknown PLY header line {line[:60]!r}", lineno)
        except (IndexError, KeyError):
            raise _bad(path, f"malformed PLY header line {line[:60]!r}", lineno) from None
    if fmt not in ("ascii", "binary_little_endian", "binary_big_endian"):
        raise _bad(path, f"unsupported PLY format {str(fmt)[:40]!r}")
    if any(e.count < 0 for e in elements):
        raise _bad(path, "negative element count")
    for e in elements:
        names = [p[0] for p in e.props]
        if len(set(names)) != len(names):
            raise _bad(path, f"element {e.name[:40]!r} names a property twice")
    return fmt, elements, len(lines) + 1  # the header's lines, end_header included


def _read_ply(path, want_faces=False):
    """(vertices, triangles or None) of a PLY file; faces are parsed only with ``want_faces``."""
    with open(path, "rb") as f:
        fmt, elements, header_lines = _parse_ply_header(path, f)
        if "vertex" not in [e.name for e in elements]:
            raise _bad(path, "no 'vertex' element")
        if fmt == "ascii":
            return _read_ply_ascii(path, f, header_lines, elements, want_faces)
        order = "<" if fmt == "binary_little_endian" else ">"
        return _read_ply_binary(path, f, elements, want_faces, order)


def _read_ply_ascii(path, f, header_lines, elements, want_faces):
    """The body of an ascii PLY: one non-empty line a row, the elements in header order."""
    verts, faces = None, None

    def rows():
        lineno = header_lines
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > MAX_LINE_BYTES:
                raise _bad(path, f"longer than {MAX_LINE_BYTES} bytes", lineno)
            text = raw.decode("ascii", errors="replace")
            if text.strip():
                yield lineno, text

    it = rows()
    for e in elements:
        if e.name == "vertex":
            verts = _ascii_vertices(path, e, it)
        elif e.name == "face" and want_faces:
            faces = _counted_polygons(path, _take(path, e, it), "face row")
        else:
            for _ in _take(path, e, it):
                pass
        if verts is not None and not want_faces:
            break
    return verts, faces


def _take(path, e, it):
    """The next ``e.count`` rows of the line iterator ``it``, or an error saying the file is truncated."""
    for k in range(e.count):
        row = next(it, None)
        if row is None:
            raise _bad(path, f"truncated: {e.name[:40]} has {k} of {e.count} rows")
        yield row


def _read_ply_binary(path, f, elements, want_faces, order):
    """The body of a binary PLY (byte ``order`` '<' or '>'), read element by element up to what is wanted;
    a fixed-size element reads exactly its bytes (checked against the file's size first)."""
    verts, faces = None, None
    remaining = os.fstat(f.fileno()).st_size - f.tell()
    for e in elements:
        if all(len(p) == 2 for p in e.props):
            try:
                dt = np.dtype([(p[0], order + p[1]) for p in e.props])
            except (ValueError, TypeError) as exc:
                raise _bad(path, f"element {e.name[:40]!r}: {exc}") from None
            need = e.count * dt.itemsize
            if need > remaining:
                raise _bad(path, f"truncated binary PLY in element {e.name[:40]!r}")
            raw = f.read(need)
            remaining -= need
            if len(raw) != need:
                raise _bad(path, f"truncated binary PLY in element {e.name[:40]!r}")
            if e.name == "vertex":
                data = np.frombuffer(raw, dtype=dt, count=e.count) if dt.itemsize else np.zeros(e.count, dt)
                verts = _xyz_columns(path, data)
        else:
            if e.name == "vertex":
                raise _bad(path, "list properties in the vertex element are not supported")
            raw = f.read(remaining)
            data, used = _binary_lists(path, raw, 0, e, order)
            f.seek(used - len(raw), os.SEEK_CUR)
            remaining -= used
            if e.name == "face":
                faces = data
        if verts is not None and (not want_faces or faces is not None):
            break
    return verts, faces


def _xyz_columns(path, data):
    try:
        # a binary file may hold any bit pattern (NaN, huge values of a wider type): the cast is quiet and
        # the caller refuses non-finite coordinates, naming the vertex
        with np.errstate(invalid="ignore", over="ignore"):
            return np.column_stack([np.asarray(data[c], dtype=np.float64) for c in "xyz"])
    except (ValueError, KeyError) as exc:
        raise _bad(path, "the vertex element needs properties x, y, z") from exc


def _ascii_vertices(path, e, it):
    props = [p[0] for p in e.props]
    if not all(c in props for c in "xyz") or any(len(p) != 2 for p in e.props):
        raise _bad(path, "the vertex element needs scalar properties x, y, z")
    cols = [props.index(c) for c in "xyz"]
    table = []
    for lineno, r in _take(path, e, it):
        tok = r.split()
        if len(tok) < len(props):
            raise _bad(path, "malformed vertex row", lineno)
        vals = _floats(path, [tok[c] for c in cols], lineno, "vertex row")
        # a value is what its declared type holds ('float' is float32, as in a binary file)
        with np.errstate(over="ignore"):
            vals = [float(np.array(v).astype(e.props[c][1])) for v, c in zip(vals, cols)]
        if not all(np.isfinite(vals)):
            raise _bad(path, "non-finite coordinates", lineno)
        table.append(vals)
    return np.array(table, dtype=np.float64).reshape(e.count, 3)


def _counted_polygons(path, rows, what):
    """Triangles of text rows 'k i_1 ... i_k' (ascii PLY and OFF faces); ``what`` names a row in errors."""
    polys = []
    for lineno, r in rows:
        tok = r.split()
        if not tok:
            raise _bad(path, f"malformed {what}", lineno)
        k = _index(path, tok[0], lineno, what)
        if k < 3 or len(tok) < 1 + k:
            raise _bad(path, f"malformed {what} (a face of fewer than 3 vertices, or fewer indices than its count)",
                       lineno)
        polys.append([_index(path, t, lineno, what) for t in tok[1:1 + k]])
    return _triangles(path, polys)


def _binary_lists(path, raw, pos, e, order):
    """An element with list properties (faces): vectorised when every row is a triangle of one list."""
    try:
        if len(e.props) == 1:
            _, ct, it = e.props[0]
            dt = np.dtype([("n", order + ct), ("v", order + it, (3,))])
            if pos + e.count * dt.itemsize <= len(raw):
                data = np.frombuffer(raw, dtype=dt, count=e.count, offset=pos)
                if np.all(data["n"] == 3):
                    v = data["v"].astype(np.int64)
                    if v.size and np.abs(v).max() > _INDEX_MAX:
                        raise _bad(path, "a face index is out of range")
                    return v, pos + e.count * dt.itemsize
        rows = []
        for _ in range(e.count):
            row = []
            for p in e.props:
                if len(p) == 2:
                    pos += np.dtype(p[1]).itemsize
                    continue
                ct, it = np.dtype(order + p[1]), np.dtype(order + p[2])
                k = int(np.frombuffer(raw, dtype=ct, count=1, offset=pos)[0])
                pos += ct.itemsize
                if k < 0 or pos + k * it.itemsize > len(raw):
                    raise ValueError("truncated")
                row = np.frombuffer(raw, dtype=it, count=k, offset=pos).tolist()
                pos += k * it.itemsize
            rows.append(row)
    except (ValueError, TypeError) as exc:
        if isinstance(exc, ValueError) and str(exc).startswith(os.fspath(path)):
            raise
        raise _bad(path, f"truncated or malformed binary PLY in element {e.name[:40]!r}") from None
    return _triangles(path, rows), pos


def _triangles(path, polys):
    """Polygons -> triangles (fans)."""
    tris = []
    for p in polys:
        if len(p) < 3:
            raise _bad(path, "a face has fewer than 3 vertices")
        if any(abs(int(v)) > _INDEX_MAX for v in p):
            raise _bad(path, "a face index is out of range")
        tris.extend([p[0], p[j], p[j + 1]] for j in range(1, len(p) - 1))
    return np.array(tris, dtype=np.int64).reshape(-1, 3)


def _read_xyz(path):
    rows, width, first = [], None, None  # the first data line's column count and number
    for lineno, line in _text_lines(path):
        tok = line.split("#", 1)[0].split()
        if not tok:
            continue
        if len(tok) < 3:
            raise _bad(path, f"an XYZ line needs at least 3 columns, found {len(tok)}", lineno)
        if rows and len(tok) != width:
            raise _bad(path, f"{len(tok)} columns where line {first} has {width}", lineno)
        if not rows:
            width, first = len(tok), lineno
        rows.append(_floats(path, tok[:3], lineno, "XYZ line"))
        _floats(path, tok[3:], lineno, "XYZ line")
    return np.array(rows, dtype=np.float64).reshape(-1, 3)


def _read_off(path, want_faces=False):
    lines = ((n, ln.split("#", 1)[0].strip()) for n, ln in _text_lines(path))
    lines = ((n, ln) for n, ln in lines if ln)
    first = next(lines, None)
    if first is None or not first[1].startswith("OFF"):
        raise _bad(path, "not an OFF file (no 'OFF' header)")
    head = first[1][3:].split()
    lineno = first[0]
    if not head:
        nxt = next(lines, None)
        if nxt is None:
            raise _bad(path, "missing OFF counts")
        lineno, text = nxt
        head = text.split()
    if len(head) < 2:
        raise _bad(path, "malformed OFF counts line", lineno)
    nv, nf = _index(path, head[0], lineno, "OFF counts line"), _index(path, head[1], lineno, "OFF counts line")
    if nv < 0 or nf < 0:
        raise _bad(path, "negative OFF counts", lineno)
    verts = []
    for k in range(nv):
        row = next(lines, None)
        if row is None:
            raise _bad(path, f"truncated OFF file: expected {nv} vertices and {nf} faces, found {k} vertices")
        tok = row[1].split()
        if len(tok) < 3:
            raise _bad(path, "malformed OFF vertex line", row[0])
        verts.append(_floats(path, tok[:3], row[0], "OFF vertex line"))
    faces = None
    if want_faces:
        rows = []
        for k in range(nf):
            row = next(lines, None)
            if row is None:
                raise _bad(path, f"truncated OFF file: expected {nf} faces, found {k}")
            rows.append(row)
        faces = _counted_polygons(path, rows, "OFF face line")
    return np.array(verts, dtype=np.float64).reshape(nv, 3), faces


def _read_obj(path, want_faces=True):
    verts, polys = [], []
    for lineno, line in _text_lines(path):
        tok = line.split()
        if tok and tok[0] == "v":
            if len(tok) < 4:
                raise _bad(path, "an OBJ vertex needs 3 coordinates", lineno)
            verts.append(_floats(path, tok[1:4], lineno, "OBJ line"))
        elif tok and tok[0] == "f" and want_faces:
            poly = []
            for t in tok[1:]:
                v = _index(path, t.split("/")[0], lineno, "OBJ face")
                # 1-based; a negative index counts back from the last vertex so far (the OBJ convention)
                poly.append(v - 1 if v > 0 else len(verts) + v if v < 0 else -1)
            polys.append(poly)
    return np.array(verts, dtype=np.float64).reshape(-1, 3), (_triangles(path, polys) if want_faces else None)


def _ext(path):
    return os.path.splitext(os.fspath(path))[1].lower()


def _check_finite(path, verts):
    if not np.all(np.isfinite(verts)):
        row = int(np.flatnonzero(~np.all(np.isfinite(verts), axis=1))[0])
        raise _bad(path, f"non-finite coordinates (vertex {row})")


def read_points(path) -> np.ndarray:
    """The (n, 3) float64 vertices of a .ply, .obj, .xyz (also .txt, .pts) or .off file; faces are ignored.
    Reads every format :func:`write_mesh` writes.

    Raises ValueError naming the file (and the line, in a text file) when it is malformed or of an unknown
    type, and when it holds non-finite coordinates.  Memory: in proportion to the vertices read (a text
    line longer than 64 MB, or a PLY header longer than 1 MB, is an error).
    """
    ext = _ext(path)
    try:
        if ext == ".ply":
            pts, _ = _read_ply(path)
        elif ext in (".xyz", ".txt", ".pts"):
            pts = _read_xyz(path)
        elif ext == ".off":
            pts, _ = _read_off(path)
        elif ext == ".obj":
            pts, _ = _read_obj(path, want_faces=False)
        else:
            raise _bad(path, f"unknown point-cloud file type {ext!r} (expected .ply, .obj, .xyz or .off)")
    except OSError as exc:
        raise _bad(path, f"cannot read the file ({exc.strerror or exc})") from None
    _check_finite(path, pts)
    return np.ascontiguousarray(pts, dtype=np.float64)


def read_mesh(path):
    """(verts (n, 3), faces (k, 3) int64) of a .ply, .obj or .off mesh (polygons split into triangles);
    errors as :func:`read_points`, and a face index that names no vertex."""
    ext = _ext(path)
    try:
        if ext == ".ply":
            verts, faces = _read_ply(path, want_faces=True)
        elif ext == ".obj":
            verts, faces = _read_obj(path)
        elif ext == ".off":
            verts, faces = _read_off(path, want_faces=True)
        else:
            raise _bad(path, f"unknown mesh file type {ext!r} (expected .ply, .obj or .off)")
    except OSError as exc:
        raise _bad(path, f"cannot read the file ({exc.strerror or exc})") from None
    _check_finite(path, verts)
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
