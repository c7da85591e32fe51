"""The estimators of corevector, listed once.

The command line's ``--estimator`` choices and per-estimator options (:mod:`corevector.cli`), the model
files' class table (:mod:`corevector.io.model_files`) and the documentation read :data:`ESTIMATORS`.  The
other lists live where their members are defined and are read, never repeated: kernels
(:data:`refimpl.kernels.KERNELS`), stop rules (:data:`refimpl.driver.STOPS`), inner solvers
(:data:`corevector.engine_policy.SOLVERS`) and implementations (:data:`corevector.numerics.IMPLS`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .ball import CVDD, MEB
from .classifier import CVMClassifier
from .mmda import MMDA
from .regressor import CVR
from .sparse_svr import SparseSVR
from .surface import ImplicitSurface

__all__ = ["Entry", "ESTIMATORS", "CLI_ESTIMATORS", "by_name"]


@dataclass(frozen=True)
class Entry:
    """One estimator: its class, its command-line name (None: not offered by ``corevector fit``), what it
    learns ('classifier', 'regressor', 'outlier', 'transformer', 'surface') and the paper it implements."""

    cls: type
    cli_name: str | None
    task: str
    paper: str


ESTIMATORS = (
    Entry(CVMClassifier, "cvm", "classifier", "001"),
    Entry(CVDD, "cvdd", "outlier", "001"),
    Entry(MEB, "meb", "outlier", "001"),
    Entry(CVR, "cvr", "regressor", "000"),
    Entry(SparseSVR, "ssvr", "regressor", "002"),
    Entry(MMDA, "mmda", "transformer", "004"),
    Entry(ImplicitSurface, "surface", "surface", "000"),
)

#: the estimators ``corevector fit --estimator NAME`` offers, by command-line name
CLI_ESTIMATORS = {e.cli_name: e for e in ESTIMATORS if e.cli_name is not None}


def by_name(name: str) -> Entry:
    """The entry of the estimator class called ``name`` (e.g. 'CVMClassifier'); KeyError otherwise."""
    for e in ESTIMATORS:
        if e.cls.__name__ == name:
            return e
    raise KeyError(name)
