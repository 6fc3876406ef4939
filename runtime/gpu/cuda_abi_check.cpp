// Compile-time check of runtime/CudaDriver.h against the CUDA toolkit's
// cuda.h: every function pointer type matches cuda.h's prototype, every
// dlsym name is the (versioned) symbol cuda.h maps the name to, and every
// constant has cuda.h's value. Compiling it is the test; it never runs.
// run-smoke.sh compiles it with -fsyntax-only where cuda.h is installed:
//   g++ -std=c++17 -fsyntax-only -I. -I/usr/local/cuda/include
//   runtime/gpu/cuda_abi_check.cpp
#include <cuda.h>

#include "runtime/CudaDriver.h"

#include <cstddef>
#include <type_traits>

namespace cu = kda::rt::cuda;

namespace {

// The runtime declares cuda.h's enums (CUresult, CUdevice_attribute, ...) as
// int: the same type in the C ABI when the enum is int-sized (also behind a
// pointer: CUpointer_attribute * is passed as int *).
template <class Theirs, class Ours> constexpr bool sameAbi() {
  if constexpr (std::is_same_v<Theirs, Ours>)
    return true;
  else if constexpr (std::is_enum_v<Theirs> && std::is_same_v<Ours, int>)
    return sizeof(Theirs) == sizeof(int);
  else if constexpr (std::is_pointer_v<Theirs> && std::is_pointer_v<Ours>)
    return std::is_enum_v<std::remove_pointer_t<Theirs>> &&
           sameAbi<std::remove_pointer_t<Theirs>,
                   std::remove_pointer_t<Ours>>();
  else
    return false;
}

template <class R1, class... A1, class R2, class... A2>
constexpr bool sameSignature(R1 (*)(A1...), R2 (*)(A2...)) {
  if constexpr (sizeof...(A1) != sizeof...(A2))
    return false;
  else
    return sameAbi<R1, R2>() && (sameAbi<A1, A2>() && ... && true);
}

constexpr bool equal(const char *a, const char *b) {
  return *a == *b && (*a == '\0' || equal(a + 1, b + 1));
}

#define KDA_STRINGIFY2(x) #x
#define KDA_STRINGIFY(x) KDA_STRINGIFY2(x)

// `name` expands to what cuda.h #defines it to (cuMemAlloc -> cuMemAlloc_v2).
#define KDA_CHECK_FUNCTION(member, name, symbol, ...)                          \
  static_assert(                                                               \
      sameSignature(&::name, static_cast<cu::Api::member##_fn *>(nullptr)),    \
      #name ": the runtime's signature differs from cuda.h");                  \
  static_assert(equal(KDA_STRINGIFY(name), symbol),                            \
                #name ": cuda.h calls it " KDA_STRINGIFY(                      \
                    name) ", the runtime dlsyms " symbol);
KDA_CUDA_DRIVER_FUNCTIONS(KDA_CHECK_FUNCTION)
KDA_CUDA_OPTIONAL_FUNCTIONS(KDA_CHECK_FUNCTION)
KDA_CUDA_PIECES_FUNCTIONS(KDA_CHECK_FUNCTION)
KDA_CUDA_GRAPH_FUNCTIONS(KDA_CHECK_FUNCTION)
KDA_CUDA_VALUE_FUNCTIONS(KDA_CHECK_FUNCTION)

// The layouts the runtime fills for the graph functions.
static_assert(sizeof(cu::KernelNodeParams) == sizeof(::CUDA_KERNEL_NODE_PARAMS));
#define KDA_CHECK_FIELD(field)                                                 \
  static_assert(offsetof(cu::KernelNodeParams, field) ==                       \
                    offsetof(::CUDA_KERNEL_NODE_PARAMS, field),                \
                "CUDA_KERNEL_NODE_PARAMS." #field ": offset differs");
KDA_CHECK_FIELD(func)
KDA_CHECK_FIELD(gridDimX)
KDA_CHECK_FIELD(blockDimX)
KDA_CHECK_FIELD(sharedMemBytes)
KDA_CHECK_FIELD(kernelParams)
KDA_CHECK_FIELD(extra)
KDA_CHECK_FIELD(kern)
KDA_CHECK_FIELD(ctx)
static_assert(sizeof(cu::LaunchAttributeValue) == sizeof(::CUlaunchAttributeValue));
static_assert(offsetof(::CUlaunchAttributeValue, priority) == 0);
static_assert(std::is_same_v<::CUDA_KERNEL_NODE_PARAMS_v2, cu::KernelNodeParamsTag>);
static_assert(std::is_same_v<::CUkernelNodeAttrValue, cu::LaunchAttributeValueTag>);

static_assert(std::is_same_v<cu::CUdeviceptr, ::CUdeviceptr>);
static_assert(std::is_same_v<cu::CUcontext, ::CUcontext>);
static_assert(std::is_same_v<cu::CUmodule, ::CUmodule>);
static_assert(std::is_same_v<cu::CUfunction, ::CUfunction>);
static_assert(std::is_same_v<cu::CUstream, ::CUstream>);
static_assert(std::is_same_v<cu::CUdevice, ::CUdevice>);

#define KDA_CHECK_CONSTANT(name)                                               \
  static_assert(static_cast<int>(cu::name) == static_cast<int>(::name), #name);
KDA_CHECK_CONSTANT(CUDA_SUCCESS)
KDA_CHECK_CONSTANT(CUDA_ERROR_INVALID_VALUE)
KDA_CHECK_CONSTANT(CUDA_ERROR_NO_DEVICE)
KDA_CHECK_CONSTANT(CUDA_ERROR_INVALID_DEVICE)
KDA_CHECK_CONSTANT(CUDA_ERROR_INVALID_IMAGE)
KDA_CHECK_CONSTANT(CUDA_ERROR_NO_BINARY_FOR_GPU)
KDA_CHECK_CONSTANT(CUDA_ERROR_INVALID_PTX)
KDA_CHECK_CONSTANT(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
KDA_CHECK_CONSTANT(CUDA_ERROR_NOT_FOUND)
KDA_CHECK_CONSTANT(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
KDA_CHECK_CONSTANT(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
KDA_CHECK_CONSTANT(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
KDA_CHECK_CONSTANT(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
KDA_CHECK_CONSTANT(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
KDA_CHECK_CONSTANT(CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
KDA_CHECK_CONSTANT(CU_POINTER_ATTRIBUTE_IS_MANAGED)
KDA_CHECK_CONSTANT(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
KDA_CHECK_CONSTANT(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
KDA_CHECK_CONSTANT(CU_POINTER_ATTRIBUTE_RANGE_SIZE)
KDA_CHECK_CONSTANT(CU_MEMORYTYPE_HOST)
KDA_CHECK_CONSTANT(CU_MEMORYTYPE_DEVICE)
KDA_CHECK_CONSTANT(CU_MEMORYTYPE_ARRAY)
KDA_CHECK_CONSTANT(CU_MEMORYTYPE_UNIFIED)
KDA_CHECK_CONSTANT(CU_STREAM_NON_BLOCKING)
KDA_CHECK_CONSTANT(CU_EVENT_DISABLE_TIMING)
KDA_CHECK_CONSTANT(CU_LAUNCH_ATTRIBUTE_PRIORITY)
KDA_CHECK_CONSTANT(CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)
KDA_CHECK_CONSTANT(CU_STREAM_CAPTURE_STATUS_NONE)
KDA_CHECK_CONSTANT(CU_STREAM_WAIT_VALUE_GEQ)
KDA_CHECK_CONSTANT(CU_STREAM_WRITE_VALUE_DEFAULT)

} // namespace
