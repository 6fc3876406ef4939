// The driver-independent half of a launch: matching tensors to a kernel's
// parameters, binding shape symbols, evaluating the grid and packing the
// kernel arguments. kda_check_tensors is exactly bindTensors; kda_launch is
// bindTensors, then the Driver (Driver.h).
#ifndef KDA_RUNTIME_RUNTIME_H
#define KDA_RUNTIME_RUNTIME_H

#include "runtime/Manifest.h"
#include "runtime/Status.h"
#include "runtime/kda_runtime.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kda::rt {

struct Binding {
  std::vector<int64_t> symbols; // the value of each Kernel::symbols entry
  std::vector<uint64_t> bytes;  // bytes each tensor spans from its data pointer
  int device = -1; // the device all tensors are on (-1: kernel has no tensors)
  std::vector<std::pair<size_t, size_t>>
      boundAt; // (tensor, dimension) that bound each symbol
  unsigned grid[3] = {0, 0, 0};

  bool emptyGrid() const {
    return grid[0] == 0 || grid[1] == 0 || grid[2] == 0;
  }
};

// Checks `tensors` (one per tensor parameter of `kernel`, in order) and binds
// every shape symbol. The first tensor dimension with a symbol binds it; every
// later one must agree. Fails with KDA_ERROR_BAD_TENSOR (or
// KDA_ERROR_INVALID_ARGUMENT for a malformed call) naming the tensor, the
// dimension, and the expected and found values.
Status bindTensors(const Kernel &kernel, const kda_tensor *tensors,
                   int32_t count, Binding &out);

// The kernel arguments in params order: `storage` holds the values, `args`
// points at each (what cuLaunchKernel / hipModuleLaunchKernel take).
void packArguments(const Kernel &kernel, const kda_tensor *tensors,
                   const Binding &binding, std::vector<uint64_t> &storage,
                   std::vector<void *> &args);

// Where an entry's workspaces lie in the one allocation of a call, for the
// symbols the entry's tensors bound (bindTensors of Entry::signature).
struct WorkspaceLayout {
  std::vector<int64_t> shapes;  // every workspace's sizes, concatenated
  std::vector<uint64_t> offsets; // from the allocation's start, aligned
  std::vector<uint64_t> bytes;   // each workspace's size
  uint64_t total = 0;            // bytes the allocation needs
  uint64_t alignment = 1;        // what the allocation's start must be aligned to
};

// Computes the layout: each workspace's offset is the previous end rounded up
// to its (effective) alignment. All arithmetic is overflow-checked: a
// workspace or a total beyond 2^62 bytes is KDA_ERROR_BAD_TENSOR naming the
// workspace and the symbols' values.
Status layoutWorkspaces(const Entry &entry, const Binding &binding,
                        WorkspaceLayout &out);

// "tensor 1 ('k')": the `position`-th tensor argument, for messages.
std::string tensorName(const Kernel &kernel, size_t position);

// "[B, T, 32, 128]".
std::string shapeString(const std::vector<Extent> &shape);

} // namespace kda::rt

#endif // KDA_RUNTIME_RUNTIME_H
