"""The GPU chips kda compiles for, in one table for the package.

The values are the compiler's chip table (lowering/Chips.h), which
``kda-compile --print-chips`` prints as JSON; test/tools/print-chips.test
checks this copy against it value for value. The package keeps its own copy
because it runs where no compiler is installed (a GPU server with prebuilt
bundles). Every Python module that needs a chip fact reads it here.
"""

from typing import Dict, Tuple

# default_tile: kda-compile's tile without flags (v_block_f32: the V block of
# gated delta ops with fp32 q and k; v_block_gradient and threads_gradient:
# the V block and block threads of kda.gated_delta_grad; v_block_gradient_step:
# its step program's V columns a loop iteration, 0 for the V block).
_NV_TILE = {"chunk": 16, "v_block": 16, "v_block_f32": 32, "v_block_gradient": 16,
            "threads_gradient": 256, "v_block_gradient_step": 0}
# sm_90a: the reverse scan on V blocks of 32, the step program on 16 (Chips.h).
_SM90_TILE = dict(_NV_TILE, v_block_gradient=32, v_block_gradient_step=16)
_AMD_TILE = {"chunk": 16, "v_block": 16, "v_block_f32": 16, "v_block_gradient": 16,
             "threads_gradient": 128, "v_block_gradient_step": 0}
CHIP_TABLE: Dict[str, Dict[str, object]] = {
    "sm_80": {"vendor": "nvidia", "warp_size": 32, "shared_memory_per_block": 163 * 1024,
              "default_tile": _NV_TILE},
    "sm_90a": {"vendor": "nvidia", "warp_size": 32, "shared_memory_per_block": 227 * 1024,
               "default_tile": _SM90_TILE},
    "gfx90a": {"vendor": "amd", "warp_size": 64, "shared_memory_per_block": 64 * 1024,
               "default_tile": _AMD_TILE},
    "gfx942": {"vendor": "amd", "warp_size": 64, "shared_memory_per_block": 64 * 1024,
               "default_tile": _AMD_TILE},
    "gfx1100": {"vendor": "amd", "warp_size": 32, "shared_memory_per_block": 64 * 1024,
                "default_tile": _AMD_TILE},
}

CHIPS: Tuple[str, ...] = tuple(CHIP_TABLE)
NVIDIA_CHIPS: Tuple[str, ...] = tuple(c for c, t in CHIP_TABLE.items() if t["vendor"] == "nvidia")


def shared_memory_per_block(chip: str) -> int:
    """Bytes of shared memory (LDS) one block may use on `chip`."""
    return int(CHIP_TABLE[chip]["shared_memory_per_block"])


def default_tile(chip: str) -> Dict[str, int]:
    """kda-compile's tile without flags on `chip`: chunk, v_block and the
    v_block of gated delta ops with fp32 q and k (v_block_f32)."""
    return dict(CHIP_TABLE[chip]["default_tile"])  # type: ignore[arg-type]


def amd_chips() -> Tuple[str, ...]:
    """The AMD chips kda compiles for."""
    return tuple(c for c, t in CHIP_TABLE.items() if t["vendor"] == "amd")
