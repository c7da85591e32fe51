"""The ``corevector`` command line.

Subcommands
-----------
``report [--quick] [--out DIR]``
    Regenerate the experiment report (``python -m reports.run``; needs a source checkout).
``verify [--quick] [--seed N]``
    Check the (1+eps)^2 guarantee of 001 Sec. 4 on a grid of small random problems for every
    bounded formulation (two-class L2-SVM, one-class L2-SVM, MEB), both implementations, several
    eps, ``sample_size=None``, against an exact QP solver (cvxopt).  Exit status 1 on any violation.
``fit DATA --model OUT.pkl [options]``
    Fit a CVMClassifier / CVDD / MEB / CVR on a LIBSVM or CSV file and pickle it.
``predict MODEL DATA [--out FILE]``
    Predict with a pickled model; prints the accuracy on stderr when DATA carries labels.
``bench [ASV ARGS...]``
    Run the asv suite in ``asv_benchmarks/`` (default: ``asv run --python=same --quick``).

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
#: relative slack of the verify checks (floating point of engine and exact solver)
VERIFY_RTOL = 1e-7
ESTIMATORS = ("cvm", "cvdd", "meb", "cvr")
FORMATS = ("libsvm", "csv")


#: default of the fit options: "use the estimator's own default" (None is a valid sample_size)
UNSET = argparse.SUPPRESS


class CLIError(Exception):
    """An error to report as one line on stderr (exit status 1)."""


# --------------------------------------------------------------------------------------------
# exact reference solver and the verification grid (also used by reports/ratios.py)
# --------------------------------------------------------------------------------------------
def exact_meb(problem):
    """(lower, upper) bracket of the exact r*^2 from the exact-QP baseline (:mod:`refimpl.exact_qp`)."""
    from refimpl.exact_qp import exact_meb as _exact

    lower, upper, _ = _exact(problem)
    return lower, upper


FORMULATIONS = ("two_class", "one_class", "meb", "cvr")


def make_problem(formulation, m, kernel, seed, C=10.0, d=3):
    """A random small problem of one formulation: Gaussian blobs in d dimensions, gamma='beta'."""
    from refimpl import cvm, cvr
    from refimpl.kernels import make_kernel_spec

    rng = np.random.default_rng(seed)
    y = np.where(rng.random(m) < 0.5, 1.0, -1.0)
    y[:2] = [1.0, -1.0]
    X = rng.normal(size=(m, d)) + 0.75 * y[:, None]
    if kernel == "poly":
        spec = make_kernel_spec(X, "poly", "beta", degree=2, coef0=1.0)
    else:
        spec = make_kernel_spec(X, kernel, "beta")
    if formulation == "two_class":
        return cvm.two_class_problem(X, y, spec, C)
    if formulation == "one_class":
        return cvm.one_class_problem(X, spec, C)
    if formulation == "meb":
        return cvm.svdd_problem(X, spec)
    if formulation == "cvr":  # L2-SVR on a smooth target (000 eqs. (7)-(8), (15)): 2m augmented points
        target = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=m)
        return cvr.cvr_problem(X, target, spec, C, 0.5)
    raise ValueError(f"unknown formulation {formulation!r}")


def get_fit_meb(impl):
    from .estimators import get_engine

    return get_engine(impl)[0]


VERIFY_GRIDS = {
    # name: (sizes, seeds, kernels, eps values)
    "tiny": ((40,), 1, ("rbf",), (1e-1, 1e-3)),
    "quick": ((60, 200), 2, ("rbf", "laplacian", "poly"), (1e-1, 1e-2, 1e-3, 1e-4)),
    "full": ((50, 150, 300), 5, ("rbf", "laplacian", "poly", "linear"), (1e-1, 1e-2, 1e-3, 1e-4, 1e-5)),
}


def verify_cases(grid="quick", seed=0, impls=("fast", "ref"), formulations=FORMULATIONS, progress=True):
    """Run the verification grid; yields one dict per (problem, impl, eps) fit.

    Keys: formulation, kernel, m, seed, impl, eps, R2 (engine radius^2), r_cert2, certified_ratio,
    exact_lo/exact_hi (bracket of r*^2), lower_ratio = R2 / r*^2 (must be <= 1),
    upper_ratio = r*^2 / R2 (must be <= (1+eps)^2), ok, reason.
    """
    sizes, n_seeds, kernels, eps_grid = VERIFY_GRIDS[grid]
    problems = [(f, k, m, seed + s) for m in sizes for s in range(n_seeds) for k in kernels for f in formulations]
    try:
        from tqdm import tqdm
        it = tqdm(problems, desc="verify", unit="problem", disable=not progress, file=sys.stderr)
    except ImportError:  # pragma: no cover
        it = problems
    for formulation, kernel, m, s in it:
        problem = make_problem(formulation, m, kernel, s)
        lo, hi = exact_meb(problem)
        for impl in impls:
            fit_meb = get_fit_meb(impl)
            for eps in eps_grid:
                with warnings.catch_warnings():  # the bound is the radius rule's; its accuracy warning is moot here
                    warnings.filterwarnings("ignore", message="stop='radius' with eps")
                    res = fit_meb(problem, float(eps), sample_size=None, random_state=s, certify=True,
                                  stop="radius")
                yield check_case(dict(formulation=formulation, kernel=kernel, m=m, seed=s, impl=impl, eps=eps),
                                 res, lo, hi)


def check_case(case, res, lo, hi, rtol=VERIFY_RTOL):
    """Check R^2 <= r*^2 and r*^2 <= (1+eps)^2 R^2 (each with slack 1+rtol) for one fit."""
    R2 = float(res.radius2)
    eps = case["eps"]
    bound = (1.0 + eps) ** 2
    reasons = []
    # R^2 is the dual value of a feasible point, so it cannot exceed r*^2 <= hi.
    if not R2 <= hi * (1 + rtol):
        reasons.append(f"R^2={R2:.12g} > r*^2={hi:.12g}")
    # the guarantee: r*^2 <= (1+eps)^2 R^2 (lo <= r*^2 is what we can prove exceeds it)
    if not lo <= bound * R2 * (1 + rtol):
        reasons.append(f"r*^2/R^2={lo / R2:.12g} > (1+eps)^2={bound:.12g}")
    # the engine's own certificate must also satisfy the bound and enclose the exact ball
    cr = float(res.certified_ratio)
    if not cr <= bound * (1 + rtol):
        reasons.append(f"certified_ratio={cr:.12g} > (1+eps)^2")
    if not float(res.r_cert2) >= lo * (1 - rtol):
        reasons.append(f"r_cert^2={float(res.r_cert2):.12g} < r*^2={lo:.12g}")
    if hi - lo > 1e-6 * abs(hi):
        reasons.append(f"exact solver inexact: gap {hi - lo:.3g}")
    return dict(case, R2=R2, r_cert2=float(res.r_cert2), certified_ratio=cr, exact_lo=lo, exact_hi=hi,
                lower_ratio=R2 / lo if lo > 0 else np.inf, upper_ratio=lo / R2 if R2 > 0 else np.inf,
                bound=bound, n_iter=int(res.n_iter), core_size=len(res.core_set),
                ok=not reasons, reason="; ".join(reasons))


def _format_verify_table(rows):
    groups = {}
    for r in rows:
        groups.setdefault((r["formulation"], r["kernel"], r["impl"], r["eps"]), []).append(r)
    head = ["formulation", "kernel", "impl", "eps", "n", "max R2/r*2", "max r*2/R2", "max cert", "(1+eps)^2",
            "fail"]
    lines = [head]
    for (f, k, impl, eps), g in groups.items():
        lines.append([f, k, impl, f"{eps:.0e}", str(len(g)), f"{max(r['lower_ratio'] for r in g):.9f}",
                      f"{max(r['upper_ratio'] for r in g):.9f}", f"{max(r['certified_ratio'] for r in g):.9f}",
                      f"{(1 + eps) ** 2:.9f}", str(sum(not r["ok"] for r in g))])
    widths = [max(len(row[c]) for row in lines) for c in range(len(head))]
    out = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def cmd_verify(args):
    grid = "tiny" if args.tiny else ("quick" if args.quick else "full")
    impls = ("fast", "ref") if args.impl == "both" else (args.impl,)
    rows = list(verify_cases(grid, seed=args.seed, impls=impls, progress=not args.no_progress))
    print(_format_verify_table(rows))
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
def _import_reports():
    if str(REPO_ROOT) not in sys.path and (REPO_ROOT / "reports" / "run.py").exists():
        sys.path.insert(0, str(REPO_ROOT))
    try:
        from reports import run
    except ImportError:
        raise CLIError("the report generator (reports/) is only available in a source checkout of corevector") \
            from None
    return run


def cmd_report(args):
    run = _import_reports()
    argv = []
    if args.quick:
        argv.append("--quick")
    if args.tiny:
        argv.append("--tiny")
    if args.out:
        argv += ["--out", args.out]
    if args.only:
        argv += ["--only", *args.only]
    return run.main(argv)


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
    bench_dir = Path(args.config_dir) if args.config_dir else REPO_ROOT / "asv_benchmarks"
    if not (bench_dir / "asv.conf.json").is_file():
        raise CLIError(f"no asv.conf.json in {bench_dir} (the benchmarks need a source checkout)")
    cmd = asv_command(args.asv_args)
    env = dict(os.environ)
    # with --python=same asv imports the package from this interpreter; make the checkout importable
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    print("+ " + " ".join(cmd), file=sys.stderr)
    try:
        return subprocess.call(cmd, cwd=bench_dir, env=env)
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
    f.add_argument("--C", type=_positive_float, default=UNSET, help="penalty (cvm, cvdd; default 1)")
    f.add_argument("--gamma", type=_gamma, default=UNSET, help="positive number or beta/scale/auto (default beta)")
    f.add_argument("--eps", type=_positive_float, default=UNSET, help="(1+eps) tolerance (default 1e-6)")
    f.add_argument("--kernel", choices=("rbf", "laplacian", "poly", "linear"), default=UNSET)
    f.add_argument("--impl", choices=("fast", "ref"), default=UNSET)
    f.add_argument("--sample-size", type=_sample_size, default=UNSET,
                   help="candidates per iteration (default 59), or 'none' for full scans")
    f.add_argument("--max-iter", type=_positive_int, default=UNSET)
    f.add_argument("--random-state", type=int, default=UNSET)
    f.add_argument("--stop", choices=("margin", "radius", "gap"), default=UNSET,
                   help="stopping rule of the core-set loop (default margin; radius is the paper's)")
    f.add_argument("--mu", type=_positive_float, default=UNSET, help="CVR's mu (expected error, default 0.1)")
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
