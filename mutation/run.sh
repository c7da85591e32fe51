#!/usr/bin/env bash
# Mutation testing of refimpl's formulation modules with cosmic-ray (see mutation/README.md).
#
#   bash mutation/run.sh [MODULE ...]      default: problem cvm cvr sor (refimpl/MODULE.py)
#
# cosmic-ray edits the module in place for every mutant, so each module runs in its own scratch
# copy of the working tree (with its compiled extensions; without .git, .venv and caches), never
# in the working tree itself.  For each module it checks that the selected tests pass unmutated (baseline),
# runs every mutant under nice, and writes mutation/out/MODULE.sqlite and MODULE.txt (the
# surviving mutants with their diffs).  Needs the venv of `bash run.sh test` with cosmic-ray
# installed (pip install -e ".[test]").  Environment: PYTHON (default .venv/bin/python), JOBS
# (modules run in parallel, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN=$(dirname "$PY")
OUT=$ROOT/mutation/out
JOBS=${JOBS:-1}
modules=("$@")
[ ${#modules[@]} -eq 0 ] && modules=(problem cvm cvr sor)
mkdir -p "$OUT"
export PATH="$BIN:$PATH"

run_module() {
    local mod=$1 cfg="$ROOT/mutation/$1.toml" work
    [ -f "$cfg" ] || { echo "mutation: no $cfg" >&2; return 2; }
    work=$(mktemp -d "${TMPDIR:-/tmp}/corevector-mutation-$mod.XXXXXX")
    tar -C "$ROOT" --exclude=./.git --exclude=./.venv --exclude=./mutation/out --exclude=__pycache__ \
        --exclude=./.hypothesis --exclude=./build --exclude=./.asv --exclude=./asv_benchmarks/env \
        --exclude=./reports/output -cf - . | tar -C "$work" -xf -
    cd "$work"
    rm -f "$OUT/$mod.sqlite"
    nice -n 19 cosmic-ray baseline "$cfg" > "$OUT/$mod.baseline.log" 2>&1 \
        || { echo "mutation: the $mod tests fail unmutated (see $OUT/$mod.baseline.log)" >&2; return 1; }
    cosmic-ray init "$cfg" "$OUT/$mod.sqlite"
    cr-filter-operators "$OUT/$mod.sqlite" "$cfg"
    nice -n 19 cosmic-ray exec "$cfg" "$OUT/$mod.sqlite"
    cr-report --surviving-only --show-diff "$OUT/$mod.sqlite" > "$OUT/$mod.txt"
    tail -n 3 "$OUT/$mod.txt" | sed "s/^/$mod: /"
    cd "$ROOT"
    rm -rf "$work"
}

pids=()
for mod in "${modules[@]}"; do
    run_module "$mod" &
    pids+=($!)
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 5; done
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
