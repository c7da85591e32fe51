"""corevector reference implementation: readable NumPy/SciPy, one module per algorithm.

Every module cites the paper files of ``shared/papers`` by name and equation number.
No compiled code is needed to import or run anything here.
"""
from .kernels import KernelSpec, beta_heuristic, kernel_block, kernel_diag, kernel_expansion, make_kernel_spec
from .meb import MEBResult, fit_meb
from .problem import MEBProblem

__all__ = ["KernelSpec", "MEBProblem", "MEBResult", "beta_heuristic", "fit_meb", "kernel_block",
           "kernel_diag", "kernel_expansion", "make_kernel_spec"]
