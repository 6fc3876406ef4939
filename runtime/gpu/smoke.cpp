// GPU smoke test of the runtime (built and run by runtime/gpu/run-smoke.sh on
// a machine with an NVIDIA GPU; not part of CI). Allocates device memory
// through the runtime's own dlopen'ed driver table, launches saxpy.cu from a
// real bundle through the C API, checks the results, and checks the error
// paths that need a real driver: host memory, a shape larger than its
// allocation, and a bundle for the wrong chip.
//
//   smoke BUNDLE_DIR...   one bundle per chip (saxpy.cu built for it); the
//                         first one whose chip runs on device 0 is launched,
//                         every other one must fail with
//                         KDA_ERROR_WRONG_ARCHITECTURE.
//
// Without a driver or a device it prints "SKIP: ..." and exits 0.
#include "runtime/CudaDriver.h"
#include "runtime/Manifest.h"
#include "runtime/kda_runtime.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace kda::rt;

namespace {

int failures = 0;

void check(bool ok, const std::string &what) {
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  if (!ok)
    ++failures;
}

// Expects `status` from the last call; prints its message.
void expect(kda_status status, kda_status expected, const std::string &what) {
  check(
      status == expected,
      what + ": " + kda_status_name(status) +
          (status == expected
               ? ""
               : " (expected " + std::string(kda_status_name(expected)) + ")"));
  if (*kda_last_error())
    std::printf("      %s\n", kda_last_error());
}

bool driverOk(const cuda::Api &api, cuda::CUresult r, const char *call) {
  if (r == cuda::CUDA_SUCCESS)
    return true;
  check(false, api.describe(call, r));
  return false;
}

} // namespace

int main(int argc, char **argv) {
  const cuda::Api *api = nullptr;
  Status s = cuda::loadApi(api);
  if (s.code() == KDA_ERROR_NO_DRIVER) {
    std::printf("SKIP: no CUDA driver (%s)\n", s.message().c_str());
    return 0;
  }
  if (s.code() == KDA_ERROR_NO_DEVICE) {
    std::printf("SKIP: no CUDA device (%s)\n", s.message().c_str());
    return 0;
  }
  if (!s.isOk()) {
    std::printf("FAIL: %s\n", s.message().c_str());
    return 1;
  }
  int count = 0;
  if (api->deviceGetCount(&count) != cuda::CUDA_SUCCESS || count == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 0;
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s BUNDLE_DIR...\n", argv[0]);
    return 2;
  }

  cuda::CUdevice device;
  int major = 0, minor = 0;
  char name[256] = {0};
  if (!driverOk(*api, api->deviceGet(&device, 0), "cuDeviceGet") ||
      !driverOk(*api,
                api->deviceGetAttribute(
                    &major, cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    device),
                "cuDeviceGetAttribute") ||
      !driverOk(*api,
                api->deviceGetAttribute(
                    &minor, cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                    device),
                "cuDeviceGetAttribute"))
    return 1;
  api->deviceGetName(name, sizeof name - 1, device);
  std::printf(
      "driver %s (version %d), device 0: %s, compute capability %d.%d\n",
      api->library.c_str(), api->driverVersion, name, major, minor);

  // Sort the bundles into the one to run and the ones that must be refused.
  kda_bundle *runnable = nullptr;
  std::string runnableDir;
  std::vector<kda_bundle *> wrong;
  for (int i = 1; i < argc; ++i) {
    kda_bundle *b = nullptr;
    expect(kda_bundle_load(argv[i], &b), KDA_OK,
           std::string("load ") + argv[i]);
    if (!b)
      continue;
    std::string why;
    if (!runnable &&
        nvidiaChipRunsOn(kda_bundle_target_chip(b), major, minor, why)) {
      runnable = b;
      runnableDir = argv[i];
    } else {
      wrong.push_back(b);
    }
  }

  // Device memory through the same driver table the runtime launches with,
  // in device 0's primary context (the one the runtime uses).
  cuda::CUcontext context;
  if (!driverOk(*api, api->devicePrimaryCtxRetain(&context, device),
                "cuDevicePrimaryCtxRetain") ||
      !driverOk(*api, api->ctxSetCurrent(context), "cuCtxSetCurrent"))
    return 1;
  const int64_t nb = 1000, n = nb * 256;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  std::vector<float> x(n), y(n), out(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.001f;
    y[i] = 1.0f - static_cast<float>(i % 777) * 0.0005f;
  }
  cuda::CUdeviceptr dx = 0, dy = 0;
  if (!driverOk(*api, api->memAlloc(&dx, bytes), "cuMemAlloc") ||
      !driverOk(*api, api->memAlloc(&dy, bytes), "cuMemAlloc") ||
      !driverOk(*api, api->memcpyHtoD(dx, x.data(), bytes), "cuMemcpyHtoD") ||
      !driverOk(*api, api->memcpyHtoD(dy, y.data(), bytes), "cuMemcpyHtoD"))
    return 1;

  int64_t shape[2] = {nb, 256};
  kda_tensor tensors[2];
  tensors[0] =
      kda_tensor{reinterpret_cast<void *>(dx), KDA_F32, 2, shape, nullptr, 0};
  tensors[1] =
      kda_tensor{reinterpret_cast<void *>(dy), KDA_F32, 2, shape, nullptr, 0};

  if (!runnable) {
    std::printf("SKIP: none of the bundles runs on compute capability %d.%d; "
                "only checking refusals\n",
                major, minor);
  } else {
    std::printf("running the %s bundle\n", kda_bundle_target_chip(runnable));
    expect(kda_check_tensors(runnable, "saxpy", tensors, 2), KDA_OK,
           "kda_check_tensors");
    expect(kda_launch(runnable, "saxpy", tensors, 2, nullptr), KDA_OK,
           "kda_launch");
    if (driverOk(*api, api->ctxSynchronize(),
                 "cuCtxSynchronize after the launch") &&
        driverOk(*api, api->memcpyDtoH(out.data(), dy, bytes),
                 "cuMemcpyDtoH")) {
      int64_t bad = 0;
      double worst = 0;
      for (int64_t i = 0; i < n; ++i) {
        float expected = 2.5f * x[i] + y[i] + 3.0f;
        double err = std::fabs(static_cast<double>(out[i]) - expected);
        worst = std::fmax(worst, err);
        bad += err > 1e-5 * (1.0 + std::fabs(expected));
      }
      check(bad == 0, "y = 2.5 x + y + 3 on " + std::to_string(n) +
                          " elements (" + std::to_string(bad) +
                          " wrong, max abs error " + std::to_string(worst) +
                          ")");
    }

    // What the checks cost per launch (pointer attributes, binding, packing).
    const int launches = 2000;
    auto start = std::chrono::steady_clock::now();
    kda_status status = KDA_OK;
    for (int i = 0; i < launches && status == KDA_OK; ++i)
      status = kda_launch(runnable, "saxpy", tensors, 2, nullptr);
    double us = std::chrono::duration<double, std::micro>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    expect(status, KDA_OK, std::to_string(launches) + " more launches");
    driverOk(*api, api->ctxSynchronize(),
             "cuCtxSynchronize after the launches");
    std::printf(
        "      %.2f us per kda_launch (host side, asynchronous launches)\n",
        us / launches);

    // Baseline: the same kernel through cuLaunchKernel alone.
    std::string chip = kda_bundle_target_chip(runnable);
    std::string image;
    if (FILE *f = std::fopen(
            (runnableDir + "/saxpy." + chip + ".cubin").c_str(), "rb")) {
      char buf[65536];
      for (size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;)
        image.append(buf, got);
      std::fclose(f);
    }
    cuda::CUmodule module = nullptr;
    cuda::CUfunction function = nullptr;
    if (!image.empty() &&
        driverOk(*api, api->moduleLoadData(&module, image.data()),
                 "cuModuleLoadData") &&
        driverOk(*api,
                 api->moduleGetFunction(&function, module, "kda_smoke_saxpy"),
                 "cuModuleGetFunction") &&
        driverOk(*api,
                 api->funcSetAttribute(
                     function,
                     cuda::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                     65536),
                 "cuFuncSetAttribute")) {
      int64_t nbArg = nb, bias = 3;
      float a = 2.5f;
      void *args[] = {&dx, &dy, &nbArg, &a, &bias};
      cuda::CUresult r = cuda::CUDA_SUCCESS;
      start = std::chrono::steady_clock::now();
      for (int i = 0; i < launches && r == cuda::CUDA_SUCCESS; ++i)
        r = api->launchKernel(function, static_cast<unsigned>(nb), 1, 1, 256, 1,
                              1, 65536, nullptr, args, nullptr);
      us = std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now() - start)
               .count();
      if (driverOk(*api, r, "cuLaunchKernel") &&
          driverOk(*api, api->ctxSynchronize(), "cuCtxSynchronize"))
        std::printf("      %.2f us per raw cuLaunchKernel of the same kernel "
                    "(baseline)\n",
                    us / launches);
      api->moduleUnload(module);
    }

    // Host memory where device memory is expected: the driver says so.
    std::vector<float> host(n);
    kda_tensor onHost[2] = {tensors[0], tensors[1]};
    onHost[0].data = host.data();
    expect(kda_launch(runnable, "saxpy", onHost, 2, nullptr),
           KDA_ERROR_BAD_TENSOR, "host memory tagged as device 0");

    kda_tensor misaligned[2] = {tensors[0], tensors[1]};
    misaligned[1].data = reinterpret_cast<char *>(dy) + 4;
    expect(kda_launch(runnable, "saxpy", misaligned, 2, nullptr),
           KDA_ERROR_BAD_TENSOR, "misaligned pointer");

    // A shape four times its allocation: refused before the kernel runs.
    int64_t big[2] = {4 * nb, 256};
    kda_tensor oversized[2] = {tensors[0], tensors[1]};
    oversized[0].shape = oversized[1].shape = big;
    expect(kda_launch(runnable, "saxpy", oversized, 2, nullptr),
           KDA_ERROR_BAD_TENSOR, "shape larger than the allocation");
    driverOk(*api, api->ctxSynchronize(), "cuCtxSynchronize at the end");
  }

  for (kda_bundle *b : wrong)
    expect(kda_launch(b, "saxpy", tensors, 2, nullptr),
           KDA_ERROR_WRONG_ARCHITECTURE,
           std::string("launch the ") + kda_bundle_target_chip(b) + " bundle");

  // The runtime restored the context it found.
  cuda::CUcontext current = nullptr;
  api->ctxGetCurrent(&current);
  check(current == context,
        "the caller's context is current after the launches");

  api->memFree(dx);
  api->memFree(dy);
  if (runnable)
    kda_bundle_free(runnable);
  for (kda_bundle *b : wrong)
    kda_bundle_free(b);
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
  return failures ? 1 : 0;
}
