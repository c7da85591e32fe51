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
    Fit a CVMClassifier / CVDD / MEB / CVR on a LIBSVM or CSV file and pickle it.
``predict MODEL DATA [--out FILE]``
    Predict with a pickled model; prints the accuracy on stderr when DATA carries labels.
``bench [ASV ARGS...]``
    Run the asv suite in ``asv_benchmarks/`` (default: ``asv run --python=same --quick``; needs a
    source checkout).

Errors in files or options give a one-line message on stderr and a non-zero exit status.
"""
from __future__ import annotations

import argparse
import os
import pickle
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

PROG = "corevector"
REPO_ROOT = Path(__file__).resolve().parent.parent
ESTIMATORS = ("cvm", "cvdd", "meb", "cvr")
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
# fit / predict
# --------------------------------------------------------------------------------------------
def _infer_format(path, fmt):
    if fmt is not None:
        return fmt
    return "csv" if str(path).lower().endswith((".csv", ".txt.csv")) else "libsvm"


def load_data(path, fmt=None, n_features=None):
    from refimpl.datasets import load_csv, load_libsvm

    fmt = _infer_format(path, fmt)
    if fmt == "csv":
        return load_csv(path)
    return load_libsvm(path, n_features=n_features)


def _gamma(value):
    if value in ("beta", "scale", "auto"):
        return value
    try:
        g = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number or beta/scale/auto, got {value!r}") from None
    if not np.isfinite(g) or g <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value!r}")
    return g


def _positive_float(value):
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value!r}")
    return v


def _positive_int(value):
    try:
        v = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return v


def _sample_size(value):
    if value.lower() in ("none", "all", "full"):
        return None
    try:
        v = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'none', got {value!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'none', got {value!r}")
    return v


def make_estimator(name, **params):
    from fastimpl import CVDD, CVR, MEB, CVMClassifier

    cls = {"cvm": CVMClassifier, "cvdd": CVDD, "meb": MEB, "cvr": CVR}[name]
    params = {k: v for k, v in params.items() if v is not UNSET}
    if name == "meb" and "C" in params:
        raise CLIError("--C does not apply to --estimator meb (the hard MEB has no C)")
    return cls(**params)


def cmd_fit(args):
    fmt = _infer_format(args.data, args.format)
    X, y = load_data(args.data, fmt)
    supervised = args.estimator in ("cvm", "cvr")
    if supervised and y is None:
        raise CLIError(f"{args.data}: the {args.estimator} estimator needs a target column")
    params = {k: getattr(args, k, UNSET) for k in ("C", "gamma", "eps", "kernel", "impl", "random_state",
                                                    "max_iter", "sample_size", "stop", "mu")}
    if args.estimator != "cvr" and params.get("mu", UNSET) is not UNSET:
        raise CLIError("--mu applies to --estimator cvr only")
    est = make_estimator(args.estimator, **params)
    if supervised:
        est.fit(X, y)
    else:
        est.fit(X)
    est.corevector_data_format_ = fmt
    out = Path(args.model)
    if out.parent and not out.parent.exists():
        raise CLIError(f"output directory does not exist: {out.parent}")
    with open(out, "wb") as f:
        pickle.dump(est, f, protocol=pickle.HIGHEST_PROTOCOL)
    n_core = len(est.core_set_)
    msg = f"fitted {type(est).__name__} on {X.shape[0]} x {X.shape[1]} ({fmt}): core set {n_core}"
    if args.estimator == "cvm":
        msg += f", training accuracy {est.score(X, y):.4f}"
    elif args.estimator == "cvr":
        msg += f", training R^2 {est.score(X, y):.4f}"
    print(msg + f" -> {out}", file=sys.stderr)
    return 0


def _load_model(path):
    from sklearn.base import BaseEstimator

    if not os.path.isfile(path):
        raise CLIError(f"model file not found: {path}")
    try:
        with open(path, "rb") as f:
            est = pickle.load(f)
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError, ValueError,
            TypeError) as exc:
        raise CLIError(f"{path} is not a corevector model pickle ({type(exc).__name__})") from None
    if not isinstance(est, BaseEstimator) or not hasattr(est, "predict") or not hasattr(est, "n_features_in_"):
        raise CLIError(f"{path} does not contain a fitted corevector estimator")
    return est


def cmd_predict(args):
    est = _load_model(args.model)
    fmt = _infer_format(args.data, args.format or getattr(est, "corevector_data_format_", None))
    d = est.n_features_in_
    from refimpl.datasets import load_csv, load_libsvm

    if fmt == "csv":
        X, y = load_csv(args.data, target=None)
        if X.shape[1] == d + 1:  # the file carries a target column (last)
            X, y = X[:, :-1], X[:, -1]
        elif X.shape[1] != d:
            raise CLIError(f"{args.data} has {X.shape[1]} columns; the model expects {d} features "
                           f"(or {d + 1} with a target column)")
    else:
        X, y = load_libsvm(args.data)
        if X.shape[1] > d:
            raise CLIError(f"{args.data} has {X.shape[1]} features; the model expects {d}")
        X = np.hstack([X, np.zeros((X.shape[0], d - X.shape[1]))])
    pred = est.predict(np.ascontiguousarray(X))
    text = "\n".join(_fmt_label(p) for p in pred) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if y is not None and hasattr(est, "classes_"):
        y = y.astype(est.classes_.dtype) if np.all(y == np.round(y)) else y
        print(f"accuracy {np.mean(pred == y):.4f} on {len(y)} samples", file=sys.stderr)
    elif y is not None:  # a regressor (CVR): 000 footnote 10's errors
        from refimpl.cvr import normalized_rmse
        rmse = float(np.sqrt(np.mean((pred - y) ** 2)))
        print(f"RMSE {rmse:.6g} (RMSE/max y {normalized_rmse(y, pred):.6g}) on {len(y)} samples", file=sys.stderr)
    return 0


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


def asv_command(extra):
    """The asv command line for ``corevector bench EXTRA...``."""
    exe = shutil.which("asv")
    base = [exe] if exe else [sys.executable, "-m", "asv"]
    if extra and extra[0] == "--":
        extra = extra[1:]
    if extra and extra[0] in ASV_SUBCOMMANDS:
        return base + list(extra)
    return base + ["run", "--python=same", "--quick", "--show-stderr"] + list(extra)


def cmd_bench(args):
    if args.config_dir:
        bench_dir = Path(args.config_dir)
    else:
        bench_dir = _need_checkout("bench") / "asv_benchmarks"
    if not (bench_dir / "asv.conf.json").is_file():
        raise CLIError(f"no asv.conf.json in {bench_dir} (the benchmarks need a source checkout)")
    cmd = asv_command(args.asv_args)
    # with --python=same asv imports corevector from this interpreter (the editable install)
    print("+ " + " ".join(cmd), file=sys.stderr)
    try:
        return subprocess.call(cmd, cwd=bench_dir)
    except FileNotFoundError:
        raise CLIError("asv is not installed (pip install asv)") from None


# --------------------------------------------------------------------------------------------
def build_parser():
    p = argparse.ArgumentParser(prog=PROG, description="Core Vector Machines: fit, predict, verify, report, bench.")
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
    v.add_argument("--impl", choices=("both", "fast", "ref"), default="both")
    v.add_argument("--no-progress", action="store_true", help="no progress bar")
    v.set_defaults(func=cmd_verify)

    f = sub.add_parser("fit", help="fit a model on a LIBSVM or CSV file and pickle it")
    f.add_argument("data", help="training data (LIBSVM text, or CSV with the target in the last column)")
    f.add_argument("--model", required=True, help="output pickle")
    f.add_argument("--format", choices=FORMATS, help="default: csv for *.csv, else libsvm")
    f.add_argument("--estimator", choices=ESTIMATORS, default="cvm")
    f.add_argument("--C", type=_positive_float, default=UNSET, help="penalty (cvm, cvdd: default 1; cvr: default 3000 max|y|)")
    f.add_argument("--gamma", type=_gamma, default=UNSET, help="positive number or beta/scale/auto (default beta)")
    f.add_argument("--eps", type=_positive_float, default=UNSET, help="(1+eps) tolerance (default: the estimator's, 1e-2 for cvm and cvr)")
    f.add_argument("--kernel", choices=("rbf", "laplacian", "poly", "linear"), default=UNSET)
    f.add_argument("--impl", choices=("fast", "ref"), default=UNSET)
    f.add_argument("--sample-size", type=_sample_size, default=UNSET,
                   help="candidates per iteration (default 59), or 'none' for full scans")
    f.add_argument("--max-iter", type=_positive_int, default=UNSET)
    f.add_argument("--random-state", type=int, default=UNSET)
    f.add_argument("--stop", choices=("margin", "radius", "gap", "hybrid"), default=UNSET,
                   help="stopping rule of the core-set loop (default: the estimator's, hybrid for cvm and cvr; radius is the paper's)")
    f.add_argument("--mu", type=_positive_float, default=UNSET, help="CVR's mu (expected error; default C / (50 m))")
    f.set_defaults(func=cmd_fit)

    q = sub.add_parser("predict", help="predict with a pickled model")
    q.add_argument("model")
    q.add_argument("data")
    q.add_argument("--format", choices=FORMATS)
    q.add_argument("--out", help="write predictions here (one per line) instead of stdout")
    q.set_defaults(func=cmd_predict)

    b = sub.add_parser("bench", help="run the asv benchmarks (asv run --python=same --quick [ARGS])")
    b.add_argument("--config-dir", help=argparse.SUPPRESS)
    b.add_argument("asv_args", nargs=argparse.REMAINDER,
                   help="extra asv arguments, or a full asv subcommand (e.g. 'continuous HEAD~1 HEAD')")
    b.set_defaults(func=cmd_bench)
    return p


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
    except (ValueError, TypeError, OSError, pickle.PickleError, EOFError, MemoryError) as exc:
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
