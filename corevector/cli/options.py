"""The command line's options: the argparse types of option values and each subcommand's parser, with
its usage, description and help (:func:`corevector.cli.command.build_parser` puts them together and
gives each its command).  The ``fit`` options state each estimator's own defaults, read from the classes
(:func:`_defaults_help`), so the help cannot go stale."""
from __future__ import annotations

import argparse

import numpy as np

from ..io.readers import _is_number

PROG = "corevector"
FORMATS = ("libsvm", "csv")
#: default of the fit options: "use the estimator's own default" (None is a valid sample_size)
UNSET = argparse.SUPPRESS
#: the fit options that are estimator parameters, by attribute name (the parameter has the same name)
FIT_PARAMS = ("C", "gamma", "eps", "kernel", "degree", "coef0", "impl", "random_state", "max_iter",
              "sample_size", "stop", "mu", "class_weight", "probability", "n_components", "n_basis")
#: corevector fit's seed when --random-state is not given: two fits of one file give one model
DEFAULT_SEED = 0


# --------------------------------------------------------------------------------------------
# option values
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
_gamma = _positive(float, {w: w for w in ("beta", "scale", "auto", "select")})
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


# --------------------------------------------------------------------------------------------
# the subcommands' parsers
# --------------------------------------------------------------------------------------------
def add_report_parser(sub):
    """``report``: regenerate the experiment report (a source checkout's reports/)."""
    r = sub.add_parser(
        "report", help="regenerate the experiment report (reports/)",
        description="Regenerate the experiment report from scratch: run every experiment of reports/ (python -m "
                    "reports.run in the checkout) and write its tables (CSV, markdown), figures (PNG) and REPORT.md "
                    "into the output folder.  Needs a source checkout (an editable install, pip install -e .): "
                    "the installed wheel does not ship reports/.  The full report runs the papers' scales "
                    "(hours); --quick smaller sizes.")
    r.add_argument("--quick", action="store_true", help="smaller sizes (about 15 minutes on 2 cores)")
    r.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    r.add_argument("--out", metavar="DIR", help="output folder (default reports/output)")
    r.add_argument("--only", nargs="+", metavar="NAME", help="run only these experiments (e.g. checkerboard)")
    return r


def add_verify_parser(sub):
    """``verify``: the (1+eps)^2 bound against an exact solver, for every formulation or one estimator's."""
    from ..numerics import IMPLS
    from ..registry import CLI_ESTIMATORS

    v = sub.add_parser(
        "verify", help="check the (1+eps)^2 bound against an exact solver (cvxopt)",
        description="Check the guarantee of [001] Sec. 4, R^2 <= r*^2 <= (1+eps)^2 R^2, on a grid of small random "
                    "problems: every bounded formulation (two-class L2-SVM, one-class L2-SVM, MEB, CVR), every "
                    "kernel, several eps, full scans (sample_size=None), both implementations, against the exact "
                    "radius r* of an independent QP solver (cvxopt).  Prints a table per formulation, kernel, "
                    "implementation and eps; exit status 1 on any violation.  The full grid takes minutes; "
                    "--quick a smaller one.")
    v.add_argument("--quick", action="store_true", help="a smaller grid")
    v.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    v.add_argument("--estimator", metavar="NAME", choices=tuple(CLI_ESTIMATORS),
                   help="check only this estimator's formulation: cvm (two-class), cvdd (one-class), meb, cvr "
                        "(default: all)")
    v.add_argument("--seed", type=int, default=0, metavar="N", help="first random seed (default 0)")
    v.add_argument("--impl", choices=("both",) + IMPLS, default="both", help="implementations to check "
                                                                             "(default both)")
    v.add_argument("--no-progress", action="store_true", help="no progress bar")
    return v


def add_fit_parser(sub):
    """The ``fit`` subcommand's options: each estimator's own defaults in their help (_defaults_help)."""
    from refimpl.driver import STOPS
    from refimpl.kernels import KERNELS

    from ..numerics import IMPLS
    from ..registry import CLI_ESTIMATORS

    f = sub.add_parser("fit", help="fit a model on a LIBSVM or CSV file and save it",
                       description="Fit an estimator on a LIBSVM or CSV file (gzip or not) and save it as a model "
                                   "file (no code in it: see 'Model files' in README).  Defaults below are each "
                                   "estimator's own, read from its class.  An option that does not apply to the "
                                   "estimator is an error.",
                       epilog="Estimators: " + "; ".join(f"{n} ({e.cls.__name__}): {ESTIMATOR_DATA[e.task]}"
                                                         for n, e in CLI_ESTIMATORS.items()) + ".")
    f.add_argument("data", help="training data (LIBSVM text, or CSV with the target in the last column, numbers "
                                "or class labels; cvdd and meb do not use the target, surface reads x,y,z columns "
                                "and no target)")
    f.add_argument("--model", required=True, help="output model file")
    data_file_options(f)
    f.add_argument("--n-features", type=_positive_int, default=None,
                   help="LIBSVM only: the number of features (default: the highest index in the file)")
    f.add_argument("--estimator", choices=tuple(CLI_ESTIMATORS), default="cvm",
                   help="default cvm; see the list below")
    f.add_argument("--C", type=_positive(float, {"auto": "auto"}), default=UNSET,
                   help="penalty: the weight of the slacks (surface: one C for its three levels) ("
                        + _defaults_help("C", {"auto": "auto: " + _cvr_auto_C()}) + ")")
    f.add_argument("--gamma", type=_gamma, default=UNSET,
                   help="kernel width: a positive number or beta/scale/auto, or select (cvr: the pilot picks scale or beta) ("
                        + _defaults_help("gamma") + ")")
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
    f.add_argument("--mu", type=_positive(float, {"auto": "auto", "ratio": "ratio"}), default=UNSET,
                   help="mean error outside the tube, not the error of the fit: too small a mu flattens the fit ("
                   + _defaults_help("mu", {"auto": "auto: " + _cvr_auto_mu(), "ratio": "ratio"}) + ")")
    f.add_argument("--class-weight", type=_class_weight, default=UNSET,
                   help="'balanced' or LABEL:WEIGHT,... multiplying C per class (" + _defaults_help("class_weight") + ")")
    f.add_argument("--probability", action="store_const", const=True, default=UNSET,
                   help="fit Platt's sigmoids for 'predict --probability' (5 extra fits per pair; "
                        + _defaults_help("probability") + ")")
    f.add_argument("--n-components", type=_positive_int, default=UNSET,
                   help="directions per binary problem (" + _defaults_help("n_components") + ")")
    f.add_argument("--n-basis", type=_positive_int, default=UNSET,
                   help="basis functions of the expansion (" + _defaults_help("n_basis", none=_ssvr_n_basis())
                        + ")")
    return f


#: what each kind of estimator reads from the data file and what 'predict' writes (fit --help's list)
ESTIMATOR_DATA = {
    "classifier": "class labels in the target; predict writes labels",
    "outlier": "no target; predict writes +1 (inlier) or -1",
    "regressor": "numeric targets; predict writes their predictions",
    "transformer": "class labels in the target; predict writes its transform, one comma-separated row per line",
    "surface": "x,y,z points on a surface, no target; predict writes the implicit value f - 1 (0 on the surface, "
               "> 0 inside)",
}


def _cvr_auto_C():
    """CVR's C='auto' in a few words, with its constants read from the class."""
    from ..regressor import CVR

    return (f"{CVR.AUTO_C_FACTOR:g} times the C of least hold-out error of a kernel ridge pilot on "
            f"{CVR.AUTO_PILOT_SIZE} points, at most {CVR.AUTO_C_MAX:g}")


def _cvr_auto_mu():
    """CVR's mu='auto' in a few words, with its constants read from the class."""
    from ..regressor import CVR

    return (f"the tube set from the residuals of that kernel ridge pilot, leaving about a fraction "
            f"min(max(min({CVR.AUTO_TUBE_OUTSIDE:g}, max({CVR.AUTO_TUBE_CLEAN:g}, {CVR.AUTO_TUBE_CLEAN_SLOPE:g} e_b)), "
            f"{CVR.AUTO_TUBE_NOISE:g} e, {CVR.AUTO_TUBE_CP:g}/C), "
            f"{CVR.AUTO_TUBE_NOISY:g}, {CVR.TUBE_MAX_OUTSIDE:g} max(1, {CVR.AUTO_NOISY_MAX_OUTSIDE:g} e)/m) of the "
            f"points outside it (e: the pilot's "
            f"relative hold-out error, e_b: that of its residuals' bulk, less than e where the largest fraction "
            f"{CVR.AUTO_TUBE_TRIM:g} of them holds more of the mean square than a Gaussian tail would); with a "
            f"given C, min(max({CVR.TUBE_OUTSIDE:g}, {CVR.TUBE_CP:g}/C), "
            f"{CVR.TUBE_MAX_OUTSIDE:g}/m) from a pilot of that C on {CVR.PILOT_SIZE} points")


def _ssvr_n_basis():
    from ..sparse_svr import DEFAULT_N_BASIS

    return f"min({DEFAULT_N_BASIS}, m)"


def _defaults_help(param, words=None, none="none"):
    """'default: cvm X, cvdd Y, ...': each command-line estimator's own default of ``param`` (read from the
    classes, so the help cannot go stale); ``words`` say what a string default means, ``none`` what None
    does; 'not for E' names those without it."""
    from ..registry import CLI_ESTIMATORS

    have, without = [], []
    for name, e in CLI_ESTIMATORS.items():
        params = e.cls().get_params()
        if param not in params:
            without.append(name)
            continue
        v = params[param]
        text = (words or {}).get(v, v) if isinstance(v, str) else v
        have.append(f"{name} {none if text is None else text}")
    # one value for all: say it once
    values = {h.split(" ", 1)[1] for h in have}
    out = "default " + (values.pop() if len(values) == 1 and not without else ", ".join(have))
    if without:
        out += "; not for " + ", ".join(without)
    return out


def data_file_options(parser):
    """--format and --header, the data file options of fit and predict."""
    parser.add_argument("--format", choices=FORMATS,
                        help="the data file's format (default: read from its lines, not its name: "
                             "'label index:value ...' is LIBSVM, comma-separated is CSV)")
    parser.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                        help="CSV: the first row is (--header) or is not (--no-header) a header; default: a "
                             "header when none of its fields is a number or a missing-value token such as NA, or "
                             "when its target field is a name above numbers (1,2,label)")


def add_predict_parser(sub):
    """``predict``: a model's predictions (labels, targets, +1/-1, MMDA's transform, a surface's f - 1)."""
    q = sub.add_parser("predict", help="predict with a model written by 'fit' (or a LIBSVM model file)")
    q.add_argument("model", help="a model file of 'fit' or corevector.save_model, or a LIBSVM model file")
    q.add_argument("data", help="LIBSVM, or CSV with the model's features and optionally the target; a header row "
                                "is matched to the model's feature names")
    data_file_options(q)
    q.add_argument("--by-position", action="store_true",
                   help="match the columns to the model's features by position, not by name")
    q.add_argument("--probability", action="store_true",
                   help="write the class probabilities after each label, under a line of labels (as LIBSVM's "
                        "svm-predict -b 1)")
    q.add_argument("--out", help="write predictions here (one per line) instead of stdout")
    return q


def add_convert_parser(sub):
    """``convert``: corevector's model files and LIBSVM's, by the output's extension or --to."""
    c = sub.add_parser("convert", help="convert a model file: LIBSVM's format, or an old pickle-format file",
                       description="Convert a model file (corevector's, or LIBSVM's text format) to corevector's "
                                   "format or LIBSVM's, chosen by OUT's extension: .model is LIBSVM's, .cvm (or any "
                                   "other) corevector's; --to overrides.  LIBSVM's format holds CVMClassifier, "
                                   "CVDD, MEB (rbf kernel) and CVR models; a LIBSVM model reads back as "
                                   "CVMClassifier, CVDD (one_class) or CVR.")
    c.add_argument("model", help="a model file of corevector or LIBSVM")
    c.add_argument("out", help="the file to write (.model: LIBSVM's format, .cvm: corevector's)")
    c.add_argument("--to", choices=("native", "libsvm"), default=None,
                   help="the format to write (default: by OUT's extension, native unless .model)")
    c.add_argument("--allow-unsafe-pickle", action="store_true",
                   help="read a model file in corevector 0.1's pickle format: unpickling RUNS ANY CODE the file "
                        "holds; only for a file you trust")
    return c


def add_bench_parser(sub):
    """``bench``: the asv suite; everything after 'bench' but a lone -h/--help goes to asv."""
    b = sub.add_parser(
        "bench", help="run the asv benchmarks (asv run --python=same --quick [ARGS]); 'bench record', "
                      "'bench compare A B' (the verdict), 'bench plot --commits A B'",
        usage=f"{PROG} bench [-h] [record|compare|plot|ASV ARGS ...]",
        description="Run the asv benchmark suite of asv_benchmarks/ in this interpreter.  Without arguments: asv "
                    "run --python=same --quick --show-stderr --set-commit-hash HEAD, so the results are saved "
                    "against the checkout's HEAD.  ASV ARGS are added to that command, or, when they start with "
                    "an asv subcommand (run, continuous, publish, ...), run as that subcommand, with "
                    "--python=same for those that would build environments.  Says which checkout it benchmarks; "
                    "needs a source checkout (an editable install).  Three subcommands are corevector's own "
                    "(each has --help): 'bench record' measures a checkout's code and saves every sample against "
                    "its HEAD, 'bench compare A B' prints the verdict between two commits' results (status 1 only "
                    "on a change), 'bench plot --commits A B' draws them side by side against m on an offline "
                    "page (asv's own compare: run asv compare in asv_benchmarks/).",
        epilog=f"Everything after 'bench' goes to asv, except -h/--help alone: '{PROG} bench -- --help' shows "
               f"asv run's help, '{PROG} bench continuous --help' asv continuous's.")
    b.add_argument("--config-dir", help=argparse.SUPPRESS)
    b.add_argument("asv_args", nargs=argparse.REMAINDER, metavar="ASV ARGS",
                   help="extra asv arguments, or a full asv subcommand (e.g. 'continuous HEAD~1 HEAD')")
    return b
