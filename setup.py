"""Build the Cython extensions of fastimpl, with OpenMP when the compiler supports it.

OpenMP is detected by compiling a tiny test program with the compiler setuptools will use;
when that fails (e.g. Apple clang without libomp) the extensions are built without it and
``prange`` loops run serially — same results, one core.
"""
import glob
import os
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
    flag = "/openmp" if sys.platform == "win32" else "-fopenmp"
    code = "#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n"
    if not try_build(code, [flag], [flag] if sys.platform != "win32" else []):
        print("corevector: OpenMP not available, building serial extensions", file=sys.stderr)
        return [], []
    return [flag], ([] if sys.platform == "win32" else [flag])


def try_build(code, compile_args, link_args):
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as f:
            f.write(code)
        try:
            res = subprocess.run(cc + compile_args + [src, "-o", os.path.join(tmp, "t")] + link_args,
                                 capture_output=True, timeout=60)
            return res.returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False


def libmvec_flags(omp_flags):
    """Vector exp from glibc's libmvec (see fastimpl/_vexp.h), when it compiles and links here."""
    if os.environ.get("COREVECTOR_NO_LIBMVEC") or sys.platform != "linux":
        return [], [], []
    simd = omp_flags or ["-fopenmp-simd"]
    code = ("#include <math.h>\n#pragma omp declare simd notinbranch\nextern double exp(double);\n"
            "double b[64];\nint main(void){\n#pragma omp simd\nfor(int i=0;i<64;i++) b[i]=exp(b[i]);\n"
            "return b[3] == 1.0 ? 0 : 1;}\n")
    if not try_build(code, ["-O2"] + simd, ["-lmvec", "-lm"]):
        print("corevector: libmvec not available, scalar exp in kernel rows", file=sys.stderr)
        return [], [], []
    return simd, ["-lmvec", "-lm"], [("COREVECTOR_LIBMVEC", "1")]


compile_omp, link_omp = openmp_flags()
simd_compile, simd_link, simd_macros = libmvec_flags(compile_omp)
# -fno-math-errno: sqrt/exp need not set errno, which lets the compiler vectorise them; results are unchanged
extra_compile = ["-O3", "-fno-math-errno"] if sys.platform != "win32" else ["/O2"]


def extension(pyx):
    """One extension per ``fastimpl/_*.pyx`` (one concept per module), all with the same flags."""
    name = "fastimpl." + os.path.splitext(os.path.basename(pyx))[0]
    return Extension(
        name,
        [pyx],
        include_dirs=[np.get_include(), "fastimpl"],
        extra_compile_args=extra_compile + compile_omp + [f for f in simd_compile if f not in compile_omp],
        extra_link_args=link_omp + simd_link,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")] + simd_macros,
        # every header, include and declaration file (the engine's units: _cache.pxi, _scans.pxi, ...; _simd*.h;
        # the kernel-row layer _krows.pxd, which the engine, _ssvr and _mmda cimport)
        depends=sorted(glob.glob(os.path.join("fastimpl", "_*.h")) + glob.glob(os.path.join("fastimpl", "_*.pxi"))
                       + glob.glob(os.path.join("fastimpl", "_*.pxd"))),
    )


sources = sorted(glob.glob(os.path.join("fastimpl", "_*.pyx")))
# Development aid: COREVECTOR_EXTENSIONS=_engine,_ssvr builds only those (e.g. while another
# module is half-written); a normal install builds them all.
only = [s.strip() for s in os.environ.get("COREVECTOR_EXTENSIONS", "").split(",") if s.strip()]
if only:
    sources = [p for p in sources if os.path.splitext(os.path.basename(p))[0] in only]
extensions = [extension(p) for p in sources]


# The extensions are independent, so Cython translates them and the compiler builds them in parallel,
# one per core (about 60 s of CPU in all, which was most of a fresh setup's wall time on 2 cores).
# COREVECTOR_BUILD_JOBS=1 builds them one after another.
jobs = int(os.environ.get("COREVECTOR_BUILD_JOBS", 0)) or min(len(extensions), os.cpu_count() or 1)
setup(ext_modules=cythonize(extensions, nthreads=jobs if jobs > 1 else 0,
                            compiler_directives={"language_level": "3"}),
      options={"build_ext": {"parallel": jobs}})
