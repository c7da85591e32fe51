"""Commits side by side against the training-set size m, from saved asv results, offline.

    cd asv_benchmarks
    python plot_results.py --commits A B [C ...] [--environment ENV] [--out DIR]
    corevector bench plot --commits A B ...          (the same, from anywhere in the checkout)

For every benchmark class with a parameter ``m``, one PNG with three panels against m, both axes
logarithmic where the quantity spans decades: fit time (``time_fit``), core-set size
(``track_core_set_size``, or ``track_n_support`` for the baselines) and test accuracy
(``track_test_accuracy``; ``track_test_rmse`` where there is none); one colour per commit, one marker and
line style per value of the other parameters (the implementation).  m is read as a number and sorted as one.
A commit is a git reference (main, HEAD~1, a hash or its prefix) or a result ``.json`` file; without
``--commits``, the most recent results.  Each commit's results come from one environment: ``--environment``
(a substring of its name) chooses it where there are several, so two environments never mix on one line.

The page ``index.html`` (and ``README.md``, the same in Markdown) shows the figures and, for every commit
after the first, the verdict table of ``corevector bench compare FIRST COMMIT`` (times: ratio of medians and
quartiles; tracks: relative change); it loads nothing from the internet.  asv's own pages (``asv publish``)
load jQuery and flot from CDNs: without internet they show only an error page.
"""
from __future__ import annotations

import argparse
import ast
import html
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load_bench_compare():
    """This checkout's corevector/cli/bench_compare.py (the reading of results and the verdicts), loaded by its
    path: it imports nothing of the package, whose compiled parts need not be built here."""
    spec = importlib.util.spec_from_file_location("_bench_compare", HERE.parent / "corevector" / "cli" /
                                                  "bench_compare.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


bc = _load_bench_compare()

#: panel -> (y label, candidate benchmark methods in order of preference, log y axis?)
PANELS = (
    ("fit CPU time (s)", ("time_fit",), True),
    ("core-set size", ("track_core_set_size", "track_n_support"), True),
    ("test accuracy", ("track_test_accuracy", "track_test_rmse"), False),
)
MARKERS = "os^vDx"
STYLES = ("-", "--", ":", "-.")


def series(result, benchmarks: dict, pattern: str = "") -> dict:
    """{class: {method: {label: [(m, value), ...]}}} of one result ({name: {combo: Measured}}, as
    ``bench_compare.load_result`` reads it) for every benchmark with a parameter named 'm'.

    ``benchmarks`` is asv's benchmarks.json (name -> description with ``param_names``); ``label`` names the
    values of the other parameters (e.g. ``impl=fast``).  Missing values (skipped combinations, failures) are
    left out; the points are sorted by m, as numbers."""
    import re

    out: dict = {}
    for key, per in result.items():
        names = benchmarks.get(key, {}).get("param_names", ())
        if "m" not in names or not re.search(pattern, key):
            continue
        cls, method = key.rsplit(".", 1)
        i_m = names.index("m")
        for combo, measured in per.items():
            value = measured.value
            if bc._missing(value):
                continue
            m = ast.literal_eval(combo[i_m])
            label = ", ".join(f"{n}={ast.literal_eval(v)}" for n, v in zip(names, combo) if n != "m")
            out.setdefault(cls, {}).setdefault(method, {}).setdefault(label, []).append((m, float(value)))
    for methods in out.values():
        for lines in methods.values():
            for points in lines.values():
                points.sort()
    return out


def plot_class(name: str, per_commit: list, path: Path) -> bool:
    """One PNG with the PANELS of class ``name``: ``per_commit`` is [(commit label, {method: {label: points}})];
    False if no commit has any of the panels' benchmarks."""
    from matplotlib.figure import Figure

    methods = {m for _, ms in per_commit for m in ms}
    panels = [(label, next(m for m in cands if m in methods), logy) for label, cands, logy in PANELS
              if any(m in methods for m in cands)]
    if not panels:
        return False
    fig = Figure(figsize=(4.8 * len(panels), 4.0))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    labels = sorted({line for _, ms in per_commit for lines in ms.values() for line in lines})
    for ax, (ylabel, method, logy) in zip(axes, panels):
        for c, (commit, ms) in enumerate(per_commit):
            for line, points in sorted(ms.get(method, {}).items()):
                k = labels.index(line)
                xs, ys = zip(*points)
                # earlier commits drawn wider, so that a later one on top of them leaves them visible
                ax.plot(xs, ys, color=f"C{c}", marker=MARKERS[k % len(MARKERS)], linestyle=STYLES[k % len(STYLES)],
                        linewidth=max(1.0, 2.8 - 0.7 * c), markersize=max(3.0, 8.0 - 2.0 * c),
                        label=f"{commit} {line}".strip())
        ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("training-set size m")
        ax.set_ylabel(ylabel if method != "track_test_rmse" else "test RMSE")
        ax.set_title(method, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(name)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def verdict_tables(results: list, info: dict, pattern: str, factor: float):
    """[(title, verdict rows, only)] of the first commit against each later one."""
    (label_a, _, res_a), out = results[0], []
    for label_b, _, res_b in results[1:]:
        rows, only = bc.compare(res_a, res_b, info, factor, bc.TRACK_TOLERANCE, pattern)
        out.append((f"{label_a} -> {label_b}", rows, only))
    return out


def _html_table(rows, info):
    head = "<tr><th>verdict</th><th>A</th><th>B</th><th>B/A</th><th>spread A/B</th><th>benchmark</th></tr>"
    body = []
    for r in rows:
        if r.verdict == "skipped":
            continue
        cls = "bad" if r.verdict in bc.FLAGGED else "good" if r.verdict in ("faster", "smaller") else ""
        ratio = "" if r.ratio is None else f"{r.ratio:.3f}"
        spreads = f"{bc._pct(r.spread_a)}/{bc._pct(r.spread_b)}" if r.kind == "time" else ""
        body.append(f"<tr class='{cls}'><td>{r.verdict}</td><td>{bc.fmt_value(r.a, r.kind)}</td>"
                    f"<td>{bc.fmt_value(r.b, r.kind)}</td><td>{ratio}</td><td>{spreads}</td>"
                    f"<td>{html.escape(bc.describe(r.name, r.combo, info))}"
                    + (f" <i>{html.escape(r.note)}</i>" if r.note else "") + "</td></tr>")
    return f"<table>{head}{''.join(body)}</table>"


def write_page(out: Path, title: str, figures: list, tables: list, info: dict, caption: str):
    """index.html and README.md in ``out``: the figures (PNG files beside them) and the verdict tables."""
    style = ("body{font-family:sans-serif;max-width:1500px;margin:1em auto}img{max-width:100%}"
             "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}"
             ".bad{background:#fdd}.good{background:#dfd}")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1><p>{html.escape(caption)}</p>"]
    md = [f"# {title}", "", caption, ""]
    for name, png in figures:
        parts.append(f"<h2>{html.escape(name)}</h2><img src='{png.name}' alt='{html.escape(name)}'>")
        md += [f"## {name}", "", f"![{name}]({png.name})", ""]
    for heading, rows, only in tables:
        parts.append(f"<h2>verdicts {html.escape(heading)}</h2><p>{html.escape(bc.summary(rows, only))}</p>")
        parts.append(_html_table(rows, info))
        md += [f"## verdicts {heading}", "", bc.summary(rows, only), "", "```"]
        md += bc.format_rows(rows, info, every=True) + ["```", ""]
    parts.append("</body></html>")
    (out / "index.html").write_text("\n".join(parts))
    (out / "README.md").write_text("\n".join(md))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default=str(HERE / "results"), help="asv's results folder")
    p.add_argument("--machine", help="machine name (default: the only one with results)")
    p.add_argument("--commits", nargs="+", help="commits (git references, hash prefixes) or result .json files; "
                                                "the first is the base of the verdict tables (default: the latest)")
    p.add_argument("--commit", help=argparse.SUPPRESS)  # the former single-commit option
    p.add_argument("--environment", help="the environment (a substring of its name) when there are several")
    p.add_argument("--bench", default="", help="regular expression the benchmark names must match")
    p.add_argument("--factor", type=float, default=bc.FACTOR, help="the verdicts' threshold (bench compare's)")
    p.add_argument("--out", help="output folder (default: <results>/plots/<commits>)")
    args = p.parse_args(argv)
    results_dir = Path(args.results)
    try:
        commits = args.commits or ([args.commit] if args.commit else [latest_commit(results_dir, args.machine)])
        files = [bc.result_file(results_dir, c, args.machine, args.environment, HERE.parent) for c in commits]
    except bc.BenchError as exc:
        raise SystemExit(f"plot_results: {exc}") from None
    info = bc.benchmark_info(results_dir)
    loaded = []
    for path in files:
        meta, res = bc.load_result(path)
        loaded.append((str(meta["commit_hash"])[:8], meta, res))
    if len({label for label, _, _ in loaded}) < len(loaded):  # one commit's results twice: name them by file
        loaded = [(Path(path).stem, meta, res) for path, (_, meta, res) in zip(files, loaded)]
    per_class: dict = {}
    for label, _, res in loaded:
        for cls, methods in series(res, info, args.bench).items():
            per_class.setdefault(cls, []).append((label, methods))
    if not per_class:
        raise SystemExit("plot_results: no saved benchmark with a parameter 'm' matches")
    out = Path(args.out) if args.out else results_dir / "plots" / "_".join(label for label, _, _ in loaded)
    out.mkdir(parents=True, exist_ok=True)
    figures = []
    for name, per_commit in sorted(per_class.items()):
        png = out / f"{name}.png"
        if plot_class(name, per_commit, png):
            figures.append((name, png))
    envs = sorted({str(meta["env_name"]) for _, meta, _ in loaded})
    caption = (f"asv results of {', '.join(label for label, _, _ in loaded)} (environment {', '.join(envs)}), "
               "against the training-set size m on log axes; times are CPU seconds of one thread.")
    write_page(out, "corevector benchmarks: " + " vs ".join(label for label, _, _ in loaded), figures,
               verdict_tables(loaded, info, args.bench, args.factor), info, caption)
    print(f"-> {out / 'index.html'}", file=sys.stderr)
    return 0


def latest_commit(results_dir: Path, machine=None) -> str:
    """The commit of the most recently dated result file."""
    import json

    mdir = bc.machine_dir(results_dir, machine)
    best = None
    for path in mdir.glob("*.json"):
        if path.name == "machine.json":
            continue
        data = json.loads(path.read_text())
        key = (data.get("date") or 0, path.stat().st_mtime)
        if best is None or key > best[0]:
            best = (key, data["commit_hash"])
    if best is None:
        raise bc.BenchError(f"no result files in {mdir}")
    return best[1]


if __name__ == "__main__":
    sys.exit(main())
