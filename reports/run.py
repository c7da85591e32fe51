"""Regenerate the experiment report from scratch.

    python -m reports.run [--quick] [--out DIR] [--only NAME ...]

Writes every experiment's outputs (CSV, markdown, figures as PNG, PDF and SVG) and ``REPORT.md`` (opening with the
papers' claims beside ours) into DIR (default
``reports/output/``, git-ignored).  Experiments are registered with
:func:`reports.common.experiment`; to add one, write the function in a module and list the
module ``reports/<name>.py``: every module of the package is imported (the ones in
``EXPERIMENT_MODULES`` first, in that order, then the rest alphabetically).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import os
import shlex
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reports.common import MODES, REGISTRY, Context, machine_info  # noqa: E402

#: modules whose import registers experiments (in report order)
EXPERIMENT_MODULES = ["reports.checkerboard", "reports.ratios"]
#: modules of the package that hold no experiments
_NOT_EXPERIMENTS = {"reports.common", "reports.run", "reports.__init__", "reports.style", "reports.paper"}
DEFAULT_OUT = Path(__file__).resolve().parent / "output"
#: fresh processes per timing in the quick and tiny modes (the full mode: common.REPEATS)
QUICK_REPEATS = 1


def experiment_modules():
    here = Path(__file__).resolve().parent
    found = sorted(f"reports.{p.stem}" for p in here.glob("*.py"))
    rest = [m for m in found if m not in EXPERIMENT_MODULES and m not in _NOT_EXPERIMENTS]
    return EXPERIMENT_MODULES + rest


def load_experiments():
    for mod in experiment_modules():
        importlib.import_module(mod)
    return REGISTRY


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m reports.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="smaller sizes, one fresh process per timing: every figure, in minutes (see README)")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # for the test suite
    p.add_argument("--out", default=str(DEFAULT_OUT), help="output folder (default reports/output)")
    p.add_argument("--only", nargs="+", action="extend", metavar="NAME", help="run only these experiments")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    mode = "tiny" if args.tiny else ("quick" if args.quick else "full")
    assert mode in MODES
    registry = load_experiments()
    names = args.only or list(registry)
    unknown = [n for n in names if n not in registry]
    if unknown:
        print(f"reports.run: unknown experiment(s) {unknown}; available: {list(registry)}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now().astimezone()
    t_start = time.perf_counter()
    from reports import common
    # the quick mode (a first look) and the tiny one (the test suite's smoke run) time every fit once;
    # the full mode takes the median of common.REPEATS fresh processes
    common.MODE_REPEATS = QUICK_REPEATS if mode in ("tiny", "quick") else None
    usage = {}
    try:
        sections = _run_experiments(registry, names, mode, out, args, usage)
    finally:
        common.MODE_REPEATS = None
    total = time.perf_counter() - t_start
    command = "python -m reports.run " + " ".join(shlex.quote(a) for a in argv)
    write_report(out, sections, mode, started, total, command.strip(), usage)
    print(f"report written to {out / 'REPORT.md'} in {total:.0f} s", file=sys.stderr)
    return 0


def tree_cpu():
    """CPU seconds (user + system) of this process and its descendants, the ones still running and the ones
    that have ended: the measured fits are children of the fork server (grandchildren of this process), the
    ``--one`` measurements children of this one and their workers grandchildren.  Linux: read from /proc
    (utime + stime + cutime + cstime of this process and every live descendant); elsewhere this process and
    its ended children."""
    try:
        tck = os.sysconf("SC_CLK_TCK")
        procs = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:  # ended meanwhile
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            procs[int(entry)] = (int(fields[1]), sum(int(v) for v in fields[11:15]))
        me, total = os.getpid(), 0
        for pid, (_, ticks) in procs.items():
            p = pid
            while p in procs and p != me and p > 1:
                p = procs[p][0]
            if p == me:
                total += ticks
        if me in procs:
            return total / tck
    except (OSError, ValueError, AttributeError):
        pass
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + r.ru_utime + r.ru_stime


def _loadavg():
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def _run_experiments(registry, names, mode, out, args, usage=None):
    """Runs the experiments; returns (experiment, result, wall seconds) per experiment, and fills ``usage``
    (name -> (CPU seconds of the process tree, 1-minute load at the start, at the end)) when given."""
    sections = []
    for name in names:
        exp = registry[name]
        sizes = exp.sizes.get(mode, [])
        ctx = Context(out=out, mode=mode, sizes=list(sizes), seed=args.seed, progress=not args.no_progress)
        print(f"== {name}: {exp.title} ({mode})", file=sys.stderr)
        load0, cpu0, t0 = _loadavg(), tree_cpu(), time.perf_counter()
        result = exp.func(ctx)
        elapsed = time.perf_counter() - t0
        cpu = tree_cpu() - cpu0
        if usage is not None:
            usage[name] = (cpu, load0, _loadavg())
        print(f"== {name}: {elapsed:.1f} s, {cpu:.1f} CPU s, load {load0:.2f} -> {_loadavg():.2f}", file=sys.stderr)
        missing = [f for f in result.outputs if not (out / f).exists()]
        if missing:
            raise RuntimeError(f"experiment {name} did not write {missing}")
        sections.append((exp, result, elapsed))
    return sections


HOLDS = {True: "yes", False: "**no**", None: "not at this scale"}


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def summary_table(sections):
    """REPORT.md's opening table: per experiment, each headline claim of the papers it re-measures, what we
    measured and whether the claim holds (``ExperimentResult.headline``); [] when no experiment has one."""
    rows = [(exp, h) for exp, result, _ in sections for h in (result.headline or [])]
    if not rows:
        return []
    lines = ["## Summary: the papers' claims, re-measured", "",
             "| experiment | the paper's claim | ours | holds |", "|---|---|---|---|"]
    lines += [f"| [{exp.name}](#{exp.name}) | {_cell(h['claim'])} | {_cell(h['ours'])} | {HOLDS[h.get('holds')]} |"
              for exp, h in rows]
    return lines + [""]


def write_report(out, sections, mode, started, total, command, usage=None):
    """REPORT.md; ``usage``: name -> (CPU seconds, load at the start, at the end) of each experiment (a header
    line: on a shared machine the wall times alone say little)."""
    info = machine_info()
    lines = ["# corevector experiment report", ""] + summary_table(sections) + [
        f"- date: {started.isoformat(timespec='seconds')}",
        f"- command: `{command}` (mode: {mode}; total {total:.1f} s)",
        f"- machine: {info['platform']}, {info['cpu']}, {info['cpu_count']} CPUs"
        + (f" ({info['usable_cpus']} usable)" if info.get("usable_cpus") else "")
        + f", Python {info['python']}",
        f"- packages: numpy {info['numpy']}, scipy {info['scipy']}, scikit-learn {info['scikit-learn']}, "
        f"corevector {info['corevector']}",
        f"- OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}",
        f"- timings: {'one fresh process per fit' if mode != 'full' else 'median of several fresh processes'}"
        + (" (quick mode: a first look; the full mode repeats every fit)" if mode == "quick" else ""),
    ]
    if usage:
        lines.append("- CPU seconds per experiment (this process and every process it started, the measured fits "
                     "included; 1-minute load at its start and end): "
                     + "; ".join(f"{name} {cpu:.1f} (load {l0:.1f}–{l1:.1f})"
                                 for name, (cpu, l0, l1) in usage.items()))
    lines += [
        "",
        "## Contents",
        "",
    ]
    for exp, result, elapsed in sections:
        lines.append(f"- [{exp.title}](#{exp.name}) ({elapsed:.1f} s): "
                     + ", ".join(f"[{f}]({f})" for f in result.outputs))
    for exp, result, _ in sections:
        lines += ["", f'<a id="{exp.name}"></a>', f"## {exp.title}", ""]
        for f in result.outputs:
            if f.endswith(".png"):
                vector = [v for v in (f[:-4] + ".pdf", f[:-4] + ".svg") if v in result.outputs]
                lines += [f"![{f}]({f})", ""]
                if vector:
                    lines += ["Vector: " + ", ".join(f"[{v}]({v})" for v in vector), ""]
        lines += [result.summary_md, ""]
        if result.notes and result.notes not in result.summary_md:
            lines += ["Notes:" + result.notes, ""]
    (Path(out) / "REPORT.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
