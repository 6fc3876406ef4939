// A stand-in for libcuda.so.1 and libamdhip64.so, for the unit tests: the
// runtime dlopens it through KDA_CUDA_LIBRARY / KDA_HIP_LIBRARY and drives it
// like a real driver, so CI (no GPU) covers device selection, the chip check,
// pointer checks, lazy module loading, argument packing and every driver
// error path.
//
// Behaviour is set through the environment, read on each call:
//   KDA_FAKE_DEVICES  number of devices (default 1; 0 makes cuInit/hipInit
//                     fail with *_ERROR_NO_DEVICE)
//   KDA_FAKE_CC       compute capability as major*10+minor (default 90)
//   KDA_FAKE_GFX      the AMD chip; hipModuleLoadData refuses a code object
//                     not mentioning it (default gfx942)
//   KDA_FAKE_FAIL     FUNCTION=CODE: that function returns CODE
// and through the kda_fake_* functions below (the tests dlsym them).
// Built twice: kda-fake-driver, and kda-fake-driver-noasync with
// KDA_FAKE_NO_ASYNC_ALLOC, a driver older than stream-ordered allocation
// (no cuMemAllocAsync / cuMemFreeAsync / hipMallocAsync / hipFreeAsync).
// "Device memory" is whatever host memory a test registers.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Allocation {
  uintptr_t base;
  size_t size;
  int device;
  int memoryType; // CU_MEMORYTYPE_*: 1 host, 2 device
  bool owned;     // allocated by cuMemAlloc_v2
};

struct Function {
  std::string entry;
};

struct Module {
  std::string image;
  std::vector<std::unique_ptr<Function>>
      functions; // freed with the module, as in a real driver
};

std::mutex &mutex() {
  static std::mutex m;
  return m;
}

int envInt(const char *name, int fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// The code KDA_FAKE_FAIL gives `function`, or 0.
int failure(const char *function) {
  const char *v = std::getenv("KDA_FAKE_FAIL");
  if (!v)
    return 0;
  std::string s = v;
  size_t eq = s.find('=');
  if (eq == std::string::npos || s.compare(0, eq, function) != 0)
    return 0;
  return std::atoi(s.c_str() + eq + 1);
}

bool hasString(const std::string &image, const std::string &s) {
  return image.find(s) != std::string::npos;
}

uint16_t elfMachine(const void *image) {
  const unsigned char *p = static_cast<const unsigned char *>(image);
  if (std::memcmp(p,
                  "\x7f"
                  "ELF",
                  4) != 0)
    return 0;
  return static_cast<uint16_t>(p[18] | (p[19] << 8));
}

std::vector<Allocation> allocations;
std::vector<int> argSizes;
thread_local void *currentContext = nullptr;
thread_local int currentHipDevice = 0;

void *contextOf(int device) {
  return reinterpret_cast<void *>(uintptr_t(0x1000) + 0x10 * uintptr_t(device));
}

} // namespace

extern "C" {

// What the tests read back.
struct kda_fake_state {
  int inits, retains, moduleLoads, moduleUnloads, launches, setCurrentCalls;
  int funcAttribute, funcAttributeValue; // last cuFuncSetAttribute
  struct {
    char entry[128];
    unsigned grid[3], block[3], shared;
    void *stream;
    void *context; // CUDA: context current during the launch
    int hipDevice; // HIP: device current during the launch
    int numArgs;
    unsigned char args[16][8];
  } last;
  // Stream-ordered allocations (cuMemAllocAsync, hipMallocAsync) and frees.
  int allocs, frees;
  unsigned long long lastAllocBytes;
  void *lastAllocStream, *lastAllocPointer;
  void *lastFreeStream, *lastFreePointer;
  // Every launch, in order (the first 16), with its first 8 arguments (8
  // bytes each, as kda_fake_set_arg_sizes says).
  int historyCount;
  struct {
    char entry[64];
    void *stream;
    unsigned long long args[8];
    unsigned shared;
  } history[16];
  // "alloc launch:ENTRY free ..." in call order, for ordering checks.
  char events[1024];
};

static kda_fake_state state;
static int launchesBeforeFailure = -1; // kda_fake_fail_launches_after
// Streams and events of the pieces' functions: fake handles 0xF000 + 16 n
// (streams) and 0xE000 + 16 n (events), named sN and eN in state.events.
static int streamsCreated = 0, eventsCreated = 0, eventsDestroyed = 0;
static int graphsLive = 0, execsLive = 0; // cuGraphCreate / Instantiate, less destroyed

void kda_fake_reset() {
  std::lock_guard<std::mutex> lock(mutex());
  for (const Allocation &a : allocations)
    if (a.owned)
      std::free(reinterpret_cast<void *>(a.base));
  allocations.clear();
  argSizes.clear();
  state = kda_fake_state();
  launchesBeforeFailure = -1;
  streamsCreated = eventsCreated = eventsDestroyed = 0;
  graphsLive = execsLive = 0;
  currentContext = nullptr;
  currentHipDevice = 0;
}

const kda_fake_state *kda_fake_get_state() { return &state; }

// state.events, for tests that do not mirror the struct (test_package.py).
const char *kda_fake_events() { return state.events; }

void kda_fake_add_allocation(void *base, size_t size, int device,
                             int memoryType) {
  std::lock_guard<std::mutex> lock(mutex());
  allocations.push_back(
      {reinterpret_cast<uintptr_t>(base), size, device, memoryType, false});
}

// After `n` more successful launches, every launch fails with error 719
// (CUDA_ERROR_LAUNCH_FAILED / hipErrorLaunchFailure); -1: never.
void kda_fake_fail_launches_after(int n) {
  std::lock_guard<std::mutex> lock(mutex());
  launchesBeforeFailure = n;
}

// Appends "WHAT" or "WHAT:DETAIL" to state.events. Caller holds mutex().
// Uses no heap (the tests count the runtime's heap allocations, and this
// library's operator new resolves to the test executable's).
static void event(const char *what, const char *detail = nullptr) {
  size_t used = std::strlen(state.events);
  std::snprintf(state.events + used, sizeof state.events - used, "%s%s%s%s",
                used ? " " : "", what, detail ? ":" : "",
                detail ? detail : "");
}

// Whether this launch fails (kda_fake_fail_launches_after).
static bool launchFails() {
  std::lock_guard<std::mutex> lock(mutex());
  if (launchesBeforeFailure < 0)
    return false;
  if (launchesBeforeFailure == 0) {
    event("launch-failed");
    return true;
  }
  --launchesBeforeFailure;
  return false;
}

// The byte size of each kernel argument, so that launches can be recorded.
void kda_fake_set_arg_sizes(int n, const int *sizes) {
  std::lock_guard<std::mutex> lock(mutex());
  argSizes.assign(sizes, sizes + n);
}

static void recordLaunch(const Function *f, const unsigned grid[3],
                         const unsigned block[3], unsigned shared, void *stream,
                         void **args) {
  std::lock_guard<std::mutex> lock(mutex());
  ++state.launches;
  std::snprintf(state.last.entry, sizeof state.last.entry, "%s",
                f->entry.c_str());
  std::memcpy(state.last.grid, grid, sizeof state.last.grid);
  std::memcpy(state.last.block, block, sizeof state.last.block);
  state.last.shared = shared;
  state.last.stream = stream;
  state.last.context = currentContext;
  state.last.hipDevice = currentHipDevice;
  state.last.numArgs = static_cast<int>(argSizes.size());
  std::memset(state.last.args, 0, sizeof state.last.args);
  for (size_t i = 0; i < argSizes.size() && i < 16; ++i)
    std::memcpy(state.last.args[i], args[i], static_cast<size_t>(argSizes[i]));
  event("launch", f->entry.c_str());
  if (state.historyCount < 16) {
    auto &h = state.history[state.historyCount];
    std::snprintf(h.entry, sizeof h.entry, "%s", f->entry.c_str());
    h.stream = stream;
    h.shared = shared;
    std::memset(h.args, 0, sizeof h.args);
    for (size_t i = 0; i < argSizes.size() && i < 8; ++i)
      std::memcpy(&h.args[i], args[i], static_cast<size_t>(argSizes[i]));
  }
  ++state.historyCount;
}

// Stream-ordered allocation: host memory registered as device memory of the
// current device, 256-byte aligned like the real allocators.
[[maybe_unused]] static int allocAsync(void **pointer, size_t size, void *stream, int device) {
  void *p = std::aligned_alloc(256, (size + 255) / 256 * 256);
  if (!p)
    return 2;
  std::lock_guard<std::mutex> lock(mutex());
  allocations.push_back(
      {reinterpret_cast<uintptr_t>(p), size, device, 2, true});
  ++state.allocs;
  state.lastAllocBytes = size;
  state.lastAllocStream = stream;
  state.lastAllocPointer = p;
  char bytes[32];
  std::snprintf(bytes, sizeof bytes, "%zu", size);
  event("alloc", bytes);
  *pointer = p;
  return 0;
}

[[maybe_unused]] static int freeAsync(void *pointer, void *stream) {
  std::lock_guard<std::mutex> lock(mutex());
  for (size_t i = 0; i < allocations.size(); ++i)
    if (allocations[i].base == reinterpret_cast<uintptr_t>(pointer) &&
        allocations[i].owned) {
      std::free(pointer);
      allocations.erase(allocations.begin() + static_cast<long>(i));
      ++state.frees;
      state.lastFreeStream = stream;
      state.lastFreePointer = pointer;
      event("free");
      return 0;
    }
  return 1; // not an allocation of this driver
}

// "sN" for a stream of cuStreamCreateWithPriority, "caller" for any other.
static void streamName(void *stream, char *out, size_t size) {
  uintptr_t v = reinterpret_cast<uintptr_t>(stream);
  if (v >= 0xF000 && v < 0xF000 + 16 * uintptr_t(streamsCreated + 1) &&
      (v - 0xF000) % 16 == 0)
    std::snprintf(out, size, "s%d", static_cast<int>((v - 0xF000) / 16));
  else
    std::snprintf(out, size, "caller");
}

static int eventId(void *event) {
  return static_cast<int>((reinterpret_cast<uintptr_t>(event) - 0xE000) / 16);
}

static int createStream(void **stream, int priority) {
  std::lock_guard<std::mutex> lock(mutex());
  *stream = reinterpret_cast<void *>(uintptr_t(0xF000) +
                                     16 * uintptr_t(++streamsCreated));
  char detail[32];
  std::snprintf(detail, sizeof detail, "s%d/%d", streamsCreated, priority);
  event("stream", detail);
  return 0;
}

static int createEvent(void **e) {
  std::lock_guard<std::mutex> lock(mutex());
  *e = reinterpret_cast<void *>(uintptr_t(0xE000) +
                                16 * uintptr_t(++eventsCreated));
  return 0;
}

static int recordEvent(void *e, void *stream) {
  std::lock_guard<std::mutex> lock(mutex());
  char name[16], detail[48];
  streamName(stream, name, sizeof name);
  std::snprintf(detail, sizeof detail, "e%d@%s", eventId(e), name);
  event("record", detail);
  return 0;
}

static int waitEvent(void *stream, void *e) {
  std::lock_guard<std::mutex> lock(mutex());
  char name[16], detail[48];
  streamName(stream, name, sizeof name);
  std::snprintf(detail, sizeof detail, "%s@e%d", name, eventId(e));
  event("wait", detail);
  return 0;
}

// Graphs (cuGraph*): kernel nodes keep copies of their arguments (8 bytes
// each, as kda_fake_set_arg_sizes says), a launch replays them in order.
struct FakeNode {
  const Function *function;
  unsigned grid[3], block[3], shared;
  unsigned long long args[16];
  int numDeps, priority;
};
struct FakeGraph {
  std::vector<FakeNode> nodes;
};

// The layout of CUDA_KERNEL_NODE_PARAMS_v2.
struct FakeNodeParams {
  void *func;
  unsigned grid[3], block[3], shared;
  void **kernelParams;
  void **extra;
  void *kern;
  void *ctx;
};

static void copyNode(FakeNode &n, const FakeNodeParams *p) {
  n.function = static_cast<const Function *>(p->func);
  std::memcpy(n.grid, p->grid, sizeof n.grid);
  std::memcpy(n.block, p->block, sizeof n.block);
  n.shared = p->shared;
  std::memset(n.args, 0, sizeof n.args);
  for (size_t i = 0; i < argSizes.size() && i < 16; ++i)
    std::memcpy(&n.args[i], p->kernelParams[i],
                static_cast<size_t>(argSizes[i]));
}

int kda_fake_live_graphs() { return graphsLive + execsLive; }

// Events created and not yet destroyed (the tests check that handles free
// theirs).
int kda_fake_live_events() {
  std::lock_guard<std::mutex> lock(mutex());
  return eventsCreated - eventsDestroyed;
}

// ---- CUDA driver API ------------------------------------------------------

#define FAIL_IF_ASKED(name)                                                    \
  if (int code = failure(name))                                                \
    return code;

int cuGetErrorName(int error, const char **name) {
  switch (error) {
  case 0:
    *name = "CUDA_SUCCESS";
    return 0;
  case 1:
    *name = "CUDA_ERROR_INVALID_VALUE";
    return 0;
  case 2:
    *name = "CUDA_ERROR_OUT_OF_MEMORY";
    return 0;
  case 100:
    *name = "CUDA_ERROR_NO_DEVICE";
    return 0;
  case 101:
    *name = "CUDA_ERROR_INVALID_DEVICE";
    return 0;
  case 200:
    *name = "CUDA_ERROR_INVALID_IMAGE";
    return 0;
  case 209:
    *name = "CUDA_ERROR_NO_BINARY_FOR_GPU";
    return 0;
  case 500:
    *name = "CUDA_ERROR_NOT_FOUND";
    return 0;
  case 701:
    *name = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    return 0;
  case 719:
    *name = "CUDA_ERROR_LAUNCH_FAILED";
    return 0;
  case 804:
    *name = "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    return 0;
  default:
    *name = nullptr;
    return 1;
  }
}

int cuInit(unsigned) {
  FAIL_IF_ASKED("cuInit");
  ++state.inits;
  return envInt("KDA_FAKE_DEVICES", 1) == 0 ? 100 : 0;
}

int cuDriverGetVersion(int *v) {
  *v = 13000;
  return 0;
}

int cuDeviceGetCount(int *count) {
  FAIL_IF_ASKED("cuDeviceGetCount");
  *count = envInt("KDA_FAKE_DEVICES", 1);
  return 0;
}

int cuDeviceGet(int *device, int ordinal) {
  FAIL_IF_ASKED("cuDeviceGet");
  if (ordinal < 0 || ordinal >= envInt("KDA_FAKE_DEVICES", 1))
    return 101;
  *device = ordinal;
  return 0;
}

int cuDeviceGetAttribute(int *value, int attribute, int) {
  FAIL_IF_ASKED("cuDeviceGetAttribute");
  int cc = envInt("KDA_FAKE_CC", 90);
  switch (attribute) {
  case 75:
    *value = cc / 10;
    return 0;
  case 76:
    *value = cc % 10;
    return 0;
  case 97:
    *value = envInt("KDA_FAKE_SMEM_OPTIN", 232448);
    return 0;
  case 16: // multiprocessors (0: unknown, as a driver that will not say)
    *value = envInt("KDA_FAKE_SMS", 0);
    return *value > 0 ? 0 : 1;
  default:
    return 1;
  }
}

int cuDeviceGetName(char *name, int length, int device) {
  std::snprintf(name, static_cast<size_t>(length), "Fake GPU %d", device);
  return 0;
}

int cuDevicePrimaryCtxRetain(void **context, int device) {
  FAIL_IF_ASKED("cuDevicePrimaryCtxRetain");
  ++state.retains;
  *context = contextOf(device);
  return 0;
}

int cuCtxGetCurrent(void **context) {
  *context = currentContext;
  return 0;
}

int cuCtxSetCurrent(void *context) {
  FAIL_IF_ASKED("cuCtxSetCurrent");
  ++state.setCurrentCalls;
  currentContext = context;
  return 0;
}

int cuCtxSynchronize() { return 0; }

int cuModuleLoadData(void **module, const void *image) {
  FAIL_IF_ASKED("cuModuleLoadData");
  if (elfMachine(image) != 190)
    return 200;
  // The runtime's image is a std::string: NUL-terminated after its bytes,
  // but may hold NULs inside; the tests put a size in bytes 40..47 (e_shoff,
  // unused by the fake) so the fake can copy the whole thing.
  uint64_t size;
  std::memcpy(&size, static_cast<const char *>(image) + 40, sizeof size);
  std::lock_guard<std::mutex> lock(mutex());
  ++state.moduleLoads;
  *module = new Module{std::string(static_cast<const char *>(image), size), {}};
  return 0;
}

int cuModuleUnload(void *module) {
  std::lock_guard<std::mutex> lock(mutex());
  ++state.moduleUnloads;
  delete static_cast<Module *>(module);
  return 0;
}

int cuModuleGetFunction(void **function, void *module, const char *name) {
  FAIL_IF_ASKED("cuModuleGetFunction");
  if (!hasString(static_cast<Module *>(module)->image,
                 std::string(1, '\0') + name + '\0'))
    return 500;
  auto *m = static_cast<Module *>(module);
  m->functions.push_back(std::make_unique<Function>(Function{name}));
  *function = m->functions.back().get();
  return 0;
}

int cuFuncSetAttribute(void *, int attribute, int value) {
  FAIL_IF_ASKED("cuFuncSetAttribute");
  state.funcAttribute = attribute;
  state.funcAttributeValue = value;
  return 0;
}

int cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz,
                   unsigned bx, unsigned by, unsigned bz, unsigned shared,
                   void *stream, void **args, void **) {
  FAIL_IF_ASKED("cuLaunchKernel");
  if (launchFails())
    return 719;
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  recordLaunch(static_cast<Function *>(function), grid, block, shared, stream,
               args);
  return 0;
}

int cuPointerGetAttribute(void *data, int attribute,
                          unsigned long long pointer) {
  FAIL_IF_ASKED("cuPointerGetAttribute");
  std::lock_guard<std::mutex> lock(mutex());
  for (const Allocation &a : allocations) {
    if (pointer < a.base || pointer >= a.base + a.size)
      continue;
    switch (attribute) {
    case 2:
      *static_cast<unsigned *>(data) = static_cast<unsigned>(a.memoryType);
      return 0;
    case 8:
      *static_cast<unsigned *>(data) = 0;
      return 0;
    case 9:
      *static_cast<int *>(data) = a.device;
      return 0;
    case 11:
      *static_cast<unsigned long long *>(data) = a.base;
      return 0;
    case 12:
      *static_cast<size_t *>(data) = a.size;
      return 0;
    default:
      return 1;
    }
  }
  return 1; // CUDA_ERROR_INVALID_VALUE: memory the driver does not know
}

// Like the real one: memory the driver does not know gets zeros, not an error.
int cuPointerGetAttributes(unsigned count, int *attributes, void **data,
                           unsigned long long pointer) {
  FAIL_IF_ASKED("cuPointerGetAttributes");
  const Allocation *found = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex());
    for (const Allocation &a : allocations)
      if (pointer >= a.base && pointer < a.base + a.size)
        found = &a;
  }
  for (unsigned i = 0; i < count; ++i) {
    switch (attributes[i]) {
    case 2:
      *static_cast<unsigned *>(data[i]) =
          found ? static_cast<unsigned>(found->memoryType) : 0;
      break;
    case 8:
      *static_cast<unsigned char *>(data[i]) = 0;
      break; // a bool
    case 9:
      *static_cast<int *>(data[i]) = found ? found->device : -2;
      break;
    case 11:
      *static_cast<unsigned long long *>(data[i]) = found ? found->base : 0;
      break;
    case 12:
      *static_cast<size_t *>(data[i]) = found ? found->size : 0;
      break;
    default:
      return 1;
    }
  }
  return 0;
}

int cuMemAlloc_v2(unsigned long long *pointer, size_t size) {
  void *p = std::aligned_alloc(256, (size + 255) / 256 * 256);
  if (!p)
    return 2;
  std::lock_guard<std::mutex> lock(mutex());
  int device = 0;
  for (int d = 0; d < 16; ++d)
    if (currentContext == contextOf(d))
      device = d;
  allocations.push_back(
      {reinterpret_cast<uintptr_t>(p), size, device, 2, true});
  *pointer = reinterpret_cast<uintptr_t>(p);
  return 0;
}

int cuMemFree_v2(unsigned long long pointer) {
  std::lock_guard<std::mutex> lock(mutex());
  for (size_t i = 0; i < allocations.size(); ++i)
    if (allocations[i].base == pointer && allocations[i].owned) {
      std::free(reinterpret_cast<void *>(pointer));
      allocations.erase(allocations.begin() + static_cast<long>(i));
      return 0;
    }
  return 1;
}

#ifndef KDA_FAKE_NO_ASYNC_ALLOC
int cuMemAllocAsync(unsigned long long *pointer, size_t size, void *stream) {
  FAIL_IF_ASKED("cuMemAllocAsync");
  int device = 0;
  for (int d = 0; d < 16; ++d)
    if (currentContext == contextOf(d))
      device = d;
  void *p = nullptr;
  int r = allocAsync(&p, size, stream, device);
  *pointer = reinterpret_cast<uintptr_t>(p);
  return r;
}

int cuMemFreeAsync(unsigned long long pointer, void *stream) {
  FAIL_IF_ASKED("cuMemFreeAsync");
  return freeAsync(reinterpret_cast<void *>(pointer), stream);
}
#endif

int cuCtxGetStreamPriorityRange(int *least, int *greatest) {
  FAIL_IF_ASKED("cuCtxGetStreamPriorityRange");
  *least = 0;
  *greatest = -5;
  return 0;
}

int cuStreamCreateWithPriority(void **stream, unsigned flags, int priority) {
  FAIL_IF_ASKED("cuStreamCreateWithPriority");
  if (flags != 1) // CU_STREAM_NON_BLOCKING, as the runtime asks
    return 1;
  return createStream(stream, priority);
}

int cuEventCreate(void **e, unsigned flags) {
  FAIL_IF_ASKED("cuEventCreate");
  if (flags != 2) // CU_EVENT_DISABLE_TIMING
    return 1;
  return createEvent(e);
}

int cuEventDestroy_v2(void *) {
  std::lock_guard<std::mutex> lock(mutex());
  ++eventsDestroyed;
  return 0;
}

int cuEventRecord(void *e, void *stream) {
  FAIL_IF_ASKED("cuEventRecord");
  return recordEvent(e, stream);
}

int cuStreamWaitEvent(void *stream, void *e, unsigned) {
  FAIL_IF_ASKED("cuStreamWaitEvent");
  return waitEvent(stream, e);
}

// Stream memory operations: "write:caller=V@0xADDR", "waitvalue:caller>=V@0xADDR".
int cuStreamWriteValue32_v2(void *stream, unsigned long long address, unsigned value, unsigned flags) {
  FAIL_IF_ASKED("cuStreamWriteValue32");
  std::lock_guard<std::mutex> lock(mutex());
  char name[16], detail[64];
  streamName(stream, name, sizeof name);
  std::snprintf(detail, sizeof detail, "%s=%u@0x%llx%s", name, value, address, flags ? "/flags" : "");
  event("write", detail);
  return 0;
}

int cuStreamWaitValue32_v2(void *stream, unsigned long long address, unsigned value, unsigned flags) {
  FAIL_IF_ASKED("cuStreamWaitValue32");
  std::lock_guard<std::mutex> lock(mutex());
  char name[16], detail[64];
  streamName(stream, name, sizeof name);
  // flags 0: CU_STREAM_WAIT_VALUE_GEQ
  std::snprintf(detail, sizeof detail, "%s%s%u@0x%llx", name, flags == 0 ? ">=" : "?", value, address);
  event("waitvalue", detail);
  return 0;
}

int cuStreamIsCapturing(void *, int *status) {
  FAIL_IF_ASKED("cuStreamIsCapturing");
  *status = envInt("KDA_FAKE_CAPTURING", 0);
  return 0;
}

int cuGraphCreate(void **graph, unsigned) {
  FAIL_IF_ASKED("cuGraphCreate");
  std::lock_guard<std::mutex> lock(mutex());
  *graph = new FakeGraph;
  ++graphsLive;
  event("graph");
  return 0;
}

int cuGraphAddKernelNode_v2(void **node, void *graph, void *const *deps,
                            size_t numDeps, const FakeNodeParams *params) {
  FAIL_IF_ASKED("cuGraphAddKernelNode_v2");
  std::lock_guard<std::mutex> lock(mutex());
  auto *g = static_cast<FakeGraph *>(graph);
  FakeNode n{};
  copyNode(n, params);
  n.numDeps = static_cast<int>(numDeps);
  // Dependencies must be nodes added before (the replay's order is the
  // insertion order).
  for (size_t d = 0; d < numDeps; ++d)
    if (reinterpret_cast<uintptr_t>(deps[d]) == 0 ||
        reinterpret_cast<uintptr_t>(deps[d]) > g->nodes.size())
      return 1;
  g->nodes.push_back(n);
  // A node is its 1-based index (the fake's graphs are never merged).
  *node = reinterpret_cast<void *>(static_cast<uintptr_t>(g->nodes.size()));
  char detail[96];
  std::snprintf(detail, sizeof detail, "%s/%zu", n.function->entry.c_str(),
                numDeps);
  event("node", detail);
  return 0;
}

int cuGraphKernelNodeSetAttribute(void *node, int attribute,
                                  const int *value) {
  FAIL_IF_ASKED("cuGraphKernelNodeSetAttribute");
  if (attribute != 8) // CU_LAUNCH_ATTRIBUTE_PRIORITY, the only one asked for
    return 1;
  char detail[32];
  std::snprintf(detail, sizeof detail, "%d@%zu", *value,
                static_cast<size_t>(reinterpret_cast<uintptr_t>(node)));
  std::lock_guard<std::mutex> lock(mutex());
  event("priority", detail);
  return 0;
}

struct FakeExec {
  FakeGraph graph; // a copy, as instantiation takes
};

int cuGraphInstantiateWithFlags(void **exec, void *graph,
                                unsigned long long flags) {
  FAIL_IF_ASKED("cuGraphInstantiateWithFlags");
  std::lock_guard<std::mutex> lock(mutex());
  *exec = new FakeExec{*static_cast<FakeGraph *>(graph)};
  ++execsLive;
  char detail[32];
  std::snprintf(detail, sizeof detail, "%llu", flags);
  event("instantiate", detail);
  return 0;
}

int cuGraphExecKernelNodeSetParams_v2(void *exec, void *node,
                                      const FakeNodeParams *params) {
  FAIL_IF_ASKED("cuGraphExecKernelNodeSetParams_v2");
  std::lock_guard<std::mutex> lock(mutex());
  auto *e = static_cast<FakeExec *>(exec);
  size_t i = static_cast<size_t>(reinterpret_cast<uintptr_t>(node));
  if (i == 0 || i > e->graph.nodes.size())
    return 1;
  FakeNode &n = e->graph.nodes[i - 1];
  if (n.function != params->func)
    return 1; // a node's kernel cannot change
  int deps = n.numDeps;
  copyNode(n, params);
  n.numDeps = deps;
  event("set");
  return 0;
}

int cuGraphLaunch(void *exec, void *stream) {
  FAIL_IF_ASKED("cuGraphLaunch");
  {
    std::lock_guard<std::mutex> lock(mutex());
    event("graph-launch");
  }
  for (FakeNode &n : static_cast<FakeExec *>(exec)->graph.nodes) {
    void *args[16];
    for (int i = 0; i < 16; ++i)
      args[i] = &n.args[i];
    recordLaunch(n.function, n.grid, n.block, n.shared, stream, args);
  }
  return 0;
}

int cuGraphExecDestroy(void *exec) {
  std::lock_guard<std::mutex> lock(mutex());
  delete static_cast<FakeExec *>(exec);
  --execsLive;
  return 0;
}

int cuGraphDestroy(void *graph) {
  std::lock_guard<std::mutex> lock(mutex());
  delete static_cast<FakeGraph *>(graph);
  --graphsLive;
  return 0;
}

int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n) {
  std::memcpy(reinterpret_cast<void *>(dst), src, n);
  return 0;
}

int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n) {
  std::memcpy(dst, reinterpret_cast<const void *>(src), n);
  return 0;
}

// ---- HIP module API -------------------------------------------------------

const char *hipGetErrorName(int error) {
  switch (error) {
  case 0:
    return "hipSuccess";
  case 1:
    return "hipErrorInvalidValue";
  case 100:
    return "hipErrorNoDevice";
  case 101:
    return "hipErrorInvalidDevice";
  case 200:
    return "hipErrorInvalidImage";
  case 209:
    return "hipErrorNoBinaryForGpu";
  case 500:
    return "hipErrorNotFound";
  case 719:
    return "hipErrorLaunchFailure";
  default:
    return "hipErrorUnknown";
  }
}

int hipInit(unsigned) {
  FAIL_IF_ASKED("hipInit");
  ++state.inits;
  return envInt("KDA_FAKE_DEVICES", 1) == 0 ? 100 : 0;
}

int hipGetDeviceCount(int *count) {
  *count = envInt("KDA_FAKE_DEVICES", 1);
  return 0;
}

int hipDeviceGet(int *device, int ordinal) {
  *device = ordinal;
  return 0;
}

int hipDeviceGetName(char *name, int length, int device) {
  std::snprintf(name, static_cast<size_t>(length), "Fake AMD GPU %d", device);
  return 0;
}

int hipGetDevice(int *device) {
  *device = currentHipDevice;
  return 0;
}

int hipSetDevice(int device) {
  if (device < 0 || device >= envInt("KDA_FAKE_DEVICES", 1))
    return 101;
  ++state.setCurrentCalls;
  currentHipDevice = device;
  return 0;
}

int hipModuleLoadData(void **module, const void *image) {
  FAIL_IF_ASKED("hipModuleLoadData");
  if (elfMachine(image) != 224)
    return 200;
  uint64_t size;
  std::memcpy(&size, static_cast<const char *>(image) + 40, sizeof size);
  std::string copy(static_cast<const char *>(image), size);
  const char *gfx = std::getenv("KDA_FAKE_GFX");
  if (!hasString(copy, gfx && *gfx ? gfx : "gfx942"))
    return 209;
  std::lock_guard<std::mutex> lock(mutex());
  ++state.moduleLoads;
  *module = new Module{copy, {}};
  return 0;
}

#ifndef KDA_FAKE_NO_ASYNC_ALLOC
int hipMallocAsync(void **pointer, size_t size, void *stream) {
  FAIL_IF_ASKED("hipMallocAsync");
  return allocAsync(pointer, size, stream, currentHipDevice);
}

int hipFreeAsync(void *pointer, void *stream) {
  FAIL_IF_ASKED("hipFreeAsync");
  return freeAsync(pointer, stream);
}
#endif

int hipDeviceGetStreamPriorityRange(int *least, int *greatest) {
  FAIL_IF_ASKED("hipDeviceGetStreamPriorityRange");
  *least = 0;
  *greatest = -1;
  return 0;
}

int hipStreamCreateWithPriority(void **stream, unsigned flags, int priority) {
  FAIL_IF_ASKED("hipStreamCreateWithPriority");
  if (flags != 1) // hipStreamNonBlocking
    return 1;
  return createStream(stream, priority);
}

int hipEventCreateWithFlags(void **e, unsigned flags) {
  FAIL_IF_ASKED("hipEventCreateWithFlags");
  if (flags != 2) // hipEventDisableTiming
    return 1;
  return createEvent(e);
}

int hipEventDestroy(void *e) { return cuEventDestroy_v2(e); }

int hipEventRecord(void *e, void *stream) {
  FAIL_IF_ASKED("hipEventRecord");
  return recordEvent(e, stream);
}

int hipStreamWaitEvent(void *stream, void *e, unsigned) {
  FAIL_IF_ASKED("hipStreamWaitEvent");
  return waitEvent(stream, e);
}

int hipModuleUnload(void *module) { return cuModuleUnload(module); }

int hipModuleGetFunction(void **function, void *module, const char *name) {
  return cuModuleGetFunction(function, module, name);
}

int hipModuleLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz,
                          unsigned bx, unsigned by, unsigned bz,
                          unsigned shared, void *stream, void **args, void **) {
  FAIL_IF_ASKED("hipModuleLaunchKernel");
  if (launchFails())
    return 719;
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  recordLaunch(static_cast<Function *>(function), grid, block, shared, stream,
               args);
  return 0;
}

} // extern "C"
