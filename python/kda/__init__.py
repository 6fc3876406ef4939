"""kda: Kimi Delta Attention kernels compiled by the kda MLIR compiler.

    from kda import chunk_kda            # instead of: from fla.ops.kda import chunk_kda
    o, ht = chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)

See python/README.md. Importing this package needs neither torch nor a GPU;
calling the ops needs torch with CUDA and libkda_runtime.so. Where torch is
installed, importing kda registers the ops as torch custom ops
(torch.ops.kda.*, kda/torch_ops.py) for torch.compile and CUDA graphs;
kda.layers.KimiDeltaAttention is the drop-in for FLA's layer.
"""

__version__ = "0.1.0"

from .runtime import Bundle, KdaError, load_bundle, load_library
from .bundles import BundleNotFoundError, CompileError
from .ops import chunk_kda, fused_recurrent_kda, hybrid_attention, multi_scale_attention, window_attention


def _register_torch_ops():
    """Where torch is installed: the custom ops torch.compile traces
    (kda/torch_ops.py). Without torch (or with one older than
    torch.library.custom_op, 2.4) the functions run eagerly only."""
    try:
        import torch
    except ImportError:
        return
    if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
        return
    from . import ops as _ops, torch_ops as _torch_ops
    _ops._traced = _torch_ops
    _ops._compiling = torch.compiler.is_compiling


_register_torch_ops()


def __getattr__(name):
    # kda.layers (torch.nn modules) is imported on first use: `import kda`
    # needs no torch.
    if name == "layers":
        import importlib
        return importlib.import_module(".layers", __name__)
    raise AttributeError(f"module 'kda' has no attribute {name!r}")

__all__ = ["chunk_kda", "fused_recurrent_kda", "window_attention", "hybrid_attention", "multi_scale_attention", "Bundle", "KdaError", "load_bundle",
           "load_library", "BundleNotFoundError", "CompileError"]
