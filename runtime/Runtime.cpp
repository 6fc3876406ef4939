// The C API (kda_runtime.h) and the driver-independent half of a launch.
#include "runtime/Runtime.h"

#include "runtime/CudaDriver.h"
#include "runtime/Driver.h"
#include "runtime/HipDriver.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

namespace kda::rt {

std::string shapeString(const std::vector<Extent> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + shape[i].str();
  return s + "]";
}

std::string tensorName(const Kernel &kernel, size_t position) {
  return "tensor " + std::to_string(position) + " ('" +
         kernel.params[kernel.tensorParams[position]].name + "')";
}

namespace {

// The integer in a C enum field. C callers may store any int there; loading
// an out-of-range value as the C++ enum type would be undefined behaviour.
template <class Enum> int rawValue(const Enum &e) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized here");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// "kernel 'k'" or "entry 'e'", for messages.
std::string label(const Kernel &kernel) {
  return std::string(kernel.what) + " '" + kernel.name + "'";
}

// a * b, or false when it overflows `limit`.
bool multiply(uint64_t a, uint64_t b, uint64_t limit, uint64_t &out) {
  if (b != 0 && a > limit / b)
    return false;
  out = a * b;
  return true;
}

} // namespace

// Runs on every launch: nothing is allocated unless something is wrong
// (messages are built only on failure), beyond the Binding's vectors.
Status bindTensors(const Kernel &kernel, const kda_tensor *tensors,
                   int32_t count, Binding &out) {
  size_t expected = kernel.tensorParams.size();
  if (count < 0 || static_cast<size_t>(count) != expected) {
    std::string names;
    for (size_t i : kernel.tensorParams)
      names += (names.empty() ? "" : ", ") + kernel.params[i].name;
    return Status(KDA_ERROR_INVALID_ARGUMENT,
                  label(kernel) + " takes " +
                      std::to_string(expected) +
                      (expected == 1 ? " tensor" : " tensors") +
                      (names.empty() ? "" : " (" + names + ")") + ", got " +
                      std::to_string(count));
  }
  if (count > 0 && !tensors)
    return Status(KDA_ERROR_INVALID_ARGUMENT, "tensors is NULL, but " +
                                                  label(kernel) + " takes " +
                                                  std::to_string(count));

  out.symbols.assign(kernel.symbols.size(), -1);
  out.bytes.assign(expected, 0);
  out.device = -1;
  // Which tensor dimension bound each symbol, for messages.
  out.boundAt.resize(kernel.symbols.size());
  size_t deviceTensor = 0;

  for (size_t i = 0; i < expected; ++i) {
    const Param &p = kernel.params[kernel.tensorParams[i]];
    const kda_tensor &t = tensors[i];
    auto bad = [&](const std::string &problem) {
      return Status(KDA_ERROR_BAD_TENSOR, tensorName(kernel, i) + problem);
    };
    auto expects = [&] {
      return ", but " + label(kernel) + " expects ";
    };

    int dtype = rawValue(t.dtype);
    if (dtype < KDA_F32 || dtype > KDA_I64)
      return bad(" has dtype " + std::to_string(dtype) +
                 ", which is not a kda_dtype");
    if (t.dtype != p.dtype)
      return bad(std::string(" has dtype ") + dtypeName(t.dtype) + expects() +
                 dtypeName(p.dtype));
    if (t.rank < 0 || static_cast<size_t>(t.rank) != p.shape.size())
      return bad(" has rank " + std::to_string(t.rank) + expects() + "rank " +
                 std::to_string(p.shape.size()) + " " + shapeString(p.shape));
    if (t.rank > 0 && !t.shape)
      return Status(KDA_ERROR_INVALID_ARGUMENT,
                    tensorName(kernel, i) + " has rank " +
                        std::to_string(t.rank) + " but a NULL shape");

    uint64_t elements = 1;
    for (size_t d = 0; d < p.shape.size(); ++d) {
      int64_t size = t.shape[d];
      const Extent &e = p.shape[d];
      auto dimension = [&] { return " dimension " + std::to_string(d); };
      if (size < 0)
        return bad(dimension() + " is " + std::to_string(size) + " (negative)");
      if (!e.isSymbol()) {
        if (size != e.value)
          return bad(dimension() + " is " + std::to_string(size) + expects() +
                     std::to_string(e.value) + " (shape " +
                     shapeString(p.shape) + ")");
      } else if (out.symbols[e.symbolIndex] < 0) {
        out.symbols[e.symbolIndex] = size;
        out.boundAt[e.symbolIndex] = {i, d};
      } else if (out.symbols[e.symbolIndex] != size) {
        auto [ti, td] = out.boundAt[e.symbolIndex];
        return bad(dimension() + " (symbol " + e.symbol + ") is " +
                   std::to_string(size) + ", but " + tensorName(kernel, ti) +
                   " dimension " + std::to_string(td) + " bound " + e.symbol +
                   " = " + std::to_string(out.symbols[e.symbolIndex]));
      }
      if (!multiply(elements, static_cast<uint64_t>(size), uint64_t(1) << 62,
                    elements))
        return bad(" has more than 2^62 elements");
    }
    if (!multiply(elements, dtypeSize(p.dtype), uint64_t(1) << 62,
                  out.bytes[i]))
      return bad(" spans more than 2^62 bytes");

    // The kernel gets a bare pointer and computes row-major offsets itself.
    // Like PyTorch's is_contiguous, size-1 dimensions may have any stride and
    // an empty tensor any strides.
    if (t.strides && elements > 0) {
      int64_t stride = 1;
      for (size_t d = p.shape.size(); d-- > 0;) {
        if (t.shape[d] != 1 && t.strides[d] != stride)
          return bad(" is not contiguous: dimension " + std::to_string(d) +
                     " has stride " + std::to_string(t.strides[d]) +
                     ", row-major needs " + std::to_string(stride) +
                     " (the kernel takes a bare pointer: make the tensor "
                     "contiguous first)");
        stride *= t.shape[d];
      }
    }
    if (elements > 0) {
      if (!t.data)
        return bad(" has a NULL data pointer");
      if (reinterpret_cast<uintptr_t>(t.data) %
              static_cast<uint64_t>(p.alignment) !=
          0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%p", t.data);
        return bad(std::string(" data pointer ") + buf + " is not aligned to " +
                   std::to_string(p.alignment) + " bytes, as " +
                   label(kernel) + " requires");
      }
    }

    if (t.device == -1)
      return bad(" is in host memory (device -1); " + label(kernel) +
                 " needs device memory");
    if (t.device < -1)
      return bad(" has device " + std::to_string(t.device) +
                 " (expected a device ordinal >= 0, or -1 for host memory)");
    if (out.device < 0) {
      out.device = t.device;
      deviceTensor = i;
    } else if (t.device != out.device) {
      return bad(" is on device " + std::to_string(t.device) + ", but " +
                 tensorName(kernel, deviceTensor) + " is on device " +
                 std::to_string(out.device) + "; a launch runs on one device");
    }
  }

  // The manifest's "at_least" pairs (every symbol in them is bound: each
  // occurs in some tensor's shape).
  for (auto [a, b] : kernel.atLeast)
    if (out.symbols[a] < out.symbols[b]) {
      auto [ta, da] = out.boundAt[a];
      auto [tb, db] = out.boundAt[b];
      return Status(KDA_ERROR_BAD_TENSOR,
                    label(kernel) + ": " + tensorName(kernel, ta) +
                        " dimension " + std::to_string(da) + " (symbol " +
                        kernel.symbols[a] + ") is " +
                        std::to_string(out.symbols[a]) +
                        ", expected at least " + kernel.symbols[b] + " = " +
                        std::to_string(out.symbols[b]) + " (" +
                        tensorName(kernel, tb) + " dimension " +
                        std::to_string(db) + ")");
    }

  static const char axes[] = "xyz";
  // What a launch may ask for on both vendors: CUDA's grid limits (2^31 - 1
  // blocks in x, 65535 in y and z; HIP's are no smaller). Checked here, so a
  // too-long sequence is named instead of failing in the driver.
  static const int64_t maxGrid[3] = {2147483647, 65535, 65535};
  for (int a = 0; a < 3; ++a) {
    const Extent &e = kernel.grid[a];
    // Every grid symbol occurs in some tensor's shape (the manifest checks),
    // so it is bound by now.
    int64_t value = e.isSymbol() ? out.symbols[e.symbolIndex] : e.value;
    if (e.isSymbol() && e.ceilDiv > 1) // value >= 0: no overflow
      value = value / e.ceilDiv + (value % e.ceilDiv != 0);
    if (e.times > 1) // value < 2^62, times <= 2^16: saturate, then refused
      value = value > (int64_t(1) << 46) ? (int64_t(1) << 62)
                                          : value * e.times;
    if (e.plusIndex >= 0) // both < 2^62 (tensor sizes): no overflow
      value += out.symbols[e.plusIndex];
    if (e.zeroIfEqualIndex[0] >= 0 &&
        out.symbols[e.zeroIfEqualIndex[0]] ==
            out.symbols[e.zeroIfEqualIndex[1]])
      value = 0; // an empty grid: the launch is skipped
    if (value > maxGrid[a])
      return Status(KDA_ERROR_BAD_TENSOR,
                    std::string("grid ") + axes[a] + " is " + e.str() + " = " +
                        std::to_string(value) + " blocks; a launch takes at "
                        "most " + std::to_string(maxGrid[a]) + " in " +
                        axes[a] + " (split the call: fewer tokens per "
                        "sequence, sequences or heads)");
    out.grid[a] = static_cast<unsigned>(value);
  }
  return Status::ok();
}

void packArguments(const Kernel &kernel, const kda_tensor *tensors,
                   const Binding &binding, std::vector<uint64_t> &storage,
                   std::vector<void *> &args) {
  // Each argument gets an 8-byte slot; the driver reads as many bytes as the
  // kernel's parameter has (8 for pointers and i64, 4 for f32), from the
  // slot's start, which is where memcpy puts them.
  storage.assign(kernel.params.size(), 0);
  args.assign(kernel.params.size(), nullptr);
  size_t tensor = 0;
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    const Param &p = kernel.params[i];
    switch (p.kind) {
    case ParamKind::Tensor:
      storage[i] = static_cast<uint64_t>(
          reinterpret_cast<uintptr_t>(tensors[tensor++].data));
      break;
    case ParamKind::Dim: {
      int64_t v = binding.symbols[p.symbolIndex];
      std::memcpy(&storage[i], &v, sizeof v);
      break;
    }
    case ParamKind::F32: {
      float f = static_cast<float>(p.f32Value);
      std::memcpy(&storage[i], &f, sizeof f);
      break;
    }
    case ParamKind::I64:
      std::memcpy(&storage[i], &p.i64Value, sizeof p.i64Value);
      break;
    }
    args[i] = &storage[i];
  }
}

Status layoutWorkspaces(const Entry &entry, const Binding &binding,
                        WorkspaceLayout &out) {
  constexpr uint64_t kLimit = uint64_t(1) << 62;
  size_t dims = 0;
  for (const Workspace &w : entry.workspaces)
    dims += w.shape.size();
  out.shapes.resize(dims);
  out.offsets.resize(entry.workspaces.size());
  out.bytes.resize(entry.workspaces.size());
  out.total = 0;
  out.alignment = 1;
  size_t at = 0;
  for (size_t i = 0; i < entry.workspaces.size(); ++i) {
    const Workspace &w = entry.workspaces[i];
    auto tooLarge = [&](const char *what) {
      std::string values;
      for (size_t d = 0; d < w.shape.size(); ++d)
        if (w.shape[d].isSymbol())
          values += std::string(values.empty() ? " with " : ", ") +
                    w.shape[d].symbol + " = " +
                    std::to_string(binding.symbols[w.shape[d].symbolIndex]);
      return Status(KDA_ERROR_BAD_TENSOR,
                    "workspace '" + w.name + "' of entry '" + entry.name +
                        "' (" + dtypeName(w.dtype) + " " +
                        shapeString(w.shape) + values + ") " + what +
                        " more than 2^62 bytes");
    };
    uint64_t bytes = dtypeSize(w.dtype);
    for (const Extent &e : w.shape) {
      // Every workspace symbol occurs in some entry parameter's shape (the
      // manifest checks), so bindTensors bound it.
      int64_t size = e.isSymbol() ? binding.symbols[e.symbolIndex] : e.value;
      out.shapes[at++] = size;
      if (!multiply(bytes, static_cast<uint64_t>(size), kLimit, bytes))
        return tooLarge("needs");
    }
    uint64_t align = static_cast<uint64_t>(w.effectiveAlignment);
    out.alignment = std::max(out.alignment, align);
    uint64_t offset = (out.total + align - 1) / align * align; // total <= 2^62
    if (offset > kLimit || bytes > kLimit - offset)
      return tooLarge("brings the workspaces to");
    out.offsets[i] = offset;
    out.bytes[i] = bytes;
    out.total = offset + bytes;
  }
  return Status::ok();
}

Status getDriver(Vendor vendor, Driver *&out) {
  return vendor == Vendor::Nvidia ? cuda::getDriver(out) : hip::getDriver(out);
}

} // namespace kda::rt

using namespace kda::rt;

struct kda_bundle {
  std::string directory;
  Manifest manifest;

  // Modules loaded so far: one per (driver, kernel, device), loaded on first
  // launch and unloaded by kda_bundle_free.
  struct Loaded {
    Driver *driver;
    size_t kernel;
    int device;
    void *module;
    void *function;
  };
  std::mutex mutex;
  std::vector<Loaded> loaded;

  // The kernel's function on `device`, loading its module on first use.
  // The device must be current.
  Status function(Driver &driver, size_t kernel, int device, void *&out) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const Loaded &l : loaded)
      if (l.driver == &driver && l.kernel == kernel && l.device == device) {
        out = l.function;
        return Status::ok();
      }
    void *module = nullptr;
    if (Status s = driver.load(manifest.target, manifest.kernels[kernel],
                               device, module, out))
      return s;
    loaded.push_back({&driver, kernel, device, module, out});
    return Status::ok();
  }
};

namespace {

thread_local std::string lastError;

kda_status finish(const Status &s) {
  lastError = s.message();
  return s.code();
}

// A name kda_launch accepts: a kernel or (version 2) an entry.
struct Callable {
  const Kernel *kernel = nullptr; // set for a kernel
  size_t kernelIndex = 0;
  const Entry *entry = nullptr; // set for an entry
  const Kernel &signature() const { return entry ? entry->signature : *kernel; }
};

Status findCallable(const kda_bundle *bundle, const char *name,
                    Callable &out) {
  if (!bundle)
    return Status(KDA_ERROR_INVALID_ARGUMENT, "bundle is NULL");
  if (!name)
    return Status(KDA_ERROR_INVALID_ARGUMENT, "kernel name is NULL");
  out = Callable();
  const Manifest &m = bundle->manifest;
  for (size_t i = 0; i < m.kernels.size(); ++i)
    if (m.kernels[i].name == name) {
      out.kernel = &m.kernels[i];
      out.kernelIndex = i;
      return Status::ok();
    }
  for (const Entry &e : m.entries)
    if (e.name == name) {
      out.entry = &e;
      return Status::ok();
    }
  std::string kernels, entries;
  for (const Kernel &k : m.kernels)
    kernels += (kernels.empty() ? "" : ", ") + k.name;
  for (const Entry &e : m.entries)
    entries += (entries.empty() ? "" : ", ") + e.name;
  if (entries.empty())
    return Status(KDA_ERROR_NOT_FOUND, "bundle " + bundle->directory +
                                           " has no kernel '" + name +
                                           "' (it has: " + kernels + ")");
  return Status(KDA_ERROR_NOT_FOUND,
                "bundle " + bundle->directory + " has no kernel or entry '" +
                    name + "' (kernels: " + kernels + "; entries: " + entries +
                    ")");
}

// Asks the driver about every non-empty tensor of a launch: device memory of
// `device` holding the whole tensor (kda_launch_trusted skips this).
Status checkTensorPointers(Driver &driver, const kda_tensor *tensors,
                           const Binding &binding, int device,
                           const Kernel &kernel) {
  for (size_t i = 0; i < binding.bytes.size(); ++i)
    if (binding.bytes[i] > 0)
      if (Status s = driver.checkPointer(tensors[i].data, binding.bytes[i],
                                         device, kernel, i))
        return s;
  return Status::ok();
}

Status launchKernel(kda_bundle *bundle, const Callable &callable,
                    const kda_tensor *tensors, int32_t count, void *stream,
                    bool checkPointers) {
  const Kernel &kernel = *callable.kernel;
  // Reused by this thread's launches, so that a launch allocates nothing.
  thread_local Binding binding;
  thread_local std::vector<uint64_t> storage;
  thread_local std::vector<void *> args;
  if (Status s = bindTensors(kernel, tensors, count, binding))
    return s;

  Driver *driver = nullptr;
  if (Status s = getDriver(bundle->manifest.target.vendor, driver))
    return s;
  int device = binding.device < 0 ? 0 : binding.device;
  if (Status s = driver->checkDevice(device, bundle->manifest.target))
    return s;
  DeviceScope scope(*driver);
  if (Status s = scope.enter(device))
    return s;
  if (checkPointers)
    if (Status s =
            checkTensorPointers(*driver, tensors, binding, device, kernel))
      return s;
  // An empty batch: nothing to run (a zero grid is an error to the drivers).
  if (binding.emptyGrid())
    return Status::ok();

  void *function = nullptr;
  if (Status s = bundle->function(*driver, callable.kernelIndex, device,
                                  function))
    return s;
  packArguments(kernel, tensors, binding, storage, args);
  LaunchConfig config{{binding.grid[0], binding.grid[1], binding.grid[2]},
                      {kernel.block[0], kernel.block[1], kernel.block[2]},
                      kernel.dynamicSharedMemory,
                      stream,
                      args.data()};
  return driver->launch(kernel, function, config);
}

// What the device allocators guarantee for the start of an allocation
// (cuMemAllocAsync, hipMallocAsync, cudaMalloc, PyTorch's caching allocator).
constexpr uint64_t kAllocatorAlignment = 256;

// "0x7f...", for messages.
std::string pointerText(const void *p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// KDA_ENTRY_STREAMS=0: entries with side-stream launches run on the caller's
// stream alone (read at every such call, so that one process can time both
// schedules: a diagnostic of the two-stream schedule).
bool entryStreams() {
  const char *v = std::getenv("KDA_ENTRY_STREAMS");
  return !(v && v[0] == '0' && v[1] == 0);
}

// A launch that holds a multiprocessor a block (an entry's `alone` launch,
// pipelined pieces' state passes under KDA_PIECES_ALONE): the dynamic shared
// memory that leaves no room for another block, where the driver can say
// and the grid leaves at least half the device to the other stream's work.
// Whether `config` took it.
bool placeAlone(Driver &driver, void *function, int device,
                LaunchConfig &config) {
  unsigned bytes = 0;
  int sms = 0;
  const uint64_t blocks =
      uint64_t(config.grid[0]) * config.grid[1] * config.grid[2];
  if (!driver.aloneSharedBytes(function, device, bytes, sms).isOk() ||
      bytes <= config.sharedBytes || sms <= 0 || blocks * 2 > uint64_t(sms))
    return false;
  config.sharedBytes = bytes;
  return true;
}

// An entry: check the caller's tensors, lay out the workspaces, allocate them
// on `stream` (unless the caller passes `workspace`), launch every kernel in
// order on `stream`, free on `stream`.
Status launchEntry(kda_bundle *bundle, const Entry &entry,
                   const kda_tensor *tensors, int32_t count, void *stream,
                   bool callerWorkspace, void *workspace,
                   uint64_t workspaceBytes, bool checkPointers) {
  const Kernel &signature = entry.signature;
  const std::vector<Kernel> &kernels = bundle->manifest.kernels;
  // Reused by this thread's launches, so that a launch allocates nothing
  // after its first.
  thread_local Binding binding, kernelBinding;
  thread_local WorkspaceLayout layout;
  thread_local std::vector<void *> functions;
  thread_local std::vector<kda_tensor> kernelTensors;
  thread_local std::vector<uint64_t> storage;
  thread_local std::vector<void *> args;
  thread_local std::vector<size_t> shapeStart;
  if (Status s = bindTensors(signature, tensors, count, binding))
    return s;
  if (Status s = layoutWorkspaces(entry, binding, layout))
    return s;
  auto entryLabel = [&] { return "entry '" + entry.name + "'"; };
  if (callerWorkspace) {
    if (workspaceBytes < layout.total)
      return Status(KDA_ERROR_INVALID_ARGUMENT,
                    entryLabel() + " needs " + std::to_string(layout.total) +
                        " bytes of workspace for these tensors "
                        "(kda_entry_workspace_bytes), got " +
                        std::to_string(workspaceBytes));
    if (layout.total > 0 && !workspace)
      return Status(KDA_ERROR_INVALID_ARGUMENT,
                    "workspace is NULL, but " + entryLabel() + " needs " +
                        std::to_string(layout.total) + " bytes");
    if (layout.total > 0 &&
        reinterpret_cast<uintptr_t>(workspace) % layout.alignment != 0)
      return Status(KDA_ERROR_INVALID_ARGUMENT,
                    "workspace " + pointerText(workspace) +
                        " is not aligned to " +
                        std::to_string(layout.alignment) + " bytes, as " +
                        entryLabel() + " requires");
  }

  Driver *driver = nullptr;
  if (Status s = getDriver(bundle->manifest.target.vendor, driver))
    return s;
  int device = binding.device < 0 ? 0 : binding.device;
  if (Status s = driver->checkDevice(device, bundle->manifest.target))
    return s;
  DeviceScope scope(*driver);
  if (Status s = scope.enter(device))
    return s;
  if (checkPointers)
    if (Status s =
            checkTensorPointers(*driver, tensors, binding, device, signature))
      return s;
  if (checkPointers && callerWorkspace && layout.total > 0) {
    static const Kernel *const workspaceView = [] {
      auto *k = new Kernel;
      k->name = "workspace";
      k->params.emplace_back();
      k->params.back().name = "workspace";
      k->tensorParams.push_back(0);
      return k;
    }();
    if (Status s = driver->checkPointer(workspace, layout.total, device,
                                        *workspaceView, 0))
      return s.prefix(entryLabel() + ": ");
  }

  // Modules first, so that a missing entry point fails before anything is
  // allocated or enqueued.
  functions.assign(entry.launches.size(), nullptr);
  for (size_t l = 0; l < entry.launches.size(); ++l)
    if (Status s = bundle->function(*driver, entry.launches[l].kernel, device,
                                    functions[l]))
      return s.prefix(entryLabel() + " launch " + std::to_string(l) + ": ");

  void *allocation = nullptr;
  char *base = static_cast<char *>(workspace);
  if (!callerWorkspace) {
    base = nullptr;
    if (layout.total > 0) {
      // Over-allocate when a workspace wants more than the allocator's
      // alignment, and align the start by hand.
      uint64_t extra = layout.alignment > kAllocatorAlignment
                           ? layout.alignment - kAllocatorAlignment
                           : 0;
      if (Status s =
              driver->allocAsync(layout.total + extra, stream, allocation))
        return s.prefix(entryLabel() + ": allocating " +
                        std::to_string(layout.total + extra) +
                        " bytes of workspace: ");
      uintptr_t start = reinterpret_cast<uintptr_t>(allocation);
      start = (start + layout.alignment - 1) / layout.alignment *
              layout.alignment;
      base = reinterpret_cast<char *>(start);
    }
  }
  shapeStart.resize(entry.workspaces.size());
  for (size_t w = 0, at = 0; w < entry.workspaces.size(); ++w) {
    shapeStart[w] = at;
    at += entry.workspaces[w].shape.size();
  }

  // Two streams (launches with "stream": 1): the side stream (the device's
  // greatest priority, shared with the pieces) starts after the workspace
  // allocation, follows the caller's launches it names in "after" through
  // events, and the caller joins it at the end, also after a failure.
  // KDA_ENTRY_STREAMS=0, or a driver without streams and events, runs every
  // launch on the caller's stream in the manifest's order (the order the
  // dependencies allow).
  thread_local std::vector<void *> events;
  void *side = nullptr;
  Status result;
  if (entry.sideStream && entryStreams()) {
    if (driver->sideStream(device, side))
      side = nullptr;
  }
  events.assign(entry.launches.size() + 1, nullptr);
  auto eventAt = [&](size_t i) -> Status {
    if (!events[i])
      if (Status s = driver->createEvent(events[i]))
        return s.prefix(entryLabel() + ": ");
    return Status::ok();
  };
  const size_t startEvent = entry.launches.size();
  // Launches that follow a side-stream launch's progress ("progress"): the
  // counter's first word is reset here, on the caller's stream before
  // anything of this call; such a launch may then start once every block of
  // its producer has (see below). Not under a capture, nor without stream
  // memory operations: it then follows the whole producer.
  thread_local std::vector<char> alonePlaced;
  thread_local std::vector<uint64_t> gridBlocks;
  alonePlaced.assign(entry.launches.size(), 0);
  gridBlocks.assign(entry.launches.size(), 0);
  bool progressWaits = false;
  auto counterAddress = [&](const EntryLaunch &launch) -> void * {
    const LaunchArg &c = launch.progressCounter;
    if (!c.isWorkspace)
      return tensors[c.index].data;
    return base && layout.bytes[c.index] > 0 ? base + layout.offsets[c.index]
                                             : nullptr;
  };
  if (side && driver->hasStreamValues()) {
    bool capturing = false;
    bool any = false;
    for (const EntryLaunch &launch : entry.launches)
      any = any || launch.progressAfter >= 0;
    if (any && driver->streamCapturing(stream, capturing).isOk() &&
        !capturing) {
      progressWaits = true;
      for (const EntryLaunch &launch : entry.launches)
        if (launch.progressAfter >= 0 && result.isOk())
          if (void *counter = counterAddress(launch))
            if (Status s = driver->writeValue32(stream, counter, 0))
              result = s.prefix(entryLabel() + ": ");
    }
  }
  if (side && result.isOk()) {
    if (Status s = eventAt(startEvent))
      result = s;
    else if (Status s2 = driver->recordEvent(events[startEvent], stream))
      result = s2.prefix(entryLabel() + ": ");
    else if (Status s3 = driver->waitEvent(side, events[startEvent]))
      result = s3.prefix(entryLabel() + ": ");
  }
  for (size_t l = 0; l < entry.launches.size() && result.isOk(); ++l) {
    const EntryLaunch &launch = entry.launches[l];
    const Kernel &kernel = kernels[launch.kernel];
    void *target = side && launch.stream == 1 ? side : stream;
    kernelTensors.resize(launch.args.size());
    for (size_t a = 0; a < launch.args.size(); ++a) {
      const LaunchArg &arg = launch.args[a];
      if (!arg.isWorkspace) {
        kernelTensors[a] = tensors[arg.index];
        continue;
      }
      const Workspace &w = entry.workspaces[arg.index];
      kda_tensor &t = kernelTensors[a];
      t.data = base && layout.bytes[arg.index] > 0
                   ? base + layout.offsets[arg.index]
                   : nullptr;
      t.dtype = w.dtype;
      t.rank = static_cast<int32_t>(w.shape.size());
      t.shape = layout.shapes.data() + shapeStart[arg.index];
      t.strides = nullptr;
      t.device = device;
    }
    auto where = [&] {
      return entryLabel() + " launch " + std::to_string(l) + " of " +
             std::to_string(entry.launches.size()) + " (kernel '" +
             kernel.name + "'): ";
    };
    if (Status s = bindTensors(kernel, kernelTensors.data(),
                               static_cast<int32_t>(kernelTensors.size()),
                               kernelBinding)) {
      result = s.prefix(where());
      break;
    }
    if (side) {
      // Every block of the producer started (and holds its multiprocessor
      // alone): this launch's blocks can wait for its progress without
      // taking the multiprocessors it needs.
      const int producer = launch.progressAfter;
      void *counter = producer >= 0 ? counterAddress(launch) : nullptr;
      const bool early = progressWaits && counter && alonePlaced[producer] &&
                         gridBlocks[producer] > 0 &&
                         gridBlocks[producer] <= 0xffffffffu;
      for (size_t d : launch.after)
        if (entry.launches[d].stream != launch.stream && events[d] &&
            !(early && d == size_t(producer)))
          if (Status s = driver->waitEvent(target, events[d])) {
            result = s.prefix(where());
            break;
          }
      if (result.isOk() && early)
        if (Status s = driver->waitValue32(
                target, counter, static_cast<uint32_t>(gridBlocks[producer])))
          result = s.prefix(where());
      if (!result.isOk())
        break;
    }
    if (!kernelBinding.emptyGrid()) {
      packArguments(kernel, kernelTensors.data(), kernelBinding, storage,
                    args);
      LaunchConfig config{{kernelBinding.grid[0], kernelBinding.grid[1],
                           kernelBinding.grid[2]},
                          {kernel.block[0], kernel.block[1], kernel.block[2]},
                          kernel.dynamicSharedMemory,
                          target,
                          args.data()};
      gridBlocks[l] =
          uint64_t(config.grid[0]) * config.grid[1] * config.grid[2];
      // A multiprocessor a block beside the other stream's work.
      if (side && launch.alone &&
          placeAlone(*driver, functions[l], device, config))
        alonePlaced[l] = 1;
      if (Status s = driver->launch(kernel, functions[l], config)) {
        result = Status(s.code(),
                        where() + s.message() +
                            (l == 0 ? std::string()
                                    : " (launches 0.." +
                                          std::to_string(l - 1) +
                                          " were enqueued before it)"));
        break;
      }
    }
    // (Recorded also after an empty grid: a launch that waits for this
    // one then waits for what came before it on its stream.)
    if (side && launch.recordEvent) {
      if (Status s = eventAt(l)) {
        result = s;
        break;
      }
      if (Status s = driver->recordEvent(events[l], target))
        result = s.prefix(where());
    }
  }
  // The caller's stream joins the side stream (also after a failure: the
  // workspace is freed on the caller's stream after the side's launches).
  if (side) {
    Status join = eventAt(startEvent);
    if (join.isOk() && (join = driver->recordEvent(events[startEvent], side)))
      join = join.prefix(entryLabel() + ": ");
    if (join.isOk() && (join = driver->waitEvent(stream, events[startEvent])))
      join = join.prefix(entryLabel() + ": ");
    if (result.isOk())
      result = join;
    for (void *&e : events)
      if (e) {
        driver->destroyEvent(e);
        e = nullptr;
      }
  }
  // Stream-ordered: the memory is reused only after the launches above.
  if (allocation)
    if (Status s = driver->freeAsync(allocation, stream))
      if (result.isOk())
        result = s.prefix(entryLabel() + ": freeing the workspace: ");
  return result;
}

// `checkPointers` false: the caller vouches for every pointer
// (kda_launch_trusted), so the driver is not asked about each one.
Status launch(kda_bundle *bundle, const char *name, const kda_tensor *tensors,
              int32_t count, void *stream, bool callerWorkspace = false,
              void *workspace = nullptr, uint64_t workspaceBytes = 0,
              bool checkPointers = true) {
  Callable callable;
  if (Status s = findCallable(bundle, name, callable))
    return s;
  if (callable.entry)
    return launchEntry(bundle, *callable.entry, tensors, count, stream,
                       callerWorkspace, workspace, workspaceBytes,
                       checkPointers);
  return launchKernel(bundle, callable, tensors, count, stream, checkPointers);
}

} // namespace

// A launch checked and resolved once (kda_prepare) for tensors of fixed
// shapes, dtypes, strides and device: each later kda_launch_prepared stores
// the new data pointers (and the workspace's) into the kernels' packed
// arguments and launches, with nothing left to bind, lay out, look up or
// allocate. Owns no driver object (modules belong to the bundle), so freeing
// it never touches the bundle.
struct kda_prepared {
  Driver *driver = nullptr;
  int device = 0;
  const Kernel *signature = nullptr; // the entry's or the kernel's, for messages
  std::string label;                 // "entry 'e'" / "kernel 'k'"
  bool isEntry = false;
  std::vector<uint64_t> bytes;     // each tensor's span; 0: empty, not checked
  std::vector<uint64_t> alignment; // each tensor's, over every kernel it feeds
  uint64_t workspaceTotal = 0, workspaceAlignment = 1;
  size_t entryLaunches = 0; // for messages: launch l of entryLaunches

  struct Launch {
    size_t index = 0; // in the entry's launches (empty grids are left out)
    const Kernel *kernel = nullptr;
    void *function = nullptr;
    LaunchConfig config{};
    std::vector<uint64_t> storage; // packed arguments, pointers patched per call
    std::vector<void *> args;
  };
  // One argument slot that holds a pointer: a tensor's data, or the
  // workspace at an offset (tensor < 0; null for an empty workspace).
  struct Patch {
    uint64_t *slot;
    int32_t tensor;
    uint64_t offset;
    bool null;
  };
  std::vector<Launch> launches;
  std::vector<Patch> patches;
};

namespace {

// kda_prepare's work: kda_launch_trusted's checks and look-ups, kept.
Status prepare(kda_bundle *bundle, const char *name, const kda_tensor *tensors,
               int32_t count, kda_prepared &p) {
  Callable callable;
  if (Status s = findCallable(bundle, name, callable))
    return s;
  const Kernel &signature = callable.signature();
  p.signature = &signature;
  p.label = label(signature);
  p.isEntry = callable.entry != nullptr;
  Binding binding;
  if (Status s = bindTensors(signature, tensors, count, binding))
    return s;
  p.bytes = binding.bytes;
  p.alignment.assign(binding.bytes.size(), 1);
  for (size_t i = 0; i < signature.tensorParams.size(); ++i)
    p.alignment[i] = static_cast<uint64_t>(
        signature.params[signature.tensorParams[i]].alignment);

  WorkspaceLayout layout;
  if (callable.entry) {
    if (Status s = layoutWorkspaces(*callable.entry, binding, layout))
      return s;
    p.workspaceTotal = layout.total;
    p.workspaceAlignment = layout.alignment;
    p.entryLaunches = callable.entry->launches.size();
  }

  Driver *driver = nullptr;
  if (Status s = getDriver(bundle->manifest.target.vendor, driver))
    return s;
  int device = binding.device < 0 ? 0 : binding.device;
  if (Status s = driver->checkDevice(device, bundle->manifest.target))
    return s;
  DeviceScope scope(*driver);
  if (Status s = scope.enter(device))
    return s;
  p.driver = driver;
  p.device = device;

  const std::vector<Kernel> &kernels = bundle->manifest.kernels;
  // (kernel index, where each of its tensor arguments comes from)
  struct Source {
    size_t kernel;
    std::vector<LaunchArg> args;
  };
  std::vector<Source> sources;
  if (callable.entry) {
    for (const EntryLaunch &l : callable.entry->launches)
      sources.push_back({l.kernel, l.args});
  } else {
    Source only{callable.kernelIndex, {}};
    for (size_t i = 0; i < signature.tensorParams.size(); ++i)
      only.args.push_back({false, i});
    sources.push_back(only);
  }

  // A stand-in workspace start, aligned as a caller's must be: the kernels'
  // bindings check offsets and shapes here, the pointer comes per call.
  char *base = layout.total > 0
                   ? reinterpret_cast<char *>(static_cast<uintptr_t>(
                         std::max<uint64_t>(layout.alignment, 256)))
                   : nullptr;
  std::vector<size_t> shapeStart(callable.entry
                                     ? callable.entry->workspaces.size()
                                     : 0);
  for (size_t w = 0, at = 0; w < shapeStart.size(); ++w) {
    shapeStart[w] = at;
    at += callable.entry->workspaces[w].shape.size();
  }
  auto entryLabel = [&] { return p.label; };
  p.launches.reserve(sources.size());
  for (size_t l = 0; l < sources.size(); ++l) {
    const Kernel &kernel = kernels[sources[l].kernel];
    const std::vector<LaunchArg> &largs = sources[l].args;
    std::vector<kda_tensor> kernelTensors(largs.size());
    for (size_t a = 0; a < largs.size(); ++a) {
      const LaunchArg &arg = largs[a];
      if (!arg.isWorkspace) {
        kernelTensors[a] = tensors[arg.index];
        continue;
      }
      const Workspace &w = callable.entry->workspaces[arg.index];
      kda_tensor &t = kernelTensors[a];
      t.data = base && layout.bytes[arg.index] > 0
                   ? base + layout.offsets[arg.index]
                   : nullptr;
      t.dtype = w.dtype;
      t.rank = static_cast<int32_t>(w.shape.size());
      t.shape = layout.shapes.data() + shapeStart[arg.index];
      t.strides = nullptr;
      t.device = device;
    }
    auto where = [&] {
      return entryLabel() + " launch " + std::to_string(l) + " of " +
             std::to_string(sources.size()) + " (kernel '" + kernel.name +
             "'): ";
    };
    Binding kernelBinding;
    if (callable.entry) {
      if (Status s = bindTensors(kernel, kernelTensors.data(),
                                 static_cast<int32_t>(kernelTensors.size()),
                                 kernelBinding))
        return s.prefix(where());
    } else {
      kernelBinding = binding;
    }
    // Modules are loaded here, so that a missing entry point fails now.
    void *function = nullptr;
    if (Status s = bundle->function(*driver, sources[l].kernel, device,
                                    function))
      return callable.entry ? s.prefix(where()) : s;
    if (kernelBinding.emptyGrid())
      continue; // launches nothing, as kda_launch
    // Where each tensor argument's pointer comes from, and the alignment
    // its kernel parameter needs of a caller's tensor.
    for (size_t a = 0; a < largs.size(); ++a)
      if (!largs[a].isWorkspace) {
        const Param &kp = kernel.params[kernel.tensorParams[a]];
        uint64_t &need = p.alignment[largs[a].index];
        need = std::max(need, static_cast<uint64_t>(kp.alignment));
      }
    p.launches.emplace_back();
    kda_prepared::Launch &launch = p.launches.back();
    launch.index = l;
    launch.kernel = &kernel;
    launch.function = function;
    packArguments(kernel, kernelTensors.data(), kernelBinding, launch.storage,
                  launch.args);
    launch.config = LaunchConfig{
        {kernelBinding.grid[0], kernelBinding.grid[1], kernelBinding.grid[2]},
        {kernel.block[0], kernel.block[1], kernel.block[2]},
        kernel.dynamicSharedMemory,
        nullptr,
        nullptr};
  }
  // Slots are addressed once the launches no longer move.
  for (kda_prepared::Launch &launch : p.launches) {
    launch.config.args = launch.args.data();
    const std::vector<LaunchArg> &largs = sources[launch.index].args;
    size_t tensor = 0;
    for (size_t i = 0; i < launch.kernel->params.size(); ++i) {
      if (launch.kernel->params[i].kind != ParamKind::Tensor)
        continue;
      const LaunchArg &arg = largs[tensor++];
      kda_prepared::Patch patch{&launch.storage[i], -1, 0, false};
      if (arg.isWorkspace) {
        patch.offset = layout.offsets[arg.index];
        patch.null = layout.bytes[arg.index] == 0;
      } else {
        patch.tensor = static_cast<int32_t>(arg.index);
      }
      p.patches.push_back(patch);
    }
  }
  return Status::ok();
}

// What a prepared call (kda_launch_prepared, kda_launch_pieces) checks of
// the caller's pointers: the count, and every non-empty tensor's pointer
// non-NULL and aligned. `label` names the handle ("entry 'e'", "pipelined
// pieces of entry 'e'"), `plural` says whether it reads as one or many.
Status checkData(const Kernel &signature, const std::string &label,
                 bool plural, const std::vector<uint64_t> &bytes,
                 const std::vector<uint64_t> &alignment, void *const *data,
                 int32_t count) {
  size_t expected = bytes.size();
  if (count < 0 || static_cast<size_t>(count) != expected)
    return Status(KDA_ERROR_INVALID_ARGUMENT,
                  label + (plural ? " were" : " was") + " prepared for " +
                      std::to_string(expected) +
                      (expected == 1 ? " tensor" : " tensors") + ", got " +
                      std::to_string(count) + " data pointers");
  if (count > 0 && !data)
    return Status(KDA_ERROR_INVALID_ARGUMENT,
                  "data is NULL, but " + label + (plural ? " take " : " takes ") +
                      std::to_string(count) + " tensors");
  for (size_t i = 0; i < expected; ++i) {
    if (bytes[i] == 0)
      continue;
    if (!data[i])
      return Status(KDA_ERROR_BAD_TENSOR,
                    tensorName(signature, i) + " has a NULL data pointer");
    if (reinterpret_cast<uintptr_t>(data[i]) % alignment[i] != 0)
      return Status(KDA_ERROR_BAD_TENSOR,
                    tensorName(signature, i) + " data pointer " +
                        pointerText(data[i]) + " is not aligned to " +
                        std::to_string(alignment[i]) + " bytes, as " + label +
                        (plural ? " require" : " requires"));
  }
  return Status::ok();
}

// What kda_launch_prepared checks of a call: the pointers (checkData) and
// the workspace.
Status checkPrepared(const kda_prepared *p, void *const *data, int32_t count,
                     void *workspace, uint64_t workspaceBytes) {
  if (!p)
    return Status(KDA_ERROR_INVALID_ARGUMENT, "prepared launch is NULL");
  if (Status s = checkData(*p->signature, p->label, false, p->bytes,
                           p->alignment, data, count))
    return s;
  if (p->isEntry) {
    if (workspaceBytes < p->workspaceTotal)
      return Status(KDA_ERROR_INVALID_ARGUMENT,
                    p->label + " needs " + std::to_string(p->workspaceTotal) +
                        " bytes of workspace for these tensors "
                        "(kda_entry_workspace_bytes), got " +
                        std::to_string(workspaceBytes));
    if (p->workspaceTotal > 0 && !workspace)
      return Status(KDA_ERROR_INVALID_ARGUMENT,
                    "workspace is NULL, but " + p->label + " needs " +
                        std::to_string(p->workspaceTotal) + " bytes");
    if (p->workspaceTotal > 0 &&
        reinterpret_cast<uintptr_t>(workspace) % p->workspaceAlignment != 0)
      return Status(KDA_ERROR_INVALID_ARGUMENT,
                    "workspace " + pointerText(workspace) +
                        " is not aligned to " +
                        std::to_string(p->workspaceAlignment) + " bytes, as " +
                        p->label + " requires");
  }
  return Status::ok();
}

// Stores a checked call's pointers into the packed arguments.
void patchPrepared(kda_prepared *p, void *const *data, void *workspace) {
  for (const kda_prepared::Patch &patch : p->patches) {
    uintptr_t v;
    if (patch.tensor >= 0)
      v = reinterpret_cast<uintptr_t>(data[patch.tensor]);
    else
      v = patch.null ? 0
                     : reinterpret_cast<uintptr_t>(workspace) + patch.offset;
    *patch.slot = static_cast<uint64_t>(v);
  }
}

// Launches p->launches[l] on `stream` (the device current); a failure names
// the entry's launch and what was enqueued before it.
Status launchOne(kda_prepared *p, size_t l, void *stream) {
  kda_prepared::Launch &launch = p->launches[l];
  launch.config.stream = stream;
  Status s = p->driver->launch(*launch.kernel, launch.function, launch.config);
  if (s.isOk() || !p->isEntry)
    return s;
  size_t i = launch.index;
  return Status(s.code(),
                p->label + " launch " + std::to_string(i) + " of " +
                    std::to_string(p->entryLaunches) + " (kernel '" +
                    launch.kernel->name + "'): " + s.message() +
                    (l == 0 ? std::string()
                            : " (launches 0.." + std::to_string(i - 1) +
                                  " were enqueued before it)"));
}

Status launchPrepared(kda_prepared *p, void *const *data, int32_t count,
                      void *workspace, uint64_t workspaceBytes, void *stream) {
  if (Status s = checkPrepared(p, data, count, workspace, workspaceBytes))
    return s;
  if (p->launches.empty())
    return Status::ok(); // an empty batch
  patchPrepared(p, data, workspace);
  DeviceScope scope(*p->driver);
  if (Status s = scope.enter(p->device))
    return s;
  for (size_t l = 0; l < p->launches.size(); ++l)
    if (Status s = launchOne(p, l, stream))
      return s;
  return Status::ok();
}

uint64_t roundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

} // namespace

// Pipelined pieces of one sequence (kda_prepare_pieces): one prepared entry
// per piece, for the piece's tokens, and where each piece's pointers come
// from (the caller's, offset by the piece's first token; the workspace's
// regions; the intermediate states).
struct kda_pieces {
  Driver *driver = nullptr;
  int device = 0;
  std::string label; // "pipelined pieces of entry 'e'"
  const Kernel *signature = nullptr;
  std::vector<std::unique_ptr<kda_prepared>> pieces;
  std::vector<int64_t> starts, ends; // each piece's tokens
  std::vector<uint64_t> tokenBytes;  // per tensor: bytes a token (0: not per token)
  // Per tensor: passed from row 0 through the piece's last token (a
  // follower's earlier keys: their rows are a symbol the follower's kernel
  // needs at least T), not offset.
  std::vector<char> prefix;
  std::vector<uint64_t> bytes, alignment; // per tensor, the whole call's
  int32_t initialState = -1, finalState = -1; // tensor positions
  std::vector<uint64_t> regions;      // each piece's workspace offset
  uint64_t statesOffset = 0, stateStride = 0;
  uint64_t workspaceTotal = 0;
  std::vector<void *> data; // per piece, its pointers (reused every call)
  void *side = nullptr;     // the driver's side stream (not owned)
  std::vector<void *> events; // one a piece, then the join
  // A layer's pieces (a third launch, the follower): the driver's follower
  // stream (not owned) and its events, one a piece, then the join; the eager
  // schedule runs each piece's follower there after its state pass.
  bool follower = false;
  void *follow = nullptr;
  std::vector<void *> followEvents;
  // Unless KDA_PIECES_GRAPH=0 (read by kda_prepare_pieces), where the driver
  // has graphs: the schedule as one graph, built at the first launch that is
  // not being captured; nodes[i] runs launches of piece nodePiece[i].
  bool useGraph = false;
  void *graph = nullptr, *exec = nullptr;
  std::vector<void *> nodes;
  std::vector<std::pair<size_t, size_t>> nodeLaunch; // (piece, launch)
  std::vector<void *> graphData; // the pointers the nodes hold (data, ws)

  ~kda_pieces() {
    for (void *e : events)
      if (e)
        driver->destroyEvent(e);
    for (void *e : followEvents)
      if (e)
        driver->destroyEvent(e);
    if (graph || exec)
      driver->graphDestroy(graph, exec);
  }
};

namespace {

// What a piece's launch is, by its index in the entry: 0 the chunk-parallel
// launch, 1 the state pass, 2 a follower (a layer's window over earlier
// keys, after its piece's state pass).
size_t pieceLaunchKind(size_t index) { return std::min<size_t>(index, 2); }

// kda_prepare_pieces' work.
Status preparePieces(kda_bundle *bundle, const char *name,
                     const kda_tensor *tensors, int32_t count,
                     const int64_t *starts, int32_t numPieces,
                     kda_pieces &out) {
  Callable callable;
  if (Status s = findCallable(bundle, name, callable))
    return s;
  const Kernel &signature = callable.signature();
  out.signature = &signature;
  out.label = "pipelined pieces of " + label(signature);
  out.follower = false;
  if (!callable.entry)
    return Status(KDA_ERROR_INVALID_ARGUMENT,
                  "pipelined pieces take an entry (a chunk-parallel launch, "
                  "then the state pass), not " +
                      label(signature));
  const Entry &entry = *callable.entry;
  // Two launches (the chunk-parallel kernel, the state pass), or a third
  // that follows the state pass (a layer's window with earlier keys: its
  // kernel checks key rows at least T, "at_least").
  const auto &kernels = bundle->manifest.kernels;
  const bool follower = entry.launches.size() == 3 &&
                        !kernels[entry.launches[2].kernel].atLeast.empty();
  out.follower = follower;
  if (entry.launches.size() != 2 && !follower)
    return Status(KDA_ERROR_INVALID_ARGUMENT,
                  out.label + ": the entry must launch two kernels (the "
                              "chunk-parallel one, then the state pass), or "
                              "three where the third follows the state pass "
                              "over earlier keys (a window's \"at_least\"); "
                              "it launches " +
                      std::to_string(entry.launches.size()));
  const size_t n = signature.tensorParams.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string &pname = signature.params[signature.tensorParams[i]].name;
    if (pname == "initial_state")
      out.initialState = static_cast<int32_t>(i);
    if (pname == "final_state")
      out.finalState = static_cast<int32_t>(i);
  }
  if (out.initialState < 0 || out.finalState < 0)
    return Status(KDA_ERROR_INVALID_ARGUMENT,
                  out.label + ": the entry must take an initial_state and a "
                              "final_state, the states the pieces pass on");
  Binding binding;
  if (Status s = bindTensors(signature, tensors, count, binding))
    return s;
  out.bytes = binding.bytes;
  int tSymbol = -1;
  for (size_t i = 0; i < signature.symbols.size(); ++i)
    if (signature.symbols[i] == "T")
      tSymbol = static_cast<int>(i);
  if (tSymbol < 0)
    return Status(KDA_ERROR_INVALID_ARGUMENT,
                  out.label + ": the entry has no token dimension T to split");
  const int64_t T = binding.symbols[static_cast<size_t>(tSymbol)];
  // The follower's earlier keys: the entry symbols of its kernel's key rows
  // (each pair's first where its second is the entry's T). A tensor with
  // such a dimension is passed from row 0 through the piece's end.
  std::vector<int> keyRows;
  if (follower) {
    const EntryLaunch &fl = entry.launches[2];
    const Kernel &fk = kernels[fl.kernel];
    // The entry symbol a kernel symbol takes: that of the entry parameter
    // (not a workspace) bound to the first kernel tensor naming it.
    auto entrySymbol = [&](size_t kernelSymbol) -> int {
      for (size_t a = 0; a < fl.args.size(); ++a) {
        const Param &kp = fk.params[fk.tensorParams[a]];
        for (size_t d = 0; d < kp.shape.size(); ++d)
          if (kp.shape[d].isSymbol() &&
              kp.shape[d].symbolIndex == static_cast<int>(kernelSymbol)) {
            if (fl.args[a].isWorkspace)
              return -1;
            const Param &ep =
                signature.params[signature.tensorParams[fl.args[a].index]];
            return ep.shape[d].isSymbol() ? ep.shape[d].symbolIndex : -1;
          }
      }
      return -1;
    };
    for (auto [a, b] : fk.atLeast) {
      int rows = entrySymbol(a);
      if (entrySymbol(b) == tSymbol && rows >= 0 && rows != tSymbol)
        keyRows.push_back(rows);
    }
  }
  const size_t is = static_cast<size_t>(out.initialState),
               fs = static_cast<size_t>(out.finalState);
  if (tensors[is].dtype != tensors[fs].dtype ||
      binding.bytes[is] != binding.bytes[fs] || binding.bytes[is] == 0)
    return Status(KDA_ERROR_BAD_TENSOR,
                  out.label + ": " + tensorName(signature, is) + " and " +
                      tensorName(signature, fs) +
                      " must be non-empty and of one dtype and size, found " +
                      std::to_string(binding.bytes[is]) + " and " +
                      std::to_string(binding.bytes[fs]) + " bytes");

  // The per-token tensors: a dimension T, after dimensions of extent 1 only
  // (one sequence), each piece a view of its tokens.
  std::vector<int> tDim(n, -1);
  out.tokenBytes.assign(n, 0);
  out.prefix.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Param &param = signature.params[signature.tensorParams[i]];
    for (size_t d = 0; d < param.shape.size(); ++d) {
      const int sym = param.shape[d].symbolIndex;
      const bool rows = param.shape[d].isSymbol() &&
                        std::find(keyRows.begin(), keyRows.end(), sym) !=
                            keyRows.end();
      if (sym != tSymbol && !rows)
        continue;
      if (rows) {
        // Earlier keys: at least T rows (the follower reads them up to
        // each piece's end).
        if (tensors[i].shape[d] < T)
          return Status(KDA_ERROR_BAD_TENSOR,
                        out.label + ": " + tensorName(signature, i) +
                            " dimension " + std::to_string(d) + " (" +
                            param.shape[d].symbol + ", earlier keys) is " +
                            std::to_string(tensors[i].shape[d]) +
                            ", expected at least T = " + std::to_string(T));
        out.prefix[i] = 1;
      }
      if (tDim[i] >= 0)
        return Status(KDA_ERROR_INVALID_ARGUMENT,
                      out.label + ": " + tensorName(signature, i) +
                          " has two token dimensions");
      tDim[i] = static_cast<int>(d);
    }
    if (tDim[i] < 0)
      continue;
    if (i == is || i == fs)
      return Status(KDA_ERROR_INVALID_ARGUMENT,
                    out.label + ": " + tensorName(signature, i) +
                        " has a token dimension");
    const kda_tensor &t = tensors[i];
    for (int d = 0; d < tDim[i]; ++d)
      if (t.shape[d] != 1)
        return Status(KDA_ERROR_BAD_TENSOR,
                      out.label + " split one sequence: " +
                          tensorName(signature, i) + " dimension " +
                          std::to_string(d) + " is " +
                          std::to_string(t.shape[d]) +
                          ", expected 1 (before its token dimension)");
    uint64_t stride = 1;
    if (t.strides)
      stride = static_cast<uint64_t>(t.strides[tDim[i]]);
    else
      for (int d = tDim[i] + 1; d < t.rank; ++d)
        stride *= static_cast<uint64_t>(t.shape[d]);
    out.tokenBytes[i] = stride * dtypeSize(t.dtype);
  }

  if (numPieces < 1 || numPieces > 4096 || !starts)
    return Status(KDA_ERROR_INVALID_ARGUMENT,
                  out.label + ": " + std::to_string(numPieces) +
                      " pieces asked for (with starts " +
                      (starts ? "given" : "NULL") + "), expected 1 to 4096");
  for (int32_t i = 0; i < numPieces; ++i) {
    int64_t a = starts[i];
    int64_t z = i + 1 < numPieces ? starts[i + 1] : T;
    if ((i == 0 && a != 0) || a >= z || a < 0 || z > T)
      return Status(KDA_ERROR_INVALID_ARGUMENT,
                    out.label + ": piece " + std::to_string(i) +
                        " starts at token " + std::to_string(a) +
                        "; pieces start at 0, then strictly increase below "
                        "T = " +
                        std::to_string(T));
    out.starts.push_back(a);
    out.ends.push_back(z);
  }

  // One prepared entry a piece, for its view of the tensors. The states the
  // pieces pass on lie in the workspace; their sample pointers only need to
  // be non-NULL and aligned.
  const size_t P = static_cast<size_t>(numPieces);
  std::vector<int64_t> shapes;
  std::vector<size_t> shapeAt(n);
  for (size_t i = 0; i < n; ++i) {
    shapeAt[i] = shapes.size();
    shapes.insert(shapes.end(), tensors[i].shape,
                  tensors[i].shape + tensors[i].rank);
  }
  char *stand = reinterpret_cast<char *>(uintptr_t(1) << 20);
  uint64_t total = 0;
  for (size_t pi = 0; pi < P; ++pi) {
    std::vector<kda_tensor> view(tensors, tensors + n);
    std::vector<int64_t> pieceShapes = shapes;
    for (size_t i = 0; i < n; ++i) {
      view[i].shape = pieceShapes.data() + shapeAt[i];
      if (tDim[i] < 0)
        continue;
      if (out.prefix[i]) { // earlier keys: rows 0 .. the piece's end
        pieceShapes[shapeAt[i] + static_cast<size_t>(tDim[i])] = out.ends[pi];
        continue;
      }
      pieceShapes[shapeAt[i] + static_cast<size_t>(tDim[i])] =
          out.ends[pi] - out.starts[pi];
      if (view[i].data)
        view[i].data = static_cast<char *>(view[i].data) +
                       out.tokenBytes[i] * static_cast<uint64_t>(out.starts[pi]);
    }
    if (pi > 0)
      view[is].data = stand;
    if (pi + 1 < P)
      view[fs].data = stand;
    auto piece = std::make_unique<kda_prepared>();
    if (Status s = prepare(bundle, name, view.data(),
                           static_cast<int32_t>(n), *piece))
      return s.prefix(out.label + ", piece " + std::to_string(pi) + " of " +
                      std::to_string(P) + " (tokens " +
                      std::to_string(out.starts[pi]) + ".." +
                      std::to_string(out.ends[pi]) + "): ");
    uint64_t align = std::max<uint64_t>(piece->workspaceAlignment, 256);
    total = roundUp(total, align);
    out.regions.push_back(total);
    total += piece->workspaceTotal;
    out.pieces.push_back(std::move(piece));
  }
  out.alignment.assign(n, 1);
  for (const auto &piece : out.pieces)
    for (size_t i = 0; i < n; ++i)
      out.alignment[i] = std::max(out.alignment[i], piece->alignment[i]);
  out.stateStride = roundUp(binding.bytes[is], 256);
  out.statesOffset = roundUp(total, 256);
  out.workspaceTotal = out.statesOffset + (P - 1) * out.stateStride;
  out.data.assign(P * n, nullptr);

  // The side stream and the events.
  kda_prepared &first = *out.pieces.front();
  out.driver = first.driver;
  out.device = first.device;
  DeviceScope scope(*out.driver);
  if (Status s = scope.enter(out.device))
    return s;
  if (Status s = out.driver->sideStream(out.device, out.side))
    return s.prefix(out.label + ": ");
  // KDA_PIECES_ALONE=1 (an experiment, read here): each state pass holds a
  // multiprocessor a block, as an entry's `alone` launch, where its grid
  // leaves half the device. Beside the intra-chunk and window pieces the
  // state pieces run at half their speed alone (H100, bench/RESULTS.md,
  // fifty-second session): co-resident blocks taking their issue slots, or
  // the memory system; this tells the two apart.
  if (const char *alone = std::getenv("KDA_PIECES_ALONE");
      alone && std::strcmp(alone, "1") == 0)
    for (auto &piece : out.pieces)
      for (kda_prepared::Launch &launch : piece->launches)
        if (pieceLaunchKind(launch.index) == 1)
          placeAlone(*out.driver, launch.function, out.device, launch.config);
  for (size_t e = 0; e <= P; ++e) {
    void *event = nullptr;
    if (Status s = out.driver->createEvent(event))
      return s.prefix(out.label + ": ");
    out.events.push_back(event);
  }
  if (out.follower) {
    if (Status s = out.driver->followerStream(out.device, out.follow))
      return s.prefix(out.label + ": ");
    for (size_t e = 0; e <= P; ++e) {
      void *event = nullptr;
      if (Status s = out.driver->createEvent(event))
        return s.prefix(out.label + ": ");
      out.followEvents.push_back(event);
    }
  }
  // The graph form is the default where the driver has graphs: eager
  // launches reach the GPU too late for the pieces to overlap (T = 32768,
  // H = 32 on the H100: eight pieces 2.102 ms eagerly, 1.866 as one graph,
  // one piece 2.164; bench/RESULTS.md, forty-eighth session).
  // KDA_PIECES_GRAPH=0 launches them eagerly, to measure.
  const char *graphs = std::getenv("KDA_PIECES_GRAPH");
  out.useGraph = !(graphs && std::strcmp(graphs, "0") == 0) &&
                 out.driver->hasGraphs();
  return Status::ok();
}

// The pieces as one graph (the device current, the pointers patched): built
// at the first call, each node's arguments set anew where the pointers
// changed since the last call, then one graph launch on `stream`. The
// dependencies are the eager schedule's: piece i's chunk-parallel node after
// piece i - 1's, its state node after it and after piece i - 1's state node.
Status launchPiecesGraph(kda_pieces *p, void *const *data, void *workspace,
                         void *stream) {
  Driver &driver = *p->driver;
  const size_t n = p->bytes.size();
  bool same = p->exec && p->graphData.size() == n + 1 &&
              p->graphData[n] == workspace;
  for (size_t i = 0; same && i < n; ++i)
    same = p->graphData[i] == data[i];
  if (!p->exec) {
    if (Status s = driver.graphCreate(p->graph))
      return s;
    void *lastChunk = nullptr, *lastState = nullptr;
    for (size_t pi = 0; pi < p->pieces.size(); ++pi) {
      kda_prepared &piece = *p->pieces[pi];
      void *chunk = nullptr, *state = nullptr;
      for (size_t l = 0; l < piece.launches.size(); ++l) {
        kda_prepared::Launch &launch = piece.launches[l];
        // 0: the chunk-parallel launch, after the last piece's; 1: the
        // state pass, after its piece's chunk launch and the last piece's
        // state pass (the chain, at the greatest priority); 2: the
        // follower (a window over earlier keys), after its piece's state
        // pass only, so that it runs beside the next pieces' state passes.
        const size_t kind = pieceLaunchKind(launch.index);
        void *deps[2];
        size_t numDeps = 0;
        if (kind == 0 && lastChunk)
          deps[numDeps++] = lastChunk;
        if (kind == 1 && chunk)
          deps[numDeps++] = chunk;
        if (kind == 1 && lastState)
          deps[numDeps++] = lastState;
        if (kind == 2 && (state || chunk))
          deps[numDeps++] = state ? state : chunk;
        void *node = nullptr;
        if (Status s = driver.graphAddKernel(p->graph, *launch.kernel,
                                             launch.function, launch.config,
                                             deps, numDeps, kind == 1, node))
          return s;
        p->nodes.push_back(node);
        p->nodeLaunch.emplace_back(pi, l);
        if (kind == 0)
          chunk = node;
        else if (kind == 1)
          state = lastState = node;
      }
      if (chunk)
        lastChunk = chunk;
    }
    if (Status s = driver.graphInstantiate(p->graph, p->exec))
      return s;
  } else if (!same) {
    for (size_t i = 0; i < p->nodes.size(); ++i) {
      kda_prepared::Launch &launch =
          p->pieces[p->nodeLaunch[i].first]->launches[p->nodeLaunch[i].second];
      if (Status s = driver.graphSetKernel(p->exec, p->nodes[i], *launch.kernel,
                                           launch.function, launch.config))
        return s;
    }
  }
  p->graphData.assign(data, data + n);
  p->graphData.push_back(workspace);
  return driver.graphLaunch(p->exec, stream);
}

Status launchPieces(kda_pieces *p, void *const *data, int32_t count,
                    void *workspace, uint64_t workspaceBytes, void *stream) {
  if (!p)
    return Status(KDA_ERROR_INVALID_ARGUMENT, "pipelined pieces are NULL");
  const size_t n = p->bytes.size(), P = p->pieces.size();
  if (Status s = checkData(*p->signature, p->label, true, p->bytes,
                           p->alignment, data, count))
    return s;
  if (workspaceBytes < p->workspaceTotal || !workspace ||
      reinterpret_cast<uintptr_t>(workspace) % kAllocatorAlignment != 0)
    return Status(KDA_ERROR_INVALID_ARGUMENT,
                  p->label + " need " + std::to_string(p->workspaceTotal) +
                      " bytes of workspace aligned to 256 bytes "
                      "(kda_prepare_pieces says how many), got " +
                      std::to_string(workspaceBytes) + " at " +
                      pointerText(workspace));
  char *ws = static_cast<char *>(workspace);
  const size_t is = static_cast<size_t>(p->initialState),
               fs = static_cast<size_t>(p->finalState);
  bool any = false;
  for (size_t pi = 0; pi < P; ++pi) {
    void **d = p->data.data() + pi * n;
    for (size_t i = 0; i < n; ++i)
      d[i] = p->tokenBytes[i] && data[i] && !p->prefix[i]
                 ? static_cast<char *>(data[i]) +
                       p->tokenBytes[i] * static_cast<uint64_t>(p->starts[pi])
                 : data[i];
    if (pi > 0)
      d[is] = ws + p->statesOffset + (pi - 1) * p->stateStride;
    if (pi + 1 < P)
      d[fs] = ws + p->statesOffset + pi * p->stateStride;
    kda_prepared &piece = *p->pieces[pi];
    if (Status s = checkPrepared(&piece, d, static_cast<int32_t>(n),
                                 ws + p->regions[pi],
                                 p->workspaceTotal - p->regions[pi]))
      return s.prefix(p->label + ", piece " + std::to_string(pi) + ": ");
    any = any || !piece.launches.empty();
  }
  if (!any)
    return Status::ok(); // an empty batch (no heads, say)
  for (size_t pi = 0; pi < P; ++pi)
    patchPrepared(p->pieces[pi].get(), p->data.data() + pi * n,
                  ws + p->regions[pi]);
  DeviceScope scope(*p->driver);
  if (Status s = scope.enter(p->device))
    return s;
  Driver &driver = *p->driver;
  if (p->useGraph) {
    // A caller's capture takes the eager launches (one graph inside another
    // is not launched into a capturing stream).
    bool capturing = false;
    if (Status s = driver.streamCapturing(stream, capturing))
      return s.prefix(p->label + ": ");
    if (!capturing) {
      if (Status s = launchPiecesGraph(p, data, workspace, stream)) {
        if (!p->exec) { // a graph half built is dropped; the next call retries
          driver.graphDestroy(p->graph, nullptr);
          p->graph = nullptr;
          p->nodes.clear();
          p->nodeLaunch.clear();
        }
        p->graphData.clear();
        return s.prefix(p->label + ", as one graph: ");
      }
      return Status::ok();
    }
  }
  // Piece i's chunk-parallel launch on the caller's stream, then its state
  // pass on the side stream once that is done (and after piece i - 1's state
  // pass, by the side stream's order): the state pass of piece i runs beside
  // the chunk-parallel launch of piece i + 1. The chunk-parallel kernel does
  // not read the initial state, which the previous piece's state pass may
  // still be writing.
  // The launches of `piece` of one kind (pieceLaunchKind), on `on`.
  auto launchKind = [&](kda_prepared &piece, size_t kind, void *on) {
    for (size_t l = 0; l < piece.launches.size(); ++l)
      if (pieceLaunchKind(piece.launches[l].index) == kind)
        if (Status s = launchOne(&piece, l, on))
          return s;
    return Status::ok();
  };
  // `to` waits for what reached `from` so far, through `event`.
  auto order = [&](void *event, void *from, void *to) {
    if (Status s = driver.recordEvent(event, from))
      return s;
    return driver.waitEvent(to, event);
  };
  Status failed = Status::ok();
  for (size_t pi = 0; pi < P; ++pi) {
    kda_prepared &piece = *p->pieces[pi];
    Status s = launchKind(piece, 0, stream);
    if (s.isOk())
      s = order(p->events[pi], stream, p->side);
    if (s.isOk())
      s = launchKind(piece, 1, p->side);
    // The follower (a layer's window) after this piece's state pass, on
    // the follower stream: beside the next pieces' state passes.
    if (s.isOk() && p->follower) {
      s = order(p->followEvents[pi], p->side, p->follow);
      if (s.isOk())
        s = launchKind(piece, 2, p->follow);
    }
    if (!s.isOk()) {
      failed = s.prefix(p->label + ", piece " + std::to_string(pi) + " of " +
                        std::to_string(P) + ": ");
      break;
    }
  }
  // The joins, also after a failure: the caller's stream then orders after
  // whatever reached the side (and follower) stream.
  Status join = order(p->events[P], p->side, stream);
  if (join.isOk() && p->follower)
    join = order(p->followEvents[P], p->follow, stream);
  if (!failed.isOk())
    return failed;
  return join.isOk() ? join : join.prefix(p->label + ", the join: ");
}

} // namespace

extern "C" {

kda_status kda_bundle_load(const char *directory, kda_bundle **out) {
  if (out)
    *out = nullptr;
  if (!directory || !out)
    return finish(Status(KDA_ERROR_INVALID_ARGUMENT,
                         !directory ? "directory is NULL" : "out is NULL"));
  auto *bundle = new kda_bundle;
  bundle->directory = directory;
  if (Status s = loadBundle(directory, bundle->manifest)) {
    delete bundle;
    return finish(s);
  }
  *out = bundle;
  return finish(Status::ok());
}

void kda_bundle_free(kda_bundle *bundle) {
  if (!bundle)
    return;
  for (const kda_bundle::Loaded &l : bundle->loaded) {
    DeviceScope scope(*l.driver);
    if (scope.enter(l.device).isOk())
      l.driver->unload(l.module);
  }
  delete bundle;
}

int32_t kda_bundle_num_kernels(const kda_bundle *bundle) {
  if (!bundle) {
    finish(Status(KDA_ERROR_INVALID_ARGUMENT, "bundle is NULL"));
    return -1;
  }
  finish(Status::ok());
  return static_cast<int32_t>(bundle->manifest.kernels.size());
}

const char *kda_bundle_kernel_name(const kda_bundle *bundle, int32_t i) {
  if (!bundle) {
    finish(Status(KDA_ERROR_INVALID_ARGUMENT, "bundle is NULL"));
    return nullptr;
  }
  const auto &kernels = bundle->manifest.kernels;
  if (i < 0 || static_cast<size_t>(i) >= kernels.size()) {
    finish(Status(KDA_ERROR_INVALID_ARGUMENT,
                  "kernel index " + std::to_string(i) +
                      " is out of range (the bundle has " +
                      std::to_string(kernels.size()) + " kernels)"));
    return nullptr;
  }
  finish(Status::ok());
  return kernels[i].name.c_str();
}

const char *kda_bundle_target_chip(const kda_bundle *bundle) {
  if (!bundle) {
    finish(Status(KDA_ERROR_INVALID_ARGUMENT, "bundle is NULL"));
    return nullptr;
  }
  finish(Status::ok());
  return bundle->manifest.target.chip.c_str();
}

kda_status kda_check_tensors(const kda_bundle *bundle, const char *kernel,
                             const kda_tensor *tensors, int32_t num_tensors) {
  Callable callable;
  if (Status s = findCallable(bundle, kernel, callable))
    return finish(s);
  thread_local Binding binding; // reused: checking allocates nothing
  return finish(
      bindTensors(callable.signature(), tensors, num_tensors, binding));
}

kda_status kda_launch(kda_bundle *bundle, const char *kernel,
                      const kda_tensor *tensors, int32_t num_tensors,
                      void *stream) {
  return finish(launch(bundle, kernel, tensors, num_tensors, stream));
}

int32_t kda_bundle_num_entries(const kda_bundle *bundle) {
  if (!bundle) {
    finish(Status(KDA_ERROR_INVALID_ARGUMENT, "bundle is NULL"));
    return -1;
  }
  finish(Status::ok());
  return static_cast<int32_t>(bundle->manifest.entries.size());
}

const char *kda_bundle_entry_name(const kda_bundle *bundle, int32_t i) {
  if (!bundle) {
    finish(Status(KDA_ERROR_INVALID_ARGUMENT, "bundle is NULL"));
    return nullptr;
  }
  const auto &entries = bundle->manifest.entries;
  if (i < 0 || static_cast<size_t>(i) >= entries.size()) {
    finish(Status(KDA_ERROR_INVALID_ARGUMENT,
                  "entry index " + std::to_string(i) +
                      " is out of range (the bundle has " +
                      std::to_string(entries.size()) + " entries)"));
    return nullptr;
  }
  finish(Status::ok());
  return entries[i].name.c_str();
}

kda_status kda_entry_workspace_bytes(const kda_bundle *bundle,
                                     const char *entry,
                                     const kda_tensor *tensors,
                                     int32_t num_tensors, uint64_t *bytes) {
  if (bytes)
    *bytes = 0;
  Callable callable;
  if (Status s = findCallable(bundle, entry, callable))
    return finish(s);
  if (!bytes)
    return finish(Status(KDA_ERROR_INVALID_ARGUMENT, "bytes is NULL"));
  thread_local Binding binding;
  thread_local WorkspaceLayout layout;
  if (Status s =
          bindTensors(callable.signature(), tensors, num_tensors, binding))
    return finish(s);
  if (callable.entry) { // a kernel needs no workspace
    if (Status s = layoutWorkspaces(*callable.entry, binding, layout))
      return finish(s);
    *bytes = layout.total;
  }
  return finish(Status::ok());
}

kda_status kda_launch_with_workspace(kda_bundle *bundle, const char *name,
                                     const kda_tensor *tensors,
                                     int32_t num_tensors, void *workspace,
                                     uint64_t workspace_bytes, void *stream) {
  return finish(launch(bundle, name, tensors, num_tensors, stream,
                       /*callerWorkspace=*/true, workspace, workspace_bytes));
}

kda_status kda_launch_trusted(kda_bundle *bundle, const char *name,
                              const kda_tensor *tensors, int32_t num_tensors,
                              void *workspace, uint64_t workspace_bytes,
                              void *stream) {
  return finish(launch(bundle, name, tensors, num_tensors, stream,
                       /*callerWorkspace=*/true, workspace, workspace_bytes,
                       /*checkPointers=*/false));
}

kda_status kda_prepare(kda_bundle *bundle, const char *name,
                       const kda_tensor *tensors, int32_t num_tensors,
                       kda_prepared **out, uint64_t *workspace_bytes) {
  if (out)
    *out = nullptr;
  if (workspace_bytes)
    *workspace_bytes = 0;
  if (!out)
    return finish(Status(KDA_ERROR_INVALID_ARGUMENT, "out is NULL"));
  auto *p = new kda_prepared;
  if (Status s = prepare(bundle, name, tensors, num_tensors, *p)) {
    delete p;
    return finish(s);
  }
  if (workspace_bytes)
    *workspace_bytes = p->workspaceTotal;
  *out = p;
  return finish(Status::ok());
}

kda_status kda_launch_prepared(kda_prepared *prepared, void *const *data,
                               int32_t num_data, void *workspace,
                               uint64_t workspace_bytes, void *stream) {
  return finish(launchPrepared(prepared, data, num_data, workspace,
                               workspace_bytes, stream));
}

void kda_prepared_free(kda_prepared *prepared) { delete prepared; }

kda_status kda_prepare_pieces(kda_bundle *bundle, const char *entry,
                              const kda_tensor *tensors, int32_t num_tensors,
                              const int64_t *starts, int32_t num_pieces,
                              kda_pieces **out, uint64_t *workspace_bytes) {
  if (out)
    *out = nullptr;
  if (workspace_bytes)
    *workspace_bytes = 0;
  if (!out)
    return finish(Status(KDA_ERROR_INVALID_ARGUMENT, "out is NULL"));
  auto p = std::make_unique<kda_pieces>();
  if (Status s = preparePieces(bundle, entry, tensors, num_tensors, starts,
                               num_pieces, *p))
    return finish(s);
  if (workspace_bytes)
    *workspace_bytes = p->workspaceTotal;
  *out = p.release();
  return finish(Status::ok());
}

kda_status kda_launch_pieces(kda_pieces *pieces, void *const *data,
                             int32_t num_data, void *workspace,
                             uint64_t workspace_bytes, void *stream) {
  return finish(
      launchPieces(pieces, data, num_data, workspace, workspace_bytes, stream));
}

int32_t kda_pieces_count(const kda_pieces *pieces) {
  return pieces ? static_cast<int32_t>(pieces->pieces.size()) : -1;
}

void kda_pieces_free(kda_pieces *pieces) { delete pieces; }

const char *kda_last_error(void) { return lastError.c_str(); }

const char *kda_status_name(kda_status status) {
  switch (rawValue(status)) {
  case KDA_OK:
    return "KDA_OK";
  case KDA_ERROR_INVALID_ARGUMENT:
    return "KDA_ERROR_INVALID_ARGUMENT";
  case KDA_ERROR_NO_DRIVER:
    return "KDA_ERROR_NO_DRIVER";
  case KDA_ERROR_NO_DEVICE:
    return "KDA_ERROR_NO_DEVICE";
  case KDA_ERROR_WRONG_ARCHITECTURE:
    return "KDA_ERROR_WRONG_ARCHITECTURE";
  case KDA_ERROR_CORRUPT_BUNDLE:
    return "KDA_ERROR_CORRUPT_BUNDLE";
  case KDA_ERROR_NOT_FOUND:
    return "KDA_ERROR_NOT_FOUND";
  case KDA_ERROR_BAD_TENSOR:
    return "KDA_ERROR_BAD_TENSOR";
  case KDA_ERROR_LAUNCH_FAILED:
    return "KDA_ERROR_LAUNCH_FAILED";
  }
  return "KDA_STATUS_UNKNOWN";
}

} // extern "C"
