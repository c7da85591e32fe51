# Shared by fastimpl._engine and fastimpl._mmda with ``include "_tolerances.pxi"``: the tolerances
# that make the compiled numerics decide as the reference does.  Each is defined once, in
# refimpl.simplex_qp, and read from there when the extension is imported, so ref and fast can never
# disagree on one (a module-level ``cdef double`` is a C global either way: no speed is lost).
#
#   TAU         LIBSVM's floor on the SMO curvature a_ij (duplicate points)
#   TIE         relative width within which candidates tie; ties go to the lowest index
#   PIVOT_RTOL  smallest accepted Cholesky pivot^2 / Q_aa of the active-set method
from refimpl import simplex_qp as _simplex_qp

cdef double TAU = _simplex_qp.TAU
cdef double TIE = _simplex_qp.TIE
cdef double PIVOT_RTOL = _simplex_qp.PIVOT_RTOL
