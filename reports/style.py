"""One style for every figure of the report: colours, markers, sizes, axes, legends and the saved formats.

* **Methods keep their look.**  :data:`METHODS` gives every method one colour, marker and line style, from the
  colour-blind-safe palette of Okabe and Ito (2008); :func:`method_style` maps the labels the experiments use
  ("CVM (fast)", "sklearn SVR", "MMDA(SVM)", ...) to them, so the library's fast implementation is the same
  blue circle in every figure, the NumPy reference the same sky-blue square, the papers' loop (``solver='smo'``)
  vermillion, LIBSVM black, oneDAL green, ThunderSVM orange, LibCVM yellow.  Series that are settings rather than
  methods (a C, a formulation) take :data:`CATEGORIES` in order.
* **Paper sizes.**  :func:`figure` makes figures one column (3.5 in) or two columns (7.16 in) wide, the widths of
  the IEEE and ACM two-column formats, with 8-point text.
* **Legends never cover data.**  :func:`legend` puts one legend for the whole figure below the panels, outside
  every axes.
* **Readable log axes.**  :func:`log_axis` labels decades (and 2 and 5 within a span under two decades) as
  plain numbers (0.01, 300, 3k, 1M), never the minor ticks, so labels cannot run into each other.
* **Median and range.**  :func:`series` draws a method's median and, when the repeats give one, the min–max
  range as a band of the same colour.
* **Vector output.**  :func:`save` writes the figure as PNG, PDF and SVG side by side (text kept as text, fonts
  embedded as TrueType) and returns the three file names.
* **Honest curves.**  :func:`enough_sizes`: outside the test suite's tiny mode, a panel against m needs
  :data:`MIN_SIZES` sizes; the plotting functions leave a shorter one out and say so in a note.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Okabe & Ito's colour-blind-safe palette
BLACK, ORANGE, SKY, GREEN = "#000000", "#E69F00", "#56B4E9", "#009E73"
YELLOW, BLUE, VERMILLION, PURPLE = "#F0E442", "#0072B2", "#D55E00", "#CC79A7"
GREY = "#999999"

#: figure widths (inches): one column and the full page of a two-column paper
WIDTHS = {"one": 3.5, "two": 7.16}
#: a panel row's height (inches)
ROW_HEIGHT = 2.1
#: a panel against the training-set size needs this many sizes (quick and full modes)
MIN_SIZES = 3
#: the formats :func:`save` writes
FORMATS = ("png", "pdf", "svg")
PNG_DPI = 200

RC = {
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "figure.titlesize": 8, "lines.linewidth": 1.2, "lines.markersize": 4,
    "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5, "axes.linewidth": 0.6,
    "legend.frameon": False, "svg.fonttype": "none", "pdf.fonttype": 42, "ps.fonttype": 42,
    "savefig.bbox": "standard", "figure.constrained_layout.use": True,
}


@dataclass(frozen=True)
class Style:
    color: str
    marker: str
    ls: str = "-"

    def kw(self):
        return dict(color=self.color, marker=self.marker, ls=self.ls)


#: method -> its style (unique colour and marker across the report)
METHODS = {
    "fast": Style(BLUE, "o", "-"),                 # the library's compiled engine (CVM, CVR, MMDA(CVM), SSVR-SRS)
    "ref": Style(SKY, "s", "--"),                  # its NumPy reference
    "papers_fast": Style(VERMILLION, "D", "-."),   # the papers' loop (solver='smo'), compiled
    "papers_ref": Style(VERMILLION, "v", ":"),     # the papers' loop, reference
    "libsvm": Style(BLACK, "^", ":"),              # scikit-learn's SVC / SVR (LIBSVM)
    "libsvm_tuned": Style(BLACK, "<", "--"),       # LIBSVM tuned as the papers
    "onedal": Style(GREEN, "p", "-"),              # scikit-learn-intelex (oneDAL)
    "thundersvm": Style(ORANGE, "X", "-"),         # ThunderSVM (CPU)
    "libcvm": Style(YELLOW, "h", "-"),             # the authors' LibCVM
    "exact_qp": Style(GREY, "^", "--"),            # MMDA(SVM): the exact dense QP (active set)
    "exact_qp_ip": Style(GREY, "x", ":"),          # MMDA(SVM) by interior point
    "kfd": Style(PURPLE, "P", "-."),
    "kpca": Style(PURPLE, "*", ":"),
    "raw": Style(GREY, "o", "-"),                  # no feature extraction
    "fast_variant": Style(BLUE, "*", "--"),        # a second setting of the fast engine (e.g. Table 4's lambda)
    "rsvm": Style(ORANGE, ">", "--"),              # random basis (RSVM)
    "rss": Style(GREEN, "d", ":"),                 # reduced-set selection (RSS)
}

#: labels of the experiments -> method (exact labels; :func:`method_style` also matches by prefix)
LABELS = {
    "CVM (fast)": "fast", "CVR (fast)": "fast", "MMDA(CVM)": "fast", "CVR() defaults": "fast",
    "SSVR-SRS (lambda of Table 3)": "fast", "default engine (solver='auto')": "fast",
    "CVMClassifier()": "fast", "CVR()": "fast",
    "CVM (ref)": "ref", "CVR (ref)": "ref",
    "CVM (fast, SMO)": "papers_fast", "papers' loop (solver='smo')": "papers_fast",
    "CVR, papers' tuned protocol": "papers_fast", "papers' loop": "papers_fast", "CVM (ref, SMO)": "papers_ref",
    "sklearn SVC": "libsvm", "sklearn SVR": "libsvm", "SVC()": "libsvm", "SVR()": "libsvm", "SVR() defaults, standardised y": "libsvm", "SVR": "libsvm",
    "SVR, tuned as the papers": "libsvm_tuned",
    "sklearnex": "onedal", "oneDAL": "onedal", "ThunderSVM": "thundersvm", "LibCVM": "libcvm",
    "MMDA(SVM)": "exact_qp", "MMDA(SVM, IP)": "exact_qp_ip", "KFD": "kfd", "KPCA": "kpca", "none": "raw",
    "RSVM (lambda of Table 3)": "rsvm", "RSS": "rss",
}
#: settings that are not methods (a C, a formulation), in order
CATEGORIES = (BLUE, VERMILLION, GREEN, PURPLE, ORANGE, SKY, BLACK, GREY)
CATEGORY_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def method_style(label):
    """The :class:`Style` of a method label (exact, else the longest known prefix; unknown labels: grey)."""
    if label in LABELS:
        return METHODS[LABELS[label]]
    for known in sorted(LABELS, key=len, reverse=True):
        if str(label).startswith(known):
            return METHODS[LABELS[known]]
    if str(label).startswith("SSVR-SRS"):
        return METHODS["fast_variant"]
    return Style(GREY, ".", "-")


def category_style(i, ls="-"):
    """The i-th setting's style (colour and marker advance together)."""
    return Style(CATEGORIES[i % len(CATEGORIES)], CATEGORY_MARKERS[i % len(CATEGORY_MARKERS)], ls)


def styled(func):
    """Runs a plotting function under the report's rcParams (nothing leaks to the caller's matplotlib)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        import matplotlib
        with matplotlib.rc_context(RC):
            return func(*args, **kwargs)
    return wrapper


def figure(nrows=1, ncols=1, width="two", row_height=ROW_HEIGHT, legend_rows=0, **subplot_kw):
    """(fig, axes 2-D array): an Agg figure (no pyplot state) one or two paper columns wide; ``legend_rows``
    adds room below the panels for a figure legend of that many rows."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    w = WIDTHS[width] if isinstance(width, str) else float(width)
    fig = Figure(figsize=(w, row_height * nrows + 0.16 * legend_rows + 0.1), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    return fig, axes


def series(ax, x, y, label, style=None, lo=None, hi=None, **kw):
    """A method's values against x in its style, sorted by x; with ``lo``/``hi`` (the repeats' min and max)
    the range is a band of the same colour.  NaNs are dropped.  Returns the line (or None if nothing to draw)."""
    st = style or method_style(label)
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    if not keep.any():
        return None
    order = np.argsort(x[keep])
    xs, ys = x[keep][order], y[keep][order]
    line, = ax.plot(xs, ys, label=label, **{**st.kw(), **kw})
    if lo is not None and hi is not None:
        lo_, hi_ = np.asarray(lo, float)[keep][order], np.asarray(hi, float)[keep][order]
        ok = np.isfinite(lo_) & np.isfinite(hi_)
        if ok.any() and np.any(hi_[ok] > lo_[ok]):
            ax.fill_between(xs[ok], lo_[ok], hi_[ok], color=st.color, alpha=0.2, lw=0, label="_range")
    return line


def range_columns(df, col):
    """(lo, hi) of a summarised column (``<col>_min``, ``<col>_max``: the repeats' extremes), or (None, None)."""
    if f"{col}_min" in df and f"{col}_max" in df:
        return df[f"{col}_min"], df[f"{col}_max"]
    return None, None


def _number(v, pos=None):
    if not np.isfinite(v) or v <= 0:
        return ""
    e = int(np.floor(np.log10(v) + 1e-9))
    mant = v / 10.0 ** e
    if 1e-2 <= v < 1e3:
        return f"{v:g}"
    if 1e3 <= v < 1e6:
        return f"{v / 1e3:g}k"
    if 1e6 <= v < 1e9:
        return f"{v / 1e6:g}M"
    if abs(mant - 1) < 1e-6:
        return f"$10^{{{e}}}$"
    return f"${mant:g}\\times10^{{{e}}}$"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power(v):
    """A number for a label: a power of ten as 10 with a superscript (1e-06 -> 10⁻⁶), else as %g."""
    v = float(v)
    if v > 0:
        e = round(np.log10(v))
        if abs(v - 10.0 ** e) <= 1e-9 * v and abs(e) >= 3:
            return "10" + str(e).translate(_SUPERSCRIPT)
    return f"{v:g}"


def log_axis(ax, which="both"):
    """Log scale on x, y or both, with labels that cannot overlap: decades (1, 2, 5 within a span under two
    decades, at most 7 labels) as plain numbers, minor ticks unlabelled.  Call after plotting."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for name in ("x", "y") if which == "both" else (which,):
        axis = ax.xaxis if name == "x" else ax.yaxis
        (ax.set_xscale if name == "x" else ax.set_yscale)("log")
        ax.autoscale_view()
        lim = ax.get_xlim() if name == "x" else ax.get_ylim()
        lo, hi = sorted(float(v) for v in lim)
        span = np.log10(hi / lo) if lo > 0 and hi > 0 and np.isfinite(hi / lo) else 3.0
        subs = (1.0, 2.0, 5.0) if span < 2 else (1.0,)
        axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=7))
        axis.set_minor_locator(LogLocator(base=10, subs=np.arange(2, 10) * 1.0, numticks=12))
        axis.set_major_formatter(FuncFormatter(_number))
        axis.set_minor_formatter(NullFormatter())


def legend(fig, axes=None, ncol=None):
    """One legend for the figure, below every panel (outside the axes: it covers no data); the entries are
    the labelled series of ``axes`` (default: every axes), each label once."""
    handles, labels = [], []
    for ax in (fig.axes if axes is None else np.ravel(axes)):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels and not lab.startswith("_"):
                handles.append(h)
                labels.append(lab)
    if not handles:
        return None
    width = fig.get_figwidth()
    ncol = ncol or max(1, min(len(labels), int(width // 1.75)))
    return fig.legend(handles, labels, loc="outside lower center", ncol=ncol, handlelength=2.2,
                      columnspacing=1.2)


def note(fig, text):
    """A line of text under the figure (e.g. the panels left out)."""
    fig.text(0.5, 0.005, text, ha="center", va="bottom", fontsize=6, wrap=True)


def enough_sizes(values, mode):
    """Whether a panel against the training-set size has enough distinct sizes to draw a curve (always in
    the tiny mode, the test suite's smoke run of the plotting code)."""
    n = len(set(float(v) for v in values if v == v))
    return mode == "tiny" or n >= MIN_SIZES


#: called as on_save(fig, path) before a figure is written (the tests check the figure there)
on_save = None
#: environment variable: a file to which :func:`save` appends each figure's name and its problems
#: (:func:`figure_problems`), one JSON line a figure (the test suite's check of a report run in a child process)
CHECK_LOG = "COREVECTOR_FIGURE_CHECK_LOG"


def save(fig, path):
    """Writes ``fig`` as PNG, PDF and SVG (``path`` with each suffix); returns the three file names."""
    path = Path(path)
    if on_save is not None:
        on_save(fig, path)
    log = os.environ.get(CHECK_LOG)
    if log:
        import json
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"figure": path.name, "problems": figure_problems(fig)}) + "\n")
    names = []
    for fmt in FORMATS:
        p = path.with_suffix("." + fmt)
        meta = {"Creator": "corevector report"} if fmt in ("png", "svg") else {"Creator": "corevector report",
                                                                             "CreationDate": None}
        if fmt == "svg":
            meta["Date"] = None
        fig.savefig(p, dpi=PNG_DPI if fmt == "png" else None, metadata=meta)
        names.append(p.name)
    return names


def figure_files(png_name):
    """The three names :func:`save` writes for ``png_name``."""
    stem = Path(png_name).with_suffix("")
    return [f"{stem}.{fmt}" for fmt in FORMATS]


@styled
def wrap_raster(png_path, width="two"):
    """PDF and SVG beside a rendered PNG (a mesh of many thousands of triangles, which as vectors would be
    tens of MB): the image embedded at its own resolution, one or two columns wide.  Returns the names of the
    PNG and of the two files written."""
    import matplotlib.image as mpimg

    png_path = Path(png_path)
    img = mpimg.imread(png_path)
    h, w = img.shape[:2]
    fw = WIDTHS[width]
    fig, axes = figure(1, 1, width=fw, row_height=fw * h / w)
    fig.set_layout_engine(None)
    ax = axes[0, 0]
    ax.set_position([0, 0, 1, 1])
    ax.imshow(img, interpolation="none")
    ax.axis("off")
    names = [png_path.name]
    for fmt in FORMATS[1:]:
        p = png_path.with_suffix("." + fmt)
        meta = {"Creator": "corevector report", ("Date" if fmt == "svg" else "CreationDate"): None}
        fig.savefig(p, dpi=w / fw, metadata=meta)
        names.append(p.name)
    return names


def figure_problems(fig):
    """What breaks the style in a figure, as sentences (empty: none): two labelled series of one axes with the
    same colour and marker; a legend whose box holds a plotted point (matplotlib's own extents, after a draw);
    tick labels of one axis that overlap; titles of two axes that overlap; a figure wider than two columns."""
    from matplotlib.colors import to_hex

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = []
    titles = [(k, ax.title.get_window_extent(renderer)) for k, ax in enumerate(fig.axes)
              if ax.get_visible() and ax.get_title()]
    for (i, a), (j, b) in ((p, q) for n, p in enumerate(titles) for q in titles[n + 1:]):
        if a.overlaps(b):
            problems.append(f"the titles of axes {i} and {j} overlap")
    if fig.get_figwidth() > WIDTHS["two"] + 1e-6:
        problems.append(f"figure {fig.get_figwidth():.2f} in wide, more than two columns ({WIDTHS['two']} in)")
    legends = [lg for lg in fig.legends] + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    boxes = [lg.get_window_extent(renderer) for lg in legends]
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        seen = {}
        for line in ax.get_lines():
            lab = line.get_label()
            if lab.startswith("_"):
                continue
            key = (to_hex(line.get_color()), str(line.get_marker()))
            if key in seen:
                problems.append(f"axes {k} ({ax.get_title()!r}): {lab!r} and {seen[key]!r} share colour and marker")
            seen[key] = lab
        for line in ax.get_lines():
            xy = np.asarray(line.get_xydata(), float)
            if not len(xy):
                continue
            pts = line.get_transform().transform(xy)
            for box in boxes:
                inside = ((pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1))
                if inside.any():
                    problems.append(f"axes {k} ({ax.get_title()!r}): a legend covers a point of {line.get_label()!r}")
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            labels = [t for t, loc in zip(axis.get_ticklabels(), axis.get_ticklocs())
                      if t.get_visible() and t.get_text() and lo <= loc <= hi]
            ext = sorted((t.get_window_extent(renderer) for t in labels),
                         key=lambda b: b.x0 if axis is ax.xaxis else b.y0)
            for a, b in zip(ext, ext[1:]):
                if (axis is ax.xaxis and a.x1 > b.x0 + 0.5) or (axis is ax.yaxis and a.y1 > b.y0 + 0.5):
                    problems.append(f"axes {k} ({ax.get_title()!r}): overlapping tick labels on "
                                    f"{axis.axis_name}")
                    break
    return problems
