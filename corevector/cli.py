"""The ``corevector`` command line.

Subcommands
-----------
``report [--quick] [--out DIR]``
    Regenerate the experiment report (``python -m reports.run`` in the checkout; needs a source
    checkout, i.e. an editable install: the wheel does not ship ``reports/``).
``verify [--quick] [--seed N]``
    Check the (1+eps)^2 guarantee of 001 Sec. 4 on a grid of small random problems for every
    bounded formulation (two-class L2-SVM, one-class L2-SVM, MEB, CVR), both implementations,
    several eps, ``sample_size=None``, against an exact QP solver (cvxopt); the grid and its checks
    are :mod:`refimpl.verify`.  Exit status 1 on any violation.
``fit DATA --model OUT.pkl [options]``
    Fit a CVMClassifier / CVDD / MEB / CVR on a LIBSVM or CSV file and save it as a model file: a
    versioned JSON header line, then the pickled estimator (:mod:`corevector.model_file`).
``predict MODEL DATA [--out FILE]``
    Predict with a model written by ``fit`` (any other file, e.g. a pickled scikit-learn SVC, is
    refused before it is unpickled).  On stderr: the accuracy (classifier) or RMSE (regressor) when
    DATA carries targets; the inlier and outlier rates for CVDD and MEB.
``bench [ASV ARGS...]``
    Run the asv suite in ``asv_benchmarks/`` (default: ``asv run --python=same --quick
    --set-commit-hash HEAD``, so the results are saved against the checkout's HEAD; needs a source
    checkout).
``--version``
    Print the version.

Data files
----------
The format is read from the file's lines, not from its name or the model (``--format`` overrides):
``label index:value ...`` is LIBSVM, comma-separated values are CSV (:func:`sniff_format`).

* LIBSVM: indices start at 1 (a 0 index is an error naming its line); missing indices are zeros, so a
  file whose highest index is below the model's feature count is valid, and an index above it is an
  error.  The data stay sparse (CSR) end to end: the estimators take CSR input (:func:`_estimator_input`).
* CSV: the target is the last column (``fit``; ``predict`` takes the model's feature count of columns,
  plus optionally the target).  Any other column count is an error.  The first row is a header only if
  none of its fields is a number or a missing-value token such as NA (``--header``/``--no-header``
  decide otherwise); a missing, non-numeric or non-finite value is an error naming its line and column.

Model files and predictions are written atomically (temporary file in the same folder, then
``os.replace``): a failed write leaves the previous file intact and no partial file.

Errors in files or options give a one-line message on stderr and a non-zero exit status.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

PROG = "corevector"
REPO_ROOT = Path(__file__).resolve().parent.parent
FORMATS = ("libsvm", "csv")


#: default of the fit options: "use the estimator's own default" (None is a valid sample_size)
UNSET = argparse.SUPPRESS


class CLIError(Exception):
    """An error to report as one line on stderr (exit status 1)."""


# --------------------------------------------------------------------------------------------
# verify: the grid and its checks live in refimpl.verify; the CLI supplies both engines
# --------------------------------------------------------------------------------------------
def get_fit_meb(impl):
    from .numerics import numerics

    return numerics(impl).fit_meb


def cmd_verify(args):
    from refimpl.verify import VERIFY_RTOL, format_table, verify_cases

    grid = "tiny" if args.tiny else ("quick" if args.quick else "full")
    impls = ("fast", "ref") if args.impl == "both" else (args.impl,)
    rows = list(verify_cases(grid, seed=args.seed, engines={impl: get_fit_meb(impl) for impl in impls},
                             progress=not args.no_progress))
    print(format_table(rows))
    bad = [r for r in rows if not r["ok"]]
    for r in bad:
        print(f"VIOLATION {r['formulation']}/{r['kernel']} m={r['m']} seed={r['seed']} impl={r['impl']} "
              f"eps={r['eps']:g}: {r['reason']}")
    print(f"{len(rows)} fits checked, {len(bad)} violation(s)"
          f" (checks: R^2 <= r*^2 and r*^2 <= (1+eps)^2 R^2, relative slack {VERIFY_RTOL:g})")
    return 1 if bad else 0


# --------------------------------------------------------------------------------------------
# data files: the format is read from the file itself
# --------------------------------------------------------------------------------------------
#: how many data lines (blank and '#' comment lines aside) sniff_format looks at
SNIFF_LINES = 50
#: CSV fields that mean "missing value" (case-insensitive); a first row holding one is data, not a header
MISSING_TOKENS = frozenset({"", "na", "n/a", "nan", "null", "none", "?", "-", ".", "missing", "#n/a"})


def _is_number(token):
    try:
        float(token)
    except ValueError:
        return False
    return True


def _data_lines(f):
    """(line number, line) of the lines of the text file ``f`` that are neither blank nor '#' comments."""
    try:
        for lineno, line in enumerate(f, start=1):
            if line.strip() and not line.lstrip().startswith("#"):
                yield lineno, line
    except UnicodeDecodeError:
        raise CLIError(f"{f.name} is not a text file (not UTF-8)") from None


def _open_text(path):
    """The data file opened as UTF-8 text, after refimpl.datasets' checks (found, a regular file, not
    empty) with their messages as CLIError."""
    from refimpl.datasets import check_data_file

    try:
        path = check_data_file(path)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    return open(path, encoding="utf-8", newline="")


def _line_kind(line):
    """'libsvm' (label index:value ...), 'label' (a lone number: a LIBSVM line with no feature, or a
    one-column CSV line), 'csv' (holds a comma) or None (neither)."""
    tokens = line.split("#", 1)[0].split()
    if tokens and _is_number(tokens[0]):
        if len(tokens) == 1:
            return "label"
        if all(":" in t and (t.split(":", 1)[0] == "qid" or t.split(":", 1)[0].lstrip("+-").isdigit())
               for t in tokens[1:]):
            return "libsvm"
    return "csv" if "," in line else None


def sniff_format(path):
    """'libsvm' or 'csv', from the first SNIFF_LINES data lines of the file (not from its name).

    A line ``label index:value ...`` is LIBSVM, a line holding a comma is CSV (a header too).  The
    file is LIBSVM when its lines are LIBSVM (lines of a lone label allowed), CSV when they are CSV;
    a mix, a line that is neither, or only lone numbers (a LIBSVM file with no features cannot be
    told from a one-column CSV) is an error asking for ``--format``.
    """
    kinds = {}
    with _open_text(path) as f:
        for k, (lineno, line) in enumerate(_data_lines(f)):
            if k == SNIFF_LINES:
                break
            kind = _line_kind(line)
            if kind is None:
                raise CLIError(f"{path} line {lineno} is neither LIBSVM ('label index:value ...') nor CSV "
                               f"(comma-separated): {line.strip()[:60]!r}; see --format")
            kinds.setdefault(kind, lineno)
    if not kinds:
        raise CLIError(f"no data lines in {path}")
    if "libsvm" in kinds and "csv" in kinds:
        raise CLIError(f"{path} mixes LIBSVM (line {kinds['libsvm']}) and CSV (line {kinds['csv']}) lines; "
                       f"see --format")
    if "libsvm" in kinds:
        return "libsvm"
    if "csv" in kinds:
        return "csv"
    raise CLIError(f"{path}: every line is a single number, which can be LIBSVM (labels, no features) or a "
                   f"one-column CSV; pass --format")


def read_csv(path, header=None):
    """All columns of a numeric CSV file (comma-separated; blank and '#' lines skipped), dense float64.

    ``header``: True skips the first row, False reads it as data, None (auto) takes it as a header only
    when none of its fields is a number or a missing-value token (MISSING_TOKENS), so a first row of
    data holding "NA" is never lost as a header.  A missing, non-numeric or non-finite value is an error
    naming its line and column (corevector does not impute); so is a row with another column count.
    """
    import csv

    rows, linenos, auto = [], [], header is None
    with _open_text(path) as f:
        def lines():
            for lineno, line in _data_lines(f):
                linenos.append(lineno)
                yield line

        for fields in csv.reader(lines()):
            fields = [s.strip() for s in fields]
            if header is None:
                header = all(not _is_number(s) and s.lower() not in MISSING_TOKENS for s in fields)
            if header:  # the first data line only
                header = False
                linenos.pop()
                continue
            if rows and len(fields) != len(rows[0]):
                raise CLIError(f"{path} line {linenos[-1]} has {len(fields)} columns, line {linenos[0]} has "
                               f"{len(rows[0])}")
            rows.append(fields)
    if not rows:
        raise CLIError(f"no data rows in {path}")
    try:
        data = np.array(rows, dtype=np.float64)
        bad = np.argwhere(~np.isfinite(data))
    except ValueError:  # some field is not a number: find the first one
        bad = [(i, j) for i, row in enumerate(rows) for j, s in enumerate(row) if not _is_number(s)][:1]
    if len(bad):
        i, j = bad[0]
        s = rows[i][j]
        kind = "missing or non-finite" if _is_number(s) or s.lower() in MISSING_TOKENS else "non-numeric"
        hint = "; if that row is a header, pass --header" if auto and i == 0 else ""
        raise CLIError(f"{path} line {linenos[i]}, column {j + 1}: {kind} value {s!r}{hint}")
    return data


def _libsvm_problem(line, n_features=None):
    """What is wrong with one LIBSVM line (a message), or None when it is a valid line."""
    tokens = line.split("#", 1)[0].split()
    if not tokens:
        return None
    try:
        label = float(tokens[0])
    except ValueError:
        return f"label {tokens[0]!r} is not a number"
    if not np.isfinite(label):
        return f"non-finite label {tokens[0]!r}"
    for t in tokens[1:]:
        index, sep, value = t.partition(":")
        if index == "qid":
            continue
        try:
            index, v = int(index), float(value)
        except ValueError:
            return f"{t!r} is not index:value"
        if index < 1:
            return (f"feature index {index} (LIBSVM indices start at 1; scikit-learn's dump_svmlight_file writes "
                    f"0-based files unless given zero_based=False)")
        if n_features is not None and index > n_features:
            return f"feature index {index} is above the {n_features} features expected"
        if not np.isfinite(v):
            return f"non-finite value {value!r} at feature index {index}"
    return None


def _first_libsvm_problem(path, n_features=None):
    """'PATH line N: what is wrong' for the first invalid line, or None (error paths only: a second read)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, start=1):
            problem = _libsvm_problem(line, n_features)
            if problem:
                return f"{path} line {lineno}: {problem}"
    return None


def read_libsvm(path, n_features=None):
    """``(X, y)`` of a LIBSVM file: X a CSR matrix (kept sparse; see _estimator_input), y float labels.

    Indices are 1-based (LIBSVM's convention, read with ``zero_based=False`` rather than scikit-learn's
    'auto' guess, which shifts every column when one index is 0): a zero index is an error naming its
    line.  Missing indices are zeros, so the matrix has ``n_features`` columns when given (a file whose
    highest index is lower is valid; a higher index is an error naming its line), else as many as the
    highest index.  Non-finite labels or values are errors.
    """
    from sklearn.datasets import load_svmlight_file

    _open_text(path).close()  # the not found / empty checks
    try:
        X, y = load_svmlight_file(os.fspath(path), n_features=n_features, dtype=np.float64, zero_based=False)
    except (ValueError, UnicodeDecodeError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CLIError(_first_libsvm_problem(path, n_features) or f"cannot parse {path} as LIBSVM: {first}") \
            from None
    if not (np.all(np.isfinite(X.data)) and np.all(np.isfinite(y))):
        raise CLIError(_first_libsvm_problem(path) or f"{path}: non-finite values")
    if X.shape[0] == 0:
        raise CLIError(f"no samples in {path}")
    return X.tocsr(), np.asarray(y)


def _estimator_input(X):
    """The one place where data files become estimator input: LIBSVM files stay CSR end to end (the
    estimators take sparse input, issue 15), CSV data is a C-contiguous float64 array."""
    if sp.issparse(X):
        return sp.csr_matrix(X, dtype=np.float64)
    return np.ascontiguousarray(X, dtype=np.float64)


def read_training_data(path, fmt=None, header=None, n_features=None):
    """``(X, y, fmt)`` for ``fit``: the target is the last CSV column, or the LIBSVM label."""
    fmt = fmt or sniff_format(path)
    if fmt == "libsvm":
        X, y = read_libsvm(path, n_features)
        return X, y, fmt
    if n_features is not None:
        raise CLIError("--n-features applies to LIBSVM files only (a CSV file has its columns)")
    data = read_csv(path, header)
    if data.shape[1] < 2:
        raise CLIError(f"{path}: needs at least one feature column besides the target (last column)")
    return data[:, :-1], data[:, -1], fmt


def read_prediction_data(path, n_features, fmt=None, header=None):
    """``(X, y or None, fmt)`` for ``predict`` with a model of ``n_features`` features.

    CSV: ``n_features`` columns are the features; one more is the target (last); any other count is an
    error.  LIBSVM: the label is the target; a highest index below ``n_features`` is valid (missing
    indices are zeros: a note says so), one above is an error naming its line.
    """
    fmt = fmt or sniff_format(path)
    if fmt == "libsvm":
        X, y = read_libsvm(path, n_features)
        top = int(X.indices.max()) + 1 if X.nnz else 0
        if top < n_features:
            print(f"{PROG} predict: note: the highest feature index in {path} is {top}, the model has "
                  f"{n_features} features; the missing ones are zeros (LIBSVM convention)", file=sys.stderr)
        return X, y, fmt
    data = read_csv(path, header)
    if data.shape[1] == n_features:
        return data, None, fmt
    if data.shape[1] == n_features + 1:
        return data[:, :-1], data[:, -1], fmt
    raise CLIError(f"{path} has {data.shape[1]} columns; the model expects {n_features} features "
                   f"(or {n_features + 1} with the target in the last column)")


# --------------------------------------------------------------------------------------------
# fit / predict
# --------------------------------------------------------------------------------------------
def _positive(cast, words=None, what=None):
    """An argparse type: a positive finite ``cast`` (float or int), or one of ``words`` (a dict from the
    lower-case word to the value it stands for)."""
    words = words or {}
    what = what or ("a positive integer" if cast is int else "a positive number")
    if words:
        what += " or " + "/".join(words)

    def parse(value):
        if value.lower() in words:
            return words[value.lower()]
        try:
            v = cast(value)
        except ValueError:
            v = None
        if v is None or not np.isfinite(v) or v <= 0:
            raise argparse.ArgumentTypeError(f"must be {what}, got {value!r}")
        return v

    return parse


_positive_float = _positive(float)
_positive_int = _positive(int)
_gamma = _positive(float, {w: w for w in ("beta", "scale", "auto")})
_sample_size = _positive(int, {"none": None, "all": None, "full": None})


def make_estimator(name, **params):
    from .registry import CLI_ESTIMATORS

    cls = CLI_ESTIMATORS[name].cls
    params = {k: v for k, v in params.items() if v is not UNSET}
    if name == "meb" and "C" in params:
        raise CLIError("--C does not apply to --estimator meb (the hard MEB has no C)")
    return cls(**params)


def cmd_fit(args):
    from .model_file import save_model

    X, y, fmt = read_training_data(args.data, args.format, args.header, args.n_features)
    params = {k: getattr(args, k, UNSET) for k in ("C", "gamma", "eps", "kernel", "impl", "random_state",
                                                    "max_iter", "sample_size", "stop", "mu")}
    if args.estimator != "cvr" and params.get("mu", UNSET) is not UNSET:
        raise CLIError("--mu applies to --estimator cvr only")
    est = make_estimator(args.estimator, **params)
    Xd = _estimator_input(X)
    if args.estimator == "cvm":
        y = y.astype(int) if np.all(y == np.round(y)) and np.all(np.abs(y) < 2**31) else y
        est.fit(Xd, y)
    elif args.estimator == "cvr":
        est.fit(Xd, y)
    else:  # cvdd, meb: unsupervised, the target column / label is not used
        est.fit(Xd)
    save_model(est, args.model, data_format=fmt)
    msg = f"fitted {type(est).__name__} on {X.shape[0]} x {X.shape[1]} ({fmt}): core set {len(est.core_set_)}"
    if args.estimator == "cvm":
        msg += f", training accuracy {est.score(Xd, y):.4f}"
    elif args.estimator == "cvr":
        msg += f", training R^2 {est.score(Xd, y):.4f}"
    print(msg + f" -> {args.model}", file=sys.stderr)
    return 0


def cmd_predict(args):
    from sklearn.base import is_classifier, is_outlier_detector

    from .model_file import atomic_write, load_model

    est, _ = load_model(args.model)
    X, y, _ = read_prediction_data(args.data, est.n_features_in_, args.format, args.header)
    pred = est.predict(_estimator_input(X))
    text = "".join(_fmt_label(p) + "\n" for p in pred)
    if args.out:
        with atomic_write(args.out) as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if is_outlier_detector(est):  # MEB, CVDD: +1 inlier, -1 outlier, whatever the file's labels
        print(outlier_summary(pred, y), file=sys.stderr)
    elif y is not None and is_classifier(est):
        print(f"accuracy {np.mean(pred == y):.4f} on {len(y)} samples", file=sys.stderr)
    elif y is not None:  # a regressor (CVR): 000 footnote 10's errors
        from refimpl.cvr import normalized_rmse
        rmse = float(np.sqrt(np.mean((pred - y) ** 2)))
        print(f"RMSE {rmse:.6g} (RMSE/max y {normalized_rmse(y, pred):.6g}) on {len(y)} samples", file=sys.stderr)
    return 0


#: a labelled file gets the inlier rate of each label when it has at most this many distinct labels
MAX_LABELS_SHOWN = 10


def outlier_summary(pred, y=None):
    """One line: the inlier and outlier rates of an outlier detector's predictions (+1 / -1), and per
    label of a labelled file with few (integral) labels."""
    n = len(pred)
    inl = int(np.sum(pred == 1))
    msg = f"inliers {inl / n:.4f} ({inl}), outliers {(n - inl) / n:.4f} ({n - inl}) of {n} samples"
    if y is not None and np.all(y == np.round(y)):
        labels = np.unique(y)
        if len(labels) <= MAX_LABELS_SHOWN:
            msg += "; inlier rate by label: " + ", ".join(
                f"{_fmt_label(c)}: {np.mean(pred[y == c] == 1):.4f} of {int(np.sum(y == c))}" for c in labels)
    return msg


def _fmt_label(p):
    if isinstance(p, (float, np.floating)) and float(p).is_integer():
        return str(int(p))
    return str(p)


# --------------------------------------------------------------------------------------------
# report / bench
# --------------------------------------------------------------------------------------------
def checkout_root():
    """The source checkout this package runs from, or None for an installed wheel.

    ``report`` and ``bench`` need files that are not part of the installed package: the report
    generator (``reports/``, its data and output folder) and the asv suite (``asv_benchmarks/``,
    which benchmarks the repository's commits).  They run only where this module lives inside a
    checkout (an editable install, ``pip install -e .``); an installed wheel says so and stops.
    """
    root = REPO_ROOT
    if (root / "reports" / "run.py").is_file() and (root / "asv_benchmarks" / "asv.conf.json").is_file():
        return root
    return None


def _need_checkout(command):
    root = checkout_root()
    if root is None:
        raise CLIError(f"'{PROG} {command}' needs a source checkout of corevector (an editable install, "
                       f"pip install -e .); the installed package does not ship reports/ and asv_benchmarks/")
    return root


def cmd_report(args):
    root = _need_checkout("report")
    argv = []
    if args.quick:
        argv.append("--quick")
    if args.tiny:
        argv.append("--tiny")
    if args.out:
        argv += ["--out", str(Path(args.out).resolve())]  # relative to the caller's directory
    if args.only:
        argv += ["--only", *args.only]
    # the report generator is the checkout's own module, run as `python -m reports.run` from its root
    return subprocess.call([sys.executable, "-m", "reports.run", *argv], cwd=root)


ASV_SUBCOMMANDS = {"run", "continuous", "compare", "publish", "preview", "check", "dev", "machine", "show",
                   "find", "rm", "update", "profile", "gh-pages", "setup"}


def asv_command(extra, commit=None):
    """The asv command line for ``corevector bench EXTRA...``.

    Without an asv subcommand: ``asv run --python=same --quick --show-stderr EXTRA``, plus
    ``--set-commit-hash COMMIT`` when ``commit`` is given and EXTRA does not set one (asv saves no
    results of a run in an existing environment, such as --python=same, without it).  A full asv
    subcommand (``continuous HEAD~1 HEAD``) is passed as it is.
    """
    exe = shutil.which("asv")
    base = [exe] if exe else [sys.executable, "-m", "asv"]
    if extra and extra[0] == "--":
        extra = extra[1:]
    if not _default_run(extra):
        return base + list(extra)
    cmd = base + ["run", "--python=same", "--quick", "--show-stderr"]
    if commit and not _sets_commit(extra):
        cmd += ["--set-commit-hash", commit]
    return cmd + list(extra)


def _default_run(extra):
    """True when ``corevector bench EXTRA`` runs the default ``asv run --python=same ...``."""
    extra = extra[1:] if extra and extra[0] == "--" else extra
    return not (extra and extra[0] in ASV_SUBCOMMANDS)


def _sets_commit(extra):
    return any(a.split("=", 1)[0] == "--set-commit-hash" for a in extra)


def _git(root, *args):
    try:
        res = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 else None


def git_head(root):
    """``(HEAD's commit hash, dirty)`` when ``root`` is the top of a git checkout, else ``(None, False)``."""
    out = _git(root, "rev-parse", "--show-toplevel", "HEAD")
    if out is None or len(out.split()) != 2 or Path(out.split()[0]).resolve() != Path(root).resolve():
        return None, False
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return out.split()[1], bool(status and status.strip())


def cmd_bench(args):
    if args.config_dir:
        bench_dir = Path(args.config_dir)
    else:
        bench_dir = _need_checkout("bench") / "asv_benchmarks"
    if not (bench_dir / "asv.conf.json").is_file():
        raise CLIError(f"no asv.conf.json in {bench_dir} (the benchmarks need a source checkout)")
    # asv.conf.json's repo is "..": the checkout whose commit the results are saved against
    root = bench_dir.resolve().parent
    commit, dirty = git_head(root)
    cmd = asv_command(args.asv_args, commit)
    if _default_run(args.asv_args) and not _sets_commit(args.asv_args):
        if commit is None:
            print(f"note: {root} is not a git checkout: asv runs the benchmarks but saves no results "
                  f"(it saves them against a commit; pass --set-commit-hash to choose one)", file=sys.stderr)
        elif dirty:
            print(f"note: the working tree has uncommitted changes; the results are saved against HEAD "
                  f"{commit[:12]} but measure the working tree", file=sys.stderr)
    # with --python=same asv imports corevector from this interpreter (the editable install)
    print("+ " + " ".join(cmd), file=sys.stderr)
    try:
        return subprocess.call(cmd, cwd=bench_dir)
    except FileNotFoundError:
        raise CLIError("asv is not installed (pip install asv)") from None


# --------------------------------------------------------------------------------------------
def build_parser():
    from refimpl.driver import STOPS
    from refimpl.kernels import KERNELS

    from . import __version__
    from .numerics import IMPLS
    from .registry import CLI_ESTIMATORS

    p = argparse.ArgumentParser(prog=PROG, description="Core Vector Machines: fit, predict, verify, report, bench.")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    r = sub.add_parser("report", help="regenerate the experiment report (reports/)")
    r.add_argument("--quick", action="store_true", help="smaller sizes (about 15 minutes on 2 cores)")
    r.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    r.add_argument("--out", help="output folder (default reports/output)")
    r.add_argument("--only", nargs="+", help="run only these experiments")
    r.set_defaults(func=cmd_report)

    v = sub.add_parser("verify", help="check the (1+eps)^2 bound against an exact solver (cvxopt)")
    v.add_argument("--quick", action="store_true", help="a smaller grid")
    v.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    v.add_argument("--seed", type=int, default=0, help="first random seed (default 0)")
    v.add_argument("--impl", choices=("both",) + IMPLS, default="both")
    v.add_argument("--no-progress", action="store_true", help="no progress bar")
    v.set_defaults(func=cmd_verify)

    f = sub.add_parser("fit", help="fit a model on a LIBSVM or CSV file and save it")
    f.add_argument("data", help="training data (LIBSVM text, or CSV with the target in the last column; "
                                "cvdd and meb do not use the target)")
    f.add_argument("--model", required=True, help="output model file (a header line and a pickle)")
    _data_file_options(f)
    f.add_argument("--n-features", type=_positive_int, default=None,
                   help="LIBSVM only: the number of features (default: the highest index in the file)")
    f.add_argument("--estimator", choices=tuple(CLI_ESTIMATORS), default="cvm")
    f.add_argument("--C", type=_positive_float, default=UNSET, help="penalty (cvm, cvdd: default 1; cvr: default 3000 max|y|)")
    f.add_argument("--gamma", type=_gamma, default=UNSET, help="positive number or beta/scale/auto (default beta)")
    f.add_argument("--eps", type=_positive_float, default=UNSET, help="(1+eps) tolerance (default: the estimator's, 1e-2 for cvm and cvr)")
    f.add_argument("--kernel", choices=KERNELS, default=UNSET)
    f.add_argument("--impl", choices=IMPLS, default=UNSET)
    f.add_argument("--sample-size", type=_sample_size, default=UNSET,
                   help="candidates per iteration (default 59), or 'none' for full scans")
    f.add_argument("--max-iter", type=_positive_int, default=UNSET)
    f.add_argument("--random-state", type=int, default=UNSET)
    f.add_argument("--stop", choices=tuple(STOPS), default=UNSET,
                   help="stopping rule of the core-set loop (default: the estimator's, hybrid for cvm and cvr; radius is the paper's)")
    f.add_argument("--mu", type=_positive_float, default=UNSET, help="CVR's mu (expected error; default C / (50 m))")
    f.set_defaults(func=cmd_fit)

    q = sub.add_parser("predict", help="predict with a model written by 'fit'")
    q.add_argument("model")
    q.add_argument("data", help="LIBSVM, or CSV with the model's features and optionally the target (last column)")
    _data_file_options(q)
    q.add_argument("--out", help="write predictions here (one per line) instead of stdout")
    q.set_defaults(func=cmd_predict)

    b = sub.add_parser("bench", help="run the asv benchmarks (asv run --python=same --quick [ARGS])")
    b.add_argument("--config-dir", help=argparse.SUPPRESS)
    b.add_argument("asv_args", nargs=argparse.REMAINDER,
                   help="extra asv arguments, or a full asv subcommand (e.g. 'continuous HEAD~1 HEAD')")
    b.set_defaults(func=cmd_bench)
    return p


def _data_file_options(parser):
    parser.add_argument("--format", choices=FORMATS,
                        help="the data file's format (default: read from its lines, not its name: "
                             "'label index:value ...' is LIBSVM, comma-separated is CSV)")
    parser.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                        help="CSV: the first row is (--header) or is not (--no-header) a header; default: a "
                             "header only if none of its fields is a number or a missing-value token such as NA")


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"{PROG}: {category.__name__}: {message}", file=sys.stderr if file is None else file)


def main(argv=None):
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "bench":
        # everything after 'bench' goes to asv, even options argparse would otherwise claim
        args = parser.parse_args(["bench"])
        rest = argv[1:]
        if rest and rest[0].startswith("--config-dir="):
            args.config_dir, rest = rest[0].split("=", 1)[1], rest[1:]
        elif rest and rest[0] == "--config-dir" and len(rest) > 1:
            args.config_dir, rest = rest[1], rest[2:]
        args.asv_args = rest
    else:
        args = parser.parse_args(argv)
    saved, warnings.showwarning = warnings.showwarning, _one_line_warning
    try:
        return int(args.func(args) or 0)
    except CLIError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, OSError, MemoryError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"{PROG} {args.command}: error: {msg}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = saved


if __name__ == "__main__":
    sys.exit(main())
