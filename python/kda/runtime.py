"""ctypes binding of libkda_runtime.so (runtime/kda_runtime.h).

No compiled extension and no torch at import time: tensors are read through
their ``data_ptr()``, ``dtype``, ``shape``, ``stride()`` and ``device``
attributes (torch tensors, or anything that looks like one).

The library is found as, in order: ``$KDA_RUNTIME_LIBRARY``;
``libkda_runtime.so`` next to this package; the repository's
``build/lib/libkda_runtime.so`` or ``build/runtime/libkda_runtime.so``;
finally the dynamic loader's search path.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

__all__ = ["KdaError", "Bundle", "Prepared", "Pieces", "load_library", "library_path", "STATUS_NAMES"]

# kda_status
STATUS_NAMES = (
    "KDA_OK",
    "KDA_ERROR_INVALID_ARGUMENT",
    "KDA_ERROR_NO_DRIVER",
    "KDA_ERROR_NO_DEVICE",
    "KDA_ERROR_WRONG_ARCHITECTURE",
    "KDA_ERROR_CORRUPT_BUNDLE",
    "KDA_ERROR_NOT_FOUND",
    "KDA_ERROR_BAD_TENSOR",
    "KDA_ERROR_LAUNCH_FAILED",
)

# kda_dtype
KDA_F32, KDA_F16, KDA_BF16, KDA_I32, KDA_I64 = range(5)
_DTYPE_CODES = {
    "float32": KDA_F32, "float": KDA_F32, "f32": KDA_F32,
    "float16": KDA_F16, "half": KDA_F16, "f16": KDA_F16,
    "bfloat16": KDA_BF16, "bf16": KDA_BF16,
    "int32": KDA_I32, "int": KDA_I32, "i32": KDA_I32,
    "int64": KDA_I64, "long": KDA_I64, "i64": KDA_I64,
}
# manifest dtype names
_MANIFEST_DTYPES = {"f32": KDA_F32, "f16": KDA_F16, "bf16": KDA_BF16, "i32": KDA_I32, "i64": KDA_I64}


class KdaError(RuntimeError):
    """A failed runtime call: ``status`` is the kda_status name (e.g.
    ``KDA_ERROR_BAD_TENSOR``), ``message`` the runtime's kda_last_error()."""

    def __init__(self, status: str, message: str, call: str = ""):
        self.status = status
        self.message = message
        self.call = call
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{status}: {message}" if message else f"{where}{status}")


class _KdaTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int32),
        # int64_t * (c_void_p: assigned from addresses without a cast)
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("device", ctypes.c_int32),
    ]


_lib = None
_lib_path = None
_lib_lock = threading.Lock()


def _candidates() -> List[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    out = []
    env = os.environ.get("KDA_RUNTIME_LIBRARY")
    if env:
        return [env]
    out.append(os.path.join(here, "libkda_runtime.so"))
    out.append(os.path.join(repo, "build", "lib", "libkda_runtime.so"))
    out.append(os.path.join(repo, "build", "runtime", "libkda_runtime.so"))
    return out


def library_path() -> Optional[str]:
    """The path of the loaded (or, before loading, the one that would be) library."""
    if _lib_path:
        return _lib_path
    for c in _candidates():
        if os.path.isfile(c):
            return c
    return None


def load_library():
    """Loads libkda_runtime.so once per process and declares its C API."""
    global _lib, _lib_path
    with _lib_lock:
        if _lib is not None:
            return _lib
        tried = []
        lib = None
        for c in _candidates():
            tried.append(c)
            if os.path.isfile(c) or os.environ.get("KDA_RUNTIME_LIBRARY"):
                try:
                    lib = ctypes.CDLL(c)
                    _lib_path = c
                    break
                except OSError as e:
                    raise KdaError("KDA_ERROR_NO_RUNTIME", f"cannot load {c}: {e}", "load_library")
        if lib is None:
            try:
                lib = ctypes.CDLL("libkda_runtime.so")
                _lib_path = "libkda_runtime.so"
            except OSError:
                raise KdaError(
                    "KDA_ERROR_NO_RUNTIME",
                    "libkda_runtime.so not found (tried " + ", ".join(tried) +
                    " and the loader's path). Build it with `g++ -std=c++17 -O2 -shared -fPIC -I. "
                    "runtime/CudaDriver.cpp runtime/HipDriver.cpp runtime/Json.cpp runtime/Manifest.cpp "
                    "runtime/Runtime.cpp -o libkda_runtime.so -ldl -lpthread` in the repository and set "
                    "KDA_RUNTIME_LIBRARY to its path.", "load_library")
        c_int, c_char_p, c_void_p, c_int32 = ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int32
        lib.kda_bundle_load.argtypes = [c_char_p, ctypes.POINTER(c_void_p)]
        lib.kda_bundle_load.restype = c_int
        lib.kda_bundle_free.argtypes = [c_void_p]
        lib.kda_bundle_free.restype = None
        lib.kda_bundle_num_kernels.argtypes = [c_void_p]
        lib.kda_bundle_num_kernels.restype = c_int32
        lib.kda_bundle_kernel_name.argtypes = [c_void_p, c_int32]
        lib.kda_bundle_kernel_name.restype = c_char_p
        lib.kda_bundle_target_chip.argtypes = [c_void_p]
        lib.kda_bundle_target_chip.restype = c_char_p
        lib.kda_check_tensors.argtypes = [c_void_p, c_char_p, ctypes.POINTER(_KdaTensor), c_int32]
        lib.kda_check_tensors.restype = c_int
        lib.kda_launch.argtypes = [c_void_p, c_char_p, ctypes.POINTER(_KdaTensor), c_int32, c_void_p]
        lib.kda_launch.restype = c_int
        # Version 2 (entries); absent from libraries built before it.
        if hasattr(lib, "kda_bundle_num_entries"):
            lib.kda_bundle_num_entries.argtypes = [c_void_p]
            lib.kda_bundle_num_entries.restype = c_int32
            lib.kda_bundle_entry_name.argtypes = [c_void_p, c_int32]
            lib.kda_bundle_entry_name.restype = c_char_p
            lib.kda_entry_workspace_bytes.argtypes = [c_void_p, c_char_p, ctypes.POINTER(_KdaTensor), c_int32,
                                                      ctypes.POINTER(ctypes.c_uint64)]
            lib.kda_entry_workspace_bytes.restype = c_int
            lib.kda_launch_with_workspace.argtypes = [c_void_p, c_char_p, ctypes.POINTER(_KdaTensor), c_int32,
                                                      c_void_p, ctypes.c_uint64, c_void_p]
            lib.kda_launch_with_workspace.restype = c_int
        # Launches of tensors the caller vouches for; absent from older libraries.
        if hasattr(lib, "kda_launch_trusted"):
            lib.kda_launch_trusted.argtypes = [c_void_p, c_char_p, ctypes.POINTER(_KdaTensor), c_int32,
                                               c_void_p, ctypes.c_uint64, c_void_p]
            lib.kda_launch_trusted.restype = c_int
        # Prepared launches (kda_prepare); absent from older libraries.
        if hasattr(lib, "kda_prepare"):
            lib.kda_prepare.argtypes = [c_void_p, c_char_p, ctypes.POINTER(_KdaTensor), c_int32,
                                        ctypes.POINTER(c_void_p), ctypes.POINTER(ctypes.c_uint64)]
            lib.kda_prepare.restype = c_int
            # Every pointer argument is c_void_p, so that callers pass plain ints
            # (the cheapest conversion ctypes has).
            lib.kda_launch_prepared.argtypes = [c_void_p, c_void_p, c_int32, c_void_p, ctypes.c_uint64,
                                                c_void_p]
            lib.kda_launch_prepared.restype = c_int
            lib.kda_prepared_free.argtypes = [c_void_p]
            lib.kda_prepared_free.restype = None
        # Pipelined pieces (kda_prepare_pieces); absent from older libraries.
        if hasattr(lib, "kda_prepare_pieces"):
            lib.kda_prepare_pieces.argtypes = [c_void_p, c_char_p, ctypes.POINTER(_KdaTensor), c_int32,
                                               ctypes.POINTER(ctypes.c_int64), c_int32,
                                               ctypes.POINTER(c_void_p), ctypes.POINTER(ctypes.c_uint64)]
            lib.kda_prepare_pieces.restype = c_int
            lib.kda_launch_pieces.argtypes = [c_void_p, c_void_p, c_int32, c_void_p, ctypes.c_uint64, c_void_p]
            lib.kda_launch_pieces.restype = c_int
            lib.kda_pieces_free.argtypes = [c_void_p]
            lib.kda_pieces_free.restype = None
        lib.kda_last_error.argtypes = []
        lib.kda_last_error.restype = c_char_p
        lib.kda_status_name.argtypes = [c_int]
        lib.kda_status_name.restype = c_char_p
        _lib = lib
        return lib


def _raise(lib, status: int, call: str):
    name = lib.kda_status_name(status).decode()
    msg = (lib.kda_last_error() or b"").decode(errors="replace")
    raise KdaError(name, msg, call)


def dtype_code(dtype: Any) -> int:
    """kda_dtype of a torch dtype (torch.bfloat16, ...), numpy dtype or name."""
    name = str(dtype)
    for prefix in ("torch.", "numpy."):
        if name.startswith(prefix):
            name = name[len(prefix):]
    if name not in _DTYPE_CODES:
        raise KdaError("KDA_ERROR_BAD_TENSOR",
                       f"dtype {dtype} is not supported (float32, float16, bfloat16, int32, int64)",
                       "dtype_code")
    return _DTYPE_CODES[name]


def _device_index(t: Any) -> int:
    dev = getattr(t, "device", None)
    if dev is None:
        return -1
    if isinstance(dev, int):
        return dev
    if getattr(dev, "type", "cpu") in ("cuda", "hip"):
        idx = dev.index
        if idx is None:  # 'cuda' without an index: the current device
            import torch  # only reachable with torch tensors
            idx = torch.cuda.current_device()
        return int(idx)
    return -1


_dtype_code_of: Dict[Any, int] = {}


def _cached_dtype_code(dtype: Any) -> int:
    code = _dtype_code_of.get(dtype)
    if code is None:
        code = dtype_code(dtype)
        _dtype_code_of[dtype] = code
    return code


class _Marshalled:
    """Keeps the ctypes arrays behind a kda_tensor array alive.

    Every shape and stride lives in one int64 buffer, addressed by offset:
    a launch's host cost is what a serving engine pays per layer and token
    (decode kernels take tens of microseconds), so this avoids a ctypes
    array and a cast per tensor."""

    def __init__(self, tensors: Sequence[Any]):
        n = len(tensors)
        self.array = array = (_KdaTensor * max(n, 1))()
        self.devices = set()
        dims: List[int] = []
        layout = []
        for t in tensors:
            shape = tuple(t.shape)
            stride = getattr(t, "stride", None)
            strides = tuple(stride()) if callable(stride) else None
            layout.append((len(shape), strides is not None))
            dims.extend(shape)
            if strides is not None:
                dims.extend(strides)
        self.keep = buf = (ctypes.c_int64 * max(len(dims), 1))(*dims)
        at = ctypes.addressof(buf)
        for i, t in enumerate(tensors):
            rank, has_strides = layout[i]
            dev = _device_index(t)
            self.devices.add(dev)
            e = array[i]
            e.data = t.data_ptr()
            e.dtype = _cached_dtype_code(t.dtype)
            e.rank = rank
            e.shape = at  # never null, as for rank 0 the C API expects
            at += 8 * rank
            if has_strides:
                e.strides = at
                at += 8 * rank
            e.device = dev
        self.count = n

    def rebind(self, tensors: Sequence[Any]) -> None:
        """New data pointers for tensors of the same shapes, strides, dtypes
        and devices as the ones this array was built from (the caller
        guarantees it: kda.ops' decode plans are keyed on them)."""
        array = self.array
        for i, t in enumerate(tensors):
            array[i].data = t.data_ptr()


_raw_stream = None  # torch._C._cuda_getCurrentRawStream, once torch is imported


def _workspace_arg(workspace: Any):
    """(pointer or None, bytes) of a caller-owned workspace: a device tensor,
    a ``(pointer, bytes)`` pair, or None (nothing)."""
    if workspace is None:
        return None, 0
    if isinstance(workspace, tuple):
        ptr, size = int(workspace[0]), int(workspace[1])
    else:
        ptr = int(workspace.data_ptr())
        size = int(workspace.numel()) * int(workspace.element_size())
    return (ctypes.c_void_p(ptr) if ptr else None), size


def _stream_handle(stream: Any, device: int) -> Optional[int]:
    global _raw_stream
    if stream is None:
        if device < 0:
            return None
        if _raw_stream is None:
            try:
                import torch
            except ImportError:
                return None
            # The current stream's handle without a Stream object (what
            # Triton's launcher reads): a few microseconds less per launch.
            _raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
                lambda d: torch.cuda.current_stream(d).cuda_stream)
        return int(_raw_stream(device))
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)
    if handle is not None:
        return int(handle)
    if isinstance(stream, ctypes.c_void_p):
        return stream.value
    raise TypeError(f"stream: expected None, an int handle or a torch.cuda.Stream, got {type(stream)}")


class Prepared:
    """A kda_prepare handle: a launch of one name checked and resolved once
    for tensors of fixed shapes, dtypes, strides and device; each launch
    passes new data pointers (``data``, one c_void_p per tensor, in order)
    and is one kda_launch_prepared call. Keeps its bundle alive (the handle
    must not outlive it). Not for two threads at once."""

    _prepare, _launch, _free = "kda_prepare", "kda_launch_prepared", "kda_prepared_free"

    def __init__(self, bundle: "Bundle", name: bytes, m: "_Marshalled", *extra: Any):
        """`extra`: what the prepare call takes between the tensors and the
        handle (a subclass's)."""
        self.bundle = bundle
        self.name = name
        self._lib = lib = bundle._lib
        handle = ctypes.c_void_p()
        nbytes = ctypes.c_uint64(0)
        status = getattr(lib, self._prepare)(bundle._handle, name, m.array, m.count, *extra, ctypes.byref(handle),
                                             ctypes.byref(nbytes))
        if status != 0:
            _raise(lib, status, f"{self._prepare}({name.decode()})")
        self.handle = handle.value
        self.workspace_bytes = int(nbytes.value)
        self.count = m.count
        self.data = (ctypes.c_void_p * max(m.count, 1))(*[m.array[i].data for i in range(m.count)])
        self.data_address = ctypes.addressof(self.data)
        self.call = getattr(lib, self._launch)  # (handle, data, count, workspace, bytes, stream) -> status

    def launch(self, workspace: Optional[int] = None, nbytes: int = 0, stream: Optional[int] = None) -> None:
        """One launch with the pointers now in ``data`` (workspace: a device
        pointer, stream: a raw handle; None for none / the default stream)."""
        status = self.call(self.handle, self.data_address, self.count, workspace, nbytes, stream)
        if status != 0:
            self.fail(status)

    def fail(self, status: int) -> None:
        _raise(self._lib, status, f"{self._launch}({self.name.decode()})")

    def __del__(self):
        h = getattr(self, "handle", None)
        if h:
            self.handle = None
            try:
                getattr(self._lib, self._free)(h)
            except Exception:
                pass


class Pieces(Prepared):
    """A kda_prepare_pieces handle: one sequence's entry as pipelined pieces
    (piece i over tokens [starts[i], starts[i + 1])), each call one
    kda_launch_pieces: the chunk-parallel kernel of each piece on the caller's
    stream, its state pass on the runtime's high-priority side stream.
    ``data`` holds one c_void_p per tensor; ``workspace_bytes`` is what each
    call's workspace must hold (the pieces' workspaces and the states passed
    between them). Not for two threads at once."""

    _prepare, _launch, _free = "kda_prepare_pieces", "kda_launch_pieces", "kda_pieces_free"

    def __init__(self, bundle: "Bundle", name: bytes, m: "_Marshalled", starts: Sequence[int]):
        super().__init__(bundle, name, m, (ctypes.c_int64 * max(len(starts), 1))(*starts), len(starts))
        self.pieces = len(starts)


class Bundle:
    """A loaded kda bundle (manifest.json + kernel binaries).

    ``kernels`` maps each name to call to its manifest object: every entry
    (manifest version 2: several kernels run in order with runtime-allocated
    workspaces, behind one name) and every kernel that no entry launches.
    ``entries`` holds the entries, ``all_kernels`` every kernel (those an entry
    launches can still be launched by name). ``launch(name, tensors)`` takes
    one tensor per ``tensor`` parameter, in manifest order (a list), or a dict
    keyed by parameter name; ``dim`` parameters are bound by the runtime from
    the tensor shapes. An entry name works wherever a kernel name does.
    """

    def __init__(self, path: Union[str, os.PathLike]):
        self.path = os.fspath(path)
        if "\0" in self.path:
            # The C API reads a C string: it would load the bundle named by
            # the part before the NUL.
            raise ValueError(f"bundle path {self.path!r} contains a NUL character")
        self._lib = load_library()
        self._handle = None
        handle = ctypes.c_void_p()
        status = self._lib.kda_bundle_load(self.path.encode(), ctypes.byref(handle))
        if status != 0:
            _raise(self._lib, status, f"kda_bundle_load({self.path})")
        self._handle = handle
        with open(os.path.join(self.path, "manifest.json")) as f:
            self.manifest = json.load(f)
        self.all_kernels: Dict[str, Dict[str, Any]] = {k["name"]: k for k in self.manifest["kernels"]}
        self.entries: Dict[str, Dict[str, Any]] = {e["name"]: e for e in self.manifest.get("entries", [])}
        launched = {l["kernel"] for e in self.entries.values() for l in e.get("launches", [])}
        self.kernels: Dict[str, Dict[str, Any]] = dict(self.entries)
        self.kernels.update((n, k) for n, k in self.all_kernels.items() if n not in launched)
        self.chip = self._lib.kda_bundle_target_chip(self._handle).decode()
        names = [self._lib.kda_bundle_kernel_name(self._handle, i).decode()
                 for i in range(self._lib.kda_bundle_num_kernels(self._handle))]
        if sorted(names) != sorted(self.all_kernels):
            raise KdaError("KDA_ERROR_CORRUPT_BUNDLE",
                           f"runtime kernels {names} differ from manifest.json's {list(self.all_kernels)}",
                           "Bundle")
        entry_names = []
        if hasattr(self._lib, "kda_bundle_num_entries"):
            entry_names = [self._lib.kda_bundle_entry_name(self._handle, i).decode()
                           for i in range(self._lib.kda_bundle_num_entries(self._handle))]
        if sorted(entry_names) != sorted(self.entries):
            raise KdaError("KDA_ERROR_CORRUPT_BUNDLE",
                           f"runtime entries {entry_names} differ from manifest.json's {list(self.entries)}",
                           "Bundle")

    def __repr__(self):
        return f"Bundle({self.path!r}, chip={self.chip!r}, kernels={list(self.kernels)})"

    def close(self):
        h = getattr(self, "_handle", None)
        if h is not None and h.value:
            self._lib.kda_bundle_free(h)
        self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def strategies(self, kernel: str) -> Dict[str, Dict[str, str]]:
        """How each kernel behind `kernel` (an entry's launches in order, or the
        kernel itself) was written: {name: {"kernel", "kind": "lanes" | "tiles",
        "reason"}} from the manifest (kda-gpu-select-strategy); bundles of a
        compiler older than the strategy stage say {"kind": "unknown"}."""
        memo = self.__dict__.setdefault("_strategies", {})
        if kernel not in memo:  # kda.ops asks on every launch
            entry = self.entries.get(kernel)
            names = [l["kernel"] for l in entry.get("launches", [])] if entry else [kernel]
            memo[kernel] = {n: dict(self.all_kernels.get(n, {}).get("strategy") or {"kind": "unknown"})
                            for n in names}
        return memo[kernel]

    def tensor_params(self, kernel: str) -> List[Dict[str, Any]]:
        """The kernel's tensor parameters, in the order launch() takes them."""
        return [p for p in self._kernel(kernel)["params"] if p["kind"] == "tensor"]

    def _kernel(self, kernel: str) -> Dict[str, Any]:
        found = self.kernels.get(kernel) or self.all_kernels.get(kernel)
        if found is None:
            raise KdaError("KDA_ERROR_NOT_FOUND",
                           f"no kernel '{kernel}' in {self.path} (kernels: {', '.join(self.kernels)})",
                           "Bundle")
        return found

    def _what(self, name: str) -> str:
        return "entry" if name in self.entries else "kernel"

    def _order(self, kernel: str, tensors: Union[Sequence[Any], Mapping[str, Any]]) -> List[Any]:
        params = self.tensor_params(kernel)
        if isinstance(tensors, Mapping):
            names = [p["name"] for p in params]
            missing = [n for n in names if n not in tensors]
            extra = [n for n in tensors if n not in names]
            if missing or extra:
                raise KdaError("KDA_ERROR_INVALID_ARGUMENT",
                               f"{self._what(kernel)} '{kernel}' takes tensors {names}; "
                               f"missing {missing}, unknown {extra}",
                               "launch")
            return [tensors[n] for n in names]
        tensors = list(tensors)
        if len(tensors) != len(params):
            raise KdaError("KDA_ERROR_INVALID_ARGUMENT",
                           f"{self._what(kernel)} '{kernel}' takes {len(params)} tensors "
                           f"({', '.join(p['name'] for p in params)}), got {len(tensors)}", "launch")
        return tensors

    def check(self, kernel: str, tensors: Union[Sequence[Any], Mapping[str, Any]]) -> None:
        """kda_check_tensors: validates tensors against the manifest (no driver)."""
        ordered = self._order(kernel, tensors)
        m = _Marshalled(ordered)
        status = self._lib.kda_check_tensors(self._handle, kernel.encode(), m.array, m.count)
        if status != 0:
            _raise(self._lib, status, f"kda_check_tensors({kernel})")

    def _need_entries(self, call: str) -> None:
        if not hasattr(self._lib, "kda_entry_workspace_bytes"):
            raise KdaError("KDA_ERROR_NO_RUNTIME",
                           f"{library_path()} predates manifest version 2 (no {call}); rebuild it", call)

    def workspace_bytes(self, name: str, tensors: Union[Sequence[Any], Mapping[str, Any]]) -> int:
        """kda_entry_workspace_bytes: the workspace an entry needs for these
        tensors (0 for a kernel). No driver needed."""
        self._need_entries("kda_entry_workspace_bytes")
        m = _Marshalled(self._order(name, tensors))
        out = ctypes.c_uint64(0)
        status = self._lib.kda_entry_workspace_bytes(self._handle, name.encode(), m.array, m.count,
                                                     ctypes.byref(out))
        if status != 0:
            _raise(self._lib, status, f"kda_entry_workspace_bytes({name})")
        return int(out.value)

    def launch_marshalled(self, kernel: bytes, m: _Marshalled, device: int, workspace: Any = None,
                          trusted: bool = False) -> None:
        """kda_launch of an already marshalled tensor array (kernel name
        encoded) on the current stream of `device`: the per-call path of
        repeated launches with the same shapes (decode steps, planned
        chunk_kda calls). ``workspace``: a device tensor for an entry's
        workspaces (kda_launch_with_workspace). ``trusted``: every tensor
        (and the workspace) is a torch CUDA tensor, device memory of its
        device that holds it whole, so the runtime need not ask the driver
        about each pointer (kda_launch_trusted, where the library has it)."""
        handle = _stream_handle(None, device)
        stream_arg = ctypes.c_void_p(handle) if handle else None
        self._launch(kernel, m, stream_arg, workspace, trusted)

    def launch_prepared(self, kernel: bytes, m: _Marshalled, stream: int, workspace: Any,
                        nbytes: int) -> None:
        """launch_marshalled's last step for kda.ops' planned calls: the
        stream handle already known (0: the default stream), `workspace` a
        torch CUDA tensor of at least `nbytes` bytes (or None), every tensor
        trusted (torch CUDA tensors of the launch's device)."""
        launch = getattr(self._lib, "kda_launch_trusted", None)
        if launch is None:
            self._launch(kernel, m, ctypes.c_void_p(stream) if stream else None,
                         (workspace.data_ptr(), nbytes) if workspace is not None else None, True)
            return
        status = launch(self._handle, kernel, m.array, m.count,
                        workspace.data_ptr() if workspace is not None else None, nbytes, stream or None)
        if status != 0:
            _raise(self._lib, status, f"kda_launch_trusted({kernel.decode()})")

    def prepare(self, kernel: bytes, m: _Marshalled) -> Optional[Prepared]:
        """kda_prepare of an already marshalled tensor array (trusted tensors:
        torch CUDA tensors of one device), or None where the library predates
        it."""
        if not hasattr(self._lib, "kda_prepare"):
            return None
        return Prepared(self, kernel, m)

    def prepare_pieces(self, entry: bytes, m: _Marshalled, starts: Sequence[int]) -> Optional[Pieces]:
        """kda_prepare_pieces of an already marshalled tensor array (trusted
        tensors: torch CUDA tensors of one device), or None where the library
        predates it."""
        if not hasattr(self._lib, "kda_prepare_pieces"):
            return None
        return Pieces(self, entry, m, starts)

    def launch(self, kernel: str, tensors: Union[Sequence[Any], Mapping[str, Any]],
               stream: Any = None, workspace: Any = None) -> None:
        """Launches a kernel or an entry on stream (default: torch's current
        stream of the tensors' device). Asynchronous, like any kernel launch.
        An entry allocates its workspaces on the stream, unless ``workspace``
        (a device tensor of at least workspace_bytes() bytes, or a
        ``(pointer, bytes)`` pair) is given: kda_launch_with_workspace."""
        ordered = self._order(kernel, tensors)
        m = _Marshalled(ordered)
        devices = [d for d in m.devices if d >= 0]
        handle = _stream_handle(stream, devices[0] if devices else -1)
        stream_arg = ctypes.c_void_p(handle) if handle else None
        self._launch(kernel.encode(), m, stream_arg, workspace, False)

    def _launch(self, kernel: bytes, m: _Marshalled, stream_arg: Any, workspace: Any, trusted: bool) -> None:
        """The C call behind launch and launch_marshalled: kda_launch_trusted
        (where the library has it), kda_launch_with_workspace or kda_launch."""
        if trusted and hasattr(self._lib, "kda_launch_trusted"):
            ptr, size = _workspace_arg(workspace)
            status = self._lib.kda_launch_trusted(self._handle, kernel, m.array, m.count, ptr, size, stream_arg)
            call = "kda_launch_trusted"
        elif workspace is None:
            status = self._lib.kda_launch(self._handle, kernel, m.array, m.count, stream_arg)
            call = "kda_launch"
        else:
            self._need_entries("kda_launch_with_workspace")
            ptr, size = _workspace_arg(workspace)
            status = self._lib.kda_launch_with_workspace(self._handle, kernel, m.array, m.count, ptr, size,
                                                         stream_arg)
            call = "kda_launch_with_workspace"
        if status != 0:
            _raise(self._lib, status, f"{call}({kernel.decode()})")


_bundle_cache: Dict[str, Bundle] = {}
_bundle_cache_lock = threading.Lock()


def load_bundle(path: Union[str, os.PathLike]) -> Bundle:
    """Loads a bundle once per process (kernels stay loaded on the device)."""
    key = os.path.realpath(os.fspath(path))
    with _bundle_cache_lock:
        b = _bundle_cache.get(key)
        if b is None:
            b = Bundle(key)
            _bundle_cache[key] = b
        return b
