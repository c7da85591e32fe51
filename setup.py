"""Build the Cython extensions of fastimpl, with OpenMP when the compiler supports it.

OpenMP is detected by compiling a tiny test program with the compiler setuptools will use;
when that fails (e.g. Apple clang without libomp) the extensions are built without it and
``prange`` loops run serially — same results, one core.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import sysconfig

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup


def openmp_flags():
    if os.environ.get("COREVECTOR_NO_OPENMP"):
        return [], []
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cc = cc.split()
    flag = "/openmp" if sys.platform == "win32" else "-fopenmp"
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as f:
            f.write("#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
        try:
            res = subprocess.run(cc + [flag, src, "-o", os.path.join(tmp, "t")],
                                 capture_output=True, timeout=60)
            ok = res.returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
    if not ok:
        print("corevector: OpenMP not available, building serial extensions", file=sys.stderr)
        return [], []
    return [flag], ([] if sys.platform == "win32" else [flag])


compile_omp, link_omp = openmp_flags()
extra_compile = ["-O3"] if sys.platform != "win32" else ["/O2"]

extensions = [
    Extension(
        "fastimpl._engine",
        ["fastimpl/_engine.pyx"],
        include_dirs=[np.get_include()],
        extra_compile_args=extra_compile + compile_omp,
        extra_link_args=link_omp,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    ),
]

setup(ext_modules=cythonize(extensions, compiler_directives={"language_level": "3"}))
