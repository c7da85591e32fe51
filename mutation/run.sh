#!/usr/bin/env bash
# Mutation testing of refimpl's formulation modules with cosmic-ray (see mutation/README.md).
#
#   bash mutation/run.sh [MODULE ...]      default: all 8 session files (refimpl/MODULE.py)
#
# cosmic-ray edits the module in place for every mutant, so each module runs in its own scratch
# copy of a commit (COMMIT, default HEAD: `git archive`, so nobody's uncommitted edits leak in),
# with the compiled extensions of the working tree (refused unless the commit's extension sources
# are the working tree's), never in the working tree itself.  For each module it checks that the selected tests pass unmutated (baseline),
# runs every mutant under nice, and writes mutation/out/MODULE.sqlite and MODULE.txt (the
# surviving mutants with their diffs, headed by the commit the run used; also in MODULE.commit).  Needs the venv of `bash run.sh test` with cosmic-ray
# installed (pip install -e ".[test]").  Environment: PYTHON (default .venv/bin/python), JOBS
# (modules run in parallel, default 1), COMMIT (default HEAD), NICE (niceness of the tests, default
# 19; on a machine shared with other niced jobs use theirs, or the mutants get a few per cent of a core),
# RESUME=1 (keep mutation/out/MODULE.sqlite and run only its pending mutants, e.g. after a change of
# test-command or an interruption; the results so far are kept).  A session file may also skip whole
# functions ([cosmic-ray.filters.definition-filter] exclude = [...], see filter_definitions.py).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN=$(dirname "$PY")
OUT=$ROOT/mutation/out
JOBS=${JOBS:-1}
NICE=${NICE:-19}
modules=("$@")
[ ${#modules[@]} -eq 0 ] && modules=(problem cvm cvr sor driver meb constrained_meb ssvr)
REV=$(git -C "$ROOT" rev-parse --verify "${COMMIT:-HEAD}^{commit}")
EXT_SRC=(fastimpl/*.pyx fastimpl/*.pxi fastimpl/*.h setup.py)
git -C "$ROOT" diff --quiet "$REV" -- "${EXT_SRC[@]}" \
    || { echo "mutation: the working tree's extension sources differ from $REV; rebuild or choose COMMIT" >&2; exit 2; }
mkdir -p "$OUT"
export PATH="$BIN:$PATH"

run_module() {
    local mod=$1 cfg="$ROOT/mutation/$1.toml" work
    [ -f "$cfg" ] || { echo "mutation: no $cfg" >&2; return 2; }
    work=$(mktemp -d "${TMPDIR:-/tmp}/corevector-mutation-$mod.XXXXXX")
    git -C "$ROOT" archive "$REV" | tar -C "$work" -xf -
    cp "$ROOT"/fastimpl/*.so "$work/fastimpl/"
    cd "$work"
    if [ -n "${RESUME:-}" ] && [ -f "$OUT/$mod.sqlite" ]; then
        [ "$(cat "$OUT/$mod.commit")" = "$REV" ] \
            || { echo "mutation: $mod's session ran $(cat "$OUT/$mod.commit"), not $REV; set COMMIT" >&2; return 2; }
    else
        rm -f "$OUT/$mod.sqlite"
        echo "$REV" > "$OUT/$mod.commit"
    fi
    nice -n "$NICE" cosmic-ray baseline "$cfg" > "$OUT/$mod.baseline.log" 2>&1 \
        || { echo "mutation: the $mod tests fail unmutated (see $OUT/$mod.baseline.log)" >&2; return 1; }
    if [ ! -f "$OUT/$mod.sqlite" ]; then
        cosmic-ray init "$cfg" "$OUT/$mod.sqlite"
        cr-filter-operators "$OUT/$mod.sqlite" "$cfg"
        "$PY" "$ROOT/mutation/filter_definitions.py" "$OUT/$mod.sqlite" "$cfg"
    fi
    nice -n "$NICE" cosmic-ray exec "$cfg" "$OUT/$mod.sqlite"
    { echo "commit $REV"; cr-report --surviving-only --show-diff "$OUT/$mod.sqlite"; } > "$OUT/$mod.txt"
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
