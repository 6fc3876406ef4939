"""kda: Kimi Delta Attention kernels compiled by the kda MLIR compiler.

    from kda import chunk_kda            # instead of: from fla.ops.kda import chunk_kda
    o, ht = chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)

See python/README.md. Importing this package needs neither torch nor a GPU;
calling the ops needs torch with CUDA and libkda_runtime.so.
"""

__version__ = "0.1.0"

from .runtime import Bundle, KdaError, load_bundle, load_library
from .bundles import BundleNotFoundError, CompileError
from .ops import chunk_kda, fused_recurrent_kda, window_attention

__all__ = ["chunk_kda", "fused_recurrent_kda", "window_attention", "Bundle", "KdaError", "load_bundle",
           "load_library", "BundleNotFoundError", "CompileError"]
