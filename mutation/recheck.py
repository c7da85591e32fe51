"""Replay the surviving mutants of a finished (or running) session against the current tests.

    python mutation/recheck.py MODULE [--tests "PYTEST ARGS"] [--job JOB_ID ...] [--timeout S] [--commit REV]

For every mutant that survived in mutation/out/MODULE.sqlite (or only the given jobs), this applies it
to a scratch copy of the session's commit (mutation/out/MODULE.commit) in which tests/ is replaced by the
working tree's tests/ (so a test written since the run is used), runs the tests, and prints one line per
mutant: killed or survived, with the first failing test.  The test command is the session file's, or
``python -m pytest -x -q -p no:cacheprovider ARGS`` with --tests.  Run it after writing a test that
should kill a survivor, before moving the survivor to "killed by a later test" in SURVIVORS.md.
With --commit the mutants are applied to that commit instead (e.g. HEAD, whose other modules match the
compiled extensions of the working tree); it is refused unless the module's file there is the session's,
so every mutant is the one the session recorded.
"""
import argparse
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from cosmic_ray.mutating import use_mutation
from cosmic_ray.plugins import get_operator

ROOT = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module")
    ap.add_argument("--tests", help="pytest arguments replacing the session file's test command")
    ap.add_argument("--job", action="append", help="only this job id or its prefix (repeatable)")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--commit", help="apply the mutants to this commit (default: the session's)")
    args = ap.parse_args()
    out = ROOT / "mutation" / "out"
    commit = (out / f"{args.module}.commit").read_text().strip()
    cfg = tomllib.loads((ROOT / "mutation" / f"{args.module}.toml").read_text())["cosmic-ray"]
    if args.commit:
        same = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", commit, args.commit, "--",
                               cfg["module-path"]]).returncode == 0
        if not same:
            sys.exit(f"recheck: {cfg['module-path']} differs between the session's {commit[:8]} and {args.commit}")
        commit = args.commit
    command = (f"python -m pytest -x -q -p no:cacheprovider -p no:randomly {args.tests}" if args.tests
               else cfg["test-command"])
    db = sqlite3.connect(out / f"{args.module}.sqlite")
    rows = db.execute("select m.job_id, m.module_path, m.operator_name, m.operator_args, m.occurrence, "
                      "m.start_pos_row from mutation_specs m join work_results r on m.job_id = r.job_id "
                      "where r.test_outcome = 'SURVIVED' order by m.start_pos_row, m.operator_name").fetchall()
    if args.job:
        rows = [r for r in rows if any(r[0].startswith(j) for j in args.job)]
    work = Path(tempfile.mkdtemp(prefix=f"corevector-recheck-{args.module}."))
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-C", str(work), "-xf", "-"], input=archive, check=True)
        for so in (ROOT / "fastimpl").glob("*.so"):
            shutil.copy2(so, work / "fastimpl")
        shutil.rmtree(work / "tests")
        shutil.copytree(ROOT / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"))
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
        os.chdir(work)
        killed = 0
        for job, path, op, op_args, occ, row in rows:
            args_ = json.loads(op_args) if op_args else {}
            while isinstance(args_, str):   # cosmic-ray stores the JSON of a JSON string
                args_ = json.loads(args_)
            operator = get_operator(op)(**(args_ or {}))
            with use_mutation(Path(path), operator, occ) as (_, mutated):
                if mutated is None:
                    print(f"{job[:8]} l.{row} {op} {occ}: no mutation (source changed?)")
                    continue
                try:
                    proc = subprocess.run(shlex.split(command), env=env, capture_output=True, text=True,
                                          timeout=args.timeout)
                    ok, tail = proc.returncode == 0, proc.stdout.strip().splitlines()
                except subprocess.TimeoutExpired:
                    ok, tail = False, ["timeout"]
            failed = next((t for t in tail if t.startswith("FAILED") or t.startswith("ERROR")), tail[-1] if tail else "")
            killed += not ok
            print(f"{job[:8]} l.{row} {op} {occ}: {'survived' if ok else 'KILLED'}  {'' if ok else failed[:150]}",
                  flush=True)
        print(f"{killed} of {len(rows)} killed")
    finally:
        os.chdir(ROOT)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
