"""corevector reference implementation: readable NumPy/SciPy, one module per algorithm.

Every module cites the papers by their key and equation number, "[001] eq. (12)"; the keys are
:data:`refimpl.references.REFERENCES` (README, "References").
No compiled code is needed to import or run anything here.
"""
from .kernels import KernelSpec, beta_heuristic, kernel_block, kernel_diag, kernel_expansion, make_kernel_spec
from .meb import MEBResult, fit_meb
from .problem import MEBProblem

__all__ = ["KernelSpec", "MEBProblem", "MEBResult", "beta_heuristic", "fit_meb", "kernel_block",
           "kernel_diag", "kernel_expansion", "make_kernel_spec"]
