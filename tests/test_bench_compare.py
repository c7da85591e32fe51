"""The asv suite's shape (every benchmark against m), the regression verdict of ``corevector bench compare`` and
the offline page of ``plot_results.py --commits``, on synthetic asv result files."""
import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from corevector import cli
from corevector.cli import bench_compare as bc

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "asv_benchmarks"
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25",
           "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]


@pytest.fixture(autouse=True)
def _threads_restored():
    """The benchmarks limit OpenMP and BLAS to one thread for the rest of their process (``common.one_thread``);
    here the process is the test suite's, so the limits are lifted after each test, or every later test of
    a parallel path would run on one thread."""
    yield
    common = sys.modules.get("benchmarks.common")
    while common is not None and common._ONE_THREAD:
        common._ONE_THREAD.pop().restore_original_limits()


def _bench_modules():
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return [importlib.import_module(f"benchmarks.{p.stem}") for p in sorted((BENCH / "benchmarks").glob("*.py"))
            if p.stem != "__init__"]


def _benchmark_classes():
    """What asv collects: public, concrete classes defined in the modules (asv_runner.discovery)."""
    return {name: cls for mod in _bench_modules() for name, cls in vars(mod).items()
            if inspect.isclass(cls) and cls.__module__ == mod.__name__ and not name.startswith("_")
            and not inspect.isabstract(cls)}


def _methods(cls):
    return [n for n in dir(cls) if n.startswith(("time_", "peakmem_", "track_")) and callable(getattr(cls, n))]


# ------------------------------------------------------------------------------------------ the suite's shape
def test_every_benchmark_sweeps_m_and_tracks_what_it_fits():
    classes = _benchmark_classes()
    expected = {"CVMCheckerboard", "CVMMulticlassBoard", "CVDDBlobs", "MEBBlobs", "CVRFriedman1", "MMDACheckerboard",
                "SSVRSRSFriedman3", "BunnySurface", "ChunkedInputs", "SparseCSR", "EngineScan", "MMDASampledScan"}
    assert expected <= set(classes)
    for name, cls in classes.items():
        assert "m" in cls.param_names, name
        sizes = cls.params[cls.param_names.index("m")]
        assert sizes == sorted(sizes) and all(isinstance(m, int) for m in sizes), name
        methods = _methods(cls)
        assert any(m.startswith("time_") for m in methods), name
        if "time_fit" in methods:
            # fitted once per parameter set: the class' own setup_cache, core-set (or basis) and accuracy tracks
            assert "setup_cache" in vars(cls), name
            assert {"track_core_set_size", "track_n_support"} & set(methods), name
            assert {"track_test_accuracy", "track_test_rmse"} & set(methods), name
        if "impl" in cls.param_names and name not in ("SVCCheckerboard", "SVCGaussians", "SVRFriedman1",
                                                      "SVRFriedman3", "SVCSparse", "RSVMFriedman3",
                                                      "CVMPapersLoopGaussians"):
            assert set(cls.params[cls.param_names.index("impl")]) == {"ref", "fast"}, name


def test_chunked_inputs_cover_memmap_zarr_and_dask():
    cls = _benchmark_classes()["ChunkedInputs"]
    assert cls.params[0] == ["memory", "memmap", "zarr", "dask"]


def test_full_sizes_add_larger_m():
    code = ("import sys; sys.path.insert(0, 'asv_benchmarks'); from benchmarks import cvm, common; "
            "print(max(common.M_GRID), cvm.CVMCheckerboard.max_m['fast'])")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    default = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=env)
    full = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={**env, "COREVECTOR_BENCH_SIZES": "full"})
    assert default.stdout.split() == ["100000", "100000"], default.stderr
    assert full.stdout.split() == ["1000000", "1000000"], full.stderr


def test_a_benchmark_fits_once_and_times_warm_calls(tmp_path, monkeypatch):
    """prepare_cache fits every parameter set once; setup loads it (kept per process) and chooses ``number``
    from the CPU time of one call; the tracks read the cached model."""
    monkeypatch.chdir(tmp_path)
    cls = _benchmark_classes()["CVMCheckerboard"]

    class Small(cls):
        params = (["fast"], [300])
        max_m = {"fast": 300}

        def setup_cache(self):
            return self.prepare_cache()

    cache = Small().setup_cache()
    assert set(cache["models"]) == {("fast", 300)} and cache["seconds"][("fast", 300)][0] > 0
    b = Small()
    b.setup(cache, "fast", 300)
    assert b.time_predict.number >= 1 and b.time_fit.number >= 1
    b.time_predict(cache, "fast", 300)
    assert b.track_core_set_size(cache, "fast", 300) > 2 and 0.5 < b.track_test_accuracy(cache, "fast", 300) <= 1
    with pytest.raises(NotImplementedError):
        b.setup(cache, "fast", 400)


@pytest.mark.parametrize("impl", ["ref", "fast"])
def test_engine_scan_benchmark_scans_the_fitted_core_set(impl):
    b = _benchmark_classes()["EngineScan"]()
    b.setup(impl, 1000)
    assert b.track_core_set_size(impl, 1000) > 2
    full = b.ops.scan(None, 0, np.inf)
    assert full.d2 >= b.ops.scan(b.sample, 0, np.inf).d2
    assert b.time_full_scan.number >= 1


# ------------------------------------------------------------------------------------------ verdicts
def _m(samples=None, value=None, repeat=None):
    if samples is not None:
        s = sorted(samples)
        return bc.Measured(float(np.median(s)), list(samples), float(np.percentile(s, 25)),
                           float(np.percentile(s, 75)), len(samples))
    return bc.Measured(value, None, value, value, repeat or 1)


def _noisy(center, rel, n=12, seed=0):
    return list(center * (1 + rel * np.random.default_rng(seed).uniform(-1, 1, n)))


def test_time_verdicts_need_the_ratio_and_separated_quartiles():
    base = _m(_noisy(0.1, 0.02))
    assert bc.judge("x.T.time_fit", (), "time", base, _m(_noisy(0.1, 0.02, seed=1))).verdict == "same"
    assert bc.judge("x.T.time_fit", (), "time", base, _m(_noisy(0.135, 0.02, seed=1))).verdict == "slower"
    assert bc.judge("x.T.time_fit", (), "time", base, _m(_noisy(0.075, 0.02, seed=1))).verdict == "faster"
    # past the ratio by less than the default factor: a change only under a smaller --factor
    assert bc.judge("x.T.time_fit", (), "time", base, _m(_noisy(0.12, 0.02, seed=1))).verdict == "same"
    assert bc.judge("x.T.time_fit", (), "time", base, _m(_noisy(0.12, 0.02, seed=1)), factor=1.15).verdict \
        == "slower"
    # a ratio past the threshold whose quartiles overlap is noise
    wide = bc.judge("x.T.time_fit", (), "time", _m(_noisy(0.1, 0.5)), _m(_noisy(0.12, 0.5, seed=1)))
    assert wide.verdict == "same" and wide.note.startswith("noisy")
    # one sample a side (asv --quick): no verdict
    one = bc.judge("x.T.time_fit", (), "time", _m(value=0.1), _m(value=0.2))
    assert one.verdict == "unsure" and bc.status([one]) == 0


def test_track_memory_and_failure_verdicts():
    judge = bc.judge
    assert judge("x.T.track_core_set_size", (), "track", _m(value=500), _m(value=520)).verdict == "changed"
    assert judge("x.T.track_core_set_size", (), "track", _m(value=500), _m(value=502)).verdict == "same"
    assert judge("x.T.track_core_set_size", (), "track", _m(value=500), _m(value=502), track_tolerance=0).verdict \
        == "changed"
    assert judge("x.T.track_test_accuracy", (), "track", _m(value=0.9), _m(value=0.9)).verdict == "same"
    assert judge("x.T.peakmem_fit", (), "memory", _m(value=100e6), _m(value=130e6)).verdict == "larger"
    assert judge("x.T.time_fit", (), "time", _m(_noisy(0.1, 0.02)), bc.Measured(None, None, None, None)).verdict \
        == "failed"
    skipped = judge("x.T.time_fit", (), "time", _m(value=float("nan")), _m(value=float("nan")))
    assert skipped.verdict == "skipped"
    rows = [judge("x.T.time_fit", (), "time", _m(_noisy(0.1, 0.02)), _m(_noisy(0.05, 0.02)))]
    assert rows[0].verdict == "faster" and bc.status(rows) == 0
    assert bc.status(rows + [judge("x.T.track_core_set_size", (), "track", _m(value=5), _m(value=9))]) == 1


def test_benchmark_kinds_follow_asv_types():
    info = {"x.T.peakmem_fit": {"type": "peakmemory"}, "x.T.time_fit": {"type": "time"}}
    assert [bc.kind_of(n, info) for n in ("x.T.peakmem_fit", "x.T.time_fit", "x.T.track_n_support")] == \
        ["memory", "time", "track"]
    assert bc.kind_of("x.T.peakmem_fit", {}) == "memory"  # without benchmarks.json: from the method's name


def test_parameters_sort_as_numbers():
    combos = [("'fast'", "100000"), ("'ref'", "30000"), ("'ref'", "1000"), ("'fast'", "1000000"), ("'ref'", "100000")]
    assert sorted(combos, key=bc.param_key)[:3] == [("'fast'", "100000"), ("'fast'", "1000000"), ("'ref'", "1000")]
    assert [c[1] for c in sorted([c for c in combos if c[0] == "'ref'"], key=bc.param_key)] == ["1000", "30000",
                                                                                                  "100000"]


# ------------------------------------------------------------------------------------------ result files
def _entry(values, params, samples=None):
    """An asv result row: values in the order of the product of params; samples: lists or None per value."""
    n = len(values)
    samples = samples or [None] * n
    q25 = [None if s is None else float(np.percentile(s, 25)) for s in samples]
    q75 = [None if s is None else float(np.percentile(s, 75)) for s in samples]
    rep = [None if s is None else len(s) for s in samples]
    return [values, params, "v", 0, 1.0, [None] * n, [None] * n, q25, q75, [1] * n, rep, samples, None]


def write_results(folder, commit, env, scale=1.0, core=(300, 450, 600), seed=0):
    """A results folder like asv's: machine 'box', benchmarks.json and one result file of ``commit``."""
    mdir = folder / "box"
    mdir.mkdir(parents=True, exist_ok=True)
    (mdir / "machine.json").write_text(json.dumps({"machine": "box", "version": 1}))
    (folder / "benchmarks.json").write_text(json.dumps({
        "cvm.A.time_fit": {"param_names": ["impl", "m"], "type": "time"},
        "cvm.A.track_core_set_size": {"param_names": ["impl", "m"], "type": "track"},
        "cvm.A.track_test_accuracy": {"param_names": ["impl", "m"], "type": "track"},
        "version": 2}))
    params = [["'fast'"], ["1000", "100000", "30000"]]
    rng = np.random.default_rng(seed)
    samples = [list(t * scale * (1 + 0.02 * rng.uniform(-1, 1, 10))) for t in (0.01, 1.0, 0.3)]
    data = {"commit_hash": commit, "env_name": env, "date": 1, "params": {}, "python": "3.11",
            "requirements": {}, "env_vars": {}, "result_columns": COLUMNS, "version": 2, "durations": {},
            "results": {"cvm.A.time_fit": _entry([float(np.median(s)) for s in samples], params, samples),
                        "cvm.A.track_core_set_size": _entry(list(core), params),
                        "cvm.A.track_test_accuracy": _entry([0.97, 0.99, 0.98], params)}}
    path = mdir / f"{commit[:8]}-{env}.json"
    path.write_text(json.dumps(data))
    return path


def _config_dir(tmp_path):
    conf = tmp_path / "asv_benchmarks"
    conf.mkdir()
    (conf / "asv.conf.json").write_text("{}")
    return conf


def test_bench_compare_reads_two_commits_and_says_what_changed(tmp_path, capsys):
    conf = _config_dir(tmp_path)
    results = conf / "results"
    a, b, c = "a" * 40, "b" * 40, "c" * 40
    write_results(results, a, "env1")
    write_results(results, b, "env1", seed=1)
    write_results(results, c, "env1", scale=1.3, core=(300, 500, 600), seed=2)
    argv = ["bench", "--config-dir", str(conf), "compare"]
    assert cli.main(argv + ["aaaaaaaa", "bbbbbbbb"]) == 0
    out = capsys.readouterr().out
    assert "no change beyond noise" in out and "9 compared" in out
    assert cli.main(argv + ["aaaaaaaa", "cccccccc"]) == 1
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith(("slower", "changed"))]
    # m as numbers: 1000, 30000, 100000
    assert [line.split("m=")[1].split(")")[0] for line in lines if line.startswith("slower")] == ["1000", "30000",
                                                                                                   "100000"]
    assert any("track_core_set_size(impl='fast', m=100000)" in line for line in lines)
    assert "CHANGED" in out
    # result files by path; a commit without results is an error of its own status
    assert cli.main(argv + [str(results / "box" / "aaaaaaaa-env1.json"), str(results / "box" / "bbbbbbbb-env1.json")]) == 0
    capsys.readouterr()
    assert cli.main(argv + ["aaaaaaaa", "dddddddd"]) == 2
    assert "no results of dddddddd" in capsys.readouterr().err


def test_bench_compare_takes_one_environment_at_a_time(tmp_path, capsys):
    conf = _config_dir(tmp_path)
    a, b = "a" * 40, "b" * 40
    for env in ("env-one", "env-two"):
        write_results(conf / "results", a, env)
        write_results(conf / "results", b, env, scale=2.0 if env == "env-two" else 1.0, seed=1)
    argv = ["bench", "--config-dir", str(conf), "compare", "aaaaaaaa", "bbbbbbbb"]
    assert cli.main(argv) == 2
    assert "pass --environment" in capsys.readouterr().err
    assert cli.main(argv + ["--environment", "one"]) == 0
    assert cli.main(argv + ["--environment", "two"]) == 1


def test_bench_record_measures_the_checkout_it_names(tmp_path):
    args, rest = bc._record_parser().parse_known_args(["--append", "--bench", "EngineScan"])
    cmd, env = bc.record_command(args, rest, tmp_path, Path("/co"), "f" * 40,
                                 environ={"ASV_PYTHONPATH": "/x", "COREVECTOR_BENCH_SIZES": "full"})
    assert cmd[cmd.index("--set-commit-hash") + 1] == "f" * 40
    assert {"--python=same", "--record-samples", "--append-samples"} <= set(cmd) and cmd[-2:] == ["--bench",
                                                                                                  "EngineScan"]
    assert env["ASV_PYTHONPATH"] == os.pathsep.join(["/co", "/x"]) and "COREVECTOR_BENCH_SIZES" not in env
    args, rest = bc._record_parser().parse_known_args(["--full"])
    assert bc.record_command(args, rest, tmp_path, Path("/co"), "f" * 40, environ={})[1]["COREVECTOR_BENCH_SIZES"] \
        == "full"


# ------------------------------------------------------------------------------------------ the offline page
def _plot_results():
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("plot_results")
    finally:
        sys.path.remove(str(BENCH))


def test_plot_results_series_groups_values_by_m():
    plot_results = _plot_results()
    params = [("'ref'", "1000"), ("'ref'", "10000"), ("'fast'", "1000"), ("'fast'", "10000")]
    res = {"cvm.A.time_fit": dict(zip(params, [_m(value=v) for v in (0.5, None, 0.1, 0.2)])),
           "cvm.A.track_test_accuracy": dict(zip(params, [_m(value=v) for v in (0.9, float("nan"), 0.9, 0.95)])),
           "mmda.Scan.time_furthest": {("50",): _m(value=1e-3)}}
    benchmarks = {"cvm.A.time_fit": {"param_names": ["impl", "m"]},
                  "cvm.A.track_test_accuracy": {"param_names": ["impl", "m"]},
                  "mmda.Scan.time_furthest": {"param_names": ["n_sv"]}}
    data = plot_results.series(res, benchmarks)
    assert data == {"cvm.A": {"time_fit": {"impl=ref": [(1000, 0.5)], "impl=fast": [(1000, 0.1), (10000, 0.2)]},
                              "track_test_accuracy": {"impl=ref": [(1000, 0.9)],
                                                      "impl=fast": [(1000, 0.9), (10000, 0.95)]}}}
    assert plot_results.series(res, benchmarks, pattern="^mmda") == {}


def test_plot_results_overlays_commits_offline(tmp_path):
    plot_results = _plot_results()
    results = tmp_path / "results"
    a, b = "a" * 40, "b" * 40
    for env in ("env-one", "env-two"):
        write_results(results, a, env)
        write_results(results, b, env, scale=1.3, seed=1)
    with pytest.raises(SystemExit, match="pass --environment"):
        plot_results.main(["--results", str(results), "--commits", "aaaaaaaa", "bbbbbbbb", "--out", str(tmp_path / "p")])
    out = tmp_path / "page"
    assert plot_results.main(["--results", str(results), "--commits", "aaaaaaaa", "bbbbbbbb", "--environment", "one",
                              "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert "<img src='cvm.A.png'" in page and "http" not in page.replace("http-equiv", "")
    assert (out / "cvm.A.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "slower" in page and "3 slower" in page
    md = (out / "README.md").read_text()
    assert "![cvm.A](cvm.A.png)" in md
    # the table lists m as numbers, in order
    rows = [line for line in md.splitlines() if "time_fit" in line]
    assert [r.split("m=")[1].split(")")[0] for r in rows] == ["1000", "30000", "100000"]
