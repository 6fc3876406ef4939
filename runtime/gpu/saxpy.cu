// The GPU smoke test's kernel (runtime/gpu/run-smoke.sh): y = a * x + y + bias
// over NB blocks of 256 elements. It has every kind of bundle parameter (two
// tensors, a dim, an f32 and an i64 constant) and stages x through 64 KiB of
// dynamic shared memory, more than the 48 KiB a kernel gets without opting in,
// so launching it exercises cuFuncSetAttribute.
#include <cstdint>

extern "C" __global__ void kda_smoke_saxpy(const float *__restrict__ x,
                                           float *__restrict__ y, int64_t nb,
                                           float a, int64_t bias) {
  extern __shared__ float staged[]; // 16384 floats
  if (static_cast<int64_t>(blockIdx.x) >= nb)
    return;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  staged[threadIdx.x] = x[i];
  // Touch the far end too: with less shared memory than the manifest asks
  // for, compute-sanitizer reports it.
  staged[16383 - threadIdx.x] = 0.0f;
  __syncthreads();
  y[i] = a * staged[threadIdx.x] + y[i] + static_cast<float>(bias);
}
