"""``corevector bench compare|record|plot``: a regression verdict between two commits' saved asv results, the
recording of a checkout's results, and the offline page of commits side by side against m.

``compare A B``
    Reads the saved results of two commits (a commit, a git reference, or a result ``.json`` file each) from
    the asv results folder, one environment at a time, and judges every benchmark and parameter set:

    * ``time_*``: ``slower`` when the median of B's samples is at least ``factor`` times A's and B's lower
      quartile lies above A's upper quartile (``faster``: the mirror image).  A side without repeated samples
      (asv's ``--quick``) gives no verdict: one sample is not a measurement of noise;
    * ``peakmem_*`` / ``mem_*``: ``larger`` / ``smaller`` by the same factor (one value per run);
    * ``track_*`` (core-set size, accuracy, R^2, RMSE, certified ratio; deterministic): ``changed`` when the
      values differ by more than ``track_tolerance`` of the larger one;
    * ``failed``: a value in A and a failure in B.

    The status is 1 when anything is slower, larger, changed or failed, 0 otherwise (faster and smaller are
    reported), 2 when the results cannot be read.
``record [--checkout DIR] [--full] [--append] [ASV ARGS]``
    ``asv run --python=same`` of the checkout DIR (default: this one) with its code on ``ASV_PYTHONPATH``,
    the results saved against DIR's HEAD with every sample (``--record-samples``; ``--append`` adds them to
    the saved ones), into this checkout's results folder; ``--full`` sets ``COREVECTOR_BENCH_SIZES=full``.
``plot ARGS``
    ``asv_benchmarks/plot_results.py ARGS`` (``--commits A B ... --environment ENV``).
"""
from __future__ import annotations

import argparse
import ast
import json
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TOOLS = ("compare", "record", "plot")
#: a time's ratio of medians that counts as a change (when the quartiles do not overlap either).  Measured on a
#: shared 2-core machine at load 6-9 (docs/benchmarks.md): the same code's benchmarks moved by up to 1.22x from
#: one record to the next, a planted 25% slowdown of the engine's scan showed as 1.16-1.41x
FACTOR = 1.25
#: relative difference of a track (core-set size, accuracy, ...) that counts as a change
TRACK_TOLERANCE = 0.01
#: verdicts that make the status 1
FLAGGED = ("slower", "larger", "changed", "failed")


class BenchError(ValueError):
    """Results that cannot be read, a checkout that cannot be benchmarked: one line on stderr.  (This module
    imports nothing of the package, so that ``asv_benchmarks/plot_results.py`` loads it by its path, from the
    checkout it lies in, whatever corevector the interpreter would import.)"""


# --------------------------------------------------------------------------------------------- results
def machine_dir(results_dir, machine=None):
    """The folder of ``machine``'s results, or of the only machine that has any."""
    results_dir = Path(results_dir)
    if machine is not None:
        if not (results_dir / machine / "machine.json").is_file():
            raise BenchError(f"no results of machine {machine!r} in {results_dir}")
        return results_dir / machine
    found = sorted(p.parent for p in results_dir.glob("*/machine.json"))
    if not found:
        raise BenchError(f"no saved results in {results_dir}: record some first ('corevector bench record')")
    if len(found) > 1:
        raise BenchError(f"results of several machines ({', '.join(p.name for p in found)}): pass --machine")
    return found[0]


def resolve_commit(root, ref):
    """The commit hash git gives ``ref`` in ``root`` (a branch, HEAD~1, a hash prefix), or ``ref`` itself."""
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ref
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else ref


def env_names(mdir, commit):
    """{environment name: result file} of the results saved for ``commit`` (a hash or its prefix)."""
    out = {}
    for path in sorted(Path(mdir).glob(f"{commit[:8]}-*.json")):
        with open(path) as f:
            data = json.load(f)
        if str(data.get("commit_hash", "")).startswith(commit):
            out[data.get("env_name", path.stem.split("-", 1)[1])] = path
    return out


def result_file(results_dir, which, machine=None, environment=None, root=None):
    """The result file of ``which``: a path to a .json file, or a commit (git reference or hash prefix) whose
    results exist for one environment (or for ``environment``, a substring of its name)."""
    if which.endswith(".json") and Path(which).is_file():
        return Path(which)
    mdir = machine_dir(results_dir, machine)
    commit = resolve_commit(root or Path(results_dir).resolve().parent.parent, which)
    envs = env_names(mdir, commit)
    if environment is not None:
        envs = {k: v for k, v in envs.items() if environment in k}
    if not envs:
        raise BenchError(f"no results of {which} ({commit[:12]}) in {mdir}"
                       + (f" for an environment matching {environment!r}" if environment else ""))
    if len(envs) > 1:
        raise BenchError(f"results of {which} in {len(envs)} environments ({', '.join(sorted(envs))}): "
                       "pass --environment")
    return next(iter(envs.values()))


@dataclass
class Measured:
    """One benchmark at one parameter set in one result file."""
    value: float | None       # asv's result (the median of the samples); None: failed, nan: skipped
    samples: list | None      # every sample (runs with --record-samples)
    q25: float | None
    q75: float | None
    repeat: int = 0           # asv's count of samples (its quartiles of one sample are that sample)


def _num(v):
    return None if v is None else float(v)


def load_result(path):
    """(meta, {benchmark: {parameter values (repr strings): Measured}}) of an asv result file."""
    with open(path) as f:
        data = json.load(f)
    cols = data.get("result_columns", ["result", "params"])
    out = {}
    for name, row in data.get("results", {}).items():
        r = dict(zip(cols, row))
        params = r.get("params") or []
        combos = _product(params)
        values = r.get("result")
        values = values if isinstance(values, list) else [values]
        per = {}
        for i, combo in enumerate(combos):
            def col(key):
                v = r.get(key)
                return v[i] if isinstance(v, list) and i < len(v) else None
            samples = col("samples")
            per[combo] = Measured(_num(values[i]) if i < len(values) else None,
                                  [float(s) for s in samples] if samples else None,
                                  _num(col("stats_q_25")), _num(col("stats_q_75")), int(col("stats_repeat") or 0))
        out[name] = per
    meta = {k: data.get(k) for k in ("commit_hash", "env_name", "date")}
    return meta, out


def _product(params):
    combos = [()]
    for values in params:
        combos = [c + (v,) for c in combos for v in values]
    return combos


def benchmark_info(results_dir):
    """asv's benchmarks.json of the results folder ({name: description}), or {} where there is none."""
    path = Path(results_dir) / "benchmarks.json"
    if not path.is_file():
        return {}
    with open(path) as f:
        data = json.load(f)
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def param_key(combo):
    """Sort key of a parameter set: numbers as numbers (m = 1000 < 30000 < 100000), strings as written."""
    key = []
    for text in combo:
        try:
            v = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            v = text
        key.append((0, float(v), "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0.0, str(v)))
    return tuple(key)


def describe(name, combo, info):
    """``module.Class.method(impl='fast', m=1000)``."""
    if not combo:
        return name
    names = info.get(name, {}).get("param_names") or [f"p{i}" for i in range(len(combo))]
    return f"{name}({', '.join(f'{n}={v}' for n, v in zip(names, combo))})"


# --------------------------------------------------------------------------------------------- verdicts
def kind_of(name, info):
    """'time', 'memory' or 'track' (from benchmarks.json's type, else from the method's name)."""
    kind = info.get(name, {}).get("type") or name.rsplit(".", 1)[-1].split("_", 1)[0]
    return {"time": "time", "peakmemory": "memory", "peakmem": "memory", "memory": "memory", "mem": "memory"}.get(
        kind, "track")


def center_and_quartiles(m):
    """(median, lower quartile, upper quartile) of a time: from its samples, else asv's statistics
    (quartiles None with fewer than two samples)."""
    if m.samples and len(m.samples) >= 2:
        s = sorted(m.samples)
        return _quantile(s, 0.5), _quantile(s, 0.25), _quantile(s, 0.75)
    if m.samples or m.repeat < 2:
        return (m.samples[0] if m.samples else m.value), None, None
    return m.value, m.q25, m.q75


def _quantile(s, q):
    """The q-quantile of the sorted list s (linear interpolation, as numpy's default)."""
    pos = q * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def spread(m):
    """(upper - lower quartile) / median of a time, or None without quartiles."""
    c, lo, hi = center_and_quartiles(m)
    if c is None or lo is None or hi is None or not c > 0:
        return None
    return (hi - lo) / c


def _missing(v):
    return v is None or (isinstance(v, float) and math.isnan(v))


@dataclass
class Verdict:
    name: str
    combo: tuple
    kind: str
    verdict: str       # slower faster same unsure larger smaller changed failed skipped
    a: float | None
    b: float | None
    ratio: float | None
    spread_a: float | None = None
    spread_b: float | None = None
    note: str = ""


def judge(name, combo, kind, a, b, factor=FACTOR, track_tolerance=TRACK_TOLERANCE):
    """The Verdict of one benchmark at one parameter set: A's and B's Measured (module docstring)."""
    if kind == "time":
        (ca, la, ha), (cb, lb, hb) = center_and_quartiles(a), center_and_quartiles(b)
    else:
        (ca, la, ha), (cb, lb, hb) = (a.value, None, None), (b.value, None, None)
    v = Verdict(name, combo, kind, "same", ca, cb, None)
    if _missing(ca) or _missing(cb):
        v.verdict = "failed" if not _missing(ca) and b.value is None else "skipped"
        return v
    v.ratio = cb / ca if ca else (1.0 if cb == ca else math.inf)
    if kind == "track":
        if abs(cb - ca) > track_tolerance * max(abs(ca), abs(cb)):
            v.verdict = "changed"
        return v
    if kind == "memory":
        v.verdict = "larger" if v.ratio >= factor else "smaller" if v.ratio <= 1 / factor else "same"
        return v
    v.spread_a, v.spread_b = spread(a), spread(b)
    if la is None or lb is None:
        v.verdict, v.note = "unsure", "one sample: no verdict (run without --quick)"
        return v
    if v.ratio >= factor and lb > ha:
        v.verdict = "slower"
    elif v.ratio <= 1 / factor and hb < la:
        v.verdict = "faster"
    if max(v.spread_a or 0, v.spread_b or 0) > (factor - 1) / 2:
        v.note = "noisy: spread above half the threshold"
    return v


def compare(res_a, res_b, info=None, factor=FACTOR, track_tolerance=TRACK_TOLERANCE, pattern=""):
    """Verdicts of every benchmark and parameter set both results have (matching ``pattern``), sorted by name
    and parameters (numbers as numbers); and the names found in one result only."""
    info = info or {}
    rows, only = [], []
    for name in sorted(set(res_a) | set(res_b)):
        if not re.search(pattern, name):
            continue
        if name not in res_a or name not in res_b:
            only.append(name)
            continue
        kind = kind_of(name, info)
        for combo in sorted(set(res_a[name]) & set(res_b[name]), key=param_key):
            rows.append(judge(name, combo, kind, res_a[name][combo], res_b[name][combo], factor, track_tolerance))
    return rows, only


def status(rows):
    """1 when any verdict is in FLAGGED, else 0."""
    return 1 if any(r.verdict in FLAGGED for r in rows) else 0


# --------------------------------------------------------------------------------------------- output
def fmt_value(v, kind):
    if _missing(v):
        return "n/a" if v is not None else "failed"
    if kind == "time":
        for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
            if abs(v) >= scale or unit == "us":
                return f"{v / scale:.3g}{unit}"
    if kind == "memory":
        return f"{v / 2**20:.0f}MB"
    return f"{v:.6g}"


def _pct(s):
    return "" if s is None else f"{100 * s:.0f}%"


def format_rows(rows, info=None, every=False):
    """The table of verdicts (those flagged, faster, smaller, unsure or noisy; with ``every``, all but the
    skipped ones)."""
    info = info or {}
    shown = [r for r in rows if r.verdict != "skipped" and (every or r.verdict != "same" or r.note)]
    lines = [f"{'verdict':8} {'A':>9} {'B':>9} {'B/A':>6} {'spread A/B':>11}  benchmark"]
    for r in shown:
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}"
        spreads = "" if r.kind != "time" else f"{_pct(r.spread_a)}/{_pct(r.spread_b)}"
        lines.append(f"{r.verdict:8} {fmt_value(r.a, r.kind):>9} {fmt_value(r.b, r.kind):>9} {ratio:>6} "
                     f"{spreads:>11}  {describe(r.name, r.combo, info)}" + (f"  [{r.note}]" if r.note else ""))
    return lines


def summary(rows, only=()):
    counts = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    noisy = sum(1 for r in rows if r.note.startswith("noisy"))
    parts = [f"{counts.get(k, 0)} {k}" for k in ("slower", "faster", "larger", "smaller", "changed", "failed")]
    text = f"{len(rows)} compared: " + ", ".join(parts)
    text += f"; {counts.get('unsure', 0)} without repeated samples, {counts.get('skipped', 0)} skipped"
    text += f", {noisy} noisy"
    if only:
        text += f"; {len(only)} benchmark(s) in one result only"
    return text


def _compare_parser():
    p = argparse.ArgumentParser(prog="corevector bench compare",
                                description="The regression verdict between two commits' saved asv results.")
    p.add_argument("a", help="the base: a commit, a git reference (main, HEAD~1) or a result .json file")
    p.add_argument("b", help="the one judged against it (as A)")
    p.add_argument("--factor", type=float, default=FACTOR,
                   help=f"ratio of medians (times, memory) that counts as a change (default {FACTOR})")
    p.add_argument("--track-tolerance", type=float, default=TRACK_TOLERANCE,
                   help=f"relative difference of a track that counts as a change (default {TRACK_TOLERANCE})")
    p.add_argument("--environment", help="the environment (a substring of its name) when there are several")
    p.add_argument("--machine", help="asv machine name (default: the only one with results)")
    p.add_argument("--bench", default="", help="regular expression the benchmark names must match")
    p.add_argument("--results", help="asv's results folder (default asv_benchmarks/results)")
    p.add_argument("--all", action="store_true", help="every row, not only those with something to say")
    return p


def cmd_compare(argv, bench_dir):
    args = _compare_parser().parse_args(argv)
    if not args.factor > 1.0:
        raise BenchError(f"--factor must be above 1, got {args.factor}")
    results = Path(args.results) if args.results else Path(bench_dir) / "results"
    root = Path(bench_dir).resolve().parent
    paths = [result_file(results, w, args.machine, args.environment, root) for w in (args.a, args.b)]
    (meta_a, res_a), (meta_b, res_b) = load_result(paths[0]), load_result(paths[1])
    info = benchmark_info(results)
    rows, only = compare(res_a, res_b, info, args.factor, args.track_tolerance, args.bench)
    print(f"A: {str(meta_a['commit_hash'])[:12]} ({meta_a['env_name']}, {paths[0]})")
    print(f"B: {str(meta_b['commit_hash'])[:12]} ({meta_b['env_name']}, {paths[1]})")
    print(f"times: slower/faster when B/A of the medians passes {args.factor:g} and the quartiles do not overlap; "
          f"tracks: changed beyond {100 * args.track_tolerance:g}%")
    for line in format_rows(rows, info, args.all):
        print(line)
    print(summary(rows, only))
    code = status(rows)
    print("verdict: " + ("CHANGED (status 1): " + ", ".join(sorted({r.verdict for r in rows if r.verdict in FLAGGED}))
                         if code else "no change beyond noise (status 0)"))
    return code


# --------------------------------------------------------------------------------------------- record, plot
def _record_parser():
    p = argparse.ArgumentParser(prog="corevector bench record", allow_abbrev=False,
                                description="Benchmark a checkout in this interpreter and save the results against "
                                            "its HEAD, every sample kept; other arguments go to 'asv run'.")
    p.add_argument("--checkout", help="the checkout whose code is measured, its extensions built in place (default: "
                                      "this one); the suite and the results folder are this checkout's")
    p.add_argument("--full", action="store_true", help="the larger sizes too (COREVECTOR_BENCH_SIZES=full)")
    p.add_argument("--append", action="store_true",
                   help="add the samples to those saved for the commit (asv's --append-samples): alternate two "
                        "checkouts' runs so that both see the same load")
    return p


def _head(root):
    """(HEAD's commit hash, uncommitted changes?) of the git checkout ``root``, or (None, False)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=60)
        st = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None, False
    return (out.stdout.strip() or None) if out.returncode == 0 else None, bool(st.stdout.strip())


def record_command(args, rest, bench_dir, checkout, commit, environ=None):
    """(the asv command line, its environment) of ``bench record``."""
    exe = shutil.which("asv")
    cmd = ([exe] if exe else [sys.executable, "-m", "asv"]) + [
        "run", "--python=same", "--launch-method", "forkserver", "--set-commit-hash", commit, "--record-samples"]
    if args.append:
        cmd.append("--append-samples")
    env = dict(os.environ if environ is None else environ)
    env["ASV_PYTHONPATH"] = os.pathsep.join([str(checkout)] + ([env["ASV_PYTHONPATH"]] if env.get("ASV_PYTHONPATH")
                                                                else []))
    env.pop("COREVECTOR_BENCH_SIZES", None)
    if args.full:
        env["COREVECTOR_BENCH_SIZES"] = "full"
    return cmd + list(rest), env


def cmd_record(argv, bench_dir):
    args, rest = _record_parser().parse_known_args(argv)
    checkout = Path(args.checkout).resolve() if args.checkout else Path(bench_dir).resolve().parent
    commit, dirty = _head(checkout)
    if commit is None:
        raise BenchError(f"{checkout} is not a git checkout: its results could not be saved against a commit")
    probe = subprocess.run([sys.executable, "-c", "import corevector, fastimpl._engine; print(corevector.__file__)"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(checkout)})
    if probe.returncode != 0 or not Path(probe.stdout.strip()).resolve().is_relative_to(checkout):
        raise BenchError(f"{checkout}'s code does not import from there (build its extensions: cd {checkout} && "
                       f"{Path(sys.executable).name} setup.py build_ext --inplace)")
    cmd, env = record_command(args, rest, bench_dir, checkout, commit)
    if not Path("~/.asv-machine.json").expanduser().is_file():
        subprocess.call(cmd[:cmd.index("run")] + ["machine", "--yes"], cwd=bench_dir, env=env)
    note = ", with uncommitted changes: the results measure the working tree" if dirty else ""
    print(f"corevector bench record: {checkout} (HEAD {commit[:12]}{note}), results saved against {commit[:12]} "
          f"in {Path(bench_dir) / 'results'} (asv's log header may name another commit)", file=sys.stderr)
    print("+ " + " ".join(cmd), file=sys.stderr)
    try:
        return subprocess.call(cmd, cwd=bench_dir, env=env)
    except FileNotFoundError:
        raise BenchError("asv is not installed (pip install asv)") from None


def cmd_plot(argv, bench_dir):
    script = Path(bench_dir) / "plot_results.py"
    if not script.is_file():
        raise BenchError(f"no plot_results.py in {bench_dir}")
    return subprocess.call([sys.executable, str(script), *argv], cwd=bench_dir)


def run_tool(argv, bench_dir):
    """``corevector bench compare|record|plot ARGS`` (argv[0] one of TOOLS); compare's errors give status 2."""
    tool, rest = argv[0], list(argv[1:])
    if tool == "compare":
        try:
            return cmd_compare(rest, bench_dir)
        except BenchError as exc:
            print(f"corevector bench compare: error: {exc}", file=sys.stderr)
            return 2
    return {"record": cmd_record, "plot": cmd_plot}[tool](rest, bench_dir)
