"""The library documents itself (issue 27): the estimators' docstrings, their examples, and the API site.

* Every public class of :mod:`corevector` (``corevector.__all__``) and every public method it defines passes
  ``numpydoc.validate.validate``, less the waivers of :data:`METHOD_WAIVERS` (classes: none);
  ``help()``/``inspect.getdoc`` show the class's own docstring; the Attributes section lists exactly the
  attributes a fit sets (found by fitting and listing ``vars(est)``); the References section holds the
  papers of ``refimpl/references.py`` verbatim, the registry's paper among them.
* The examples in the docstrings of every module of ``corevector`` run as doctests (warnings are errors
  there: an example shows the estimator working).
* The site: ``docs/`` is built with Sphinx as the main job builds it (``-W``: warnings are errors), into a
  temporary folder, against a small report written by ``reports.run.write_report`` (one figure present,
  one missing); the pages are checked for their text and figures (every image they reference exists and
  is a valid PNG), and headless Chromium (Debian's ``chromium``, installed by ``run.sh``) screenshots the
  index and an estimator page, which must not be blank.  This test is never skipped: a machine without
  Chromium fails it, with the command that installs it.
"""
from __future__ import annotations

import doctest
import html.parser
import importlib
import inspect
import pkgutil
import pydoc
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import corevector
from corevector.registry import ESTIMATORS
from refimpl.references import REFERENCES, cite

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: numpydoc checks waived, for methods only (every check holds for the classes), each for its reason
METHOD_WAIVERS = {
    # a method's summary line and Parameters/Returns say what it does; the model is explained once, in the
    # class docstring (an extended summary per predict/decision_function would repeat it)
    "ES01",
    # the See Also sections are on the classes (related estimators, scikit-learn's counterparts); a method's
    # would only point to its siblings on the same page
    "SA01",
    # the class's Examples section runs the methods, and one example per estimator keeps the doctests fast
    "EX01",
}

CLASSES = [getattr(corevector, name) for name in corevector.__all__ if inspect.isclass(getattr(corevector, name))]


def public_methods(cls):
    """The public methods ``cls`` has from corevector (not the ones scikit-learn's bases provide)."""
    out = []
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") or not callable(member) or inspect.isclass(member):
            continue
        if (getattr(inspect.unwrap(member), "__module__", "") or "").startswith("corevector"):
            out.append(name)
    return out


FUNCTIONS = [name for name in corevector.__all__ if inspect.isfunction(getattr(corevector, name))]

API = ([f"corevector.{c.__name__}" for c in CLASSES] + [f"corevector.{c.__name__}.{m}" for c in CLASSES
                                                         for m in public_methods(c)]
       + [f"corevector.{f}" for f in FUNCTIONS])


# ------------------------------------------------------------------------------------------------------
# docstrings
# ------------------------------------------------------------------------------------------------------
def test_the_public_classes_are_the_registry():
    assert {c.__name__ for c in CLASSES} == {e.cls.__name__ for e in ESTIMATORS}


@pytest.mark.parametrize("name", API)
def test_numpydoc_validation(name):
    from numpydoc.validate import validate

    waived = METHOD_WAIVERS if name.count(".") == 2 else set()
    errors = [f"{code}: {msg}" for code, msg in validate(name)["errors"] if code not in waived]
    assert not errors, f"{name}:\n" + "\n".join(errors)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_help_shows_the_class_docstring(cls):
    doc = inspect.getdoc(cls)
    assert doc and cls.__doc__ and doc == inspect.cleandoc(cls.__doc__)
    assert "%" not in doc.split("\n", 1)[0] and "%SHARED_PARAMETERS%" not in doc
    summary = doc.split("\n", 1)[0]
    assert "scikit-learn" not in summary and "Mixin" not in summary, summary  # the class's own, not a base's
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    assert summary in text and "Parameters\n" in text and "Examples\n" in text


def _fitted(cls):
    """A fitted estimator of ``cls`` on small data, every optional fitted attribute set (feature names from a
    DataFrame, probabilities, a mesh)."""
    import pandas as pd
    from refimpl.datasets import checkerboard

    rng = np.random.default_rng(0)
    X, y = checkerboard(300, random_state=0)
    frame = pd.DataFrame(X, columns=["a", "b"])
    if cls is corevector.ImplicitSurface:
        u = rng.normal(size=(500, 3))
        points = u / np.linalg.norm(u, axis=1, keepdims=True) * (1 + 0.01 * rng.normal(size=(500, 1)))
        est = cls(random_state=0).fit(points)
        est.mesh(resolution=16)
        return est
    if cls in (corevector.MEB, corevector.CVDD):
        return cls(random_state=0).fit(frame)
    if cls is corevector.CVMClassifier:
        return cls(probability=True, random_state=0).fit(frame, np.arange(300) % 3)
    if cls is corevector.MMDA:
        return cls(n_components=2, random_state=0).fit(frame, np.arange(300) % 3)
    n_basis = {"n_basis": 20} if cls is corevector.SparseSVR else {}
    return cls(random_state=0, **n_basis).fit(frame, np.sin(3 * X[:, 0]) + X[:, 1])


def _documented(cls, section):
    from numpydoc.docscrape import ClassDoc

    names = set()
    for p in ClassDoc(cls)[section]:
        names.update(n.strip() for n in p.name.split(","))
    return names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_fitted_attribute_is_documented(cls):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = _fitted(cls)
    fitted = {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}
    documented = _documented(cls, "Attributes")
    assert fitted - documented == set(), f"{cls.__name__}: fitted attributes missing from its docstring"
    assert documented - fitted == set(), f"{cls.__name__}: documented attributes that no fit sets"


def _references(doc):
    """{key: text} of the ``.. [key] text`` entries of a References section (continuation lines joined)."""
    entries, key = {}, None
    for line in doc:
        m = re.match(r"\.\. \[(\w+)\]\s+(.*)", line.strip())
        if m:
            key = m[1]
            entries[key] = m[2]
        elif key and line.strip():
            entries[key] += " " + line.strip()
    return entries


@pytest.mark.parametrize("entry", ESTIMATORS, ids=lambda e: e.cls.__name__)
def test_references_are_the_papers(entry):
    from numpydoc.docscrape import ClassDoc

    refs = _references(ClassDoc(entry.cls)["References"])
    assert entry.paper in refs, f"{entry.cls.__name__} implements [{entry.paper}] but does not reference it"
    for key, text in refs.items():
        assert key in REFERENCES and f"[{key}] {' '.join(text.split())}" == cite(key), (
            f"{entry.cls.__name__}'s reference [{key}] must be refimpl/references.py's, verbatim:\n"
            f"    .. {cite(key)}")


def _modules():
    return sorted(m.name for m in pkgutil.walk_packages(corevector.__path__, "corevector."))


@pytest.mark.parametrize("module", _modules())
def test_docstring_examples_run(module):
    mod = importlib.import_module(module)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in doctest.DocTestFinder(exclude_empty=True).find(mod, module) if t.examples]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an example shows the estimator working, without a warning
        for t in tests:
            runner.run(t, out=sys.stdout.write)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {module} failed (above)"


def test_every_estimator_has_an_example():
    for cls in CLASSES:
        assert ">>> " in cls.__doc__, cls.__name__


# ------------------------------------------------------------------------------------------------------
# the Python code blocks of README.md and docs/
# ------------------------------------------------------------------------------------------------------
def _code_blocks(page):
    """The ```python blocks of a page, in order: [(line, code)]."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [(text[:m.start()].count("\n") + 2, m.group(1))
            for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]


PAGES = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md") if _code_blocks(p.relative_to(ROOT)))


def _store_and_labels(m=4000):
    """What the chunked pages' blocks read: a small checkerboard.zarr (in the working folder) and its labels."""
    import zarr
    from refimpl.datasets import checkerboard
    X, y = checkerboard(m, random_state=0)
    z = zarr.open_array("checkerboard.zarr", mode="w", shape=X.shape, chunks=(1000, 2), dtype="f4")
    z[:] = X
    return {"y": y}


def _regression_set():
    from refimpl.datasets import friedman
    X, y = friedman(2000, 1, random_state=0)
    return {"X": X, "y": y, "X_test": friedman(200, 1, random_state=1)[0]}


def _classification_set():
    from sklearn.datasets import load_iris
    X, y = load_iris(return_X_y=True)
    return {"X_train": X[::2], "y_train": y[::2], "X_test": X[1::2]}


def _fitted_models():
    from corevector import CVR, CVMClassifier
    from refimpl.datasets import checkerboard, friedman
    X, y = checkerboard(2000, random_state=0)
    Xr, yr = friedman(2000, 1, random_state=0)
    return {"clf": CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y), "X": X,
            "X_new": checkerboard(100, random_state=1)[0], "reg": CVR(random_state=0).fit(Xr, yr)}


#: what a page's block uses without defining it, by (page, block number): the names the page's text gives it,
#: made small; a store it reads is written to the working folder (the block's own lines run unchanged)
BLOCK_CONTEXT = {
    ("README.md", 2): _store_and_labels,       # y: the store's labels (the first block's are 10^5 rows)
    ("docs/chunked.md", 0): _store_and_labels,
    ("docs/algorithms.md", 1): _regression_set,
    ("docs/algorithms.md", 2): _classification_set,
    ("docs/guide.md", 0): _fitted_models,
}
#: blocks run only with the slow tests, and why
BLOCK_SLOW = {
    ("docs/algorithms.md", 0): "fits the bunny's 50,000 points, meshes and renders them at 192^3: 12 s on two busy "
                               "cores, more than the other blocks together; run with the slow tests",
}


def _run_blocks(page, slow):
    """Run the page's blocks in order in one namespace (with BLOCK_CONTEXT; BLOCK_SLOW's only if ``slow``);
    the number run."""
    namespace, ran = {"__name__": "__doc_block__"}, 0
    starts = None
    if any("LocalCluster(" in code for _, code in _code_blocks(page)):
        from helpers import quick_worker_starts
        starts = quick_worker_starts()  # (how the workers' processes start: the blocks' lines run unchanged)
    try:
        for k, (line, code) in enumerate(_code_blocks(page)):
            if (page, k) in BLOCK_SLOW and not slow:
                continue
            if (page, k) in BLOCK_CONTEXT:
                namespace.update(BLOCK_CONTEXT[page, k]())
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (the blocks show the defaults at work, warnings and all)
                exec(compile(code, f"{page}:{line}", "exec"), namespace)
            ran += 1
    finally:
        client = namespace.get("client")
        if client is not None:  # the blocks that start a LocalCluster
            cluster = client.cluster
            client.close()
            cluster.close()
        if starts is not None:
            starts.__exit__(None, None, None)
    return ran


def _in_empty_folder(tmp_path, monkeypatch):
    """Work in tmp_path, with this tree first on the path as an absolute folder: the worker processes of a block's
    LocalCluster inherit the path, and a relative entry ('', the folder pytest started in) would find another
    corevector from the empty folder."""
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("page", PAGES)
def test_python_code_blocks_of_the_pages_run(page, tmp_path, monkeypatch):
    """Every ```python block of README.md and docs/ runs, in order, the blocks of a page in one namespace, in an
    empty working folder; what a block uses without defining it comes from BLOCK_CONTEXT.  The blocks of
    BLOCK_SLOW run in the slow suite (below); none needs the network."""
    _in_empty_folder(tmp_path, monkeypatch)
    assert _run_blocks(page, slow=False) == len(_code_blocks(page)) - sum(p == page for p, _ in BLOCK_SLOW)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("page", sorted({p for p, _ in BLOCK_SLOW}))
def test_slow_python_code_blocks_run(page, tmp_path, monkeypatch):
    _in_empty_folder(tmp_path, monkeypatch)
    assert _run_blocks(page, slow=True) == len(_code_blocks(page))


def test_every_skipped_block_says_why():
    """BLOCK_SLOW and BLOCK_CONTEXT name blocks that exist."""
    for page, k in list(BLOCK_SLOW) + list(BLOCK_CONTEXT):
        assert k < len(_code_blocks(page)), (page, k)
    assert all(len(why) > 20 for why in BLOCK_SLOW.values())


# ------------------------------------------------------------------------------------------------------
# the site
# ------------------------------------------------------------------------------------------------------
class _Page(html.parser.HTMLParser):
    """The text, the image sources and the link targets of an HTML page."""

    def __init__(self, path):
        super().__init__()
        self.path, self.chunks, self.images, self.links, self._skip = Path(path), [], [], [], 0
        self.feed(self.path.read_text(encoding="utf-8"))
        self.text = " ".join(" ".join(self.chunks).split())

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        if tag == "a" and dict(attrs).get("href"):
            self.links.append(dict(attrs)["href"])

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.chunks.append(data)


def _valid_png(path):
    from PIL import Image

    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    with Image.open(path) as im:
        im.load()
        return im.convert("RGB")


def _small_report(out):
    """A report in the format of ``reports.run.write_report``: checkerboard with its figure and table, cvr
    with a figure that was not written; no other experiment."""
    import datetime

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from reports.common import ExperimentResult
    from reports.run import load_experiments, write_report

    registry = load_experiments()
    out.mkdir()
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 2, 3], [3, 1, 2])
    for fmt in ("png", "pdf", "svg"):
        fig.savefig(out / f"checkerboard.{fmt}")
    plt.close(fig)
    (out / "checkerboard.csv").write_text("m,fit_time\n1000,0.1\n")
    (out / "cvr.csv").write_text("m,rmse\n1000,1.1\n")
    claim = dict(claim="001 Sec. 5.1: 10⁶ points in under 13 s", ours="0.3 s at m = 10⁶", holds=True)
    sections = [(registry["checkerboard"], ExperimentResult(["checkerboard.csv", "checkerboard.png", "checkerboard.pdf",
                                                             "checkerboard.svg"],
                                                            "| m | fit time (s) |\n|---|---|\n| 1000 | 0.125 |",
                                                            headline=[claim]), 1.5),
                (registry["cvr"], ExperimentResult(["cvr.csv", "cvr.png"], "RMSE table."), 2.0)]
    write_report(out, sections, "tiny", datetime.datetime(2026, 1, 2, 3, 4, 5), 3.5, "python -m reports.run --tiny")


def _chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("headless Chromium is needed to look at the site: `bash run.sh test` installs Debian's chromium "
                    "(apt-get install -y --no-install-recommends chromium)")
    return exe


def _screenshot(exe, page, png, tmp, size=(1280, 1000)):
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           f"--user-data-dir={tmp / 'chromium-profile'}", f"--window-size={size[0]},{size[1]}",
           f"--screenshot={png}", page.as_uri()]
    subprocess.run(cmd, capture_output=True, timeout=120, check=False, stdin=subprocess.DEVNULL)
    assert png.is_file(), f"Chromium wrote no screenshot: {' '.join(cmd)}"
    img = _valid_png(png)
    assert img.size == size
    pixels = np.asarray(img, dtype=float)
    colours = len(np.unique(pixels.reshape(-1, 3), axis=0))
    assert colours > 50 and pixels.std() > 10, f"{png} looks blank ({colours} colours, std {pixels.std():.1f})"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site")
    _small_report(tmp / "report")
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
           "-d", str(tmp / "doctrees"), "-D", f"corevector_report_dir={tmp / 'report'}", str(DOCS), str(tmp / "html")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stdout}\n{proc.stderr}"
    return tmp


@pytest.mark.timeout(600)
def test_site_pages_carry_their_text_and_figures(site):
    html_dir = site / "html"
    pages = sorted(html_dir.rglob("*.html"))
    for page in pages:
        for src in _Page(page).images:
            if src.startswith(("http:", "https:", "data:")):
                continue
            _valid_png(page.parent / src.split("#")[0])  # every figure a page shows exists, as a PNG
    index = _Page(html_dir / "index.html")
    for text in ("Quick start", "bash run.sh test", "bash run.sh report", *[c.__name__ for c in CLASSES]):
        assert text in index.text, text
    for entry in ESTIMATORS:
        cls = entry.cls
        page = _Page(html_dir / "api" / f"{cls.__name__.lower()}.html")
        assert page.images, f"{cls.__name__}'s page has no figure"
        for word in ("Parameters", "Attributes", "Examples", "References", inspect.getdoc(cls).split(" (")[0],
                     *cls().get_params(), *_documented(cls, "Attributes"), *public_methods(cls),
                     REFERENCES[entry.paper].title):
            assert word in page.text, f"{cls.__name__}'s page lacks {word!r}"
    model_files = _Page(html_dir / "api" / "model_files.html")
    for name in (*FUNCTIONS, "to_sklearn", "Parameters", "Returns", "Raises"):
        assert name in model_files.text, f"the model files' page lacks {name!r}"
    cli = _Page(html_dir / "cli.html")
    from corevector.cli import build_parser

    subcommands = [a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction"][0].choices
    for name in subcommands:
        assert f"usage: corevector {name}" in cli.text, name
    report = _Page(html_dir / "report.html")
    assert any(src.endswith("checkerboard.png") for src in report.images)
    assert "The figure cvr.png has not been generated yet" in report.text
    assert "This experiment has not been generated yet" in report.text  # e.g. surface
    assert "0.125" in report.text and "checkerboard.csv" in report.text
    # the opening table of the papers' claims, and each figure's vector files linked under it
    assert "10⁶ points in under 13 s" in report.text and "0.3 s at m = 10⁶" in report.text
    assert any(h.endswith("checkerboard.pdf") for h in report.links) and any(h.endswith("checkerboard.svg")
                                                                             for h in report.links)
    refs = _Page(html_dir / "references.html")
    for ref in REFERENCES.values():
        assert ref.title in refs.text and ref.authors in refs.text


@pytest.mark.timeout(600)
def test_site_as_a_person_sees_it(site):
    exe = _chromium()
    html_dir = site / "html"
    for page in (html_dir / "index.html", html_dir / "api" / "cvmclassifier.html"):
        _screenshot(exe, page, site / f"{page.stem}.png", site)
