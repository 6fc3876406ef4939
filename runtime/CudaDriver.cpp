#include "runtime/CudaDriver.h"

#include "runtime/Runtime.h"

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>

namespace kda::rt::cuda {

std::string Api::errorName(CUresult result) const {
  const char *name = nullptr;
  if (getErrorName && getErrorName(result, &name) == CUDA_SUCCESS && name)
    return name;
  return "CUresult " + std::to_string(result);
}

std::string Api::describe(const char *call, CUresult result) const {
  return std::string(call) + " failed: " + errorName(result);
}

namespace {

constexpr const char *kDefaultLibrary = "libcuda.so.1";

std::string hexPointer(const void *p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

class CudaDriver final : public Driver {
public:
  explicit CudaDriver(const Api &api) : api_(api) {}

  const char *apiName() const override { return "CUDA"; }

  Status checkDevice(int device, const Target &target) override {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceInfo *info = nullptr;
    if (Status s = queryDevice(device, info))
      return s;
    std::string why;
    if (!nvidiaChipRunsOn(target.chip, info->major, info->minor, why))
      return Status(KDA_ERROR_WRONG_ARCHITECTURE,
                    "the bundle is built for " + target.chip + ", but " +
                        info->describe(device) + " is sm_" +
                        std::to_string(info->major * 10 + info->minor) + ": " +
                        why);
    // Retained once per device for the life of the process: the primary
    // context is the one frameworks (PyTorch, JAX) share, and releasing it
    // would destroy the modules loaded into it.
    if (!info->context) {
      CUresult r = api_.devicePrimaryCtxRetain(&info->context, info->handle);
      if (r != CUDA_SUCCESS) {
        info->context = nullptr;
        return Status(KDA_ERROR_NO_DEVICE,
                      "cannot use " + info->describe(device) + ": " +
                          api_.describe("cuDevicePrimaryCtxRetain", r));
      }
    }
    return Status::ok();
  }

  Status enter(int device, uintptr_t &saved) override {
    CUcontext context;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = devices_.find(device);
      if (it == devices_.end() || !it->second.context)
        return Status(KDA_ERROR_NO_DEVICE, "CUDA device " +
                                               std::to_string(device) +
                                               " was not checked before use");
      context = it->second.context;
    }
    CUcontext current = nullptr;
    if (CUresult r = api_.ctxGetCurrent(&current))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("cuCtxGetCurrent", r));
    saved = reinterpret_cast<uintptr_t>(current);
    if (current != context)
      if (CUresult r = api_.ctxSetCurrent(context))
        return Status(KDA_ERROR_LAUNCH_FAILED,
                      "making the primary context of CUDA device " +
                          std::to_string(device) +
                          " current: " + api_.describe("cuCtxSetCurrent", r));
    return Status::ok();
  }

  void leave(uintptr_t saved) override {
    CUcontext current = nullptr;
    CUcontext previous = reinterpret_cast<CUcontext>(saved);
    if (api_.ctxGetCurrent(&current) != CUDA_SUCCESS || current != previous)
      (void)api_.ctxSetCurrent(previous);
  }

  Status checkPointer(const void *ptr, uint64_t bytes, int device,
                      const Kernel &kernel, size_t position) override {
    auto address = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr));
    // One driver call per tensor per launch. Unlike the singular form,
    // cuPointerGetAttributes succeeds on memory the driver does not know and
    // leaves zeros, so plain host memory is no API error (which
    // compute-sanitizer would report). Values are 4-byte enums/ints or 8-byte
    // addresses/sizes; zeroed 8-byte slots read correctly either way.
    int attributes[5] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    unsigned long long memoryType = 0, managed = 0, ordinal = 0, start = 0,
                       size = 0;
    void *values[5] = {&memoryType, &managed, &ordinal, &start, &size};
    CUresult r = api_.pointerGetAttributes(5, attributes, values, address);
    auto fail = [&](const std::string &problem) {
      return Status(KDA_ERROR_BAD_TENSOR, tensorName(kernel, position) +
                                              " data pointer " +
                                              hexPointer(ptr) + " " + problem);
    };
    if (r != CUDA_SUCCESS)
      return fail("cannot be checked: " +
                  api_.describe("cuPointerGetAttributes", r));
    if (memoryType == 0)
      return fail("is not memory the CUDA driver knows (plain host memory?); "
                  "the kernel needs device memory");
    if (memoryType == CU_MEMORYTYPE_HOST)
      return fail("is page-locked host memory, not device memory");
    if (memoryType == CU_MEMORYTYPE_ARRAY)
      return fail("is a CUDA array, not device memory");
    // Managed memory migrates, so its ordinal says little; skip the check.
    if (!managed && static_cast<int>(ordinal) != device)
      return Status(KDA_ERROR_BAD_TENSOR,
                    tensorName(kernel, position) + " says device " +
                        std::to_string(device) + ", but its data pointer " +
                        hexPointer(ptr) + " is memory of CUDA device " +
                        std::to_string(static_cast<int>(ordinal)));
    // Catches a shape larger than the allocation (a classic out-of-bounds
    // write) before the kernel runs. Skipped where the driver reports no range.
    if (size > 0 && start <= address && size >= address - start) {
      uint64_t available = size - (address - start);
      if (bytes > available)
        return Status(
            KDA_ERROR_BAD_TENSOR,
            tensorName(kernel, position) + " spans " + std::to_string(bytes) +
                " bytes from its data pointer, but its allocation has only " +
                std::to_string(available) + " bytes from there");
    }
    return Status::ok();
  }

  Status load(const Target &target, const Kernel &kernel, int device,
              void *&module, void *&function) override {
    int maxShared = 0;
    std::string where;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = devices_.find(device);
      if (it != devices_.end()) {
        maxShared = it->second.maxSharedOptin;
        where = it->second.describe(device);
      }
    }
    std::string context = "kernel '" + kernel.name + "' (" + kernel.binary +
                          ") on " + where + ": ";
    CUmodule mod = nullptr;
    if (CUresult r = api_.moduleLoadData(&mod, kernel.image.data())) {
      kda_status code = KDA_ERROR_LAUNCH_FAILED;
      if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
        return Status(KDA_ERROR_WRONG_ARCHITECTURE,
                      context + "the " + target.chip +
                          " binary does not run here: " +
                          api_.describe("cuModuleLoadData", r));
      else if (r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_INVALID_PTX)
        code = KDA_ERROR_CORRUPT_BUNDLE;
      else if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
        code = KDA_ERROR_NO_DRIVER;
      return Status(code, context + api_.describe("cuModuleLoadData", r));
    }
    CUfunction fn = nullptr;
    if (CUresult r = api_.moduleGetFunction(&fn, mod, kernel.entry.c_str())) {
      (void)api_.moduleUnload(mod);
      return Status(r == CUDA_ERROR_NOT_FOUND ? KDA_ERROR_CORRUPT_BUNDLE
                                              : KDA_ERROR_LAUNCH_FAILED,
                    context + "entry '" + kernel.entry +
                        "': " + api_.describe("cuModuleGetFunction", r));
    }
    // Above 48 KiB a kernel must opt in to dynamic shared memory; setting the
    // limit for any nonzero amount also covers static + dynamic > 48 KiB.
    if (kernel.dynamicSharedMemory > 0) {
      if (maxShared > 0 &&
          kernel.dynamicSharedMemory > static_cast<unsigned>(maxShared)) {
        (void)api_.moduleUnload(mod);
        return Status(
            KDA_ERROR_LAUNCH_FAILED,
            context + "needs " + std::to_string(kernel.dynamicSharedMemory) +
                " bytes of dynamic shared memory; the device allows " +
                std::to_string(maxShared) + " per block");
      }
      if (CUresult r = api_.funcSetAttribute(
              fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
              static_cast<int>(kernel.dynamicSharedMemory))) {
        (void)api_.moduleUnload(mod);
        return Status(KDA_ERROR_LAUNCH_FAILED,
                      context + "allowing " +
                          std::to_string(kernel.dynamicSharedMemory) +
                          " bytes of dynamic shared memory: " +
                          api_.describe("cuFuncSetAttribute", r));
      }
    }
    module = mod;
    function = fn;
    return Status::ok();
  }

  Status launch(const Kernel &kernel, void *function,
                const LaunchConfig &c) override {
    CUresult r = api_.launchKernel(
        static_cast<CUfunction>(function), c.grid[0], c.grid[1], c.grid[2],
        c.block[0], c.block[1], c.block[2], c.sharedBytes,
        static_cast<CUstream>(c.stream), c.args, nullptr);
    if (r != CUDA_SUCCESS)
      return Status(
          KDA_ERROR_LAUNCH_FAILED,
          describeLaunch(kernel.name, c) + ": " +
              api_.describe("cuLaunchKernel", r));
    return Status::ok();
  }

  Status allocAsync(uint64_t bytes, void *stream, void *&out) override {
    out = nullptr;
    if (!api_.memAllocAsync || !api_.memFreeAsync)
      return missingAsync(!api_.memAllocAsync ? "cuMemAllocAsync"
                                              : "cuMemFreeAsync");
    CUdeviceptr ptr = 0;
    if (CUresult r = api_.memAllocAsync(&ptr, static_cast<size_t>(bytes),
                                        static_cast<CUstream>(stream)))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("cuMemAllocAsync", r));
    out = reinterpret_cast<void *>(static_cast<uintptr_t>(ptr));
    return Status::ok();
  }

  Status freeAsync(void *ptr, void *stream) override {
    if (!api_.memFreeAsync)
      return missingAsync("cuMemFreeAsync");
    if (CUresult r = api_.memFreeAsync(
            static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr)),
            static_cast<CUstream>(stream)))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("cuMemFreeAsync", r));
    return Status::ok();
  }

  void unload(void *module) override {
    (void)api_.moduleUnload(static_cast<CUmodule>(module));
  }

  Status aloneSharedBytes(void *function, int device, unsigned &bytes,
                          int &multiprocessors) override {
    bytes = 0;
    multiprocessors = 0;
    DeviceInfo info;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = devices_.find(device);
      if (it == devices_.end())
        return Status::ok();
      info = it->second;
    }
    if (info.maxSharedOptin <= 0 ||
        api_.deviceGetAttribute(&multiprocessors,
                                CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                info.handle) != CUDA_SUCCESS) {
      multiprocessors = 0;
      return Status::ok();
    }
    // Seven eighths of the opt-in maximum: more than a multiprocessor has
    // left beside any other kernel's block here (a window block takes 66 KiB
    // of the H100's 228), with room for the kernel's static shared memory
    // (the opt-in maximum itself is refused where a kernel has any). A
    // function that refuses the limit keeps its own amount: the launch is
    // then as any other.
    const int want = info.maxSharedOptin - info.maxSharedOptin / 8;
    if (api_.funcSetAttribute(static_cast<CUfunction>(function),
                              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              want) != CUDA_SUCCESS)
      return Status::ok();
    bytes = static_cast<unsigned>(want);
    return Status::ok();
  }

  Status createSideStream(void *&out, bool greatestPriority) override {
    out = nullptr;
    if (Status s = needPieces())
      return s;
    int least = 0, greatest = 0;
    if (CUresult r = api_.ctxGetStreamPriorityRange(&least, &greatest))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("cuCtxGetStreamPriorityRange", r));
    CUstream stream = nullptr;
    if (CUresult r = api_.streamCreateWithPriority(
            &stream, CU_STREAM_NON_BLOCKING,
            greatestPriority ? greatest : 0))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("cuStreamCreateWithPriority", r));
    out = stream;
    return Status::ok();
  }

  Status createEvent(void *&out) override {
    out = nullptr;
    if (Status s = needPieces())
      return s;
    CUevent event = nullptr;
    if (CUresult r = api_.eventCreate(&event, CU_EVENT_DISABLE_TIMING))
      return Status(KDA_ERROR_LAUNCH_FAILED, api_.describe("cuEventCreate", r));
    out = event;
    return Status::ok();
  }

  void destroyEvent(void *event) override {
    if (event && api_.eventDestroy)
      (void)api_.eventDestroy(static_cast<CUevent>(event));
  }

  Status recordEvent(void *event, void *stream) override {
    if (CUresult r = api_.eventRecord(static_cast<CUevent>(event),
                                      static_cast<CUstream>(stream)))
      return Status(KDA_ERROR_LAUNCH_FAILED, api_.describe("cuEventRecord", r));
    return Status::ok();
  }

  Status waitEvent(void *stream, void *event) override {
    if (CUresult r = api_.streamWaitEvent(static_cast<CUstream>(stream),
                                          static_cast<CUevent>(event), 0))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("cuStreamWaitEvent", r));
    return Status::ok();
  }

  bool hasGraphs() const override {
#define KDA_CUDA_HAS(member, name, symbol, ...) &&api_.member
    return true KDA_CUDA_GRAPH_FUNCTIONS(KDA_CUDA_HAS);
#undef KDA_CUDA_HAS
  }

  // (The capture check too: such a launch under a capture waits for the
  // whole producer.)
  bool hasStreamValues() const override {
    return api_.streamWriteValue32 && api_.streamWaitValue32 &&
           api_.streamIsCapturing;
  }

  Status writeValue32(void *stream, void *address, uint32_t value) override {
    if (CUresult r = api_.streamWriteValue32(
            static_cast<CUstream>(stream),
            static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(address)),
            value, CU_STREAM_WRITE_VALUE_DEFAULT))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("cuStreamWriteValue32", r));
    return Status::ok();
  }

  Status waitValue32(void *stream, void *address, uint32_t value) override {
    if (CUresult r = api_.streamWaitValue32(
            static_cast<CUstream>(stream),
            static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(address)),
            value, CU_STREAM_WAIT_VALUE_GEQ))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("cuStreamWaitValue32", r));
    return Status::ok();
  }

  Status streamCapturing(void *stream, bool &capturing) override {
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (CUresult r =
            api_.streamIsCapturing(static_cast<CUstream>(stream), &status))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("cuStreamIsCapturing", r));
    capturing = status != CU_STREAM_CAPTURE_STATUS_NONE;
    return Status::ok();
  }

  Status graphCreate(void *&graph) override {
    CUgraph g = nullptr;
    if (CUresult r = api_.graphCreate(&g, 0))
      return Status(KDA_ERROR_LAUNCH_FAILED, api_.describe("cuGraphCreate", r));
    graph = g;
    return Status::ok();
  }

  static KernelNodeParams nodeParams(void *function, const LaunchConfig &c) {
    KernelNodeParams p{};
    p.func = static_cast<CUfunction>(function);
    p.gridDimX = c.grid[0];
    p.gridDimY = c.grid[1];
    p.gridDimZ = c.grid[2];
    p.blockDimX = c.block[0];
    p.blockDimY = c.block[1];
    p.blockDimZ = c.block[2];
    p.sharedMemBytes = c.sharedBytes;
    p.kernelParams = c.args;
    return p;
  }

  Status graphAddKernel(void *graph, const Kernel &kernel, void *function,
                        const LaunchConfig &c, void *const *deps,
                        size_t numDeps, bool high, void *&node) override {
    KernelNodeParams p = nodeParams(function, c);
    CUgraphNode n = nullptr;
    if (CUresult r = api_.graphAddKernelNode(
            &n, static_cast<CUgraph>(graph),
            reinterpret_cast<const CUgraphNode *>(deps), numDeps,
            reinterpret_cast<const KernelNodeParamsTag *>(&p)))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    describeLaunch(kernel.name, c) + ": " +
                        api_.describe("cuGraphAddKernelNode", r));
    if (high) {
      int least = 0, greatest = 0;
      if (CUresult r = api_.ctxGetStreamPriorityRange(&least, &greatest))
        return Status(KDA_ERROR_LAUNCH_FAILED,
                      api_.describe("cuCtxGetStreamPriorityRange", r));
      LaunchAttributeValue value{};
      value.priority = greatest;
      if (CUresult r = api_.graphKernelNodeSetAttribute(
              n, CU_LAUNCH_ATTRIBUTE_PRIORITY,
              reinterpret_cast<const LaunchAttributeValueTag *>(&value)))
        return Status(KDA_ERROR_LAUNCH_FAILED,
                      api_.describe("cuGraphKernelNodeSetAttribute", r));
    }
    node = n;
    return Status::ok();
  }

  Status graphInstantiate(void *graph, void *&exec) override {
    CUgraphExec e = nullptr;
    if (CUresult r = api_.graphInstantiate(
            &e, static_cast<CUgraph>(graph),
            CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("cuGraphInstantiateWithFlags", r));
    exec = e;
    return Status::ok();
  }

  Status graphSetKernel(void *exec, void *node, const Kernel &kernel,
                        void *function, const LaunchConfig &c) override {
    KernelNodeParams p = nodeParams(function, c);
    if (CUresult r = api_.graphExecKernelNodeSetParams(
            static_cast<CUgraphExec>(exec), static_cast<CUgraphNode>(node),
            reinterpret_cast<const KernelNodeParamsTag *>(&p)))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    describeLaunch(kernel.name, c) + ": " +
                        api_.describe("cuGraphExecKernelNodeSetParams", r));
    return Status::ok();
  }

  Status graphLaunch(void *exec, void *stream) override {
    if (CUresult r = api_.graphLaunch(static_cast<CUgraphExec>(exec),
                                      static_cast<CUstream>(stream)))
      return Status(KDA_ERROR_LAUNCH_FAILED, api_.describe("cuGraphLaunch", r));
    return Status::ok();
  }

  void graphDestroy(void *graph, void *exec) override {
    if (exec)
      (void)api_.graphExecDestroy(static_cast<CUgraphExec>(exec));
    if (graph)
      (void)api_.graphDestroy(static_cast<CUgraph>(graph));
  }

private:
  Status needPieces() const {
#define KDA_CUDA_NEED(member, name, symbol, ...)                               \
  if (!api_.member)                                                            \
    return Status(KDA_ERROR_NO_DRIVER, "the CUDA driver library " +             \
                                           api_.library + " has no " symbol    \
                                           ", which pipelined pieces need");
    KDA_CUDA_PIECES_FUNCTIONS(KDA_CUDA_NEED)
#undef KDA_CUDA_NEED
    return Status::ok();
  }

  Status missingAsync(const char *symbol) const {
    return Status(KDA_ERROR_NO_DRIVER,
                  "the CUDA driver library " + api_.library + " has no " +
                      symbol +
                      " (driver older than CUDA 11.2?), which entries with "
                      "workspaces need (kda_launch_with_workspace takes "
                      "caller-owned memory instead)");
  }

  struct DeviceInfo {
    CUdevice handle = 0;
    int major = 0, minor = 0;
    int maxSharedOptin = 0;
    std::string name;
    CUcontext context = nullptr;

    std::string describe(int ordinal) const {
      return "CUDA device " + std::to_string(ordinal) +
             (name.empty() ? "" : " (" + name + ")");
    }
  };

  // Caller holds mutex_.
  Status queryDevice(int device, DeviceInfo *&out) {
    auto it = devices_.find(device);
    if (it != devices_.end()) {
      out = &it->second;
      return Status::ok();
    }
    int count = 0;
    if (CUresult r = api_.deviceGetCount(&count))
      return Status(KDA_ERROR_NO_DEVICE, api_.describe("cuDeviceGetCount", r));
    if (device < 0 || device >= count)
      return Status(KDA_ERROR_NO_DEVICE,
                    "CUDA device " + std::to_string(device) +
                        " does not exist (the driver sees " +
                        std::to_string(count) +
                        (count == 1 ? " device)" : " devices)"));
    DeviceInfo info;
    if (CUresult r = api_.deviceGet(&info.handle, device))
      return Status(KDA_ERROR_NO_DEVICE, "CUDA device " +
                                             std::to_string(device) + ": " +
                                             api_.describe("cuDeviceGet", r));
    CUresult r = api_.deviceGetAttribute(
        &info.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, info.handle);
    if (r == CUDA_SUCCESS)
      r = api_.deviceGetAttribute(&info.minor,
                                  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                  info.handle);
    if (r != CUDA_SUCCESS)
      return Status(KDA_ERROR_NO_DEVICE,
                    "CUDA device " + std::to_string(device) +
                        " compute capability: " +
                        api_.describe("cuDeviceGetAttribute", r));
    if (api_.deviceGetAttribute(
            &info.maxSharedOptin,
            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            info.handle) != CUDA_SUCCESS)
      info.maxSharedOptin = 0; // unknown: let the driver decide
    char name[256] = {0};
    if (api_.deviceGetName(name, sizeof name - 1, info.handle) == CUDA_SUCCESS)
      info.name = name;
    out = &devices_.emplace(device, info).first->second;
    return Status::ok();
  }

  const Api &api_;
  std::mutex mutex_;
  std::map<int, DeviceInfo> devices_;
};

Status loadLibrary(const std::string &path, Api &api) {
  dlerror();
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *err = dlerror();
    return Status(KDA_ERROR_NO_DRIVER,
                  "cannot load the CUDA driver library " + path + ": " +
                      (err ? err : "dlopen failed") +
                      (path == kDefaultLibrary
                           ? " (no NVIDIA driver installed? "
                             "KDA_CUDA_LIBRARY=PATH names another library)"
                           : " (named by KDA_CUDA_LIBRARY)"));
  }
  api.library = path;
#define KDA_CUDA_RESOLVE(member, name, symbol, ...)                            \
  api.member = reinterpret_cast<Api::member##_fn *>(dlsym(handle, symbol));    \
  if (!api.member) {                                                           \
    dlclose(handle);                                                           \
    return Status(KDA_ERROR_NO_DRIVER, "the CUDA driver library " + path +     \
                                           " has no " symbol                   \
                                           " (driver too old?)");              \
  }
  KDA_CUDA_DRIVER_FUNCTIONS(KDA_CUDA_RESOLVE)
#undef KDA_CUDA_RESOLVE
#define KDA_CUDA_RESOLVE_OPTIONAL(member, name, symbol, ...)                   \
  api.member = reinterpret_cast<Api::member##_fn *>(dlsym(handle, symbol));
  KDA_CUDA_OPTIONAL_FUNCTIONS(KDA_CUDA_RESOLVE_OPTIONAL)
  KDA_CUDA_PIECES_FUNCTIONS(KDA_CUDA_RESOLVE_OPTIONAL)
  KDA_CUDA_GRAPH_FUNCTIONS(KDA_CUDA_RESOLVE_OPTIONAL)
  KDA_CUDA_VALUE_FUNCTIONS(KDA_CUDA_RESOLVE_OPTIONAL)
#undef KDA_CUDA_RESOLVE_OPTIONAL
  if (CUresult r = api.init(0))
    return Status(r == CUDA_ERROR_NO_DEVICE ? KDA_ERROR_NO_DEVICE
                                            : KDA_ERROR_NO_DRIVER,
                  "the CUDA driver " + path +
                      " did not initialise: " + api.describe("cuInit", r));
  (void)api.driverGetVersion(&api.driverVersion);
  return Status::ok();
}

struct Entry {
  Api api;
  Status status;
  std::unique_ptr<CudaDriver> driver;
};

// Never destroyed: a library, once loaded, stays loaded for the process.
// Runs on every launch; after the first it only looks the path up.
Status loadEntry(Entry *&out) {
  static std::mutex *mutex = new std::mutex;
  static auto *entries =
      new std::map<std::string, std::unique_ptr<Entry>, std::less<>>;
  const char *env = std::getenv("KDA_CUDA_LIBRARY");
  std::string_view path = env && *env ? env : kDefaultLibrary;
  std::lock_guard<std::mutex> lock(*mutex);
  auto it = entries->find(path);
  if (it == entries->end()) {
    auto entry = std::make_unique<Entry>();
    entry->status = loadLibrary(std::string(path), entry->api);
    if (entry->status.isOk())
      entry->driver = std::make_unique<CudaDriver>(entry->api);
    it = entries->emplace(std::string(path), std::move(entry)).first;
  }
  out = it->second.get();
  return out->status;
}

} // namespace

Status loadApi(const Api *&out) {
  Entry *entry = nullptr;
  Status s = loadEntry(entry);
  out = s.isOk() ? &entry->api : nullptr;
  return s;
}

Status getDriver(Driver *&out) {
  Entry *entry = nullptr;
  Status s = loadEntry(entry);
  out = s.isOk() ? entry->driver.get() : nullptr;
  return s;
}

} // namespace kda::rt::cuda
