"""Sphinx configuration of corevector's documentation (``docs/``).

Built by the main job after the report (``bash run.sh report``):
``sphinx-build -W --keep-going -b html docs docs/_build/html``; ``tests/test_docs.py`` builds it too (into a
temporary folder) and looks at it in headless Chromium.  Pages are Markdown (MyST) or reStructuredText;
the estimator pages are autodoc + numpydoc of the classes' own docstrings.  What the pages show from
outside ``docs/`` (the command line's help, the latest report, the papers) is generated when Sphinx reads
them, by the local extension ``_ext/corevector_docs.py``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# the checkout first: corevector, refimpl and reports (not installed) are imported from it
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))

import corevector  # noqa: E402

project = "corevector"
author = "the corevector developers"
copyright = "the corevector developers"  # noqa: A001  (Sphinx's name)
version = release = corevector.__version__

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "myst_parser",
    "matplotlib.sphinxext.plot_directive",
    "corevector_docs",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
root_doc = "index"
# literal blocks without a language (the formulas in docstrings) are plain text; examples are highlighted
highlight_language = "none"
language = "en"

# -- the report's output folder (the main job writes it first); the test points it elsewhere with -D ---------
corevector_report_dir = os.environ.get("COREVECTOR_REPORT_DIR", str(ROOT / "reports" / "output"))

# -- autodoc and numpydoc ----------------------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "none"            # the numpydoc sections carry the types
numpydoc_show_class_members = False   # autodoc's :members: lists the methods, with their own docstrings
numpydoc_attributes_as_param_list = True
numpydoc_use_plots = False

# -- MyST (the design notes are Markdown, as they were in README) ---------------------------------------
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# -- matplotlib's plot directive (one small figure per estimator page, drawn at build time) -------------
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 100)]
plot_rcparams = {"figure.figsize": (6.4, 3.6), "font.size": 9}
plot_apply_rcparams = True

# -- HTML ------------------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"corevector {release}"
html_static_path = []
html_show_sourcelink = False
html_theme_options = {"navigation_with_keys": True}
