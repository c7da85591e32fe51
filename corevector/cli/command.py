"""The ``corevector`` command line: its parser and subcommands (:func:`main`).

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
``fit DATA --model OUT [options]``
    Fit a CVMClassifier / CVDD / MEB / CVR on a LIBSVM or CSV file (gzip or not) and save it as a model
    file: a versioned JSON header and the fitted arrays, no code (:mod:`corevector.io.model_files`).  The
    seed defaults to 0, so two fits of one file give one model; ``--help`` lists each estimator's defaults.
``predict MODEL DATA [--out FILE] [--probability] [--by-position]``
    Predict with a model written by ``fit`` or :func:`corevector.save_model`, or with a LIBSVM model file.
    On stderr: the accuracy (classifier) or RMSE (regressor) when DATA carries targets; the inlier and
    outlier rates for CVDD and MEB.  A model fitted on a CSV file with a header row matches DATA's
    columns by name.
``convert MODEL OUT [--to native|libsvm] [--allow-unsafe-pickle]``
    Convert between corevector's model files and LIBSVM's (:mod:`corevector.io.libsvm`); with
    ``--allow-unsafe-pickle``, read a model file of corevector 0.1's pickle format (which runs the
    file's code: for files you trust) and write it in today's format.
``bench [ASV ARGS...]``
    Run the asv suite in ``asv_benchmarks/`` (default: ``asv run --python=same --quick
    --set-commit-hash HEAD``, so the results are saved against the checkout's HEAD; an asv subcommand that
    would build environments gets ``--python=same``; it says which checkout it benchmarks; needs a source
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
* CSV: the target is the last column (``fit``), numbers or class labels (strings); ``predict`` matches a
  header row to the model's feature names (any order; ``--by-position`` matches by position), else takes
  the model's feature count of columns, plus optionally the target.  The first row is a header only if
  none of its fields is a number or a missing-value token such as NA (``--header``/``--no-header`` decide
  otherwise); a missing, non-numeric or non-finite feature value is an error naming its line and column.
* Both are read by :mod:`refimpl.datasets` (:func:`~refimpl.datasets.load_libsvm`,
  :func:`~refimpl.datasets.read_csv_table`): gzip data by its first bytes, line by line, a line longer
  than 64 MB an error.

No output path may be an input path (``fit --model`` the data, ``predict --out`` the model or the data).
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

# data files (corevector/io/readers.py; re-exported here): the format is read from the file itself
from ..io.readers import (SNIFF_LINES, CLIError, Data, _estimator_input, _is_number,  # noqa: F401
                         read_csv, read_libsvm, read_prediction_data, read_training_data, sniff_format)

PROG = "corevector"
REPO_ROOT = Path(__file__).resolve().parents[2]
FORMATS = ("libsvm", "csv")


#: default of the fit options: "use the estimator's own default" (None is a valid sample_size)
UNSET = argparse.SUPPRESS


# --------------------------------------------------------------------------------------------
# verify: the grid and its checks live in refimpl.verify; the CLI supplies both engines
# --------------------------------------------------------------------------------------------
def get_fit_meb(impl):
    from ..numerics import numerics

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
# fit / predict / convert
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


def _finite_float(value):
    try:
        v = float(value)
    except ValueError:
        v = float("nan")
    if not np.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {value!r}")
    return v


def _class_weight(value):
    """'balanced', or LABEL:WEIGHT pairs separated by commas (a label as in the data: a number or a string)."""
    if value.lower() == "balanced":
        return "balanced"
    out = {}
    for part in value.split(","):
        label, sep, w = part.rpartition(":")
        try:
            weight = float(w)
        except ValueError:
            weight = float("nan")
        if not sep or not label.strip() or not np.isfinite(weight) or weight < 0:
            raise argparse.ArgumentTypeError(f"must be 'balanced' or LABEL:WEIGHT,... with weights >= 0, "
                                             f"got {value!r}")
        label = label.strip()
        out[int(float(label)) if _is_number(label) and float(label).is_integer() else
            (float(label) if _is_number(label) else label)] = weight
    return out


#: the fit options that are estimator parameters, by attribute name (the parameter has the same name)
FIT_PARAMS = ("C", "gamma", "eps", "kernel", "degree", "coef0", "impl", "random_state", "max_iter",
              "sample_size", "stop", "mu", "class_weight", "probability")
#: corevector fit's seed when --random-state is not given: two fits of one file give one model
DEFAULT_SEED = 0


def make_estimator(name, **params):
    from ..registry import CLI_ESTIMATORS

    cls = CLI_ESTIMATORS[name].cls
    params = {k: v for k, v in params.items() if v is not UNSET}
    allowed = set(cls().get_params())
    for k in params:
        if k not in allowed:
            flag = "--" + k.replace("_", "-") if k not in ("C",) else "--C"
            users = sorted(n for n, e in CLI_ESTIMATORS.items() if k in e.cls().get_params())
            raise CLIError(f"{flag} does not apply to --estimator {name} (it applies to {', '.join(users)})")
    return cls(**params)


def _same_file(a, b):
    """True when paths ``a`` and ``b`` name one file (the same path, or links to one file)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def _check_outputs(outputs, inputs):
    """CLIError when an output path is an input path (it would overwrite it) or a folder."""
    for flag, out in outputs:
        if out is None:
            continue
        if os.path.isdir(out):
            raise CLIError(f"{flag} {out} is a folder; give the path of a file")
        for what, inp in inputs:
            if _same_file(out, inp):
                raise CLIError(f"{flag} {out} is the {what} file: it would be overwritten; choose another path")


def cmd_fit(args):
    from sklearn.base import is_classifier, is_regressor

    from ..io.model_files import save_model

    _check_outputs([("--model", args.model)], [("data", args.data)])
    params = {k: getattr(args, k, UNSET) for k in FIT_PARAMS}
    est = make_estimator(args.estimator, **params)
    data = read_training_data(args.data, args.format, args.header, args.n_features,
                              numeric_target=is_regressor(est))
    X, y = _estimator_input(data.X), data.y
    if is_classifier(est):
        est.fit(X, y)
    elif is_regressor(est):
        est.fit(X, y.astype(np.float64))
    else:  # cvdd, meb: unsupervised, the target column / label is not used
        est.fit(X)
    save_model(est, args.model, feature_names=data.names, target_name=data.target_name, data_format=data.fmt)
    msg = (f"fitted {type(est).__name__} on {X.shape[0]} x {X.shape[1]} ({data.fmt}): core set "
           f"{len(est.core_set_)}")
    if is_classifier(est):
        msg += f", training accuracy {est.score(X, y):.4f}"
    elif is_regressor(est):
        msg += f", training R^2 {est.score(X, y.astype(np.float64)):.4f}"
    print(msg + f" -> {args.model}", file=sys.stderr)
    return 0


def _is_libsvm_model(path):
    try:
        with open(path, "rb") as f:
            return f.read(9) == b"svm_type "
    except OSError:
        return False


def read_model(path, allow_unsafe_pickle=False):
    """(estimator, header) of a corevector model file, or of a LIBSVM model file (by its first bytes)."""
    from ..io.libsvm import load_libsvm_model
    from ..io.model_files import load_model

    if _is_libsvm_model(path):
        est = load_libsvm_model(path)
        return est, {"n_features": est.n_features_in_, "feature_names": None, "target_name": None,
                     "data_format": None}
    return load_model(path, allow_unsafe_pickle=allow_unsafe_pickle, return_header=True)


def cmd_predict(args):
    from sklearn.base import is_classifier, is_outlier_detector

    from ..io.files import atomic_write

    _check_outputs([("--out", args.out)], [("model", args.model), ("data", args.data)])
    est, header = read_model(args.model)
    if args.probability and not (is_classifier(est) and getattr(est, "probability", False)):
        raise CLIError(f"--probability needs a classifier fitted with --probability ({args.model} is not)")
    data = read_prediction_data(args.data, est.n_features_in_, args.format, args.header, header["feature_names"],
                                header["target_name"], args.by_position)
    X, y = _estimator_input(data.X), data.y
    with warnings.catch_warnings():
        # columns were matched by name above; the estimator may carry feature_names_in_ from a DataFrame
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        pred = est.predict(X)
        proba = est.predict_proba(X) if args.probability else None
    if proba is None:
        text = "".join(_fmt_label(p) + "\n" for p in pred)
    else:  # LIBSVM's svm-predict -b 1: a line of labels, then the label and its probabilities
        text = "labels " + " ".join(_fmt_label(c) for c in est.classes_) + "\n" + "".join(
            _fmt_label(p) + " " + " ".join(f"{v:.6g}" for v in row) + "\n" for p, row in zip(pred, proba))
    if args.out:
        with atomic_write(args.out) as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if is_outlier_detector(est):  # MEB, CVDD: +1 inlier, -1 outlier, whatever the file's labels
        print(outlier_summary(pred, y), file=sys.stderr)
    elif y is not None and is_classifier(est):
        print(f"accuracy {np.mean(pred == y):.4f} on {len(y)} samples", file=sys.stderr)
    elif y is not None and y.dtype.kind in "iuf":  # a regressor (CVR): 000 footnote 10's errors
        from refimpl.cvr import normalized_rmse
        rmse = float(np.sqrt(np.mean((pred - y) ** 2)))
        print(f"RMSE {rmse:.6g} (RMSE/max y {normalized_rmse(y, pred):.6g}) on {len(y)} samples", file=sys.stderr)
    return 0


def cmd_convert(args):
    from ..io.libsvm import save_libsvm_model
    from ..io.model_files import save_model

    _check_outputs([("OUT", args.out)], [("model", args.model)])
    est, header = read_model(args.model, allow_unsafe_pickle=args.allow_unsafe_pickle)
    if args.to == "libsvm":
        save_libsvm_model(est, args.out)
    else:
        save_model(est, args.out, feature_names=header.get("feature_names"), target_name=header.get("target_name"),
                   data_format=header.get("data_format"))
    print(f"converted {type(est).__name__} {args.model} -> {args.out} ({args.to})", file=sys.stderr)
    return 0


#: a labelled file gets the inlier rate of each label when it has at most this many distinct labels
MAX_LABELS_SHOWN = 10


def outlier_summary(pred, y=None):
    """One line: the inlier and outlier rates of an outlier detector's predictions (+1 / -1), and per
    label of a labelled file with few labels."""
    n = len(pred)
    inl = int(np.sum(pred == 1))
    msg = f"inliers {inl / n:.4f} ({inl}), outliers {(n - inl) / n:.4f} ({n - inl}) of {n} samples"
    if y is not None and (y.dtype.kind not in "f" or np.all(y == np.round(y))):
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


#: asv subcommands that take --python and would otherwise build environments of their own (hundreds of MB,
#: in the checkout asv.conf.json names): corevector bench runs them in this interpreter (--python=same)
ASV_SAME_PYTHON = {"run", "check", "profile", "setup", "dev"}


def _sets_python(extra):
    return any(a == "-E" or a.split("=", 1)[0] in ("--python", "--environment", "-E") for a in extra)


def asv_command(extra, commit=None):
    """The asv command line for ``corevector bench EXTRA...``.

    Without an asv subcommand: ``asv run --python=same --quick --show-stderr EXTRA``, plus
    ``--set-commit-hash COMMIT`` when ``commit`` is given and EXTRA does not set one (asv saves no
    results of a run in an existing environment, such as --python=same, without it).  A full asv
    subcommand (``continuous HEAD~1 HEAD``) is passed as it is, with ``--python=same`` added to those that
    would build an environment (:data:`ASV_SAME_PYTHON`) unless EXTRA chooses one.
    """
    exe = shutil.which("asv")
    base = [exe] if exe else [sys.executable, "-m", "asv"]
    if extra and extra[0] == "--":
        extra = extra[1:]
    if not _default_run(extra):
        sub, rest = extra[0], list(extra[1:])
        if sub in ASV_SAME_PYTHON and not _sets_python(rest):
            rest = ["--python=same"] + rest
        return base + [sub] + rest
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
    state = "not a git checkout" if commit is None else f"HEAD {commit[:12]}" + (", uncommitted changes" if dirty else "")
    print(f"{PROG} bench: benchmarking the checkout {root} ({state}) with {sys.executable}", file=sys.stderr)
    here = _git(Path.cwd(), "rev-parse", "--show-toplevel")
    if here and Path(here.strip()).resolve() != root.resolve() and (Path(here.strip()) / "asv_benchmarks").is_dir():
        print(f"note: the current folder is in the checkout {here.strip()}, but this corevector runs from {root}; "
              f"run that checkout's own corevector (its venv) to benchmark it", file=sys.stderr)
    print("+ " + " ".join(cmd), file=sys.stderr)
    try:
        return subprocess.call(cmd, cwd=bench_dir)
    except FileNotFoundError:
        raise CLIError("asv is not installed (pip install asv)") from None


# --------------------------------------------------------------------------------------------
def build_parser():
    from .._version import __version__
    from ..numerics import IMPLS

    p = argparse.ArgumentParser(prog=PROG, description="Core Vector Machines: fit, predict, convert, verify, "
                                                       "report, bench.")
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

    _add_fit_parser(sub)

    q = sub.add_parser("predict", help="predict with a model written by 'fit' (or a LIBSVM model file)")
    q.add_argument("model", help="a model file of 'fit' or corevector.save_model, or a LIBSVM model file")
    q.add_argument("data", help="LIBSVM, or CSV with the model's features and optionally the target; a header row "
                                "is matched to the model's feature names")
    _data_file_options(q)
    q.add_argument("--by-position", action="store_true",
                   help="match the columns to the model's features by position, not by name")
    q.add_argument("--probability", action="store_true",
                   help="write the class probabilities after each label, under a line of labels (as LIBSVM's "
                        "svm-predict -b 1)")
    q.add_argument("--out", help="write predictions here (one per line) instead of stdout")
    q.set_defaults(func=cmd_predict)

    c = sub.add_parser("convert", help="convert a model file: LIBSVM's format, or an old pickle-format file",
                       description="Convert a model file (corevector's, or LIBSVM's text format) to corevector's "
                                   "format (--to native) or LIBSVM's (--to libsvm).")
    c.add_argument("model")
    c.add_argument("out")
    c.add_argument("--to", choices=("native", "libsvm"), default="native", help="default native")
    c.add_argument("--allow-unsafe-pickle", action="store_true",
                   help="read a model file in corevector 0.1's pickle format: unpickling RUNS ANY CODE the file "
                        "holds; only for a file you trust")
    c.set_defaults(func=cmd_convert)

    b = sub.add_parser("bench", help="run the asv benchmarks (asv run --python=same --quick [ARGS])")
    b.add_argument("--config-dir", help=argparse.SUPPRESS)
    b.add_argument("asv_args", nargs=argparse.REMAINDER,
                   help="extra asv arguments, or a full asv subcommand (e.g. 'continuous HEAD~1 HEAD')")
    b.set_defaults(func=cmd_bench)
    return p


def _add_fit_parser(sub):
    """The ``fit`` subcommand's options: each estimator's own defaults in their help (_defaults_help)."""
    from refimpl.driver import STOPS
    from refimpl.kernels import KERNELS

    from ..numerics import IMPLS
    from ..registry import CLI_ESTIMATORS

    f = sub.add_parser("fit", help="fit a model on a LIBSVM or CSV file and save it",
                       description="Fit an estimator on a LIBSVM or CSV file (gzip or not) and save it as a model "
                                   "file (no code in it: see 'Model files' in README).  Defaults below are each "
                                   "estimator's own.")
    f.add_argument("data", help="training data (LIBSVM text, or CSV with the target in the last column, numbers "
                                "or class labels; cvdd and meb do not use the target)")
    f.add_argument("--model", required=True, help="output model file")
    _data_file_options(f)
    f.add_argument("--n-features", type=_positive_int, default=None,
                   help="LIBSVM only: the number of features (default: the highest index in the file)")
    f.add_argument("--estimator", choices=tuple(CLI_ESTIMATORS), default="cvm", help="default cvm")
    f.add_argument("--C", type=_positive_float, default=UNSET,
                   help="penalty (" + _defaults_help("C", {"auto": "auto: 3000 max|y|"}) + ")")
    f.add_argument("--gamma", type=_gamma, default=UNSET,
                   help="kernel width: a positive number or beta/scale/auto (" + _defaults_help("gamma") + ")")
    f.add_argument("--eps", type=_positive_float, default=UNSET,
                   help="(1+eps) tolerance (" + _defaults_help("eps") + ")")
    f.add_argument("--kernel", choices=KERNELS, default=UNSET, help=_defaults_help("kernel"))
    f.add_argument("--degree", type=_positive_int, default=UNSET,
                   help="polynomial kernel's degree (" + _defaults_help("degree") + ")")
    f.add_argument("--coef0", type=_finite_float, default=UNSET,
                   help="polynomial kernel's constant term (" + _defaults_help("coef0") + ")")
    f.add_argument("--impl", choices=IMPLS, default=UNSET, help=_defaults_help("impl"))
    f.add_argument("--sample-size", type=_sample_size, default=UNSET,
                   help="candidates per iteration, or 'none' for full scans (" + _defaults_help("sample_size") + ")")
    f.add_argument("--max-iter", type=_positive_int, default=UNSET, help=_defaults_help("max_iter"))
    f.add_argument("--random-state", type=int, default=DEFAULT_SEED,
                   help=f"seed of the random draws (default {DEFAULT_SEED}: two fits of one file give one model)")
    f.add_argument("--stop", choices=tuple(STOPS), default=UNSET,
                   help="stopping rule of the core-set loop; radius is the paper's (" + _defaults_help("stop") + ")")
    f.add_argument("--mu", type=_positive_float, default=UNSET,
                   help="mean error outside the tube, not the error of the fit: too small a mu flattens the fit ("
                   + _defaults_help("mu", {"auto": "auto: C / (50 m)"}) + ")")
    f.add_argument("--class-weight", type=_class_weight, default=UNSET,
                   help="'balanced' or LABEL:WEIGHT,... multiplying C per class (" + _defaults_help("class_weight") + ")")
    f.add_argument("--probability", action="store_const", const=True, default=UNSET,
                   help="fit Platt's sigmoids for 'predict --probability' (5 extra fits per pair; "
                        + _defaults_help("probability") + ")")
    f.set_defaults(func=cmd_fit)


def _defaults_help(param, words=None):
    """'default: cvm X, cvdd Y, ...': each command-line estimator's own default of ``param`` (read from the
    classes, so the help cannot go stale); 'not for E' names those without it."""
    from ..registry import CLI_ESTIMATORS

    have, without = [], []
    for name, e in CLI_ESTIMATORS.items():
        params = e.cls().get_params()
        if param not in params:
            without.append(name)
            continue
        v = params[param]
        text = (words or {}).get(v, v) if isinstance(v, str) else v
        have.append(f"{name} {'none' if text is None else text}")
    # one value for all: say it once
    values = {h.split(" ", 1)[1] for h in have}
    out = "default " + (values.pop() if len(values) == 1 and not without else ", ".join(have))
    if without:
        out += "; not for " + ", ".join(without)
    return out


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
    except OSError as exc:  # every OS error in one line: the file and the reason (never a temporary file)
        names = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n is not None)
        reason = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
        print(f"{PROG} {args.command}: error: {names + ': ' if names else ''}{reason}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, MemoryError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{PROG} {args.command}: error: {msg}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = saved


if __name__ == "__main__":
    sys.exit(main())
