#include "runtime/HipDriver.h"

#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace kda::rt::hip {

std::string Api::errorName(hipError_t error) const {
  const char *name = getErrorName ? getErrorName(error) : nullptr;
  return name && *name ? name : "hipError_t " + std::to_string(error);
}

std::string Api::describe(const char *call, hipError_t error) const {
  return std::string(call) + " failed: " + errorName(error);
}

namespace {

// Errors are classified by name (hipErrorNoBinaryForGpu, ...), as HIP
// documents them, so that the runtime declares none of HIP's enums.
bool is(const Api &api, hipError_t error, const char *name) {
  return api.errorName(error) == name;
}

class HipDriver final : public Driver {
public:
  explicit HipDriver(const Api &api) : api_(api) {}

  const char *apiName() const override { return "HIP"; }

  // HIP has no ABI-stable way to read a device's gfx name (it sits in
  // hipDeviceProp_t, whose layout changed in ROCm 6), so a chip mismatch is
  // caught when hipModuleLoadData refuses the code object, in load().
  Status checkDevice(int device, const Target &) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (names_.count(device))
      return Status::ok();
    int count = 0;
    if (hipError_t e = api_.getDeviceCount(&count))
      return Status(KDA_ERROR_NO_DEVICE, api_.describe("hipGetDeviceCount", e));
    if (device < 0 || device >= count)
      return Status(KDA_ERROR_NO_DEVICE,
                    "HIP device " + std::to_string(device) +
                        " does not exist (the driver sees " +
                        std::to_string(count) +
                        (count == 1 ? " device)" : " devices)"));
    std::string name;
    int handle = 0;
    char buf[256] = {0};
    if (api_.deviceGet(&handle, device) == hipSuccess &&
        api_.deviceGetName(buf, sizeof buf - 1, handle) == hipSuccess)
      name = buf;
    names_[device] = name;
    return Status::ok();
  }

  Status enter(int device, uintptr_t &saved) override {
    int current = 0;
    if (hipError_t e = api_.getDevice(&current))
      return Status(KDA_ERROR_LAUNCH_FAILED, api_.describe("hipGetDevice", e));
    saved = static_cast<uintptr_t>(current);
    if (current != device)
      if (hipError_t e = api_.setDevice(device))
        return Status(KDA_ERROR_LAUNCH_FAILED,
                      "selecting HIP device " + std::to_string(device) + ": " +
                          api_.describe("hipSetDevice", e));
    return Status::ok();
  }

  void leave(uintptr_t saved) override {
    int current = 0;
    if (api_.getDevice(&current) != hipSuccess ||
        current != static_cast<int>(saved))
      (void)api_.setDevice(static_cast<int>(saved));
  }

  // hipPointerGetAttributes' struct and memory-type values changed between
  // ROCm 5 and 6, so pointers are not checked with the driver here.
  Status checkPointer(const void *, uint64_t, int, const Kernel &,
                      size_t) override {
    return Status::ok();
  }

  Status load(const Target &target, const Kernel &kernel, int device,
              void *&module, void *&function) override {
    std::string where = "HIP device " + std::to_string(device);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = names_.find(device);
      if (it != names_.end() && !it->second.empty())
        where += " (" + it->second + ")";
    }
    std::string context = "kernel '" + kernel.name + "' (" + kernel.binary +
                          ") on " + where + ": ";
    hipModule_t mod = nullptr;
    if (hipError_t e = api_.moduleLoadData(&mod, kernel.image.data())) {
      if (is(api_, e, "hipErrorNoBinaryForGpu"))
        return Status(KDA_ERROR_WRONG_ARCHITECTURE,
                      context + "the " + target.chip +
                          " code object does not run on this device: " +
                          api_.describe("hipModuleLoadData", e));
      kda_status code = is(api_, e, "hipErrorInvalidImage") ||
                                is(api_, e, "hipErrorInvalidKernelFile")
                            ? KDA_ERROR_CORRUPT_BUNDLE
                            : KDA_ERROR_LAUNCH_FAILED;
      return Status(code, context + api_.describe("hipModuleLoadData", e));
    }
    hipFunction_t fn = nullptr;
    if (hipError_t e = api_.moduleGetFunction(&fn, mod, kernel.entry.c_str())) {
      (void)api_.moduleUnload(mod);
      return Status(is(api_, e, "hipErrorNotFound") ? KDA_ERROR_CORRUPT_BUNDLE
                                                    : KDA_ERROR_LAUNCH_FAILED,
                    context + "entry '" + kernel.entry +
                        "': " + api_.describe("hipModuleGetFunction", e));
    }
    // AMD GPUs need no opt-in for dynamic LDS; the launch fails if it exceeds
    // the device's limit.
    module = mod;
    function = fn;
    return Status::ok();
  }

  Status launch(const Kernel &kernel, void *function,
                const LaunchConfig &c) override {
    hipError_t e = api_.moduleLaunchKernel(
        static_cast<hipFunction_t>(function), c.grid[0], c.grid[1], c.grid[2],
        c.block[0], c.block[1], c.block[2], c.sharedBytes,
        static_cast<hipStream_t>(c.stream), c.args, nullptr);
    if (e != hipSuccess)
      return Status(
          KDA_ERROR_LAUNCH_FAILED,
          describeLaunch(kernel.name, c) + ": " +
              api_.describe("hipModuleLaunchKernel", e));
    return Status::ok();
  }

  Status allocAsync(uint64_t bytes, void *stream, void *&out) override {
    out = nullptr;
    if (!api_.mallocAsync || !api_.freeAsync)
      return missingAsync(!api_.mallocAsync ? "hipMallocAsync"
                                            : "hipFreeAsync");
    if (hipError_t e = api_.mallocAsync(&out, static_cast<size_t>(bytes),
                                        static_cast<hipStream_t>(stream))) {
      out = nullptr;
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("hipMallocAsync", e));
    }
    return Status::ok();
  }

  Status freeAsync(void *ptr, void *stream) override {
    if (!api_.freeAsync)
      return missingAsync("hipFreeAsync");
    if (hipError_t e = api_.freeAsync(ptr, static_cast<hipStream_t>(stream)))
      return Status(KDA_ERROR_LAUNCH_FAILED, api_.describe("hipFreeAsync", e));
    return Status::ok();
  }

  void unload(void *module) override {
    (void)api_.moduleUnload(static_cast<hipModule_t>(module));
  }

  Status createSideStream(void *&out, bool greatestPriority) override {
    out = nullptr;
    if (Status s = needPieces())
      return s;
    int least = 0, greatest = 0;
    if (hipError_t e = api_.deviceGetStreamPriorityRange(&least, &greatest))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("hipDeviceGetStreamPriorityRange", e));
    hipStream_t stream = nullptr;
    if (hipError_t e = api_.streamCreateWithPriority(
            &stream, hipStreamNonBlocking, greatestPriority ? greatest : 0))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("hipStreamCreateWithPriority", e));
    out = stream;
    return Status::ok();
  }

  Status createEvent(void *&out) override {
    out = nullptr;
    if (Status s = needPieces())
      return s;
    hipEvent_t event = nullptr;
    if (hipError_t e =
            api_.eventCreateWithFlags(&event, hipEventDisableTiming))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("hipEventCreateWithFlags", e));
    out = event;
    return Status::ok();
  }

  void destroyEvent(void *event) override {
    if (event && api_.eventDestroy)
      (void)api_.eventDestroy(static_cast<hipEvent_t>(event));
  }

  Status recordEvent(void *event, void *stream) override {
    if (hipError_t e = api_.eventRecord(static_cast<hipEvent_t>(event),
                                        static_cast<hipStream_t>(stream)))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("hipEventRecord", e));
    return Status::ok();
  }

  Status waitEvent(void *stream, void *event) override {
    if (hipError_t e = api_.streamWaitEvent(static_cast<hipStream_t>(stream),
                                            static_cast<hipEvent_t>(event), 0))
      return Status(KDA_ERROR_LAUNCH_FAILED,
                    api_.describe("hipStreamWaitEvent", e));
    return Status::ok();
  }

private:
  Status needPieces() const {
#define KDA_HIP_NEED(member, symbol, ...)                                      \
  if (!api_.member)                                                            \
    return Status(KDA_ERROR_NO_DRIVER, "the HIP runtime library " +             \
                                           api_.library + " has no " symbol    \
                                           ", which pipelined pieces need");
    KDA_HIP_PIECES_FUNCTIONS(KDA_HIP_NEED)
#undef KDA_HIP_NEED
    return Status::ok();
  }

  Status missingAsync(const char *symbol) const {
    return Status(KDA_ERROR_NO_DRIVER,
                  "the HIP runtime library " + api_.library + " has no " +
                      symbol +
                      " (ROCm older than 5.2?), which entries with "
                      "workspaces need (kda_launch_with_workspace takes "
                      "caller-owned memory instead)");
  }

  const Api &api_;
  std::mutex mutex_;
  std::map<int, std::string> names_; // checked devices and their names
};

Status loadLibrary(const std::vector<std::string> &candidates,
                   bool fromEnvironment, Api &api) {
  void *handle = nullptr;
  std::string errors;
  for (const std::string &path : candidates) {
    dlerror();
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      api.library = path;
      break;
    }
    const char *err = dlerror();
    errors += (errors.empty() ? "" : "; ") +
              std::string(err ? err : path + ": dlopen failed");
  }
  if (!handle)
    return Status(KDA_ERROR_NO_DRIVER,
                  "cannot load the HIP runtime library (" + errors + ")" +
                      (fromEnvironment
                           ? " (named by KDA_HIP_LIBRARY)"
                           : " (no ROCm installed? KDA_HIP_LIBRARY=PATH names "
                             "another library)"));
#define KDA_HIP_RESOLVE(member, symbol, ...)                                   \
  api.member = reinterpret_cast<Api::member##_fn *>(dlsym(handle, symbol));    \
  if (!api.member) {                                                           \
    dlclose(handle);                                                           \
    return Status(KDA_ERROR_NO_DRIVER, "the HIP runtime library " +            \
                                           api.library + " has no " symbol);   \
  }
  KDA_HIP_FUNCTIONS(KDA_HIP_RESOLVE)
#undef KDA_HIP_RESOLVE
#define KDA_HIP_RESOLVE_OPTIONAL(member, symbol, ...)                          \
  api.member = reinterpret_cast<Api::member##_fn *>(dlsym(handle, symbol));
  KDA_HIP_OPTIONAL_FUNCTIONS(KDA_HIP_RESOLVE_OPTIONAL)
  KDA_HIP_PIECES_FUNCTIONS(KDA_HIP_RESOLVE_OPTIONAL)
#undef KDA_HIP_RESOLVE_OPTIONAL
  if (hipError_t e = api.init(0))
    return Status(is(api, e, "hipErrorNoDevice") ? KDA_ERROR_NO_DEVICE
                                                 : KDA_ERROR_NO_DRIVER,
                  "the HIP runtime " + api.library +
                      " did not initialise: " + api.describe("hipInit", e));
  return Status::ok();
}

struct Entry {
  Api api;
  Status status;
  std::unique_ptr<HipDriver> driver;
};

} // namespace

Status getDriver(Driver *&out) {
  static std::mutex *mutex = new std::mutex;
  // Keyed by KDA_HIP_LIBRARY, "" for the default search.
  static auto *entries =
      new std::map<std::string, std::unique_ptr<Entry>, std::less<>>;
  const char *env = std::getenv("KDA_HIP_LIBRARY");
  std::string_view key = env && *env ? env : "";
  std::lock_guard<std::mutex> lock(*mutex);
  auto it = entries->find(key);
  if (it == entries->end()) {
    std::vector<std::string> candidates;
    if (!key.empty())
      candidates = {std::string(key)};
    else
      candidates = {"libamdhip64.so", "libamdhip64.so.6",
                    "/opt/rocm/lib/libamdhip64.so"};
    auto entry = std::make_unique<Entry>();
    entry->status = loadLibrary(candidates, !key.empty(), entry->api);
    if (entry->status.isOk())
      entry->driver = std::make_unique<HipDriver>(entry->api);
    it = entries->emplace(std::string(key), std::move(entry)).first;
  }
  out = it->second->status.isOk() ? it->second->driver.get() : nullptr;
  return it->second->status;
}

} // namespace kda::rt::hip
