"""The papers corevector implements, keyed as the docstrings cite them ("[001] eq. (12)", "[000] Sec. 3.2").

The keys 000-004 are those of the plain-text copies the project was built from (``papers/NNN_*.txt``
outside this repository); :data:`REFERENCES` says which paper each key is, so a citation can be followed
without them.  ``corevector.REFERENCES`` is this table, and README's "References" lists it too.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Reference", "REFERENCES", "cite"]


@dataclass(frozen=True)
class Reference:
    key: str
    authors: str
    title: str
    venue: str
    year: int
    what: str  # what corevector takes from it

    def __str__(self):
        return f"[{self.key}] {self.authors}. {self.title}. {self.venue}, {self.year}."


REFERENCES = {r.key: r for r in (
    Reference("000", "I. W. Tsang, J. T. Kwok and K. T. Lai", "Core Vector Regression for Very Large Regression Problems",
              "Proceedings of the 22nd International Conference on Machine Learning (ICML), pp. 912-919", 2005,
              "the L2-SVR as a center-constrained MEB (CVR), Delta and eta for any kernel, implicit surfaces"),
    Reference("001", "I. W. Tsang, J. T. Kwok and P.-M. Cheung", "Very Large SVM Training using Core Vector Machines",
              "Proceedings of the 10th International Workshop on Artificial Intelligence and Statistics (AISTATS)",
              2005, "MEB and kernel methods, the CVM loop, the (1+eps)^2 approximation, SVDD and the L2-SVMs"),
    Reference("002", "L. Bo, L. Wang and L. Jiao",
              "Selecting a Reduced Set for Building Sparse Support Vector Regression in the Primal",
              "Advances in Knowledge Discovery and Data Mining (PAKDD), LNAI 4426, pp. 35-46", 2007,
              "SSVR-SRS: insensitive Huber loss, basis selection, finite Newton in the primal"),
    Reference("003", "A. J. Smola and B. Schoelkopf", "A Tutorial on Support Vector Regression",
              "Statistics and Computing 14(3), pp. 199-222", 2004,
              "epsilon- and nu-SVR, SMO for regression, the duality gap (the exact-SVR baseline)"),
    Reference("004", "I. W. Tsang, A. Kocsor and J. T. Kwok",
              "Large-Scale Maximum Margin Discriminant Analysis Using Core Vector Machines",
              "IEEE Transactions on Neural Networks 19(4), pp. 610-624", 2008,
              "MMDA by the projection-constrained MEB, SOR, one-vs-all features"),
)}


def cite(key: str) -> str:
    """The full reference of ``key`` ('000' ... '004'), e.g. for a docstring's References section."""
    return str(REFERENCES[key])
