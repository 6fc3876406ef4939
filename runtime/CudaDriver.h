// The CUDA driver API, dlopen'ed: a table of function pointers filled with
// dlsym from libcuda.so.1, so that the runtime builds without the CUDA toolkit
// and fails with KDA_ERROR_NO_DRIVER, not a loader error, where no driver is
// installed.
//
// The declarations below are written from the driver API's documented ABI.
// runtime/gpu/cuda_abi_check.cpp compares every signature, versioned symbol
// name and constant against the toolkit's cuda.h (run-smoke.sh builds it).
#ifndef KDA_RUNTIME_CUDADRIVER_H
#define KDA_RUNTIME_CUDADRIVER_H

#include "runtime/Driver.h"
#include "runtime/Status.h"

#include <cstddef>
#include <string>

// Same tags as cuda.h, so that the handle types below are identical to its.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphNode_st;
struct CUgraphExec_st;
// Parameter structs the runtime fills through layouts of its own (below),
// passed as these (incomplete) types so that signatures match cuda.h's.
struct CUDA_KERNEL_NODE_PARAMS_v2_st;
union CUlaunchAttributeValue_union;

namespace kda::rt::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = ::CUctx_st *;
using CUmodule = ::CUmod_st *;
using CUfunction = ::CUfunc_st *;
using CUstream = ::CUstream_st *;
using CUevent = ::CUevent_st *;
using CUgraph = ::CUgraph_st *;
using CUgraphNode = ::CUgraphNode_st *;
using CUgraphExec = ::CUgraphExec_st *;
using KernelNodeParamsTag = ::CUDA_KERNEL_NODE_PARAMS_v2_st;
using LaunchAttributeValueTag = ::CUlaunchAttributeValue_union;

// cuda.h's CUDA_KERNEL_NODE_PARAMS_v2 (cuda_abi_check.cpp asserts size and
// offsets) and CUlaunchAttributeValue (64 bytes, the priority an int at 0).
struct KernelNodeParams {
  CUfunction func;
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  void **kernelParams;
  void **extra;
  void *kern;
  CUcontext ctx;
};
union LaunchAttributeValue {
  char pad[64];
  int priority;
};

// The constants the runtime uses (cuda.h's enum values).
enum : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_NOT_FOUND = 500,

  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,

  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,

  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
  CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
  CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,

  CU_MEMORYTYPE_HOST = 1,
  CU_MEMORYTYPE_DEVICE = 2,
  CU_MEMORYTYPE_ARRAY = 3,
  CU_MEMORYTYPE_UNIFIED = 4,

  CU_STREAM_NON_BLOCKING = 1,
  CU_EVENT_DISABLE_TIMING = 2,

  CU_LAUNCH_ATTRIBUTE_PRIORITY = 8,
  CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY = 8,
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_WAIT_VALUE_GEQ = 0,
  CU_STREAM_WRITE_VALUE_DEFAULT = 0,
};

// X(member, cuda.h name, exported symbol, signature). The exported symbol is
// the versioned one where cuda.h #defines the name to it (cuMemAlloc ->
// cuMemAlloc_v2); calling the unversioned one would get the old 32-bit ABI.
// clang-format off
#define KDA_CUDA_DRIVER_FUNCTIONS(X)                                           \
  X(getErrorName, cuGetErrorName, "cuGetErrorName",                            \
    CUresult(CUresult, const char **))                                         \
  X(init, cuInit, "cuInit", CUresult(unsigned))                                \
  X(driverGetVersion, cuDriverGetVersion, "cuDriverGetVersion",                \
    CUresult(int *))                                                           \
  X(deviceGetCount, cuDeviceGetCount, "cuDeviceGetCount", CUresult(int *))     \
  X(deviceGet, cuDeviceGet, "cuDeviceGet", CUresult(CUdevice *, int))          \
  X(deviceGetAttribute, cuDeviceGetAttribute, "cuDeviceGetAttribute",          \
    CUresult(int *, int, CUdevice))                                            \
  X(deviceGetName, cuDeviceGetName, "cuDeviceGetName",                         \
    CUresult(char *, int, CUdevice))                                           \
  X(devicePrimaryCtxRetain, cuDevicePrimaryCtxRetain,                          \
    "cuDevicePrimaryCtxRetain", CUresult(CUcontext *, CUdevice))               \
  X(ctxGetCurrent, cuCtxGetCurrent, "cuCtxGetCurrent",                         \
    CUresult(CUcontext *))                                                     \
  X(ctxSetCurrent, cuCtxSetCurrent, "cuCtxSetCurrent", CUresult(CUcontext))    \
  X(ctxSynchronize, cuCtxSynchronize, "cuCtxSynchronize", CUresult())          \
  X(moduleLoadData, cuModuleLoadData, "cuModuleLoadData",                      \
    CUresult(CUmodule *, const void *))                                        \
  X(moduleUnload, cuModuleUnload, "cuModuleUnload", CUresult(CUmodule))        \
  X(moduleGetFunction, cuModuleGetFunction, "cuModuleGetFunction",             \
    CUresult(CUfunction *, CUmodule, const char *))                            \
  X(funcSetAttribute, cuFuncSetAttribute, "cuFuncSetAttribute",                \
    CUresult(CUfunction, int, int))                                            \
  X(launchKernel, cuLaunchKernel, "cuLaunchKernel",                            \
    CUresult(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,     \
             unsigned, unsigned, CUstream, void **, void **))                  \
  X(pointerGetAttribute, cuPointerGetAttribute, "cuPointerGetAttribute",       \
    CUresult(void *, int, CUdeviceptr))                                        \
  X(pointerGetAttributes, cuPointerGetAttributes, "cuPointerGetAttributes",    \
    CUresult(unsigned, int *, void **, CUdeviceptr))                           \
  X(memAlloc, cuMemAlloc, "cuMemAlloc_v2", CUresult(CUdeviceptr *, size_t))    \
  X(memFree, cuMemFree, "cuMemFree_v2", CUresult(CUdeviceptr))                 \
  X(memcpyHtoD, cuMemcpyHtoD, "cuMemcpyHtoD_v2",                               \
    CUresult(CUdeviceptr, const void *, size_t))                               \
  X(memcpyDtoH, cuMemcpyDtoH, "cuMemcpyDtoH_v2",                               \
    CUresult(void *, CUdeviceptr, size_t))
// clang-format on

// Functions only entries need (stream-ordered allocation, CUDA 11.2+):
// resolved when present, so that a driver without them still launches
// kernels; an entry launch then fails with KDA_ERROR_NO_DRIVER.
// clang-format off
#define KDA_CUDA_OPTIONAL_FUNCTIONS(X)                                         \
  X(memAllocAsync, cuMemAllocAsync, "cuMemAllocAsync",                         \
    CUresult(CUdeviceptr *, size_t, CUstream))                                 \
  X(memFreeAsync, cuMemFreeAsync, "cuMemFreeAsync",                            \
    CUresult(CUdeviceptr, CUstream))
// clang-format on

// Functions only pipelined pieces need (kda_launch_pieces: a second stream of
// high priority and events between the two): resolved when present, so that
// a driver (or a test's stand-in) without them still launches everything
// else; a pieces launch then fails with KDA_ERROR_NO_DRIVER.
// clang-format off
#define KDA_CUDA_PIECES_FUNCTIONS(X)                                           \
  X(ctxGetStreamPriorityRange, cuCtxGetStreamPriorityRange,                    \
    "cuCtxGetStreamPriorityRange", CUresult(int *, int *))                     \
  X(streamCreateWithPriority, cuStreamCreateWithPriority,                      \
    "cuStreamCreateWithPriority", CUresult(CUstream *, unsigned, int))         \
  X(eventCreate, cuEventCreate, "cuEventCreate", CUresult(CUevent *, unsigned))\
  X(eventDestroy, cuEventDestroy, "cuEventDestroy_v2", CUresult(CUevent))      \
  X(eventRecord, cuEventRecord, "cuEventRecord", CUresult(CUevent, CUstream))  \
  X(streamWaitEvent, cuStreamWaitEvent, "cuStreamWaitEvent",                   \
    CUresult(CUstream, CUevent, unsigned))
// clang-format on

// Functions only the pieces' graph needs (KDA_PIECES_GRAPH=1: the schedule
// as one CUDA graph, its kernel nodes' arguments set per call): resolved when
// present; without them the pieces launch eagerly.
// clang-format off
#define KDA_CUDA_GRAPH_FUNCTIONS(X)                                            \
  X(streamIsCapturing, cuStreamIsCapturing, "cuStreamIsCapturing",             \
    CUresult(CUstream, int *))                                                 \
  X(graphCreate, cuGraphCreate, "cuGraphCreate", CUresult(CUgraph *, unsigned))\
  X(graphAddKernelNode, cuGraphAddKernelNode, "cuGraphAddKernelNode_v2",       \
    CUresult(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,              \
             const KernelNodeParamsTag *))                                     \
  X(graphKernelNodeSetAttribute, cuGraphKernelNodeSetAttribute,                \
    "cuGraphKernelNodeSetAttribute",                                           \
    CUresult(CUgraphNode, int, const LaunchAttributeValueTag *))               \
  X(graphInstantiate, cuGraphInstantiate, "cuGraphInstantiateWithFlags",       \
    CUresult(CUgraphExec *, CUgraph, unsigned long long))                      \
  X(graphExecKernelNodeSetParams, cuGraphExecKernelNodeSetParams,              \
    "cuGraphExecKernelNodeSetParams_v2",                                       \
    CUresult(CUgraphExec, CUgraphNode, const KernelNodeParamsTag *))           \
  X(graphLaunch, cuGraphLaunch, "cuGraphLaunch", CUresult(CUgraphExec, CUstream))\
  X(graphExecDestroy, cuGraphExecDestroy, "cuGraphExecDestroy",                \
    CUresult(CUgraphExec))                                                     \
  X(graphDestroy, cuGraphDestroy, "cuGraphDestroy", CUresult(CUgraph))
// clang-format on

// Stream memory operations (an entry launch's "progress": the caller's
// stream waits until every block of the side stream's launch has started):
// resolved when present; without them such a launch waits for the whole
// producer.
// clang-format off
#define KDA_CUDA_VALUE_FUNCTIONS(X)                                            \
  X(streamWriteValue32, cuStreamWriteValue32, "cuStreamWriteValue32_v2",       \
    CUresult(CUstream, CUdeviceptr, unsigned, unsigned))                       \
  X(streamWaitValue32, cuStreamWaitValue32, "cuStreamWaitValue32_v2",          \
    CUresult(CUstream, CUdeviceptr, unsigned, unsigned))
// clang-format on

// The dlopen'ed driver. memAlloc/memFree/memcpy*/ctxSynchronize and the
// singular pointerGetAttribute are not used by launches; they are here so that
// tests (runtime/gpu/smoke.cpp) can manage device memory through the very same
// table.
struct Api {
#define KDA_CUDA_MEMBER(member, name, symbol, ...)                             \
  using member##_fn = __VA_ARGS__;                                             \
  member##_fn *member = nullptr;
  KDA_CUDA_DRIVER_FUNCTIONS(KDA_CUDA_MEMBER)
  KDA_CUDA_OPTIONAL_FUNCTIONS(KDA_CUDA_MEMBER)
  KDA_CUDA_PIECES_FUNCTIONS(KDA_CUDA_MEMBER)
  KDA_CUDA_GRAPH_FUNCTIONS(KDA_CUDA_MEMBER)
  KDA_CUDA_VALUE_FUNCTIONS(KDA_CUDA_MEMBER)
#undef KDA_CUDA_MEMBER

  std::string library; // the path it was loaded from
  int driverVersion = 0;

  // "CUDA_ERROR_INVALID_VALUE", or "CUresult 123" when the driver has no name.
  std::string errorName(CUresult result) const;
  // "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE".
  std::string describe(const char *call, CUresult result) const;
};

// Loads the driver library (KDA_CUDA_LIBRARY, else libcuda.so.1), resolves
// every symbol and calls cuInit(0); once per library path, the result
// (success or failure) is cached. KDA_ERROR_NO_DRIVER / KDA_ERROR_NO_DEVICE.
Status loadApi(const Api *&out);

// The Driver over loadApi()'s table.
Status getDriver(Driver *&out);

} // namespace kda::rt::cuda

#endif // KDA_RUNTIME_CUDADRIVER_H
