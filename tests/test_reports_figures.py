"""The report's figures and the papers' values beside ours (reports.style, reports.paper).

Every plotting function renders small made-up results here (no fit runs: a few seconds in all), in the tiny,
quick and full shapes; the tiny report of ``test_reports.py`` checks the same properties on the real figures.
"""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from reports import paper, style  # noqa: E402

MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF"}


@pytest.fixture
def checked(monkeypatch):
    """Every figure saved while the test runs, with its problems (style.figure_problems)."""
    seen = []
    monkeypatch.setattr(style, "on_save", lambda fig, path: seen.append((path.name, style.figure_problems(fig))))
    return seen


def assert_three_formats(out, names):
    assert [Path(n).suffix for n in names] == [".png", ".pdf", ".svg"], names
    for n in names:
        data = (out / n).read_bytes()
        fmt = n.rsplit(".", 1)[1]
        if fmt == "svg":
            assert b"<svg" in data[:2000], n
        else:
            assert data.startswith(MAGIC[fmt]), n


def _runs(df, col, spread):
    """The summarised columns measure_fit writes in full mode: the median with the repeats' min and max."""
    df[f"{col}_min"], df[f"{col}_max"] = df[col] / spread, df[col] * spread
    return df


def _checkerboard_frame(sizes, spread=None):
    rows = []
    for meth, t0, sv in (("CVM (fast)", 0.01, 300), ("CVM (ref)", 0.05, 300), ("sklearn SVC", 0.002, 50)):
        for m in sizes:
            rows.append(dict(method=meth, m=m, fit_time=t0 * (m / 1000) ** (0.3 if "CVM" in meth else 1.8),
                             n_sv=min(sv * m / 1000, 2000), test_error=0.02 + 1 / m, error=np.nan))
    df = pd.DataFrame(rows)
    return _runs(df, "fit_time", spread) if spread else df


def test_checkerboard_figure_in_each_mode(tmp_path, checked):
    from reports import checkerboard
    names, note = checkerboard.plot(_checkerboard_frame([200, 1000]), tmp_path / "cb.png", mode="tiny")
    assert_three_formats(tmp_path, names) and note == ""
    # the quick mode leaves a figure of two sizes out, and says so
    names, note = checkerboard.plot(_checkerboard_frame([1000, 10000]), tmp_path / "cb2.png", mode="quick")
    assert names == [] and "fewer than 3" in note and not (tmp_path / "cb2.png").exists()
    # full mode: the median of the repeats, with their range as a band per method
    fig_store = []
    style_save = style.save
    try:
        style.save = lambda fig, path: fig_store.append(fig) or style_save(fig, path)
        names, _ = checkerboard.plot(_checkerboard_frame([1e3, 1e4, 1e5, 1e6], spread=1.3), tmp_path / "cb3.png")
    finally:
        style.save = style_save
    assert_three_formats(tmp_path, names)
    ax = fig_store[0].axes[0]
    bands = [c for c in ax.collections if c.get_label() == "_range"]
    assert len(bands) == 3  # one per method, in its colour
    from matplotlib.colors import to_hex
    assert {to_hex(b.get_facecolor()[0][:3]) for b in bands} == {to_hex(ln.get_color()) for ln in ax.get_lines()}
    assert all(not problems for _, problems in checked), checked


def test_cvr_figure_leaves_out_panels_of_one_size(tmp_path, checked):
    from reports import cvr
    rows = []
    for ds, sizes in (("friedman1", [300, 1000, 3000]), ("compactiv", [2730]), ("abalone", [1392])):
        for meth in ("CVR (fast)", "CVR (ref)", "sklearn SVR"):
            for m in sizes:
                rows.append(dict(dataset=ds, method=meth, m=m, fit_time=m * 1e-4, n_sv=m / 5, rmse_footnote10=0.05,
                                 mre=0.1 + m * 1e-6, error=np.nan))
    names, note = cvr.plot(pd.DataFrame(rows), tmp_path / "cvr.png", mode="quick")
    assert_three_formats(tmp_path, names)
    assert "compactiv" in note and "abalone" in note and "friedman1" not in note
    assert len(checked) == 1 and checked[0][1] == [], checked
    # the overlap of the issue: Friedman's 300-3,000 on a log axis, labelled without running into each other
    assert not [p for p in checked[0][1] if "tick" in p]


def test_every_other_figure_renders_clean(tmp_path, checked):
    from reports import engine, loosli_canu, mmda, ratios, regression, ssvr
    rng = np.random.default_rng(0)
    out = []
    r = [dict(formulation=f, kernel=k, impl=i, eps=e, m=200, upper_ratio=1 + e * rng.uniform(0.1, 1),
              certified_ratio=1 + 2 * e * rng.uniform(0.1, 1))
         for f in ratios.FORMS for k in ratios.KERNELS for i in ("fast", "ref") for e in ratios.EPS_GRID]
    out.append(ratios.plot(pd.DataFrame(r), tmp_path / "ratios.png"))
    lc = [dict(method="cvm", C=C, stop="radius", eps=e, test_error=0.05 + e, fit_time=1 / (e ** 0.1) / 10,
               core_set_size=100 / e ** 0.1, error=np.nan) for C in loosli_canu.CS for e in (1e-2, 1e-6, 1e-10)]
    lc += [dict(method=m, C=C, stop=s, eps=1e-6, test_error=0.04, fit_time=0.5, core_set_size=300, error=np.nan)
           for C in loosli_canu.CS for m, s in (("cvm", "margin"), ("cvm", "gap"), ("svc", "libsvm"))]
    out.append(loosli_canu.plot(pd.DataFrame(lc), tmp_path / "lc.png", 2000))
    acc = [dict(dataset="pendigits", method=m, k=k, n_features=10 * k, classifier="MLP", accuracy=95 + k / 10)
           for m in ("MMDA(CVM)", "MMDA(SVM)", "KFD", "KPCA") for k in (1, 3, 5)]
    cost = [dict(dataset="pendigits", method=m, k=k, n_features=10 * k, cpu_time=0.1 * k * (1 + i),
                 total_evals=300 * 10 * k * (1 + i)) for i, m in enumerate(("MMDA(CVM)", "MMDA(SVM)", "KFD", "KPCA"))
            for k in (1, 3, 5)]
    out.append(mmda.plot(pd.DataFrame(acc), pd.DataFrame(cost), tmp_path / "mmda.png"))
    cur, infos = [], {}
    for name in ssvr.DATASETS:
        for meth in ("SSVR-SRS (lambda of Table 3)", "SSVR-SRS (lambda=1e-05, Table 4)", "RSVM (lambda of Table 3)",
                     "RSS"):
            cur += [dict(dataset=name, method=meth, m=m, rmse=1 + 1 / m, rmse_median=1 + 1 / m, rmse_min=1 + 0.8 / m,
                         rmse_max=1 + 1.3 / m) for m in (5, 10, 20, 50)]
        infos[name] = dict(svr_rmse=1.0, svr_n_sv=9000, paper_name=ssvr.DATASETS[name][0])  # the real, long names
    out.append(ssvr.plot(pd.DataFrame(cur), infos, tmp_path / "ssvr.png"))
    trace = dict(trace_core_set=list(range(1, 400)), trace_elapsed=list(np.cumsum(np.linspace(1e-4, 1e-3, 399))))
    rows = [dict(case=c, variant=v, m=4000, **trace) for c in engine.PER_CV for v in ("new", "papers")]
    out.append(engine.plot_per_cv(rows, tmp_path / "engine.png"))
    fr = pd.DataFrame([dict(draw=0, method=m, m=n, fit_time=n * 1e-4, fit_time_min=n * 8e-5, fit_time_max=n * 2e-4,
                            rmse=1.1 + 1 / n, error=np.nan)
                       for m in regression.PLOT_LABELS for n in (500, 1000, 3000, 10000)])
    names, note = regression.plot(fr, tmp_path / "regression.png", mode="full")
    out.append(names)
    assert note == ""
    for names in out:
        assert_three_formats(tmp_path, names)
    assert len(checked) == len(out)
    assert all(not problems for _, problems in checked), [c for c in checked if c[1]]


def test_raster_render_gets_vector_wrappers(tmp_path):
    from matplotlib.figure import Figure
    fig = Figure(figsize=(3, 1))
    fig.add_subplot().plot([0, 1], [1, 0])
    fig.savefig(tmp_path / "mesh.png")
    assert_three_formats(tmp_path, style.wrap_raster(tmp_path / "mesh.png"))


def test_the_style_catches_what_it_forbids(tmp_path):
    """figure_problems sees a shared colour and marker, a legend over the data and overlapping tick labels."""
    fig, axes = style.figure(1, 1, width="one")
    ax = axes[0, 0]
    ax.plot([1, 2, 3], [1, 2, 3], color=style.BLUE, marker="o", label="a")
    ax.plot([1, 2, 3], [3, 2, 1], color=style.BLUE, marker="o", label="b")
    ax.legend(loc="center")
    ax.set_xticks([1, 1.01, 1.02])
    ax.set_xticklabels(["a long label", "another long label", "a third"])
    found = " ".join(style.figure_problems(fig))
    assert "share colour and marker" in found and "legend covers" in found and "overlapping tick labels" in found
    fig, axes = style.figure(1, 2, width="one")
    for ax in axes[0]:
        ax.set_title("a title far too long for half a column")
    assert "titles of axes 0 and 1 overlap" in " ".join(style.figure_problems(fig))


def test_each_method_keeps_one_colour_blind_safe_look():
    okabe_ito = {style.BLACK, style.ORANGE, style.SKY, style.GREEN, style.YELLOW, style.BLUE, style.VERMILLION,
                 style.PURPLE, style.GREY}
    looks = [(s.color, s.marker) for s in style.METHODS.values()]
    assert len(set(looks)) == len(looks)
    assert {s.color for s in style.METHODS.values()} <= okabe_ito and set(style.CATEGORIES) <= okabe_ito
    assert set(style.LABELS.values()) <= set(style.METHODS)
    # the same method under the names the experiments give it
    assert style.method_style("CVM (fast)") == style.method_style("CVR (fast)") == style.method_style("MMDA(CVM)")
    assert style.method_style("sklearn SVC") == style.method_style("sklearn SVR") == style.METHODS["libsvm"]
    assert style.method_style("papers' loop (solver='smo'), m = 4,000") == style.METHODS["papers_fast"]
    for key in ("fast", "ref", "papers_fast", "libsvm", "onedal", "thundersvm", "libcvm"):
        assert key in style.METHODS


def test_log_ticks_are_plain_numbers():
    assert [style._number(v) for v in (0.01, 0.5, 300, 3000, 2e5, 1e6)] == ["0.01", "0.5", "300", "3k", "200k", "1M"]
    assert style._number(1e-4) == "$10^{-4}$"
    assert [style.power(v) for v in (100, 1e4, 1e6, 1e-6, 0.5)] == ["100", "10⁴", "10⁶", "10⁻⁶", "0.5"]


# ------------------------------------------------------------------------------------------------------
# the papers' values
# ------------------------------------------------------------------------------------------------------
def _numbers(text):
    """The numbers written in a piece of the papers' text: '4,567' -> 4567, '265.8s' -> 265.8, '10K' -> 10000,
    bold marks dropped."""
    text = re.sub(r"</?b>", "", text)
    out = []
    for m in re.finditer(r"(\d[\d,]*(?:\.\d+)?)([KM]?)", text):
        v = float(m[1].replace(",", ""))
        out.append(v * {"": 1, "K": 1e3, "M": 1e6}[m[2]])
    return out


def test_every_paper_value_is_its_quoted_cell():
    d = paper.load()
    assert len(d) > 200 and d["quote"].str.len().min() > 10
    assert not d.duplicated(["paper", "table", "row", "column"]).any()
    for r in d.itertuples():
        if pd.isna(r.field):
            assert r.value in _numbers(r.quote), (r.table, r.row, r.column, r.value, r.quote)
        else:
            cell = r.quote.split("\t")[int(r.field)]
            assert _numbers(cell) == [r.value], (r.table, r.row, r.column, r.value, cell)


def test_every_quote_is_in_its_paper():
    """Where the papers' text copies are reachable (``../shared/papers`` beside the checkout, or
    ``$COREVECTOR_PAPERS_DIR``), every quote occurs in its paper, a table's quote as a whole line; elsewhere
    (a CI clone) the quotes stored with the values are what the test above checks against."""
    where = paper.papers_dir()
    if where is None:
        pytest.skip("the papers' text copies are not reachable from this checkout")
    texts = {p: (where / f).read_text(encoding="utf-8") for p, f in paper.PAPER_FILES.items()}
    d = paper.load()
    for r in d.itertuples():
        text = texts[r.paper]
        if pd.isna(r.field):
            assert r.quote in text, r.quote
        else:
            assert r.quote in text.splitlines(), r.quote
    # Tables II-IV's columns are the headings of the tables
    headings = {"Table II": "features\tclassifier\toptdigits\tsatimage\tpendigits\tletters\tmnist",
                "Table III": "\toptdigits\tsatimage\tpendigits\tletters\tmnist\tusps\tface"}
    for r in d[d["paper"] == "004"].itertuples():
        assert r.column in headings[r.table if r.table in headings else "Table III"].split("\t")


def test_the_values_the_experiments_look_up_exist():
    from reports import mmda, ssvr
    for prow, _ in ssvr.PAPER_ROWS.values():
        for table in ("Table 3", "Table 4"):
            for col in ("SVR RMSE", "SVR NBF", "SSVR-SRS RMSE", "SSVR-SRS NBF"):
                assert paper.has("002", table, prow, col)
        for col in ssvr.TIME_METHODS:
            assert paper.has("002", "Table 5", prow, f"training time {col} (s)")
    for ds in mmda.PAPER_SETS.values():
        for k in mmda.K_GRID:
            for clf in mmda.PAPER_CLASSIFIERS.values():
                assert paper.has("004", "Table II", f"{mmda._paper_row('MMDA(CVM)', k, 5)} {clf}", ds)
            assert paper.has("004", "Table III", mmda._paper_row("MMDA(CVM)", k, 5), ds)
    # a few cells read by hand from the papers (a check of the extraction's rows and columns)
    assert paper.value("004", "Table II", "MMDA(CVM) N_c 1-NN", "pendigits") == 97.74
    assert paper.value("004", "Table IV", "MMDA(SVM) 3N_c", "letters") == 1772
    assert paper.value("002", "Table 3", "House8l", "SSVR-SRS RMSE") == 30796
    assert paper.value("002", "Table 5", "Friedman3", "training time LIBSVM2.82 (s)") == 1237.19
    assert paper.value("000", "Table 2", "Stanford bunny", "CPU time (s)") == 265.8


def test_comparison_rows_give_the_ratio_and_both_notes():
    r = paper.row("000", "Table 2", "Stanford bunny", "#SVs", 2280.0, note="ours: half the points")
    assert r["paper"] == 4560 and r["ours / paper"] == 0.5 and r["note"] == "ours: half the points"
    r = paper.row("000", "Table 2", "Stanford bunny", "CPU time (s)", 26.58)
    assert np.isclose(r["ours / paper"], 0.1) and "Pentium" in r["note"]
    with pytest.raises(KeyError):
        paper.row("000", "Table 2", "Stanford bunny", "#CVS", 1)
    md = paper.markdown(paper.comparison([r]))
    assert "265.8" in md and "0.1" in md


def test_report_opens_with_the_summary_of_claims(tmp_path):
    import datetime

    from reports.common import Experiment, ExperimentResult
    from reports.run import write_report
    exp = Experiment("surface", "Surface", None)
    res = ExperimentResult(outputs=["a.png", "a.pdf", "a.svg"], summary_md="text",
                           headline=[dict(claim="000 Table 2: x | y", ours="z", holds=None),
                                     dict(claim="c2", ours="o2", holds=False)])
    write_report(tmp_path, [(exp, res, 1.0)], "tiny", datetime.datetime(2026, 1, 1), 1.0, "cmd")
    text = (tmp_path / "REPORT.md").read_text()
    head = text.split("- date:")[0]
    assert "| experiment | the paper's claim | ours | holds |" in head
    assert "x \\| y" in head and "not at this scale" in head and "**no**" in head
    assert "[a.pdf](a.pdf), [a.svg](a.svg)" in text
