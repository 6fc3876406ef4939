# -*- Python -*-
# lit configuration of the kda tests.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "KDA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kda_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "oracle", "Inputs", "seeds", "regressions"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%kda_src_root", config.kda_src_root))
config.substitutions.append(("%kda_obj_root", config.kda_obj_root))
# The build's libraries (KdaPlugin.so, libKdaCAPI.so).
config.substitutions.append(("%kda_libs", config.kda_libs_dir))
config.substitutions.append(("%cmake", config.cmake_command))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tool_dirs = [config.kda_tools_dir, config.llvm_tools_dir]
tools = ["kda-opt", "kda-run", "kda-model", "kda-capi-test", "kda-compile"]
# Fuzz targets linked with a replay main (test/fuzz), in builds without KDA_FUZZ.
if not config.kda_fuzz:
    tools += ["kda-replay-" + t for t in ("ir", "model", "npy", "manifest")]
llvm_config.add_tool_substitutions(tools, tool_dirs)
# The stock mlir-opt of the LLVM install (it links libMLIR.so, which the
# plugin needs), never one found elsewhere on PATH.
llvm_config.add_tool_substitutions(["mlir-opt"], [config.llvm_tools_dir])
# mlir-runner executes small lowered programs (test/passes/scalar-adjoint.mlir:
# derivatives against finite differences); vector.print needs the C runner
# utilities of the same install.
llvm_config.add_tool_substitutions(["mlir-runner"], [config.llvm_tools_dir])
config.substitutions.append(
    ("%mlir_c_runner_utils",
     os.path.join(os.path.dirname(config.llvm_tools_dir), "lib", "libmlir_c_runner_utils.so")))

# The CUDA toolkit's ptxas serializes cubins (kda-lower-to-nvvm format=bin,
# kda-compile) and reports registers and spills. Tests that need it say
# `REQUIRES: ptxas`.
cuda_root = os.environ.get("CUDA_ROOT", "/usr/local/cuda")
ptxas = os.path.join(cuda_root, "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))

# An ASan + UBSan build (scripts/sanitize.sh): tests that load kda's libraries
# into an uninstrumented host (stock mlir-opt, python, a downstream build
# without the sanitizer flags) say `UNSUPPORTED: asan`.
if config.kda_sanitize:
    config.available_features.add("asan")
if config.kda_fuzz:
    config.available_features.add("fuzz")
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
        if var in os.environ:
            config.environment[var] = os.environ[var]
