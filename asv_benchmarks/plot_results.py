"""Graphs of saved asv results against the training-set size m, on log axes.

    cd asv_benchmarks
    python plot_results.py [--commit HASH] [--machine NAME] [--bench REGEX] [--out DIR]

asv's own pages (``asv publish && asv preview``) plot every benchmark against the commits.  A parameter
can be chosen as the x-axis there (the "x-axis" buttons, or the page address, e.g.
``#cvm.CVMCheckerboard.time_fit?x-axis=m&y-axis-scale=log``), but asv draws a parameter axis on a linear
scale only, which crowds m = 1e3 ... 1e6 into one corner, and no benchmark attribute chooses the axis.
This script reads the results of one commit (default: the most recent one saved) and draws, for every
benchmark class with a parameter ``m``, one PNG with three panels against m, both axes logarithmic
where the quantity spans decades: fit time (``time_fit``), core-set size (``track_core_set_size``, or
``track_n_support`` for the baselines) and test accuracy (``track_test_accuracy``; ``track_test_rmse``
where there is no accuracy), one line per value of the other parameters (the implementation).  It also
prints the numbers.  Results are saved only by ``asv run ... --set-commit-hash HASH`` when asv runs in
the current environment (``--python=same``); see README "Benchmarks (asv)".
"""
from __future__ import annotations

import argparse
import ast
import itertools
import json
import math
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: panel -> (y label, candidate benchmark methods in order of preference, log y axis?)
PANELS = (
    ("fit time (s)", ("time_fit",), True),
    ("core-set size", ("track_core_set_size", "track_n_support"), True),
    ("test accuracy", ("track_test_accuracy", "track_test_rmse"), False),
)


def machine_dir(results_dir: Path, machine: str | None) -> Path:
    """The folder of ``machine``'s results, or of the only machine that has any."""
    if machine is not None:
        path = results_dir / machine
        if not (path / "machine.json").is_file():
            raise SystemExit(f"no results for machine {machine!r} in {results_dir}")
        return path
    found = sorted(p.parent for p in results_dir.glob("*/machine.json"))
    if not found:
        raise SystemExit(f"no saved results in {results_dir}: run `asv run --python=same --set-commit-hash "
                         "$(git rev-parse HEAD) ...` first (see README)")
    if len(found) > 1:
        raise SystemExit(f"results of several machines ({', '.join(p.name for p in found)}): pass --machine")
    return found[0]


def load_results(mdir: Path, commit: str | None):
    """asv Results objects of one commit: ``commit`` (a prefix) or the most recently dated one."""
    from asv.results import Results

    results = [Results.load(str(p), machine_name=mdir.name) for p in sorted(mdir.glob("*.json"))
               if p.name != "machine.json"]
    if not results:
        raise SystemExit(f"no result files in {mdir}")
    if commit is None:
        commit = max(results, key=lambda r: (r.date or 0, max(r.started_at.values(), default=0))).commit_hash
    chosen = [r for r in results if r.commit_hash.startswith(commit)]
    if not chosen:
        raise SystemExit(f"no results for commit {commit} in {mdir}")
    return chosen


def series(results, benchmarks: dict, pattern: str = "") -> dict:
    """{class: {method: {label: [(m, value), ...]}}} for every benchmark with a parameter named 'm'.

    ``benchmarks`` is asv's benchmarks.json (name -> description with ``param_names``); ``label`` names
    the values of the other parameters (e.g. ``impl=fast``).  Missing values (skipped combinations,
    failures) are left out; the points are sorted by m."""
    out: dict = {}
    for result in results:
        for key in result.get_all_result_keys():
            desc = benchmarks.get(key)
            if desc is None or "m" not in desc.get("param_names", ()) or not re.search(pattern, key):
                continue
            cls, method = key.rsplit(".", 1)
            names = desc["param_names"]
            params = result.get_result_params(key)
            values = result.get_result_value(key, params)
            i_m = names.index("m")
            for combo, value in zip(itertools.product(*params), values):
                if value is None or (isinstance(value, float) and math.isnan(value)):
                    continue
                m = ast.literal_eval(combo[i_m])
                label = ", ".join(f"{n}={ast.literal_eval(v)}" for n, v in zip(names, combo) if n != "m")
                out.setdefault(cls, {}).setdefault(method, {}).setdefault(label, []).append((m, float(value)))
    for methods in out.values():
        for lines in methods.values():
            for points in lines.values():
                points.sort()
    return out


def plot_class(name: str, methods: dict, path: Path, commit: str) -> bool:
    """One PNG with the PANELS of class ``name``; False if it has none of their benchmarks."""
    from matplotlib.figure import Figure

    panels = [(label, next(m for m in cands if m in methods), logy) for label, cands, logy in PANELS
              if any(m in methods for m in cands)]
    if not panels:
        return False
    fig = Figure(figsize=(4.6 * len(panels), 3.8))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (label, method, logy) in zip(axes, panels):
        for line, points in methods[method].items():
            ms, vals = zip(*points)
            ax.plot(ms, vals, "o-", label=line or method)
        ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("training-set size m")
        ax.set_ylabel(label if method != "track_test_rmse" else "test RMSE")
        ax.set_title(method, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{name} (asv results of {commit[:8]})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default=str(HERE / "results"), help="asv's results folder")
    p.add_argument("--machine", help="machine name (default: the only one with results)")
    p.add_argument("--commit", help="commit hash or prefix (default: the most recent results)")
    p.add_argument("--bench", default="", help="regular expression the benchmark names must match")
    p.add_argument("--out", help="output folder (default: <results>/plots/<commit>)")
    args = p.parse_args(argv)
    results_dir = Path(args.results)
    mdir = machine_dir(results_dir, args.machine)
    results = load_results(mdir, args.commit)
    commit = results[0].commit_hash
    benchmarks = json.loads((results_dir / "benchmarks.json").read_text())
    data = series(results, benchmarks, args.bench)
    if not data:
        raise SystemExit("no saved benchmark with a parameter 'm' matches")
    out = Path(args.out) if args.out else results_dir / "plots" / commit[:8]
    out.mkdir(parents=True, exist_ok=True)
    for name, methods in sorted(data.items()):
        for method, lines in sorted(methods.items()):
            for line, points in lines.items():
                print(f"{name}.{method} [{line}]: " + ", ".join(f"m={m:g}: {v:.4g}" for m, v in points))
        png = out / f"{name}.png"
        if plot_class(name, methods, png, commit):
            print(f"-> {png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
