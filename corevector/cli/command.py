"""The ``corevector`` command line: its parser and subcommands (:func:`main`).

Subcommands
-----------
``report [--quick] [--out DIR]``
    Regenerate the experiment report (``python -m reports.run`` in the checkout; needs a source
    checkout, i.e. an editable install: the wheel does not ship ``reports/``).
``verify [--quick] [--estimator NAME] [--seed N]``
    Check the (1+eps)^2 guarantee of 001 Sec. 4 on a grid of small random problems for every
    bounded formulation (two-class L2-SVM, one-class L2-SVM, MEB, CVR), both implementations,
    several eps, ``sample_size=None``, against an exact QP solver (cvxopt); the grid and its checks
    are :mod:`refimpl.verify`.  ``--estimator`` checks one estimator's formulation (cvm, cvdd, meb, cvr;
    the others are a one-line error saying why).  Exit status 1 on any violation.
``fit DATA --model OUT [options]``
    Fit any estimator of :mod:`corevector.registry` (``--estimator`` cvm, cvdd, meb, cvr, ssvr, mmda,
    surface) on a LIBSVM or CSV file (gzip or not) and save it as a model file: a versioned JSON header
    and the fitted arrays, no code (:mod:`corevector.io.model_files`).  The seed defaults to 0, so two
    fits of one file give one model file, byte for byte; ``--help`` lists each estimator's defaults.
``predict MODEL DATA [--out FILE] [--probability] [--by-position]``
    Predict with a model written by ``fit`` or :func:`corevector.save_model`, or with a LIBSVM model file:
    labels, targets or +1/-1 one per line; MMDA's transform (a comma-separated row per line);
    ImplicitSurface's implicit values f - 1.  On stderr: the accuracy (classifier; a warning instead when
    the file's labels share none with the model's classes) or RMSE (regressor) when DATA carries targets;
    the inlier and outlier rates for CVDD and MEB.  A model fitted on a CSV file with a header row
    matches DATA's columns by name.
``convert MODEL OUT [--to native|libsvm] [--allow-unsafe-pickle]``
    Convert between corevector's model files and LIBSVM's (:mod:`corevector.io.libsvm`), the format chosen
    by OUT's extension (``.model`` LIBSVM, ``.cvm`` or any other corevector's; ``--to`` overrides); with
    ``--allow-unsafe-pickle``, read a model file of corevector 0.1's pickle format (which runs the
    file's code: for files you trust) and write it in today's format.
``bench [ASV ARGS...]``
    Run the asv suite in ``asv_benchmarks/`` (default: ``asv run --python=same --quick
    --set-commit-hash HEAD``, so the results are saved against the checkout's HEAD; an asv subcommand that
    would build environments gets ``--python=same``; it says which checkout it benchmarks; needs a source
    checkout).  ``bench compare A B`` (the regression verdict), ``bench record`` and ``bench plot`` are
    ``corevector/cli/bench_compare.py``'s.
``--version``
    Print the version.

Data files
----------
The format is read from the file's lines, not from its name or the model (``--format`` overrides):
``label index:value ...`` is LIBSVM, comma-separated values are CSV (:func:`sniff_format`).

* LIBSVM: indices start at 1 (a 0 index is an error naming its line); missing indices are zeros, so a
  file whose highest index is below the model's feature count is valid, and an index above it is an
  error.  The data stay sparse (CSR) end to end: the estimators take CSR input (:func:`_estimator_input`),
  but SparseSVR, MMDA and ImplicitSurface, which take dense rows: for them the rows are made dense when
  that takes at most ``max(DENSE_ALLOWANCE, 2 stored values)`` entries (else a one-line error).
* CSV: the target is the last column (``fit``), numbers or class labels (strings); ``predict`` matches a
  header row to the model's feature names (any order; ``--by-position`` matches by position), else takes
  the model's feature count of columns, plus optionally the target.  The first row is a header when none
  of its fields is a number or a missing-value token such as NA, or when its target field is a name above
  a column of numbers (``1,2,label``); ``--header``/``--no-header`` decide otherwise.  A missing,
  non-numeric or non-finite feature value is an error naming its line and column.
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

from . import options
# the options' names this module uses (and its users import from here)
from .options import DEFAULT_SEED, FIT_PARAMS, FORMATS, PROG, UNSET  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------
# verify: the grid and its checks live in refimpl.verify; the CLI supplies both engines
# --------------------------------------------------------------------------------------------
def get_fit_meb(impl):
    from ..numerics import numerics

    return numerics(impl).fit_meb


#: the formulation of refimpl.verify's grid each estimator's fit solves (verify --estimator NAME)
VERIFY_FORMULATIONS = {"CVMClassifier": "two_class", "CVDD": "one_class", "MEB": "meb", "CVR": "cvr"}
#: why verify has no grid for the other estimators
VERIFY_NOT = {
    "SparseSVR": "SparseSVR grows a sparse expansion in the primal ([002]): it has no enclosing ball and no "
                 "(1+eps)^2 bound",
    "MMDA": "MMDA's directions are constrained balls ([004]) that the grid does not build",
    "ImplicitSurface": "ImplicitSurface's levels are CVRs: --estimator cvr checks their bound",
}


def verify_formulations(name):
    """The formulations ``verify --estimator NAME`` checks (None: all), or a CLIError naming the estimator
    and the estimators verify supports."""
    from refimpl.verify import FORMULATIONS

    from ..registry import CLI_ESTIMATORS

    if name is None:
        return FORMULATIONS
    cls = CLI_ESTIMATORS[name].cls.__name__
    if cls not in VERIFY_FORMULATIONS:
        names = ", ".join(n for n, e in CLI_ESTIMATORS.items() if e.cls.__name__ in VERIFY_FORMULATIONS)
        raise CLIError(f"verify checks the (1+eps)^2 bound of the core-set balls ({names}); {VERIFY_NOT[cls]}")
    return (VERIFY_FORMULATIONS[cls],)


def cmd_verify(args):
    from refimpl.verify import VERIFY_RTOL, format_table, verify_cases

    formulations = verify_formulations(args.estimator)
    grid = "tiny" if args.tiny else ("quick" if args.quick else "full")
    impls = ("fast", "ref") if args.impl == "both" else (args.impl,)
    rows = list(verify_cases(grid, seed=args.seed, engines={impl: get_fit_meb(impl) for impl in impls},
                             formulations=formulations, progress=not args.no_progress))
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


def _task(est):
    """What ``est`` learns (:class:`corevector.registry.Entry`'s task: 'classifier', 'regressor', 'outlier',
    'transformer', 'surface')."""
    from ..registry import by_name

    return by_name(type(est).__name__).task


def _dense_only(est):
    """True when ``est`` takes dense rows only (SparseSVR, MMDA, ImplicitSurface: scikit-learn's input tag)."""
    return not est.__sklearn_tags__().input_tags.sparse


def _fit_summary(est, task):
    """What a fit found, in a few words: core set, basis, directions or levels."""
    if task == "transformer":
        return f"{est.n_components_} direction(s), core sets {int(np.sum(est.core_set_size_))}"
    if task == "surface":
        return f"{est.n_core_vectors_} core vectors over {len(est.levels_)} levels"
    if hasattr(est, "n_basis_"):
        return f"{est.n_basis_} basis functions"
    return f"core set {len(est.core_set_)}"


def header_maybe(y):
    """True when the first of string labels ``y`` occurs only there: a header row's target name, read as data
    because above string labels a name cannot be told from a label (the readers' rule needs numbers there)."""
    return y is not None and y.dtype.kind == "U" and len(y) > 1 and not np.any(y[1:] == y[0])


def cmd_fit(args):
    from ..io.model_files import save_model
    from ..registry import CLI_ESTIMATORS

    _check_outputs([("--model", args.model)], [("data", args.data)])
    params = {k: getattr(args, k, UNSET) for k in FIT_PARAMS}
    est = make_estimator(args.estimator, **params)
    name, task = type(est).__name__, CLI_ESTIMATORS[args.estimator].task
    data = read_training_data(args.data, args.format, args.header, args.n_features,
                              numeric_target=task == "regressor", target=task != "surface")
    X, y = _estimator_input(data.X, dense=_dense_only(est), who=name), data.y
    if task == "surface" and X.shape[1] != 3:
        raise CLIError(f"{name} fits 3-D points: {args.data} needs 3 columns (x, y, z; no target), it has "
                       f"{X.shape[1]}")
    if task in ("classifier", "transformer") and data.fmt == "csv" and data.names is None and header_maybe(y):
        print(f"{PROG} fit: note: the label {_fmt_label(y[0])!r} of {args.data}'s first row occurs nowhere else; "
              f"if that row is a header, pass --header", file=sys.stderr)
    if task in ("classifier", "transformer"):
        est.fit(X, y)
    elif task == "regressor":
        est.fit(X, y.astype(np.float64))
    else:  # cvdd, meb, surface: unsupervised, the target column / label is not used
        est.fit(X)
    save_model(est, args.model, feature_names=data.names, target_name=data.target_name, data_format=data.fmt)
    msg = f"fitted {name} on {X.shape[0]} x {X.shape[1]} ({data.fmt}): {_fit_summary(est, task)}"
    if task == "classifier":
        msg += f", training accuracy {est.score(X, y):.4f}"
    elif task == "regressor":
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


def _as_text(values):
    """The labels as the text they are written in (1, 1.0 and '1' all read '1'), element by element."""
    values = np.asarray(values)
    uniq, inv = np.unique(values, return_inverse=True)
    return np.array([_fmt_label(u) for u in uniq], dtype=object)[inv.ravel()]


#: at most this many labels are listed in a message
LABELS_LISTED = 5


def _listed(labels):
    labels = [_fmt_label(v) for v in labels]
    return ", ".join(labels[:LABELS_LISTED]) + (", ..." if len(labels) > LABELS_LISTED else "")


def accuracy_message(pred, y, classes, data_path):
    """The accuracy line of ``predict`` on a labelled file, labels compared as written (the model's 1.0 is the
    file's 1); a warning instead when the file's labels share none with the model's classes (an accuracy of
    0 would say nothing), a note on the labels that are not classes of the model."""
    truth, guess = _as_text(y), _as_text(pred)
    file_labels = set(truth.tolist())
    known = {_fmt_label(c) for c in classes}
    if not file_labels & known:
        return (f"{PROG} predict: warning: the labels in {data_path} ({_listed(sorted(file_labels))}) share none "
                f"with the model's classes ({_listed(classes)}): no accuracy (is that column the labels?)")
    msg = f"accuracy {np.mean(guess == truth):.4f} on {len(y)} samples"
    unknown = sorted(file_labels - known)
    if unknown:
        msg += (f"\n{PROG} predict: note: label(s) {_listed(unknown)} of {data_path} are not classes of the model "
                f"({_listed(classes)}); their {int(np.isin(truth, unknown).sum())} samples count as errors")
    return msg


def cmd_predict(args):
    from ..io.files import atomic_write

    _check_outputs([("--out", args.out)], [("model", args.model), ("data", args.data)])
    est, header = read_model(args.model)
    name, task = type(est).__name__, _task(est)
    if args.probability and not (task == "classifier" and getattr(est, "probability", False)):
        raise CLIError(f"--probability needs a CVMClassifier fitted with --probability ({args.model} is "
                       + ("one fitted without it)" if task == "classifier" else f"a model of {name})"))
    data = read_prediction_data(args.data, header["n_features"], args.format, args.header, header["feature_names"],
                                header["target_name"], args.by_position)
    X, y = _estimator_input(data.X, dense=_dense_only(est), who=name), data.y
    proba = None
    with warnings.catch_warnings():
        # columns were matched by name above; the estimator may carry feature_names_in_ from a DataFrame
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        if task == "transformer":  # MMDA: the projections on its directions, one row of components per line
            pred = est.transform(X)
        elif task == "surface":  # the implicit function f - 1: 0 on the surface, > 0 inside, < 0 outside
            pred = est.decision_function(X)
        else:
            pred = est.predict(X)
            proba = est.predict_proba(X) if args.probability else None
    if task == "transformer":
        text = "".join(",".join(repr(float(v)) for v in row) + "\n" for row in pred)
    elif task == "surface":
        text = "".join(repr(float(v)) + "\n" for v in pred)
    elif proba is None:
        text = "".join(_fmt_label(p) + "\n" for p in pred)
    else:  # LIBSVM's svm-predict -b 1: a line of labels, then the label and its probabilities
        text = "labels " + " ".join(_fmt_label(c) for c in est.classes_) + "\n" + "".join(
            _fmt_label(p) + " " + " ".join(f"{v:.6g}" for v in row) + "\n" for p, row in zip(pred, proba))
    if args.out:
        with atomic_write(args.out) as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if task == "outlier":  # MEB, CVDD: +1 inlier, -1 outlier, whatever the file's labels
        print(outlier_summary(pred, y), file=sys.stderr)
    elif task == "transformer":
        print(f"{name}: {pred.shape[1]} component(s) of {pred.shape[0]} samples (one row per line, "
              f"comma-separated)", file=sys.stderr)
    elif task == "surface":
        inside = int(np.sum(pred > 0))
        print(f"{name}: implicit values f - 1 of {len(pred)} points (0 on the surface): {inside} inside (> 0), "
              f"{len(pred) - inside} outside; mean |f - 1| {float(np.mean(np.abs(pred))):.6g}", file=sys.stderr)
    elif y is not None and task == "classifier":
        print(accuracy_message(pred, y, est.classes_, args.data), file=sys.stderr)
    elif y is not None and y.dtype.kind in "iuf":  # a regressor (CVR, SparseSVR): 000 footnote 10's errors
        from refimpl.cvr import normalized_rmse
        rmse = float(np.sqrt(np.mean((pred - y) ** 2)))
        print(f"RMSE {rmse:.6g} (RMSE/max y {normalized_rmse(y, pred):.6g}) on {len(y)} samples", file=sys.stderr)
    return 0


#: the model file format ``convert`` writes, by the output's extension (``--to`` overrides)
CONVERT_EXTENSIONS = {".model": "libsvm", ".cvm": "native"}


def convert_target(out, to=None):
    """'libsvm' or 'native': ``to`` when given, else by OUT's extension (.model LIBSVM, .cvm native; any other:
    native)."""
    if to:
        return to
    return CONVERT_EXTENSIONS.get(os.path.splitext(os.fspath(out))[1].lower(), "native")


def cmd_convert(args):
    from ..io.libsvm import save_libsvm_model
    from ..io.model_files import save_model

    _check_outputs([("OUT", args.out)], [("model", args.model)])
    est, header = read_model(args.model, allow_unsafe_pickle=args.allow_unsafe_pickle)
    to = convert_target(args.out, args.to)
    if to == "libsvm":
        save_libsvm_model(est, args.out)
    else:
        save_model(est, args.out, feature_names=header.get("feature_names"), target_name=header.get("target_name"),
                   data_format=header.get("data_format"))
    print(f"converted {type(est).__name__} {args.model} -> {args.out} ({to})", file=sys.stderr)
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
    from .bench_compare import TOOLS, run_tool
    if args.asv_args[:1] and args.asv_args[0] in TOOLS:  # compare, record, plot: corevector's own
        return run_tool(args.asv_args, bench_dir)
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
    """The ``corevector`` parser: each subcommand's options are :mod:`corevector.cli.options`'."""
    from .._version import __version__

    p = argparse.ArgumentParser(prog=PROG, description="Core Vector Machines: fit, predict, convert, verify, "
                                                       "report, bench.")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for add, func in ((options.add_report_parser, cmd_report), (options.add_verify_parser, cmd_verify),
                      (options.add_fit_parser, cmd_fit), (options.add_predict_parser, cmd_predict),
                      (options.add_convert_parser, cmd_convert), (options.add_bench_parser, cmd_bench)):
        add(sub).set_defaults(func=func)
    return p


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"{PROG}: {category.__name__}: {message}", file=sys.stderr if file is None else file)


def main(argv=None):
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "bench" and argv[1:] not in (["-h"], ["--help"]):
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
