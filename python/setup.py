"""Builds libkda_runtime.so into the package (see pyproject.toml).

Environment:
  CXX                the C++ compiler (default: c++, else g++, else clang++)
  KDA_WHEEL_BUNDLES  a bundle directory (scripts/build-bench-bundles.sh,
                     python -m kda.prebuild) copied into the package as
                     kda/prebuilt/, searched after KDA_BUNDLE_PATH and the
                     user cache (kda.bundles.cache_dirs)
"""
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RUNTIME_SOURCES = ["CudaDriver.cpp", "HipDriver.cpp", "Json.cpp", "Manifest.cpp", "Runtime.cpp"]


def _compiler():
    cxx = os.environ.get("CXX")
    if cxx:
        return cxx
    for c in ("c++", "g++", "clang++"):
        if shutil.which(c):
            return c
    raise SystemExit("kda: no C++ compiler found to build libkda_runtime.so (set CXX)")


class BuildPyWithRuntime(build_py):
    """Copies the package, then compiles the runtime next to it (the same
    command as runtime/gpu/build-runtime.sh) and adds prebuilt bundles."""

    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "kda")
        sources = [os.path.join(ROOT, "runtime", s) for s in RUNTIME_SOURCES]
        missing = [s for s in sources if not os.path.isfile(s)]
        if missing:
            raise SystemExit("kda: the runtime's sources are not here (build from the repository's "
                             f"python/ directory): missing {missing[0]}")
        cmd = [_compiler(), "-std=c++17", "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
               "-DKDA_RUNTIME_BUILDING", "-I", ROOT] + sources + [
               "-o", os.path.join(pkg, "libkda_runtime.so"), "-ldl", "-lpthread"]
        print("kda: " + " ".join(cmd), flush=True)
        subprocess.check_call(cmd)
        bundles = os.environ.get("KDA_WHEEL_BUNDLES")
        if bundles:
            if not os.path.isdir(bundles):
                raise SystemExit(f"kda: KDA_WHEEL_BUNDLES={bundles} is not a directory")
            dest = os.path.join(pkg, "prebuilt")
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(bundles, dest)
            print(f"kda: bundles from {bundles} -> kda/prebuilt", flush=True)


class BinaryDistribution(Distribution):
    """The wheel holds a shared library: platform-specific, not pure."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithRuntime}, distclass=BinaryDistribution)
