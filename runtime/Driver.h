// The GPU API behind kda_launch: CUDA's driver API (CudaDriver.cpp) or HIP's
// module API (HipDriver.cpp). Runtime.cpp does every check that needs no
// driver and drives a launch through this interface, so both vendors share
// argument packing, symbol binding, module caching and error wording.
#ifndef KDA_RUNTIME_DRIVER_H
#define KDA_RUNTIME_DRIVER_H

#include "runtime/Manifest.h"
#include "runtime/Status.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace kda::rt {

struct LaunchConfig {
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedBytes;
  void *stream;
  void **args; // one pointer to each argument's value, in params order
};

/// "kernel 'k' (grid [..], block [..], N bytes of dynamic shared memory)":
/// how every driver names a failed launch.
inline std::string describeLaunch(const std::string &kernel,
                                  const LaunchConfig &c) {
  auto dims = [](const unsigned (&d)[3]) {
    return "[" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " +
           std::to_string(d[2]) + "]";
  };
  return "kernel '" + kernel + "' (grid " + dims(c.grid) + ", block " +
         dims(c.block) + ", " + std::to_string(c.sharedBytes) +
         " bytes of dynamic shared memory)";
}

// Implementations are process-wide, created on first use and never destroyed
// (modules and primary contexts outlive static destructors otherwise).
// All methods are thread-safe. Every method except checkDevice expects the
// device to be current (see DeviceScope).
class Driver {
public:
  virtual ~Driver() = default;

  // "CUDA" or "HIP", for messages.
  virtual const char *apiName() const = 0;

  // Checks that `device` exists and can run code built for `target`.
  // KDA_ERROR_NO_DEVICE or KDA_ERROR_WRONG_ARCHITECTURE otherwise.
  virtual Status checkDevice(int device, const Target &target) = 0;

  // Makes `device` current on the calling thread; `saved` receives what was
  // current before, for leave().
  virtual Status enter(int device, uintptr_t &saved) = 0;
  virtual void leave(uintptr_t saved) = 0;

  // Checks that [ptr, ptr + bytes) is device memory of `device`. Runs on
  // every launch, so the message naming the tensor is built only on failure,
  // with tensorName(kernel, position) (Runtime.h).
  virtual Status checkPointer(const void *ptr, uint64_t bytes, int device,
                              const Kernel &kernel, size_t position) = 0;

  // Loads the kernel's binary and finds its entry on the current device.
  virtual Status load(const Target &target, const Kernel &kernel, int device,
                      void *&module, void *&function) = 0;
  virtual Status launch(const Kernel &kernel, void *function,
                        const LaunchConfig &config) = 0;
  // Stream-ordered device memory for an entry's workspaces (cuMemAllocAsync /
  // hipMallocAsync, cuMemFreeAsync / hipFreeAsync): usable by work enqueued on
  // `stream` after the call, returned to the pool after the work enqueued
  // before the free. KDA_ERROR_NO_DRIVER when the driver library lacks them.
  virtual Status allocAsync(uint64_t bytes, void *stream, void *&out) = 0;
  virtual Status freeAsync(void *ptr, void *stream) = 0;
  // Pipelined pieces (kda_launch_pieces): the current device's side stream,
  // non-blocking and of the greatest priority the device offers, created on
  // first use and kept for the process (the state pass's blocks are
  // dispatched before the caller's stream's, docs/pipelining.md); and events
  // that order the two streams (no timing). Capturable: recording an event of
  // a capturing stream and waiting on it from the side stream brings the side
  // stream into the capture. KDA_ERROR_NO_DRIVER when the library lacks them.
  Status sideStream(int device, void *&out) {
    return keptStream(device, true, out);
  }
  // A layer's pieces scheduled eagerly (kda_launch_pieces without a graph):
  // the stream their followers (a window after each piece's state pass) run
  // on, non-blocking at the device's default priority, so that they run
  // beside the state passes instead of between them; kept like sideStream.
  Status followerStream(int device, void *&out) {
    return keptStream(device, false, out);
  }
  virtual Status createEvent(void *&out) = 0;
  virtual void destroyEvent(void *event) = 0; // best effort
  virtual Status recordEvent(void *event, void *stream) = 0;
  virtual Status waitEvent(void *stream, void *event) = 0;
  // The pieces as one graph (unless KDA_PIECES_GRAPH=0): kernel nodes with their
  // dependencies (`high`: the device's greatest priority, honoured at
  // launch), instantiated once; per call each node's arguments are set anew
  // and the graph is launched on the caller's stream. hasGraphs() false: the
  // driver has none of this (HIP for now), the pieces launch eagerly.
  virtual bool hasGraphs() const { return false; }
  virtual Status streamCapturing(void *, bool &capturing) {
    capturing = false;
    return Status::ok();
  }
  virtual Status graphCreate(void *&graph) {
    graph = nullptr;
    return noGraphs();
  }
  virtual Status graphAddKernel(void *, const Kernel &, void *,
                                const LaunchConfig &, void *const *, size_t,
                                bool, void *&node) {
    node = nullptr;
    return noGraphs();
  }
  virtual Status graphInstantiate(void *, void *&exec) {
    exec = nullptr;
    return noGraphs();
  }
  virtual Status graphSetKernel(void *, void *, const Kernel &, void *,
                                const LaunchConfig &) {
    return noGraphs();
  }
  virtual Status graphLaunch(void *, void *) { return noGraphs(); }
  virtual void graphDestroy(void *, void *) {}
  // Stream memory operations (an entry launch's "progress": BUNDLE.md, "Two
  // streams"): the stream writes `value` to the 32-bit word at `address`, or
  // waits until that word is at least `value` (as a signed difference, so
  // that a counter may wrap). The GPU's front end does both: no
  // multiprocessor waits. hasStreamValues() false: the driver lacks them
  // (HIP for now), and such launches wait for the whole producer.
  virtual bool hasStreamValues() const { return false; }
  virtual Status writeValue32(void *, void *, uint32_t) {
    return Status(KDA_ERROR_NO_DRIVER, "stream memory operations: not "
                                       "supported by this driver");
  }
  virtual Status waitValue32(void *, void *, uint32_t) {
    return Status(KDA_ERROR_NO_DRIVER, "stream memory operations: not "
                                       "supported by this driver");
  }
  // Best effort: called from kda_bundle_free, which cannot report errors.
  virtual void unload(void *module) = 0;
  /// For a launch that holds a multiprocessor a block (EntryLaunch::alone):
  /// the dynamic shared memory that leaves no room for another block (the
  /// device's per-block opt-in maximum, the function's limit raised to it)
  /// and the device's multiprocessors. 0 bytes: the driver cannot say, the
  /// launch keeps its own amount.
  virtual Status aloneSharedBytes(void * /*function*/, int /*device*/,
                                  unsigned &bytes, int &multiprocessors) {
    bytes = 0;
    multiprocessors = 0;
    return Status::ok();
  }

protected:
  // A new non-blocking stream of the current device for sideStream (the
  // greatest priority) or followerStream (the default one); never destroyed,
  // like the modules.
  virtual Status createSideStream(void *&out, bool greatest) = 0;
private:
  Status keptStream(int device, bool greatest, void *&out) {
    std::lock_guard<std::mutex> lock(sideMutex_);
    auto key = std::make_pair(device, greatest);
    auto it = sideStreams_.find(key);
    if (it == sideStreams_.end()) {
      void *stream = nullptr;
      if (Status s = createSideStream(stream, greatest)) {
        out = nullptr;
        return s;
      }
      it = sideStreams_.emplace(key, stream).first;
    }
    out = it->second;
    return Status::ok();
  }
  std::mutex sideMutex_;
  std::map<std::pair<int, bool>, void *> sideStreams_;

  Status noGraphs() const {
    return Status(KDA_ERROR_NO_DRIVER,
                  std::string(apiName()) + ": no graphs of kernel launches");
  }
};

// Makes a device current for a scope and restores the caller's context after,
// so that a launch never changes what the calling framework has current.
class DeviceScope {
public:
  DeviceScope(Driver &driver) : driver_(driver) {}
  ~DeviceScope() {
    if (entered_)
      driver_.leave(saved_);
  }
  DeviceScope(const DeviceScope &) = delete;
  DeviceScope &operator=(const DeviceScope &) = delete;

  Status enter(int device) {
    Status s = driver_.enter(device, saved_);
    entered_ = s.isOk();
    return s;
  }

private:
  Driver &driver_;
  uintptr_t saved_ = 0;
  bool entered_ = false;
};

// The driver for `vendor`, loaded on first use: libcuda.so.1 (or the path in
// KDA_CUDA_LIBRARY) / libamdhip64.so (or KDA_HIP_LIBRARY). The environment is
// read on every call and each library path is loaded once, so a process may
// switch paths (the tests do).
Status getDriver(Vendor vendor, Driver *&out);

} // namespace kda::rt

#endif // KDA_RUNTIME_DRIVER_H
