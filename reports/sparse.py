"""Sparse high-dimensional input: CVMClassifier on CSR rows beside scikit-learn's SVC.

Data: :func:`refimpl.datasets.sparse_planted` -- m x 5,000 CSR rows at 1% density labelled by a planted
sparse linear rule; the first fifth is the test set.  Both estimators get the same CSR matrix and the same
kernel, gamma (scikit-learn's 'scale' of the training rows) and C.  Each fit runs in fresh processes
(:func:`reports.common.measure_fit`: wall and CPU seconds, the growth of the resident high-water mark during
the fit, and the traced peak), next to the size of the CSR training matrix: the target is fit memory within
2x the CSR size plus the core-set cache, and fit time within 2x of SVC's, at m = 20,000 (``full``).
"""
from __future__ import annotations

import os

import pandas as pd

from .common import Context, ExperimentResult, FitJob, experiment, measure_fit, progress, to_markdown, with_columns

D, DENSITY, C, KERNEL = 5000, 0.01, 10.0, "rbf"
TIMEOUT = {"tiny": 120, "quick": 300, "full": 3600}
COLUMNS = ["estimator", "m_train", "fit_time", "fit_cpu_time", "maxrss_delta_mb", "csr_mb", "accuracy", "n_support"]


def _prepare(m, seed):
    from refimpl.datasets import sparse_planted
    X, y = sparse_planted(m, D, DENSITY, seed)
    nt = m // 5
    Xtr = X[nt:]
    gamma = 1.0 / (D * (Xtr.multiply(Xtr).mean() - Xtr.mean() ** 2))  # scikit-learn's 'scale'
    return dict(Xtr=Xtr, ytr=y[nt:], Xte=X[:nt], yte=y[:nt], gamma=float(gamma))


def prepare_cvm(m, seed):
    return dict(_prepare(m, seed), which="cvm")


def prepare_svc(m, seed):
    return dict(_prepare(m, seed), which="svc")


def fit(data):
    if data["which"] == "svc":
        from sklearn.svm import SVC
        est = SVC(kernel=KERNEL, gamma=data["gamma"], C=C)
    else:
        from corevector import CVMClassifier
        est = CVMClassifier(kernel=KERNEL, gamma=data["gamma"], C=C, random_state=0)
    return est.fit(data["Xtr"], data["ytr"])


def evaluate(model, data):
    X = data["Xtr"]
    return dict(accuracy=float(model.score(data["Xte"], data["yte"])), n_support=int(len(model.support_)),
                m_train=int(X.shape[0]), csr_mb=(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20)


JOBS = {"CVMClassifier (fast)": FitJob(prepare_cvm, fit, evaluate), "SVC": FitJob(prepare_svc, fit, evaluate)}


@experiment("sparse", "Sparse high-dimensional input: CSR rows, CVM vs. SVC",
            sizes={"tiny": [500], "quick": [3_000], "full": [20_000]})
def run(ctx: Context) -> ExperimentResult:
    rows = []
    for m, name in progress([(m, n) for m in ctx.sizes for n in JOBS], "sparse", ctx.progress):
        res = measure_fit(JOBS[name], m, ctx.seed, timeout=TIMEOUT[ctx.mode])
        rows.append(dict(estimator=name, m=m, **res))
    df = with_columns(pd.DataFrame(rows), COLUMNS)
    df.to_csv(ctx.out / "sparse.csv", index=False)
    load = os.getloadavg()
    summary = (f"m x {D} CSR rows at {DENSITY:.0%} density (a fifth held out), kernel={KERNEL!r}, C={C:g}, the same "
               f"gamma for both; medians over fresh processes (wall and CPU seconds), maxrss_delta_mb = growth of "
               f"the resident high-water mark during the fit; load average at the end: {load[0]:.2f}, "
               f"{load[1]:.2f}, {load[2]:.2f}.\n\n" + to_markdown(df[COLUMNS], floatfmt=".4g"))
    with open(ctx.out / "sparse.md", "w") as f:
        f.write(summary + "\n")
    return ExperimentResult(outputs=["sparse.csv", "sparse.md"], summary_md=summary)
