"""[004] Sec. V: MMDA(CVM) against MMDA(SVM), KFD and KPCA on real data.

Setup of Sec. V: Gaussian kernel exp(-||x - z||^2 / beta) with beta the mean squared distance of
the training points, C = 1, eps = 1e-3 (MMDA(CVM), 59-point sampling with the engine's
confirmations), N_c, 3N_c and 5N_c MMDA features (one-vs-all, n_components = 1, 3, 5 per class),
N_c - 1 KFD features, 5N_c KPCA features; KPCA and KFD use a random class-balanced sample of
3500 points on the large sets (letter, Fashion-MNIST), as the paper does.  Classifiers (sklearn):
1-NN, a linear SVM and an MLP with one layer of 10 hidden units (Sec. V-A's ANN), the last two on
standardised features.  Train/test splits have the paper's sizes (Table I), stratified and seeded;
Fashion-MNIST keeps its own 60k/10k split.

Every extractor is fitted in a fresh process (:func:`reports.common.measure_fit`) with BLAS and
OpenMP limited to one thread (threadpoolctl): on a small shared machine multi-threaded BLAS spins
idle threads that inflate CPU time (measured: a 350 x 350 Cholesky went from 1 ms to 0.8 s), and
the paper's Table III is CPU time.  MMDA(SVM) is the exact dense QP of
:mod:`refimpl.baselines.mmda_svm` with its active-set solver; "MMDA(SVM, IP)" is the same QP by
cvxopt's interior point (a generic dense QP, as the original MMDA used), run on the smaller sizes.  MMDA extracts its features one by one, so the models
with N_c and 3N_c features are prefixes of the 5N_c one: their CPU times and kernel counts are
summed over those features (recorded per feature by the fit).

Kernel evaluations per feature (Table IV): for KPCA and KFD every feature is an expansion over all
(sampled) training points; for MMDA the nonzero coefficients of each feature's expansion
(``n_expansion_``: its own core vectors plus those of the earlier directions of its class, since
u_q involves u_1..u_{q-1}); the column 'own SV' is the feature's own support (alpha > 0).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from . import style
from .common import Context, ExperimentResult, FitJob, experiment, measure_fit, progress, to_markdown

C, EPS, SAMPLE = 1.0, 1e-3, 3500
K_GRID = (1, 3, 5)
#: Table I's training-set sizes (the rest of each packaged set is the test set)
PAPER_TRAIN = {"optdigits": 3823, "satimage": 4435, "pendigits": 7494, "letter": 16000, "fashion_mnist": 60000}
#: data sets per mode; "name:m" subsamples m training (and m/2 test) points
SIZES = {"tiny": ["pendigits:200"], "quick": ["pendigits:2000"],
         "full": ["optdigits", "satimage", "pendigits", "letter", "fashion_mnist"]}
#: largest number of MMDA directions per class, per data set (Fashion-MNIST: 784 inputs, N_c only)
K_MAX = {"fashion_mnist": 1}
#: MMDA(SVM) (dense m x m QP) is run up to this many training points, with this many directions
SVM_MAX_M = {"tiny": 200, "quick": 7494, "full": 7494}
SVM_K_MAX = {"tiny": 1, "quick": 1, "full": 5}
IP_MAX_M = {"tiny": 200, "quick": 0, "full": 0}
#: the speed comparison of the targets: pendigits, N_c features, MMDA(CVM) vs MMDA(SVM) as m grows
SPEED_SIZES = {"tiny": [200], "quick": [500, 1000], "full": [1000, 2000, 4000, 7494]}
#: largest m at which the interior-point MMDA(SVM) is timed in the speed experiment
SPEED_IP_MAX_M = {"tiny": 200, "quick": 500, "full": 2000}
FMNIST_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "corevector" / "fashion-mnist"


# ---------------------------------------------------------------------------------------------- data
def ensure_fashion_mnist():
    """Make Debian's dataset-fashion-mnist files available offline (no root needed): if they are
    not installed, ``apt-get download`` the package into a cache folder and unpack it with
    ``dpkg -x``; then point ``COREVECTOR_FASHION_MNIST`` at it.  Returns True when available."""
    from refimpl.datasets import load_dataset
    folder = FMNIST_CACHE / "usr" / "share" / "datasets" / "fashion-mnist"
    if folder.is_dir() and "COREVECTOR_FASHION_MNIST" not in os.environ:
        os.environ["COREVECTOR_FASHION_MNIST"] = str(folder)
    try:
        load_dataset("fashion_mnist")
        return True
    except ValueError:
        pass
    if not (shutil.which("apt-get") and shutil.which("dpkg")):
        return False
    FMNIST_CACHE.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(["apt-get", "download", "dataset-fashion-mnist"], cwd=FMNIST_CACHE, check=True,
                       capture_output=True, timeout=600)
        deb = sorted(FMNIST_CACHE.glob("dataset-fashion-mnist_*.deb"))[-1]
        subprocess.run(["dpkg", "-x", str(deb), str(FMNIST_CACHE)], check=True, capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError, IndexError):
        return False
    os.environ["COREVECTOR_FASHION_MNIST"] = str(folder)
    try:
        load_dataset("fashion_mnist")
        return True
    except ValueError:
        return False


def load_split(spec, seed):
    """(name, Xtr, ytr, Xte, yte) with Table I's split sizes (stratified, seeded)."""
    from sklearn.model_selection import train_test_split

    from refimpl.datasets import load_dataset
    name, _, m = spec.partition(":")
    if name == "fashion_mnist":
        ensure_fashion_mnist()
    X, y = load_dataset(name)
    n_train = PAPER_TRAIN[name]
    if name == "fashion_mnist":   # its own split: the first 60k are the training images
        Xtr, ytr, Xte, yte = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    else:
        Xtr, Xte, ytr, yte = train_test_split(X, y, train_size=n_train, stratify=y, random_state=seed)
    if m:
        m = int(m)
        Xtr, _, ytr, _ = train_test_split(Xtr, ytr, train_size=m, stratify=ytr, random_state=seed)
        Xte, _, yte, _ = train_test_split(Xte, yte, train_size=m // 2, stratify=yte, random_state=seed)
    return name, np.ascontiguousarray(Xtr), ytr, np.ascontiguousarray(Xte), yte


# ---------------------------------------------------------------------------------------------- jobs
def classify(Ftr, ytr, Fte, yte, seed, which=("1-NN", "linear SVM", "MLP")):
    """Test accuracies of the three classifiers of Sec. V on the given features."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if "1-NN" in which:
            out["1-NN"] = KNeighborsClassifier(1).fit(Ftr, ytr).score(Fte, yte)
        if "linear SVM" in which:
            out["linear SVM"] = make_pipeline(StandardScaler(), LinearSVC(C=1.0, max_iter=5000)).fit(
                Ftr, ytr).score(Fte, yte)
        if "MLP" in which:
            out["MLP"] = make_pipeline(StandardScaler(), MLPClassifier((10,), max_iter=1000, random_state=seed)).fit(
                Ftr, ytr).score(Fte, yte)
    return {k: float(v) for k, v in out.items()}


def _prepare(method, spec, k_max, seed):
    name, Xtr, ytr, Xte, yte = load_split(spec, seed)
    from refimpl.kernels import make_kernel_spec
    kspec = make_kernel_spec(Xtr, "rbf", "beta")
    return dict(method=method, name=name, spec=spec, k_max=k_max, seed=seed, Xtr=Xtr, ytr=ytr, Xte=Xte, yte=yte,
                gamma=kspec.gamma, n_classes=len(np.unique(ytr)))


class _KFD:
    def __init__(self, model, spec):
        self.model, self.spec = model, spec

    def transform(self, X):
        from fastimpl._mmda import kernel_matrix
        from refimpl.baselines.kfd import kfd_transform
        return kfd_transform(self.model, self.spec, X, block=lambda A, B: kernel_matrix(self.spec, A, B))


def _one_thread():
    """threadpoolctl limits only the thread pools loaded when it is entered: import the compiled
    modules (and with them the OpenMP runtime they link) first, or their parallel loops keep two
    threads and CPU time counts the second one."""
    from threadpoolctl import threadpool_limits

    import fastimpl._engine  # noqa: F401
    import fastimpl._mmda  # noqa: F401
    return threadpool_limits(limits=1)


def _fit(d):
    with _one_thread():
        return _fit_inner(d)


def _fit_inner(d):
    method = d["method"]
    Xtr, ytr = d["Xtr"], d["ytr"]
    if method.startswith("MMDA"):
        from corevector import MMDA
        return MMDA(n_components=d["k_max"], C=C, eps=EPS, gamma=d["gamma"], random_state=d["seed"],
                    method="cvm" if method == "MMDA(CVM)" else "svm",
                    qp_solver="interior_point" if method == "MMDA(SVM, IP)" else "active_set").fit(Xtr, ytr)
    if method == "KPCA":
        from sklearn.decomposition import KernelPCA

        from refimpl.baselines.kfd import balanced_sample
        idx = balanced_sample(ytr, SAMPLE if len(ytr) > 10_000 else None, np.random.default_rng(d["seed"]))
        n_comp = min(d["k_max"] * d["n_classes"], len(idx) - 1)
        return KernelPCA(n_components=n_comp, kernel="rbf", gamma=d["gamma"], eigen_solver="randomized",
                         random_state=d["seed"]).fit(Xtr[idx])
    if method == "KFD":
        from fastimpl._mmda import kernel_matrix
        from refimpl.baselines.kfd import fit_kfd
        from refimpl.kernels import make_kernel_spec
        spec = make_kernel_spec(Xtr, "rbf", d["gamma"])
        model = fit_kfd(Xtr, ytr, spec, max_samples=SAMPLE if len(ytr) > 10_000 else None,
                        random_state=d["seed"], block=lambda A, B: kernel_matrix(spec, A, B))
        return _KFD(model, spec)
    if method == "none":
        return None
    raise ValueError(method)


def _evaluate(model, d):
    with _one_thread():
        return _evaluate_inner(model, d)


def _evaluate_inner(model, d):
    method, n_c, seed = d["method"], d["n_classes"], d["seed"]
    Xtr, ytr, Xte, yte = d["Xtr"], d["ytr"], d["Xte"], d["yte"]
    acc, cost = [], []
    if method == "none":
        acc.append(dict(n_features=Xtr.shape[1], k=0, **classify(Xtr, ytr, Xte, yte, seed)))
        return dict(acc=acc, cost=cost)
    Ftr, Fte = model.transform(Xtr), model.transform(Xte)
    if method.startswith("MMDA"):
        k_max = d["k_max"]
        n_bin = model.n_components_ // k_max
        for k in range(1, k_max + 1):
            cols = np.array([c * k_max + q for c in range(n_bin) for q in range(k)])
            cost.append(dict(n_features=len(cols), k=k, cpu_time=float(model.cpu_time_[cols].sum()),
                             evals_per_feature=float(model.n_expansion_[cols].mean()),
                             own_sv_per_feature=float(model.n_support_[cols].mean()),
                             total_evals=int(model.n_expansion_[cols].sum()),
                             transform_evals=int(sum(int(np.count_nonzero(np.any(B[:, :k] != 0, axis=1)))
                                                     for B in model.expansion_coef_)),
                             core_set=float(model.core_set_size_[cols].mean()),
                             certified_ratio=float(model.certified_ratio_[cols].max()),
                             fit_kernel_evals=int(model.kernel_evaluations_[cols].sum())))
            if k in K_GRID or k == k_max:
                acc.append(dict(n_features=len(cols), k=k, **classify(Ftr[:, cols], ytr, Fte[:, cols], yte, seed)))
    elif method == "KPCA":
        m_fit = model.eigenvectors_.shape[0]
        for k in range(1, d["k_max"] + 1):
            nf = min(k * n_c, Ftr.shape[1])
            cost.append(dict(n_features=nf, k=k, evals_per_feature=m_fit, own_sv_per_feature=m_fit,
                             total_evals=m_fit * nf, transform_evals=m_fit))
            if k == d["k_max"] or k in K_GRID:
                which = ("1-NN", "linear SVM", "MLP") if k == d["k_max"] else ("MLP",)
                acc.append(dict(n_features=nf, k=k, **classify(Ftr[:, :nf], ytr, Fte[:, :nf], yte, seed, which)))
    else:  # KFD
        m_fit = model.model.X.shape[0]
        nf = Ftr.shape[1]
        cost.append(dict(n_features=nf, k=0, evals_per_feature=m_fit, own_sv_per_feature=m_fit,
                         total_evals=m_fit * nf, transform_evals=m_fit))
        acc.append(dict(n_features=nf, k=0, **classify(Ftr, ytr, Fte, yte, seed)))
    return dict(acc=acc, cost=cost)


JOB = FitJob(_prepare, _fit, _evaluate)


def _measure(ctx, *args):
    """measure_fit in a fresh process; in tiny mode (the test suite's) inline, to save the start-ups."""
    if ctx.mode != "tiny":
        return measure_fit(JOB, *args, trace_memory=False)
    import time
    d = _prepare(*args)
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = _fit(d)
    out = dict(fit_time=time.perf_counter() - t0, fit_cpu_time=time.process_time() - c0, n_warnings=len(caught),
               warnings=" | ".join(sorted({f"{w.category.__name__}: {w.message}" for w in caught})))
    out.update(_evaluate(model, d))
    return out


# ---------------------------------------------------------------------------------------------- Tables II-IV, Figs. 2-4
def _methods(ctx, spec, m_train):
    name = spec.partition(":")[0]
    k_max = 1 if ctx.mode == "tiny" else K_MAX.get(name, max(K_GRID))
    out = [("MMDA(CVM)", k_max)]
    if m_train <= SVM_MAX_M[ctx.mode]:
        out.append(("MMDA(SVM)", min(k_max, SVM_K_MAX[ctx.mode])))
    if m_train <= IP_MAX_M[ctx.mode]:
        out.append(("MMDA(SVM, IP)", 1))
    out += [("KFD", k_max), ("KPCA", k_max), ("none", k_max)]
    return out


@experiment("mmda", "MMDA(CVM) vs MMDA(SVM), KFD, KPCA (004 Tables II-IV, Figs. 2-4)", sizes=SIZES)
def run(ctx: Context) -> ExperimentResult:
    acc_rows, cost_rows, notes = [], [], ""
    tasks = []
    # COREVECTOR_MMDA_DATASETS=optdigits,letter runs a subset (e.g. one full-size set at a time)
    chosen = [s for s in os.environ.get("COREVECTOR_MMDA_DATASETS", "").split(",") if s] or ctx.sizes
    for spec in chosen:
        name = spec.partition(":")[0]
        if name == "fashion_mnist" and not ensure_fashion_mnist():
            notes += "\n- Fashion-MNIST unavailable (dataset-fashion-mnist could not be installed or downloaded): skipped"
            continue
        m_train = int(spec.partition(":")[2] or PAPER_TRAIN[name])
        tasks += [(spec, name, meth, k) for meth, k in _methods(ctx, spec, m_train)]
    for spec, name, meth, k_max in progress(tasks, "mmda", ctx.progress):
        res = _measure(ctx, meth, spec, k_max, ctx.seed)
        if "error" in res:
            notes += f"\n- {meth} on {spec}: failed: {res['error']}"
            continue
        if res.get("n_warnings"):
            notes += f"\n- {meth} on {spec}: {res['warnings'][:300]}"
        for r in res["acc"]:
            for clf in ("1-NN", "linear SVM", "MLP"):
                if clf in r:
                    acc_rows.append(dict(dataset=name, method=meth, k=r["k"], n_features=r["n_features"],
                                         classifier=clf, accuracy=100 * r[clf]))
        for r in res["cost"]:
            cpu = r.get("cpu_time", res["fit_cpu_time"])
            cost_rows.append(dict(dataset=name, method=meth, **{**r, "cpu_time": cpu},
                                  fit_cpu_time=res["fit_cpu_time"], fit_time=res["fit_time"]))
    acc = pd.DataFrame(acc_rows)
    cost = pd.DataFrame(cost_rows)
    acc.to_csv(ctx.out / "mmda_accuracy.csv", index=False)
    cost.to_csv(ctx.out / "mmda_cost.csv", index=False)
    md = tables_md(acc, cost)
    outputs, head = ["mmda_accuracy.csv", "mmda_cost.csv", "mmda.md"], []
    if len(acc):
        from . import paper
        sizes = {spec.partition(":")[0]: int(spec.partition(":")[2] or PAPER_TRAIN[spec.partition(":")[0]])
                 for spec in chosen}
        cmp_ = paper_comparison(acc, cost, sizes)
        cmp_.to_csv(ctx.out / "mmda_paper.csv", index=False)
        outputs.append("mmda_paper.csv")
        md += ("\n### The paper's values beside ours (Tables II-IV)\n\n" + paper.markdown(cmp_) + "\n\nTiming is "
               "CPU seconds on one thread here, on the authors' machine in the paper; MMDA(SVM) here is an exact "
               "active-set solver of the same QP, not the original MMDA code.\n")
        head = headline(cost, acc, sizes)
    with open(ctx.out / "mmda.md", "w") as f:
        f.write("# MMDA (004 Sec. V): Tables II-IV\n\n" + __doc__.split("\n\n", 1)[1] + "\n" + md
                + (("\nNotes:" + notes + "\n") if notes else ""))
    if len(acc):
        outputs += plot(acc, cost, ctx.out / "mmda.png")
    return ExperimentResult(outputs=outputs, summary_md=md, notes=notes, headline=head)


#: our names -> the paper's (Table I's data sets; Table II's classifiers)
PAPER_SETS = {"optdigits": "optdigits", "satimage": "satimage", "pendigits": "pendigits", "letter": "letters",
              "fashion_mnist": "mnist"}
PAPER_CLASSIFIERS = {"1-NN": "1-NN", "MLP": "ANN", "linear SVM": "SVM"}
CLASSIFIER_NOTES = {"MLP": "ours: scikit-learn's MLP with one layer of 10 hidden units (the paper's ANN)",
                    "linear SVM": "ours: a linear SVM (the paper: LIBSVM, its kernel not stated)"}


def _paper_row(method, k, kmax):
    """The paper's row name of one of our (method, k), or None (KPCA is in the paper at 5N_c only)."""
    if method in ("MMDA(CVM)", "MMDA(SVM)") and k in K_GRID:
        return f"{method} {_feat_label(method, k)}"
    if method == "KFD":
        return "KFD"
    if method == "KPCA" and k == kmax == max(K_GRID):
        return "KPCA"
    if method == "none":
        return "no feature extraction"
    return None


def _paper_cell(frame, r):
    """The paper's row name (None: the paper has none) and data set (None: not one of the paper's) of the row
    ``r`` of ``frame``: its method at its k, against the largest k the frame has for that set and method."""
    kmax = frame[(frame["dataset"] == r.dataset) & (frame["method"] == r.method)]["k"].max()
    return _paper_row(r.method, r.k, kmax), PAPER_SETS.get(r.dataset)


def paper_comparison(acc, cost, train_sizes):
    """Tables II-IV: the paper's value beside ours for every cell both have (``train_sizes``: data set ->
    our training points)."""
    from . import paper
    rows = []
    for a in acc.itertuples():
        base, ds = _paper_cell(acc, a)
        if base is None or ds is None:
            continue
        prow = f"{base} {PAPER_CLASSIFIERS[a.classifier]}"
        if paper.has("004", "Table II", prow, ds):
            rows.append(paper.row("004", "Table II", prow, ds, a.accuracy, quantity=f"test accuracy (%), {ds}",
                                  note=_notes(_size_note(a.dataset, train_sizes), CLASSIFIER_NOTES.get(a.classifier))))
    for c in cost.itertuples():
        prow, ds = _paper_cell(cost, c)
        if prow is None or ds is None:
            continue
        for table, col, what in (("Table III", "cpu_time", "CPU time (s)"),
                                 ("Table IV", "evals_per_feature", "kernel evaluations per feature")):
            if paper.has("004", table, prow, ds):
                rows.append(paper.row("004", table, prow, ds, getattr(c, col), quantity=f"{what}, {ds}",
                                      note=_notes(_size_note(c.dataset, train_sizes),
                                                  "ours: one thread" if table == "Table III" else None)))
    return paper.comparison(rows)


def _size_note(dataset, train_sizes):
    m = train_sizes.get(dataset)
    if m is not None and m < PAPER_TRAIN.get(dataset, m):
        return f"ours: {m:,} of the {PAPER_TRAIN[dataset]:,} training points"
    return None


def _notes(*parts):
    return "; ".join(p for p in parts if p)


def headline(cost, acc, train_sizes):
    """004's claims: MMDA(CVM) faster than MMDA(SVM) (Table III), as accurate (Table II); judged only on the
    paper's training sets whole (a subsample favours the dense QP)."""
    mm = cost[cost["method"].isin(["MMDA(CVM)", "MMDA(SVM)"]) & cost["k"].isin(K_GRID)]
    p = mm.pivot_table(index=["dataset", "k"], columns="method", values="cpu_time")
    if not {"MMDA(CVM)", "MMDA(SVM)"} <= set(p.columns) or not len(p.dropna()):
        return []
    p = p.dropna()
    speed = p["MMDA(SVM)"] / p["MMDA(CVM)"]
    a = acc[acc["method"].isin(["MMDA(CVM)", "MMDA(SVM)"]) & (acc["classifier"] == "1-NN")]
    q = a.pivot_table(index=["dataset", "k"], columns="method", values="accuracy").dropna()
    diff = (q["MMDA(CVM)"] - q["MMDA(SVM)"]) if len(q) and {"MMDA(CVM)", "MMDA(SVM)"} <= set(q.columns) else None
    ours = (f"CPU MMDA(SVM) / MMDA(CVM): {speed.min():.3g}–{speed.max():.3g}× on "
            f"{', '.join(sorted(set(p.index.get_level_values(0))))}")
    if diff is not None and len(diff):
        ours += f"; 1-NN accuracy MMDA(CVM) − MMDA(SVM): {diff.min():+.2f} to {diff.max():+.2f} pp"
    sub = [f"{d} {train_sizes[d]:,} of {PAPER_TRAIN[d]:,}" for d in sorted(set(p.index.get_level_values(0)))
           if train_sizes.get(d, PAPER_TRAIN.get(d, 0)) < PAPER_TRAIN.get(d, 0)]
    holds = bool((speed > 1).all()) and (diff is None or bool((diff >= -1.0).all()))
    if sub:
        ours += f" (training points: {', '.join(sub)})"
        holds = None
    return [dict(claim="004 Tables II-III: MMDA(CVM) always faster than the original MMDA (MMDA(SVM)), at "
                       "accuracies as good (1-NN within 1 pp here)", ours=ours, holds=holds)]


def _label(method, k, n_features):
    if method.startswith("MMDA"):
        return f"{method} {'' if k == 1 else k}N_c".replace(" N_c", " N_c")
    return method


def tables_md(acc, cost):
    if not len(acc):
        return "(no results)"
    order = {"MMDA(CVM)": 0, "MMDA(SVM)": 1, "MMDA(SVM, IP)": 2, "KFD": 3, "KPCA": 4, "none": 5}
    # Table II: the paper's rows (MMDA at N_c, 3N_c, 5N_c; KFD N_c - 1; KPCA at 5N_c; raw inputs)
    kmax = acc.groupby(["dataset", "method"])["k"].transform("max")
    keep = acc[(acc["method"].str.startswith("MMDA") & acc["k"].isin(K_GRID))
               | (acc["method"] == "KFD") | (acc["method"] == "none")
               | ((acc["method"] == "KPCA") & (acc["k"] == kmax))].copy()
    keep["features"] = [_feat_label(r.method, r.k) for r in keep.itertuples()]
    keep["o"] = keep["method"].map(order) * 10 + keep["k"]
    t2 = keep.pivot_table(index=["o", "method", "features", "classifier"], columns="dataset", values="accuracy")
    t2 = t2.reset_index().drop(columns="o")
    out = "### Table II: test accuracy (%)\n\n" + to_markdown(t2, floatfmt=".2f") + "\n\n"
    if len(cost):
        c = cost[(~cost["method"].str.startswith("MMDA")) | cost["k"].isin(K_GRID)].copy()
        c = c[(c["method"].str.startswith("MMDA")) | (c["k"] == c.groupby(["dataset", "method"])["k"].transform("max"))]
        c["features"] = [_feat_label(r.method, r.k) for r in c.itertuples()]
        c["o"] = c["method"].map(order) * 10 + c["k"]
        t3 = c.pivot_table(index=["o", "method", "features"], columns="dataset", values="cpu_time").reset_index()
        out += ("### Table III: feature-extraction CPU time (s)\n\n"
                + to_markdown(t3.drop(columns="o"), floatfmt=".3g") + "\n\n")
        t4 = c.pivot_table(index=["o", "method", "features"], columns="dataset",
                           values="evals_per_feature").reset_index()
        out += ("### Table IV: kernel evaluations per extracted feature\n\n"
                + to_markdown(t4.drop(columns="o"), floatfmt=".0f") + "\n\n")
        mm = c[c["method"].str.startswith("MMDA")]
        if len(mm):
            t4b = mm.pivot_table(index=["o", "method", "features"], columns="dataset",
                                 values="own_sv_per_feature").reset_index().drop(columns="o")
            out += ("MMDA, own support vectors per feature (alpha > 0 of that feature's fit; the paper's "
                    "Table IV counts are of this size):\n\n" + to_markdown(t4b, floatfmt=".0f") + "\n\n")
            t4c = mm.pivot_table(index=["o", "method", "features"], columns="dataset",
                                 values="certified_ratio").reset_index().drop(columns="o")
            out += ("MMDA, largest certified ratio (r_cert/R)^2 over the features (59-point sampling, so it "
                    "may exceed (1+eps)^2 = 1.002):\n\n" + to_markdown(t4c, floatfmt=".4f") + "\n")
    return out


def _feat_label(method, k):
    if method.startswith("MMDA") or (method == "KPCA"):
        return "N_c" if k == 1 else f"{k}N_c"
    if method == "KFD":
        return "N_c-1"
    return "inputs"


@style.styled
def plot(acc, cost, path):
    """Test accuracy (MLP), CPU time and kernel evaluations against the number of features, a column per data
    set (004 Figs. 2-4).  Returns the file names."""
    sets = [s for s in ("optdigits", "satimage", "pendigits") if s in set(acc["dataset"])] or \
        sorted(set(acc["dataset"]))
    fig, axes = style.figure(3, len(sets), width="two" if len(sets) > 1 else "one", legend_rows=2, row_height=1.8)
    methods = ("MMDA(CVM)", "MMDA(SVM)", "MMDA(SVM, IP)", "KFD", "KPCA")
    for j, ds in enumerate(sets):
        a = acc[(acc["dataset"] == ds) & (acc["classifier"] == "MLP")]
        c = cost[cost["dataset"] == ds]
        for meth in methods:
            g = a[a["method"] == meth]
            style.series(axes[0, j], g["n_features"], g["accuracy"], meth)
            h = c[c["method"] == meth]
            style.series(axes[1, j], h["n_features"], h["cpu_time"], meth)
            style.series(axes[2, j], h["n_features"], h["total_evals"], meth)
        axes[0, j].set_title(ds)
        axes[0, j].set_ylabel("test accuracy, MLP (%)")
        axes[1, j].set_ylabel("CPU time (s)")
        axes[2, j].set_ylabel("kernel evaluations")
        style.log_axis(axes[1, j], "y")
        style.log_axis(axes[2, j], "y")
        axes[2, j].set_xlabel("extracted features")
    style.legend(fig, ncol=3)
    fig.suptitle("004 Figs. 2-4: MMDA(CVM) vs. MMDA(SVM), KFD, KPCA")
    return style.save(fig, path)


# ---------------------------------------------------------------------------------------------- speed target
@experiment("mmda_speed", "MMDA(CVM) vs MMDA(SVM) on pendigits as m grows (N_c features)", sizes=SPEED_SIZES)
def run_speed(ctx: Context) -> ExperimentResult:
    rows, notes = [], ""
    tasks = [(m, meth) for m in ctx.sizes for meth in ("MMDA(CVM)", "MMDA(SVM)", "MMDA(SVM, IP)")
             if meth != "MMDA(SVM, IP)" or m <= SPEED_IP_MAX_M[ctx.mode]]
    for m, meth in progress(tasks, "mmda_speed", ctx.progress):
        spec = "pendigits" if m >= PAPER_TRAIN["pendigits"] else f"pendigits:{m}"
        res = _measure(ctx, meth, spec, 1, ctx.seed)
        if "error" in res:
            notes += f"\n- {meth} m={m}: failed: {res['error']}"
            continue
        a = res["acc"][0]
        c = res["cost"][0]
        rows.append(dict(m=m, method=meth, cpu_time=res["fit_cpu_time"], wall_time=res["fit_time"],
                         acc_1nn=100 * a["1-NN"], acc_linear_svm=100 * a["linear SVM"], acc_mlp=100 * a["MLP"],
                         evals_per_feature=c["evals_per_feature"], own_sv_per_feature=c["own_sv_per_feature"]))
    df = pd.DataFrame(rows)
    df.to_csv(ctx.out / "mmda_speed.csv", index=False)
    md = to_markdown(df, floatfmt=".4g") if len(df) else "(no results)"
    if len(df) and {"MMDA(CVM)", "MMDA(SVM)"} <= set(df["method"]):
        p = df.pivot_table(index="m", columns="method", values=["cpu_time", "acc_1nn", "acc_linear_svm", "acc_mlp"])
        cols = {"m": p.index}
        for base in ("MMDA(SVM)", "MMDA(SVM, IP)"):
            if base in p["cpu_time"]:
                cols[f"speed-up vs {base}"] = (p["cpu_time"][base] / p["cpu_time"]["MMDA(CVM)"]).values
        for key, lab in (("acc_1nn", "1-NN"), ("acc_linear_svm", "lin. SVM"), ("acc_mlp", "MLP")):
            cols[f"Δacc {lab} (pp)"] = (p[key]["MMDA(CVM)"] - p[key]["MMDA(SVM)"]).values
        md += ("\n\nCPU-time speed-up of MMDA(CVM) over MMDA(SVM) (active set; IP: interior point), and accuracy "
               "differences MMDA(CVM) - MMDA(SVM) in percentage points:\n\n"
               + to_markdown(pd.DataFrame(cols), floatfmt=".3g"))
    outputs = ["mmda_speed.csv", "mmda_speed.md"]
    if len(df) and {"MMDA(CVM)", "MMDA(SVM)"} <= set(df["method"]):
        from . import paper
        t = df.pivot_table(index="m", columns="method", values="cpu_time")[["MMDA(CVM)", "MMDA(SVM)"]].dropna()
        rows = []
        for m_, r in t.iterrows():
            size = f"ours: {m_:,} of the {PAPER_TRAIN['pendigits']:,} training points" \
                if m_ < PAPER_TRAIN["pendigits"] else ""
            rows += [paper.row("004", "Table III", f"{meth} N_c", "pendigits", r[meth], f"{meth} CPU (s), m = {m_:,}",
                               "; ".join(n for n in (size, "ours: one thread") if n)) for meth in t.columns]
            speed = paper.value("004", "Table III", "MMDA(SVM) N_c", "pendigits") / \
                paper.value("004", "Table III", "MMDA(CVM) N_c", "pendigits")
            rows.append(paper.row("004", "Table III", "MMDA(SVM) N_c / MMDA(CVM) N_c", "pendigits",
                                  r["MMDA(SVM)"] / r["MMDA(CVM)"], f"speed-up, m = {m_:,}", size, paper_value=speed))
        cmp_ = paper.comparison(rows)
        cmp_.to_csv(ctx.out / "mmda_speed_paper.csv", index=False)
        outputs.append("mmda_speed_paper.csv")
        md += ("\n\nThe paper's Table III (pendigits, N_c features, all 7,494 training points, MATLAB) beside "
               "ours:\n\n" + paper.markdown(cmp_))
    with open(ctx.out / "mmda_speed.md", "w") as f:
        f.write("# MMDA(CVM) vs MMDA(SVM) on pendigits, N_c = 10 features\n\n" + md
                + (("\n\nNotes:" + notes + "\n") if notes else "\n"))
    return ExperimentResult(outputs=outputs, summary_md=md, notes=notes)
