"""End-to-end test of the report generator (reports/) on its hidden --tiny configuration."""
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

# the tiny report (every experiment, each timing the median of 3 fresh processes) runs in the first
# test that uses it: about 4 minutes on an idle 2-core machine, much more on a loaded one
pytestmark = pytest.mark.timeout(1800)

pd = pytest.importorskip("pandas")
pytest.importorskip("matplotlib")
pytest.importorskip("cvxopt")

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from reports import common  # noqa: E402
from reports import run as report_run  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


#: figure file -> its problems (reports.style.figure_problems), for every figure the tiny report saved
FIGURES = {}


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    """The whole report, through the CLI (``corevector report --tiny --out DIR``); every figure it saves is
    checked for the style's rules on the way (FIGURES)."""
    import json

    from corevector.cli import command as cli
    from reports import style
    out = tmp_path_factory.mktemp("report")
    log = out.parent / "figure_checks.jsonl"
    old = os.environ.get(style.CHECK_LOG)
    os.environ[style.CHECK_LOG] = str(log)
    try:
        rc = cli.main(["report", "--tiny", "--out", str(out)])
    finally:
        if old is None:
            del os.environ[style.CHECK_LOG]
        else:
            os.environ[style.CHECK_LOG] = old
    assert rc == 0
    for line in log.read_text().splitlines():
        rec = json.loads(line)
        FIGURES[rec["figure"]] = rec["problems"]
    return out


def test_every_figure_in_three_formats_and_in_style(tiny_report):
    """Each experiment's figures exist as PNG, PDF and SVG, REPORT.md links all three, and no figure breaks the
    style: two series of one axes with the same colour and marker, a legend over a plotted point (matplotlib's
    extents), overlapping tick labels, wider than two paper columns."""
    text = (tiny_report / "REPORT.md").read_text()
    pngs = sorted(p.name for p in tiny_report.glob("*.png"))
    assert {"checkerboard.png", "ratios.png", "cvr.png", "loosli_canu.png", "mmda.png", "ssvr_curves.png",
            "engine_per_cv.png", "regression.png", "surface_bunny.png"} <= set(pngs)
    for png in pngs:
        stem = png[:-4]
        assert (tiny_report / png).read_bytes()[:8] == PNG_MAGIC
        assert (tiny_report / f"{stem}.pdf").read_bytes()[:4] == b"%PDF", stem
        assert b"<svg" in (tiny_report / f"{stem}.svg").read_bytes()[:2000], stem
        assert f"[{stem}.pdf]({stem}.pdf)" in text and f"[{stem}.svg]({stem}.svg)" in text, stem
    drawn = {name[:-4] for name in FIGURES}
    assert {p[:-4] for p in pngs} - {"surface_bunny"} <= drawn  # the bunny is a render, wrapped
    assert not {k: v for k, v in FIGURES.items() if v}, FIGURES


def test_report_opens_with_the_papers_claims_and_our_numbers_beside_theirs(tiny_report):
    head = (tiny_report / "REPORT.md").read_text().split("- date:")[0]
    for name in ("checkerboard", "ratios", "cvr", "surface", "mmda", "ssvr"):
        assert f"| [{name}](#{name}) |" in head, name
    for name in ("checkerboard", "surface", "mmda", "mmda_speed", "ssvr"):
        d = pd.read_csv(tiny_report / f"{name}_paper.csv")
        assert list(d.columns) == ["source", "quantity", "paper", "ours", "ours / paper", "note"]
        assert d["paper"].notna().all() and d["source"].str.match(r"\[00[0-4]\] ").all()
        measured = d.dropna(subset=["ours"])
        # (the tiny checkerboard reaches neither 10^6 points nor the crossover with SVC: its rows stay empty)
        assert len(measured) or name == "checkerboard", name
        assert np.allclose(measured["ours / paper"], measured["ours"] / measured["paper"])


def test_report_writes_every_output(tiny_report):
    for name in ["REPORT.md", "checkerboard.csv", "checkerboard.md", "checkerboard.png", "ratios.csv",
                 "ratios.png"]:
        p = tiny_report / name
        assert p.is_file() and p.stat().st_size > 0, name
    for png in ["checkerboard.png", "ratios.png"]:
        assert (tiny_report / png).read_bytes()[:8] == PNG_MAGIC


def test_report_md_links_outputs_and_describes_machine(tiny_report):
    text = (tiny_report / "REPORT.md").read_text()
    links = set(re.findall(r"\]\(([^)#]+)\)", text))
    assert {"checkerboard.csv", "checkerboard.md", "checkerboard.png", "ratios.csv", "ratios.png"} <= links
    for link in links:
        assert (tiny_report / link).exists(), link
    for needle in ["numpy", "scipy", "scikit-learn", "corevector", "CPUs", "--tiny", "date:"]:
        assert needle in text, needle
    # each experiment's CPU seconds (the process tree's: the fits run in grandchildren) and the load
    cpu = dict(re.findall(r"(\w+) ([\d.]+) \(load [\d.]+–[\d.]+\)", text.split("## Contents")[0]))
    assert {"checkerboard", "ratios", "chunked"} <= set(cpu) and float(cpu["checkerboard"]) > 0, cpu


def test_quick_mode_figures_draw_lines():
    """The quick mode (the main job) is cut to minutes, but every figure against m keeps three sizes or more."""
    from reports import checkerboard, cvr, loosli_canu, regression
    assert min(len(s["quick"]) for s in (checkerboard.SIZES, checkerboard.SIZES_DENSE, checkerboard.SIZES_SMO,
                                         cvr.SIZES, regression.PLOT_M, loosli_canu.RADIUS_EPS)) >= 3


def test_checkerboard_measurements(tiny_report):
    df = pd.read_csv(tiny_report / "checkerboard.csv")
    assert df["error"].isna().all(), df["error"].dropna().tolist()
    assert set(df["method"]) == {"CVM (fast)", "CVM (ref)", "sklearn SVC"}
    # (a fit of a few hundred points: a few MB on top of its data; test_maxrss_delta_is_the_fits_own_memory)
    assert (df["fit_time"] > 0).all() and (df["maxrss_delta_mb"] < 100).all(), df["maxrss_delta_mb"].tolist()
    assert ((df["test_accuracy"] > 0.5) & (df["test_accuracy"] <= 1)).all()
    cvm = df[df["method"].str.startswith("CVM")]
    # the certified ratio is a ratio of squared radii: >= 1; core set contains the support vectors
    assert (cvm["certified_ratio"] >= 1 - 1e-9).all()
    assert (cvm["core_set_size"] >= cvm["n_sv"]).all()
    # ref and fast solve the same problem with the same seed: same model size at m=200
    at200 = cvm[cvm["m"] == 200].set_index("method")
    assert at200.loc["CVM (fast)", "n_sv"] == at200.loc["CVM (ref)", "n_sv"]
    # the 1000-point CVM learns the checkerboard
    fast = df[(df["method"] == "CVM (fast)") & (df["m"] == 1000)]
    assert float(fast["test_accuracy"].iloc[0]) > 0.9
    assert np.isfinite(fast["tracemalloc_peak_mb"]).all()


def test_cvr_experiment(tiny_report):
    df = pd.read_csv(tiny_report / "cvr.csv")
    assert df["error"].isna().all(), df["error"].dropna().tolist()
    assert set(df["method"]) == {"CVR (fast)", "CVR (ref)", "sklearn SVR"}
    cvr = df[df["method"].str.startswith("CVR")].set_index("method")
    # same seed, same problem: the two implementations select the same model
    assert cvr.loc["CVR (fast)", "n_sv"] == cvr.loc["CVR (ref)", "n_sv"]
    assert abs(cvr.loc["CVR (fast)", "rmse"] - cvr.loc["CVR (ref)", "rmse"]) <= 1e-6 * cvr.loc["CVR (ref)", "rmse"]
    # footnote 10: RMSE / max y, with max y of Friedman #1 far above 1
    assert (df["rmse_footnote10"] < df["rmse"]).all()
    assert (cvr["core_set_size"] >= cvr["n_sv"]).all()


def _opt_bool(v):
    """A mark read back from CSV: None (not applicable), True or False."""
    return None if pd.isna(v) else v in (True, "True")


def test_regression_experiment(tiny_report):
    """The panel's marks follow from the numbers of their row (recomputed here), the Friedman summary from its
    fits, and every trainer without a wheel problem is measured."""
    from reports import regression as reg
    t = pd.read_csv(tiny_report / "regression_targets.csv")
    assert set(reg.MARKS) <= set(t.columns) and set(t["set"]) == set(reg.PANEL_SETS["tiny"])
    panel = pd.read_csv(tiny_report / "regression_panel.csv")
    core = panel[panel["method"].isin(["cvr", "sparse_svr", "svr"])]
    assert core["error"].isna().all(), core["error"].dropna().tolist()
    assert ((core["r2"] > 0.1) & (core["r2"] <= 1) & (core["r2_min"] <= core["r2"])).all()
    assert (core["r2_folds"].str.split().map(len) == reg.FOLDS).all() and (core["fit_time"] > 0).all()
    for r in t.itertuples():
        assert r.n == reg.ROW_CAP["tiny"] and r.role == ("choose" if r.set in reg.CHOOSE_ON else "confirm")
        assert _opt_bool(r.cvr_r2_ok) == (r.r2_cvr >= r.r2_svr - 0.01)
        assert _opt_bool(r.cvr_time_ok) == (r.wall_cvr <= r.wall_svr or r.wall_cvr < 0.05)  # n < 5,000
        assert _opt_bool(r.sparse_r2_ok) == (r.r2_sparse_svr >= r.r2_svr - 0.01)
        assert _opt_bool(r.cvr_peer_ok) is None  # below 10,000 rows
        assert np.isclose(r.cvr_over_svr, r.wall_cvr / r.wall_svr)
    fr = pd.read_csv(tiny_report / "regression_friedman.csv")
    assert fr["error"].isna().all(), fr["error"].dropna().tolist()
    assert {"cvr", "svr", "cvr_fixed_mu", "cvr_papers", "svr_papers"} <= set(fr["method"])
    cvr = fr[(fr["method"] == "cvr") & (fr["m"] == 500)]
    fixed = fr[fr["method"] == "cvr_fixed_mu"].set_index("draw")
    assert np.allclose(fixed["mu_given"], cvr.set_index("draw").loc[fixed.index, "mu_"])
    # the fit given the C and mu that 'auto' chose solves the same problem (the pilot has its own random stream);
    # the automatic fit starts from the pilot's seed (below CVR.SEED_ALL_BELOW points), the given one from the
    # initial pair, so the two are approximations of one optimum, within the loop's tolerance of each other
    assert np.allclose(fixed["rmse"], cvr.set_index("draw").loc[fixed.index, "rmse"], rtol=0.02)
    s = pd.read_csv(tiny_report / "regression_friedman_summary.csv").iloc[0]
    assert s["cvr_draws"] == len(cvr) == reg.DRAWS["tiny"]["draws"]
    assert np.isclose(s["worst_over_median"], cvr["fit_time"].max() / cvr["fit_time"].median())
    assert _opt_bool(s["spread_ok"]) == (s["worst_over_median"] <= 3) and _opt_bool(s["ratio_ok"]) is None
    assert (tiny_report / "regression.png").read_bytes()[:8] == PNG_MAGIC


def test_regression_marks_count_only_the_peers_that_fit_as_well():
    """From 10,000 rows CVR is measured against the fastest SVR within 0.01 of LIBSVM's R^2, not a faster one that
    fits worse; below 5,000 rows 50 ms passes; missing numbers leave a mark empty."""
    from reports.regression import set_marks
    row = dict(n=20_000, r2_cvr=0.90, r2_sparse_svr=0.85, r2_svr=0.905, r2_sklearnex=0.905, r2_thundersvm=0.80,
               wall_cvr=1.0, wall_sparse_svr=0.1, wall_svr=10.0, wall_sklearnex=1.5, wall_thundersvm=0.2)
    marks = set_marks(row)
    assert marks["fastest_peer"] == "sklearnex" and np.isclose(marks["cvr_over_fastest"], 1 / 1.5)
    assert marks["cvr_peer_ok"] is False and marks["cvr_time_ok"] is True and marks["cvr_r2_ok"] is True
    assert marks["sparse_r2_ok"] is False
    assert set_marks(dict(row, wall_sklearnex=3.0))["cvr_peer_ok"] is True
    assert set_marks(dict(row, wall_sklearnex=3.0, r2_cvr=0.89))["cvr_peer_ok"] is False  # R^2 not within 0.01
    small = dict(row, n=4_000, wall_cvr=0.04, wall_svr=0.01)
    assert set_marks(small)["cvr_time_ok"] is True and set_marks(small)["cvr_peer_ok"] is None
    assert set_marks(dict(small, wall_cvr=0.06))["cvr_time_ok"] is False
    assert set_marks(dict(row, n=6_000, wall_cvr=5.01))["cvr_time_ok"] is False  # from 5,000 rows: 0.5x
    assert set_marks(dict(row, r2_svr=float("nan")))["cvr_r2_ok"] is None
    # over all folds, against the same peer: a ratio beside the marks, nan where the folds were not timed
    assert np.isnan(marks["cvr_over_fastest_5fold"])
    five = set_marks(dict(row, wall5_cvr=6.0, wall5_sklearnex=8.0, wall5_thundersvm=1.0))
    assert five["fastest_peer"] == "sklearnex" and np.isclose(five["cvr_over_fastest_5fold"], 0.75)


def test_loosli_canu_experiment(tiny_report):
    df = pd.read_csv(tiny_report / "loosli_canu.csv")
    assert df["error"].isna().all(), df["error"].dropna().tolist()
    assert {"radius", "margin", "gap", "libsvm"} <= set(df["stop"])
    cvm = df[df["stop"] != "libsvm"]
    assert (cvm["certified_ratio"] >= 1 - 1e-9).all() and (cvm["kkt_gap"] >= -1e-9).all()
    solvers = pd.read_csv(tiny_report / "loosli_canu_solvers.csv")
    assert set(solvers["solver"]) == {"active_set", "smo"}
    # both solvers reach the same model on the same problem (only their speed differs)
    assert solvers["error"].isna().all() and solvers["n_sv"].nunique() == 1


def test_ratio_experiment_respects_bounds(tiny_report):
    df = pd.read_csv(tiny_report / "ratios.csv")
    assert set(df["formulation"]) == {"two_class", "one_class", "meb", "cvr"}
    assert set(df["kernel"]) == {"rbf", "laplacian"}
    assert set(df["impl"]) == {"fast", "ref"}
    assert df["ok"].all()
    bound = (1 + df["eps"]) ** 2
    assert (df["upper_ratio"] <= bound * (1 + 1e-7)).all()          # r*^2 <= (1+eps)^2 R^2
    assert (df["lower_ratio"] <= 1 + 1e-7).all()                      # R^2 <= r*^2
    assert (df["certified_ratio"] <= bound * (1 + 1e-7)).all()
    assert (df["certified_ratio"] >= df["upper_ratio"] * (1 - 1e-7)).all()  # certificate >= true ratio


def test_registry_makes_new_experiments_declarative(tmp_path):
    calls = []

    @common.experiment("dummy_test_exp", "A dummy experiment", sizes={"tiny": [1, 2], "quick": [3]})
    def dummy(ctx):
        calls.append((ctx.mode, ctx.sizes))
        (ctx.out / "dummy.csv").write_text("a,b\n1,2\n")
        return common.ExperimentResult(outputs=["dummy.csv"], summary_md="dummy table")

    try:
        assert report_run.main(["--tiny", "--out", str(tmp_path), "--only", "dummy_test_exp",
                                "--no-progress"]) == 0
        assert calls == [("tiny", [1, 2])]
        text = (tmp_path / "REPORT.md").read_text()
        assert "[dummy.csv](dummy.csv)" in text and "dummy table" in text
        assert report_run.main(["--tiny", "--out", str(tmp_path), "--only", "no_such_exp"]) == 2
    finally:
        common.REGISTRY.pop("dummy_test_exp", None)


def test_missing_output_is_an_error(tmp_path):
    @common.experiment("liar_test_exp", "Claims a file it never writes", sizes={"tiny": [1]})
    def liar(ctx):
        return common.ExperimentResult(outputs=["never.csv"])

    try:
        with pytest.raises(RuntimeError, match="never.csv"):
            report_run.main(["--tiny", "--out", str(tmp_path), "--only", "liar_test_exp", "--no-progress"])
    finally:
        common.REGISTRY.pop("liar_test_exp", None)


def _prepare(n):
    return np.arange(n, dtype=float)


def _fit(data):
    if data.size > 3:
        raise ValueError("too big")
    return data.sum()


def _evaluate(model, data):
    return {"total": float(model)}


def test_measure_fit_isolates_failures():
    job = common.FitJob(_prepare, _fit, _evaluate)
    ok = common.measure_fit(job, 3, trace_memory=True)
    assert ok["total"] == 3.0 and ok["fit_time"] >= 0 and "tracemalloc_peak_mb" in ok
    assert ok["maxrss_delta_mb"] < 24 and ok["n_warnings"] == 0  # (a sum of three numbers)
    # every timing is the median of at least 3 fresh-process runs, with its extremes
    assert ok["n_runs"] == common.REPEATS >= 3
    for key in ("fit_time", "fit_cpu_time"):
        assert ok[f"{key}_min"] <= ok[key] <= ok[f"{key}_max"]
    bad = common.measure_fit(job, 10)
    assert "too big" in bad["error"]


def _prepare_mb(mb):
    intermediate = np.ones(2 * mb * 2**20 // 8)  # (written: resident) a peak of the preparation, gone before the fit
    del intermediate
    return np.ones(mb * 2**20 // 8)


def _fit_mb(data):
    extra = np.ones(64 * 2**20 // 8) if data.size == 128 * 2**20 // 8 else np.zeros(0)
    return float(data[0] + extra.sum())


def _evaluate_none(model, data):
    return {}


def test_maxrss_delta_is_the_fits_own_memory():
    """maxrss_delta_mb is the resident memory the fit needed on top of its data: a fit that writes 64 MB
    after 128 MB of data were prepared reports about 64, one that allocates nothing about 0 (neither the data's
    128 MB, resident before the fit, nor the 256 MB intermediate their preparation peaked at are counted)."""
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux's /proc/self/clear_refs (elsewhere ru_maxrss, which only grows)")
    job = common.FitJob(_prepare_mb, _fit_mb, _evaluate_none)
    big = common.measure_fit(job, 128, trace_memory=False, repeats=1)
    small = common.measure_fit(job, 127, trace_memory=False, repeats=1)
    assert 60 <= big["maxrss_delta_mb"] <= 64 + 24, big
    assert small["maxrss_delta_mb"] <= 24, small


def test_timings_are_summarised_over_runs():
    """Median under the plain name (so every experiment keeps reading fit_time), extremes beside it;
    timings an evaluation makes itself (``*_time``) too; everything else from the first run."""
    runs = [dict(fit_time=t, predict_time=2 * t, maxrss_delta_mb=1.0, n_sv=7, warnings="w") for t in (3.0, 1.0, 2.0)]
    out = common._summarise_runs(runs)
    assert (out["fit_time"], out["fit_time_min"], out["fit_time_max"]) == (2.0, 1.0, 3.0)
    assert (out["predict_time"], out["predict_time_min"], out["predict_time_max"]) == (4.0, 2.0, 6.0)
    assert out["n_sv"] == 7 and out["warnings"] == "w" and out["n_runs"] == 3
    with pytest.raises(ValueError, match="repeats"):
        common.measure_fit(common.FitJob(_prepare, _fit, _evaluate), 1, repeats=0)


def _slow_fit(data):
    import time
    time.sleep(0.3)
    return data.sum()


def _evaluate_with_callback(model, data):
    import time
    time.sleep(0.5)          # an evaluation (e.g. a test-set callback) must never be inside the timer
    return {"total": float(model)}


def test_no_timer_encloses_the_evaluation():
    res = common.measure_fit(common.FitJob(_prepare, _slow_fit, _evaluate_with_callback), 2, trace_memory=False)
    assert 0.3 <= res["fit_time_min"] and res["fit_time_max"] < 0.8


# ---------------------------------------------------------------------------------------------- asv suite
def _asv_modules():
    import importlib
    import inspect
    bench_root = REPO / "asv_benchmarks"
    if str(bench_root) not in sys.path:
        sys.path.insert(0, str(bench_root))
    mods = [importlib.import_module(f"benchmarks.{p.stem}") for p in sorted((bench_root / "benchmarks").glob("*.py"))
            if p.stem != "__init__"]
    # what asv collects: public, concrete classes defined in the module (asv_runner.discovery)
    return {name: cls for mod in mods for name, cls in vars(mod).items()
            if inspect.isclass(cls) and cls.__module__ == mod.__name__ and not name.startswith("_")
            and not inspect.isabstract(cls)}


def test_asv_bench_regex_of_a_class_selects_that_class_alone():
    """`asv run --bench NAME` searches NAME in 'module.Class.method': no class name may lie inside another."""
    names = list(_asv_modules())
    assert {"CVMCheckerboard", "CVMMarginCheckerboard", "CVMGaussians"} <= set(names)
    for a in names:
        assert [b for b in names if a in b] == [a], a


def test_asv_fits_silence_the_expected_warning_and_no_other():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from refimpl.datasets import checkerboard
    bench = _asv_modules()["CVMCheckerboard"]
    X, y = checkerboard(400, random_state=0)
    # the paper's setting does raise the warning the class declares ...
    with pytest.warns(ConvergenceWarning, match="stop='radius' with eps="):
        bench().make_estimator("fast").fit(X, y)
    # ... which the benchmark's fit silences
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bench().fit("fast", X, y)

    class Capped(bench):
        def make_estimator(self, impl):
            return super().make_estimator(impl).set_params(max_iter=2)
    # a warning the class does not expect still reaches the caller
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        Capped().fit("fast", X, y)


def test_chunked_experiment(tiny_report):
    """Every input kind gives the same fit; the chunked ones fetch rows, not the data set, per iteration."""
    df = pd.read_csv(tiny_report / "chunked.csv")
    assert set(df["input"]) == {"memory", "memmap", "zarr", "dask"}
    assert "error" not in df.columns or df["error"].isna().all()
    assert df["core_set"].nunique() <= 2  # the memmap holds the float32 rows: its own (equal-sized) fit
    assert (df.loc[df["input"] != "memory", "scan_bytes_per_block"] < 4096).all()


def test_chunked_grid_experiment(tiny_report):
    """The grid of issue 45's item 3: every cell measured (in-memory, zarr at each chunk size, Dask's own
    chunks='auto'), the same model in each, each chunked fit's time over its in-memory fit's and its growth
    as a share of X, with the marks."""
    from reports.chunked import MARK_GROWTH, MARK_RATIO, _grid_cells
    df = pd.read_csv(tiny_report / "chunked_grid.csv")
    assert "error" not in df.columns or df["error"].isna().all(), df.get("error")
    assert len(df) == len(_grid_cells("tiny")) and set(df["input"]) == {"memory", "zarr", "dask-auto"}
    assert sorted(df.loc[df["input"] == "zarr", "chunk_mb"]) == [1 / 16, 64]
    for _, group in df.groupby("eps"):
        assert group["core_set"].nunique() == 1 and group["accuracy"].nunique() == 1
        mem = group[group["input"] == "memory"].iloc[0]
        for _, r in group[group["input"] != "memory"].iterrows():
            assert r["time_ratio"] == pytest.approx(r["fit_time"] / mem["fit_time"])
            assert r["growth_of_x"] == pytest.approx(r["rss_growth_mb"] / r["x_mb"])
            assert r["time_mark"] == ("yes" if r["time_ratio"] <= MARK_RATIO else "NO")
            assert r["growth_mark"] == ("yes" if r["growth_of_x"] < MARK_GROWTH else "NO")


def test_wide_store_copy_for_memory_maps(tmp_path):
    """reports.chunked_wide.npy_copy: the generated store's rows, block by block, into a float32 .npy that a
    memory map opens; written once (a second call keeps the file)."""
    import zarr

    from reports.chunked_wide import npy_copy
    X = np.random.default_rng(0).random((70_000, 5)).astype(np.float32)
    root = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    root.create_array("X", shape=X.shape, chunks=(1000, 5), dtype="f4")[:] = X
    path = npy_copy(tmp_path / "g.zarr")
    M = np.load(path, mmap_mode="r")
    assert M.dtype == np.float32 and np.array_equal(M, X)
    mtime = path.stat().st_mtime_ns
    assert npy_copy(tmp_path / "g.zarr") == path and path.stat().st_mtime_ns == mtime


def test_wide_fits_take_the_estimators_parameters(tmp_path):
    """reports.chunked_wide --one ... --params JSON: the measured fit (from the store, or from the official
    training images) is CVMClassifier(random_state=0, **params) on those rows, as fitted here in memory."""
    import json
    import subprocess

    from corevector import CVMClassifier, infinite
    try:
        images, labels = infinite.source_images()
    except ValueError:
        pytest.skip("Fashion-MNIST (Debian's dataset-fashion-mnist) is not available")
    from reports.chunked_wide import CLASS, WARM_ROWS
    m, params = WARM_ROWS + 1000, {"stop": "radius", "eps": 0.01}
    root = infinite.write_zarr(tmp_path / "g.zarr", m, seed=1, chunk_rows=500, shard_rows=1000)
    sources = {"zarr": (np.asarray(root["X"]), np.asarray(root["y"])),
               "official": (images[:m].reshape(m, -1), labels[:m]),
               "official_zarr": (images[:m].reshape(m, -1), labels[:m])}
    for kind, (X, y) in sources.items():
        cmd = [sys.executable, "-m", "reports.chunked_wide", "--one", kind, str(m), str(tmp_path / "g.zarr"),
               "--params", json.dumps(params)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                             cwd=Path(__file__).resolve().parent.parent)
        row = json.loads(out.stdout.splitlines()[-1])
        est = CVMClassifier(random_state=0, **params).fit(X, np.where(y == CLASS, 1, -1))
        assert json.loads(row["params"]) == params and row["m"] == m
        assert (row["core_set"], row["n_iter"]) == (est.core_set_.size, est.n_iter_)
        assert row["peak_rss_mb"] > 0
        # the local engine's working memory is set apart from the data held only where the fit is chunked
        assert (row["engine_mb"] > 0) == (kind in ("zarr", "official_zarr")), row


def test_wide_report_gives_each_chunked_fit_its_ratio_to_the_in_memory_fit():
    """reports.chunked_wide.with_ratios: time_ratio and cpu_ratio over the in-memory fit of the same rows (the
    generated set's 'memory' row of that m, or 'official' for the official images); NaN without one."""
    import pandas as pd

    from reports.chunked_wide import with_ratios
    df = pd.DataFrame(dict(input=["memory", "zarr", "dask", "zarr", "official", "official_zarr", "official_dask"],
                           m=[100, 100, 100, 200, 60, 60, 60],
                           fit_time=[2.0, 3.0, 5.0, 7.0, 1.0, 1.2, 1.5],
                           fit_cpu_time=[4.0, 5.0, 6.0, 7.0, 2.0, 2.4, 4.0]))
    out = with_ratios(df)
    assert out["time_ratio"].tolist()[:3] == [1.0, 1.5, 2.5] and out["cpu_ratio"].tolist()[:3] == [1.0, 1.25, 1.5]
    assert np.isnan(out["time_ratio"][3]) and np.isnan(out["cpu_ratio"][3])   # no in-memory fit of 200 rows
    assert out["time_ratio"].tolist()[4:] == pytest.approx([1.0, 1.2, 1.5])
    assert out["cpu_ratio"].tolist()[4:] == pytest.approx([1.0, 1.2, 2.0])
    assert "time_ratio" not in df.columns   # (a copy)


def test_report_clusters_start_workers_with_a_larger_mmap_threshold():
    """The reports' LocalCluster starts its workers with glibc's mmap threshold at WORKER_MMAP_THRESHOLD
    (distributed's MALLOC_TRIM_THRESHOLD_ would pin it at 128 kB: docs/chunked.md), distributed's own
    settings kept, and leaves the caller's Dask configuration as it was."""
    pytest.importorskip("distributed")
    import os

    import dask
    from reports.chunked import WORKER_MMAP_THRESHOLD, local_cluster
    before = dict(dask.config.get("distributed.nanny.pre-spawn-environ"))
    client = local_cluster(1, "1GB")
    try:
        env = client.run(lambda: {k: os.environ.get(k) for k in ("MALLOC_MMAP_THRESHOLD_", "OMP_NUM_THREADS")})
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    assert [v["MALLOC_MMAP_THRESHOLD_"] for v in env.values()] == [str(WORKER_MMAP_THRESHOLD)]
    assert [v["OMP_NUM_THREADS"] for v in env.values()] == ["1"]
    assert dict(dask.config.get("distributed.nanny.pre-spawn-environ")) == before


def test_the_report_header_gives_the_installed_version():
    """The machine block of every report names corevector's version (it printed '?' when it asked fastimpl)."""
    import corevector
    from reports.common import machine_info
    assert machine_info()["corevector"].split()[0] == corevector.__version__
