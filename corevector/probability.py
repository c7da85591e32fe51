"""Probabilities from pairwise decision values, as LIBSVM computes them.

* :func:`cross_validated_sigmoid`: Platt's sigmoid P(positive | f) = 1 / (1 + exp(A f + B)) fitted to
  decision values from a shuffled k-fold cross-validation (LIBSVM's ``svm_binary_svc_probability``), with
  Lin, Lin and Weng's targets (scikit-learn's ``sklearn.calibration._sigmoid_calibration``);
* :func:`pair_probabilities`: the sigmoids applied to a model's pairwise decision values;
* :func:`pairwise_coupling`: class probabilities from the pairwise ones (Wu, Lin & Weng 2004, method 2;
  LIBSVM's ``multiclass_probability``).

References: J. Platt, "Probabilistic outputs for support vector machines", 2000; H.-T. Lin, C.-J. Lin and
R. C. Weng, "A note on Platt's probabilistic outputs for support vector machines", Machine Learning 68,
2007; T.-F. Wu, C.-J. Lin and R. C. Weng, "Probability estimates for multi-class classification by
pairwise coupling", JMLR 5, 2004.
"""
from __future__ import annotations

import numpy as np

from refimpl.driver import make_rng

#: folds of the cross-validation behind Platt's sigmoids (LIBSVM's svm_binary_svc_probability)
PROBABILITY_FOLDS = 5
#: pairwise probabilities are clipped to [MIN_PROB, 1 - MIN_PROB] before coupling (LIBSVM's min_prob)
MIN_PROB = 1e-7


def _run_tasks(fn, tasks):
    from .parallel.tasks import run_tasks
    return run_tasks(fn, tasks)


def cross_validated_sigmoid(fold_decisions, y_pm, seed, n_folds=PROBABILITY_FOLDS):
    """(A, B) of Platt's sigmoid P(y = +1 | f) = 1 / (1 + exp(A f + B)) for the labels ``y_pm`` (+1/-1).

    The decision values come from a shuffled ``n_folds``-fold cross-validation seeded from ``seed``:
    ``fold_decisions(train, test, fold_seed, k)`` fits on the rows ``train`` and returns f on the rows
    ``test``.  A training fold with one class only gives its test fold f = +1 or -1, as LIBSVM does.
    """
    from sklearn.calibration import _sigmoid_calibration
    from sklearn.model_selection import KFold

    y_pm = np.asarray(y_pm)
    rng = make_rng(seed)
    folds = KFold(min(n_folds, len(y_pm)), shuffle=True, random_state=int(rng.integers(0, 2**31 - 1)))
    dec = np.empty(len(y_pm))
    fits = []
    for k, (train, test) in enumerate(folds.split(y_pm)):
        fold_seed = int(rng.integers(0, 2**31 - 1))
        y_tr = y_pm[train]
        if np.all(y_tr == y_tr[0]):
            dec[test] = float(y_tr[0])
            continue
        fits.append((train, test, fold_seed, k))
    # the folds are separate tasks on a running dask.distributed client (corevector.parallel)
    for (_, test, _, _), values in zip(fits, _run_tasks(fold_decisions, fits)):
        dec[test] = values
    A, B = _sigmoid_calibration(dec, y_pm > 0)
    return float(A), float(B)


def pair_probabilities(decisions, prob_a, prob_b):
    """P(first class of each pair | f) = 1 / (1 + exp(A f + B)) for an (n, n_pairs) array of pairwise
    decision values and the pairs' sigmoids."""
    from scipy.special import expit

    return expit(-(decisions * prob_a + prob_b))


def class_probabilities(decisions, prob_a, prob_b, pairs, n_classes, min_prob=MIN_PROB):
    """(n, n_classes) probabilities: the sigmoid of the single pair (two classes), else the pairwise
    probabilities coupled by :func:`pairwise_coupling`."""
    r = pair_probabilities(decisions, prob_a, prob_b)
    if n_classes == 2:
        return np.column_stack([r[:, 0], 1.0 - r[:, 0]])
    return pairwise_coupling(r, pairs, n_classes, min_prob)


def pairwise_coupling(r, pairs, k, min_prob=MIN_PROB):
    """Class probabilities from pairwise ones (Wu, Lin & Weng, JMLR 2004, method 2; LIBSVM's
    ``multiclass_probability``): p minimises sum_{i<j} (r_ji p_i - r_ij p_j)^2 on sum p = 1, with
    r[:, q] = r_ab = P(a | a or b) for ``pairs[q] = (a, b)`` (clipped to [min_prob, 1 - min_prob]) and
    r_ba = 1 - r_ab.  The minimiser solves [[Q, 1], [1', 0]] [p; b] = [0; 1] with Q_tt = sum_{s != t} r_st^2,
    Q_ts = -r_st r_ts; it is non-negative (their Theorem 2), and LIBSVM reaches it iteratively.  Solved
    here directly, batched over the rows; tiny negative round-off is clipped and the rows renormalised."""
    r = np.clip(np.asarray(r, dtype=np.float64), min_prob, 1.0 - min_prob)
    n = r.shape[0]
    R = np.zeros((n, k, k))  # R[:, i, j] = r_ij = P(i | i or j)
    for q, (a, b) in enumerate(pairs):
        R[:, a, b] = r[:, q]
        R[:, b, a] = 1.0 - r[:, q]
    M = np.zeros((n, k + 1, k + 1))
    M[:, :k, :k] = -R.transpose(0, 2, 1) * R                     # Q_ts = -r_st r_ts (t != s)
    diag = np.einsum("nst,nst->nt", R, R)                         # sum_s r_st^2
    M[:, np.arange(k), np.arange(k)] = diag
    M[:, :k, k] = 1.0
    M[:, k, :k] = 1.0
    rhs = np.zeros((n, k + 1, 1))
    rhs[:, k, 0] = 1.0
    p = np.linalg.solve(M, rhs)[:, :k, 0]
    p = np.clip(p, 0.0, None)
    return p / p.sum(axis=1, keepdims=True)

