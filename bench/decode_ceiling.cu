// The attainable bandwidth of the decode step's traffic (bench/RESULTS.md): each
// (sequence, head) reads and writes its 64 KB fp32 state in place, in pool slots
// named by indices (random or in order), with nothing else to do (x = 0.99 x).
// On the GPU machine: nvcc -O3 -arch=sm_90a bench/decode_ceiling.cu -o /tmp/c && /tmp/c
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <random>
#include <cuda_runtime.h>
template <int PER, bool REV>
__global__ void rmw(float4 *pool, const int *idx, int H, int chunksPerState) {
  int n = REV ? blockIdx.z : blockIdx.x, h = blockIdx.y;
  int zc = REV ? blockIdx.x : blockIdx.z;
  int slot = idx[n];
  size_t base = ((size_t)slot * H + h) * (size_t)(128 * 128 / 4);
  size_t part = (size_t)zc * blockDim.x * PER;
  float4 r[PER];
#pragma unroll
  for (int i = 0; i < PER; ++i) r[i] = pool[base + part + i * blockDim.x + threadIdx.x];
#pragma unroll
  for (int i = 0; i < PER; ++i) { r[i].x *= 0.99f; r[i].y *= 0.99f; r[i].z *= 0.99f; r[i].w *= 0.99f; }
#pragma unroll
  for (int i = 0; i < PER; ++i) pool[base + part + i * blockDim.x + threadIdx.x] = r[i];
}
int main() {
  const int H = 32;
  for (int N : {256, 1024}) {
    int P = 2 * N;
    size_t elems = (size_t)P * H * 128 * 128;
    float4 *pool; int *idx;
    cudaMalloc(&pool, elems * 4); cudaMemset(pool, 0, elems * 4);
    cudaMalloc(&idx, N * 4);
    for (int order = 0; order < 2; ++order) {
      std::vector<int> h(P); for (int i = 0; i < P; ++i) h[i] = i;
      if (order == 0) std::shuffle(h.begin(), h.end(), std::mt19937(7));
      cudaMemcpy(idx, h.data(), N * 4, cudaMemcpyHostToDevice);
      for (int rev = 0; rev < 2; ++rev)
      for (int per : {8, 16}) {
        int threads = 128;
        int chunks = 4096 / (threads * per);  // float4 per state / per block
        dim3 grid = rev ? dim3(chunks, H, N) : dim3(N, H, chunks);
        cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
        std::vector<float> ts;
        for (int it = 0; it < 25; ++it) {
          cudaEventRecord(a);
          if (per == 8 && !rev) rmw<8, false><<<grid, threads>>>(pool, idx, H, chunks);
          if (per == 16 && !rev) rmw<16, false><<<grid, threads>>>(pool, idx, H, chunks);
          if (per == 8 && rev) rmw<8, true><<<grid, threads>>>(pool, idx, H, chunks);
          if (per == 16 && rev) rmw<16, true><<<grid, threads>>>(pool, idx, H, chunks);
          cudaEventRecord(b); cudaEventSynchronize(b);
          float ms; cudaEventElapsedTime(&ms, a, b); ts.push_back(ms);
        }
        std::sort(ts.begin(), ts.end());
        double bytes = 2.0 * N * H * 128 * 128 * 4;
        printf("N=%d %s grid %s float4/thread=%d: %.3f ms %.2f TB/s\n", N, order ? "in order" : "random",
               rev ? "(chunk, head, seq)" : "(seq, head, chunk)", per,
               ts[12], bytes / ts[12] / 1e9);
      }
    }
    cudaFree(pool); cudaFree(idx);
  }
}
