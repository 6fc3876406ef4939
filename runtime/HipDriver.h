// HIP's module API, dlopen'ed from libamdhip64.so: the AMD twin of
// CudaDriver.h. Signatures and constants are HIP's
// (include/hip/hip_runtime_api.h, which mirrors CUDA's driver API); this has
// only run against the fake driver of the unit tests, never on an AMD GPU.
#ifndef KDA_RUNTIME_HIPDRIVER_H
#define KDA_RUNTIME_HIPDRIVER_H

#include "runtime/Driver.h"
#include "runtime/Status.h"

#include <cstddef>
#include <string>

struct ihipModule_t;
struct ihipModuleSymbol_t;
struct ihipStream_t;
struct ihipEvent_t;

namespace kda::rt::hip {

using hipError_t = int;
using hipModule_t = ::ihipModule_t *;
using hipFunction_t = ::ihipModuleSymbol_t *;
using hipStream_t = ::ihipStream_t *;
using hipEvent_t = ::ihipEvent_t *;

enum : int { hipSuccess = 0, hipStreamNonBlocking = 1, hipEventDisableTiming = 2 };

// clang-format off
#define KDA_HIP_FUNCTIONS(X)                                                   \
  X(getErrorName, "hipGetErrorName", const char *(hipError_t))                 \
  X(init, "hipInit", hipError_t(unsigned))                                     \
  X(getDeviceCount, "hipGetDeviceCount", hipError_t(int *))                    \
  X(deviceGet, "hipDeviceGet", hipError_t(int *, int))                         \
  X(deviceGetName, "hipDeviceGetName", hipError_t(char *, int, int))           \
  X(getDevice, "hipGetDevice", hipError_t(int *))                              \
  X(setDevice, "hipSetDevice", hipError_t(int))                                \
  X(moduleLoadData, "hipModuleLoadData",                                       \
    hipError_t(hipModule_t *, const void *))                                   \
  X(moduleUnload, "hipModuleUnload", hipError_t(hipModule_t))                  \
  X(moduleGetFunction, "hipModuleGetFunction",                                 \
    hipError_t(hipFunction_t *, hipModule_t, const char *))                    \
  X(moduleLaunchKernel, "hipModuleLaunchKernel",                               \
    hipError_t(hipFunction_t, unsigned, unsigned, unsigned, unsigned,          \
               unsigned, unsigned, unsigned, hipStream_t, void **, void **))
// clang-format on

// Only entries need these (stream-ordered allocation, ROCm 5.2+): resolved
// when present; an entry launch without them is KDA_ERROR_NO_DRIVER.
// clang-format off
#define KDA_HIP_OPTIONAL_FUNCTIONS(X)                                          \
  X(mallocAsync, "hipMallocAsync", hipError_t(void **, size_t, hipStream_t))   \
  X(freeAsync, "hipFreeAsync", hipError_t(void *, hipStream_t))
// clang-format on

// Only pipelined pieces need these (kda_launch_pieces): resolved when present;
// a pieces launch without them is KDA_ERROR_NO_DRIVER.
// clang-format off
#define KDA_HIP_PIECES_FUNCTIONS(X)                                            \
  X(deviceGetStreamPriorityRange, "hipDeviceGetStreamPriorityRange",           \
    hipError_t(int *, int *))                                                  \
  X(streamCreateWithPriority, "hipStreamCreateWithPriority",                   \
    hipError_t(hipStream_t *, unsigned, int))                                  \
  X(eventCreateWithFlags, "hipEventCreateWithFlags",                           \
    hipError_t(hipEvent_t *, unsigned))                                        \
  X(eventDestroy, "hipEventDestroy", hipError_t(hipEvent_t))                   \
  X(eventRecord, "hipEventRecord", hipError_t(hipEvent_t, hipStream_t))        \
  X(streamWaitEvent, "hipStreamWaitEvent",                                     \
    hipError_t(hipStream_t, hipEvent_t, unsigned))
// clang-format on

struct Api {
#define KDA_HIP_MEMBER(member, symbol, ...)                                    \
  using member##_fn = __VA_ARGS__;                                             \
  member##_fn *member = nullptr;
  KDA_HIP_FUNCTIONS(KDA_HIP_MEMBER)
  KDA_HIP_OPTIONAL_FUNCTIONS(KDA_HIP_MEMBER)
  KDA_HIP_PIECES_FUNCTIONS(KDA_HIP_MEMBER)
#undef KDA_HIP_MEMBER

  std::string library;

  std::string errorName(hipError_t error) const;
  std::string describe(const char *call, hipError_t error) const;
};

// Loads KDA_HIP_LIBRARY, else the first of libamdhip64.so, libamdhip64.so.6,
// /opt/rocm/lib/libamdhip64.so that loads; calls hipInit(0). Cached per path.
Status getDriver(Driver *&out);

} // namespace kda::rt::hip

#endif // KDA_RUNTIME_HIPDRIVER_H
