"""House rules for the sources of ``fastimpl/`` and ``corevector/``: no file over 700 lines, no function over
80, imports that point down only and close no circle.

Checked: the committed Cython and C sources (``.pyx``, ``.pxd``, ``.pxi``, ``.h``, ``.c``; generated ``.c`` files
are not committed and not checked) and the Python files of both packages.

Function lengths count every line from the definition to the last line of its body (docstring, comments
and blank lines inside included): Cython ``def``/``cdef``/``cpdef`` functions and methods by indentation,
Python functions by ``ast``, C functions by brace matching (preprocessor lines, whose macro templates are
not functions, left out).
"""
import ast
import re
import subprocess
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fastimpl"
PACKAGES = ("fastimpl", "corevector")
MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 80
COMPILED_SUFFIXES = (".pyx", ".pxd", ".pxi", ".h", ".c")


def sources(suffixes, packages=PACKAGES):
    """The files of ``packages`` (fastimpl/ and corevector/) git tracks or would track, with these suffixes
    (outside a git checkout: all, less the .c files Cython generates next to their .pyx)."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *packages], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
        files = [ROOT / f for f in out]
    except (OSError, subprocess.CalledProcessError):
        files = [p for pkg in packages for p in (ROOT / pkg).rglob("*")
                 if not (p.suffix == ".c" and p.with_suffix(".pyx").exists())]
    return sorted(p for p in files if p.suffix in suffixes and p.is_file())


def _logical_header(lines, i):
    """The def/cdef/cpdef statement starting at line i, joined over open brackets and backslashes, and
    the index of its last line."""
    text, depth, j = "", 0, i
    while j < len(lines):
        line = re.sub(r"#.*", "", lines[j]).rstrip()
        text += " " + line.strip()
        depth += line.count("(") + line.count("[") - line.count(")") - line.count("]")
        if depth <= 0 and not line.endswith("\\"):
            break
        j += 1
    return text.strip(), j


def cython_functions(path):
    """(name, first line, number of lines) of every function and method of a .pyx/.pxd/.pxi file."""
    lines = path.read_text().splitlines()
    found = []
    i = 0
    while i < len(lines):
        m = re.match(r"(\s*)(?:async\s+)?(?:def|cdef|cpdef)\b", lines[i])
        if not m:
            i += 1
            continue
        header, last = _logical_header(lines, i)
        if "(" not in header or not header.endswith(":") or re.match(r"c?def\s+(class|extern|struct|enum|union)\b",
                                                                    header):
            i += 1
            continue
        indent = len(m.group(1))
        end = last
        for j in range(last + 1, len(lines)):
            s = lines[j]
            if not s.strip():
                continue
            if len(s) - len(s.lstrip()) <= indent:
                break
            end = j
        name = re.search(r"(\w+)\s*\(", header).group(1)
        found.append((name, i + 1, end - i + 1))
        i += 1
    return found


def python_functions(path):
    tree = ast.parse(path.read_text())
    return [(node.name, node.lineno, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def c_functions(path):
    """Top-level brace blocks of a C header (functions; roughly: structs and initialisers count too)."""
    raw = path.read_text()
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), raw, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    lines = text.split("\n")
    keep, cont = [], False
    for line in lines:  # drop preprocessor lines with their continuations (macro templates)
        is_pp = cont or line.lstrip().startswith("#")
        cont = is_pp and line.rstrip().endswith("\\")
        keep.append("" if is_pp else line)
    found, depth, start, stmt_start = [], 0, None, None
    for n, line in enumerate(keep):
        if depth == 0 and not line.strip():
            stmt_start = None  # a blank line at file level ends a statement (macro invocations have no ';')
        for ch in line:
            if depth == 0 and stmt_start is None and not ch.isspace():
                stmt_start = n
            if ch == "{":
                if depth == 0:
                    start = stmt_start if stmt_start is not None else n
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    head = " ".join(keep[start:n + 1])
                    m = re.search(r"(\w+)\s*\(", head)
                    found.append((m.group(1) if m else "?", start + 1, n - start + 1))
                    stmt_start = None
            elif ch == ";" and depth == 0:
                stmt_start = None
    return found


def functions(path):
    if path.suffix in (".pyx", ".pxd", ".pxi"):
        return cython_functions(path)
    if path.suffix == ".py":
        return python_functions(path)
    return c_functions(path)


def violations(paths):
    out = []
    for p in paths:
        n = len(p.read_text().splitlines())
        if n > MAX_FILE_LINES:
            out.append(f"{p.relative_to(ROOT)}: {n} lines (> {MAX_FILE_LINES})")
        for name, line, length in functions(p):
            if length > MAX_FUNCTION_LINES:
                out.append(f"{p.relative_to(ROOT)}:{line} {name}: {length} lines (> {MAX_FUNCTION_LINES})")
    return out


def test_the_checks_see_the_sources():
    """The counters find what they should (guards against a checker that silently counts nothing)."""
    files = sources(COMPILED_SUFFIXES)
    names = {p.name for p in files}
    assert {"_engine.pyx", "_krows.pyx", "_krows.pxd", "_scans.pxi", "_simd.h"} <= names
    cython = {name for p in files if p.suffix in (".pyx", ".pxd", ".pxi") for name, _, _ in cython_functions(p)}
    assert {"__init__", "solve", "qrow", "kernel_expansion", "smo_solve", "active_set_solve", "kernel_rows",
            "k_raw"} <= cython
    assert "cv_simd_level" in {name for name, _, _ in c_functions(PACKAGE / "_simd.h")}


def test_compiled_sources_keep_to_the_house_limits():
    """No .pyx/.pxd/.pxi/.h/.c file of fastimpl/ over 700 lines and no function in them over 80 lines."""
    bad = violations(sources(COMPILED_SUFFIXES))
    assert not bad, "\n".join(bad)


def test_python_sources_keep_to_the_house_limits():
    """The same limits for the Python files of fastimpl/ and corevector/."""
    files = sources((".py",))
    assert {"command.py", "regressor.py", "_openmp.py", "ops.py"} <= {p.name for p in files}
    bad = violations(files)
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------------------------------------ imports
#: the floors of the house, top to bottom: a module may import only from its own floor or the ones below
#: (a module's floor is that of the longest name here that is it or holds it).  Inside corevector:
#: cli -> io -> registry -> the estimators and what they share -> {chunked, parallel} -> numerics, and
#: numerics (and engine_policy, what solver='auto' means) -> {fastimpl, refimpl}.  The package's __init__ is its public face, above all of it.
FLOORS = {"reports": 10, "asv_benchmarks": 10, "corevector": 9, "corevector.cli": 8, "corevector.io": 7,
          "corevector.registry": 6, "corevector.*": 5, "corevector.chunked": 4, "corevector.parallel": 4,
          "corevector.numerics": 3, "corevector.engine_policy": 3, "fastimpl": 1, "refimpl": 0}


def floor_of(module):
    """The floor of a module name (None: not one of the house's)."""
    if module in FLOORS:
        return FLOORS[module]
    parts = module.split(".")
    for n in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in FLOORS and prefix != "corevector":
            return FLOORS[prefix]
    if parts[0] == "corevector":
        return FLOORS["corevector.*"]
    return FLOORS.get(parts[0])


def _module_name(path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(package, level, module):
    """The absolute name of ``from <level dots><module> import ...`` in ``package``."""
    if not level:
        return module or ""
    parts = package.split(".")
    return ".".join(parts[:len(parts) - level + 1] + ([module] if module else []))


def _imports(path, text=None):
    """(imported module, at module level?) of every import in a .py/.pyx file (relative imports resolved;
    ``from P import N`` counts P.N when that is a module of the house, else P).  ``text``: the source to
    read instead of the file's (a planted import)."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rsplit(".", 1)[0]
    text = path.read_text() if text is None else text
    if path.suffix == ".pyx":  # not Python: read the import lines (cimport and include lines are C-level)
        out = []
        for line in text.splitlines():
            m = re.match(r"(\s*)(?:from\s+(\.*[\w.]*)\s+import\s+(.+)|import\s+([\w., ]+))$", line.split("#")[0].rstrip())
            if m and "cimport" not in line:
                base = m.group(2) if m.group(2) is not None else None
                names = [base] if base else [n.strip().split(" ")[0] for n in m.group(4).split(",")]
                if base and base.startswith("."):
                    dots = len(base) - len(base.lstrip("."))
                    names = [_resolve(package, dots, base.lstrip("."))]
                out += [(n, m.group(1) == "") for n in names]
        return out
    modules = _all_module_names()
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(package, node.level, node.module)
            subs = [f"{base}.{a.name}" for a in node.names]
            names = [n for n in subs if n in modules]
            if len(names) < len(subs):
                names.append(base)
        else:
            continue
        out += [(n, node.col_offset == 0) for n in names]
    return out


_MODULES = []


def _all_module_names():
    if not _MODULES:
        _MODULES.append({_module_name(p) for p in _house_modules()})
    return _MODULES[0]


def _house_modules():
    files = []
    for top in ("reports", "asv_benchmarks", "corevector", "fastimpl", "refimpl"):
        files += [p for p in (ROOT / top).rglob("*.py") if ".asv" not in p.parts and "env" not in p.parts]
    files += sorted((ROOT / "fastimpl").glob("*.pyx"))
    return files


def upward_imports(modules):
    """'path imports name' for every import of a module from a floor above its own (lazy ones included).
    ``modules``: {path: source text or None (the file's)}."""
    bad = []
    for path, text in modules.items():
        own = floor_of(_module_name(path))
        for name, _ in _imports(path, text):
            floor = floor_of(name)
            if floor is not None and floor > own:
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    return bad


def import_cycle(modules):
    """The first cycle of the import graph of refimpl, fastimpl and corevector (every import, at module level
    or inside a function), as a list of module names; [] when there is none.  ``modules`` as for
    :func:`upward_imports`."""
    inside = {_module_name(p): (p, t) for p, t in modules.items()
              if p.relative_to(ROOT).parts[0] in ("refimpl", "fastimpl", "corevector")}
    graph = {m: {n for n, _ in _imports(p, t) if n in inside and n != m} for m, (p, t) in inside.items()}
    state, cycle = {}, []

    def visit(m, path):
        state[m] = "open"
        for n in sorted(graph[m]):
            if state.get(n) == "open" and not cycle:
                cycle.extend(path[path.index(n):] + [n])
            elif n not in state:
                visit(n, path + [n])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return cycle


def test_no_import_points_up():
    """reports/asv -> corevector (cli -> io -> registry -> estimators -> chunked, parallel -> numerics) ->
    fastimpl -> refimpl: no module imports from a floor above its own (lazy imports inside functions
    included)."""
    bad = upward_imports({p: None for p in _house_modules()})
    assert not bad, "\n".join(bad)


def test_no_import_circle():
    """The imports of refimpl, fastimpl and corevector, lazy ones inside functions included, form no cycle (a
    circle makes the import order matter, and a lazy one only hides it)."""
    modules = {p: None for p in _house_modules()}
    graph_size = sum(1 for p in modules if _imports(p))
    assert graph_size > 50  # the graph is not empty
    cycle = import_cycle(modules)
    assert not cycle, " -> ".join(cycle)


def test_a_planted_lazy_upward_import_is_caught():
    """The checks see an import inside a function: a lazy ``from .io.libsvm import ...`` planted in
    ``corevector/_base.py`` (the circle this house once had) is an upward import and closes a cycle."""
    base = ROOT / "corevector" / "_base.py"
    planted = base.read_text() + "\n\ndef _planted(est):\n    from .io.libsvm import save_libsvm_model\n" \
        "    return save_libsvm_model\n"
    modules = {p: None for p in _house_modules()}
    assert not upward_imports({base: None}) and not import_cycle(modules)
    modules[base] = planted
    assert upward_imports({base: planted}) == ["corevector/_base.py imports corevector.io.libsvm"]
    cycle = import_cycle(modules)
    assert cycle and "corevector._base" in cycle and "corevector.io.libsvm" in cycle, cycle


# ------------------------------------------------------------------------------------------------ the layout page
def test_the_layout_page_lists_every_source_file():
    """docs/layout.md names every source file of refimpl/, fastimpl/ and corevector/ by its path, and every
    such path it names exists."""
    page = (ROOT / "docs" / "layout.md").read_text()
    named = set(re.findall(r"`((?:refimpl|fastimpl|corevector)/[\w/]+\.(?:py|pyx|pxd|pxi|h))`", page))
    files = {str(p.relative_to(ROOT)) for p in sources((".py", ".pyx", ".pxd", ".pxi", ".h"), ("refimpl", *PACKAGES))}
    assert len(files) > 60 and "corevector/chunked/fit.py" in files
    assert not files - named, f"not on docs/layout.md: {sorted(files - named)}"
    assert not named - files, f"on docs/layout.md but not in the tree: {sorted(named - files)}"


def test_numerics_is_the_one_switch():
    """No module of corevector but corevector.numerics imports a compiled numerics module of fastimpl (the
    estimators and the chunked fits ask numerics(impl)); fastimpl's thread controls (_openmp) and the package
    itself (its fork flag) are not numerics."""
    compiled = {p.stem for p in (ROOT / "fastimpl").glob("*.pyx")}
    assert {"_engine", "_mmda", "_ssvr"} <= compiled
    bad = []
    for path in _house_modules():
        name = _module_name(path)
        if not name.startswith("corevector") or name == "corevector.numerics":
            continue
        for imported, _ in _imports(path):
            parts = imported.split(".")
            if parts[0] == "fastimpl" and (len(parts) > 1 and parts[1] in compiled):
                bad.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert not bad, "\n".join(bad)
