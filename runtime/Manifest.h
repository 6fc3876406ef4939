// The bundle manifest (runtime/BUNDLE.md): what the compiler promises about
// each kernel binary: its parameters (the kernel ABI), launch geometry and
// target chip. Parsing validates everything that can be checked without a
// driver, so that a bad bundle fails at load time with the field named,
// not at launch time with a driver error code.
#ifndef KDA_RUNTIME_MANIFEST_H
#define KDA_RUNTIME_MANIFEST_H

#include "runtime/Status.h"
#include "runtime/kda_runtime.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kda::rt {

enum class Vendor { Nvidia, Amd };

enum class ParamKind { Tensor, Dim, F32, I64 };

// One entry of a shape or of the grid: a fixed size, or a symbol whose value
// the tensors bind at launch.
struct Extent {
  std::string symbol; // empty for a fixed size
  int64_t value = 0;
  int symbolIndex = -1; // into Kernel::symbols
  // Grid entries only: the extent is ceil(symbol / ceilDiv) (a grid over the
  // chunks of T tokens, say). 1 for every shape entry.
  int64_t ceilDiv = 1;
  // Grid entries only: plus the value of this symbol (empty: nothing), e.g.
  // ceil(T / 16) + N_plus_1 programs: a flat grid over the chunks of packed
  // sequences, which start every 16 tokens from each sequence's start.
  std::string plus;
  int plusIndex = -1; // into Kernel::symbols
  // Grid entries only: ceil(symbol / ceilDiv) times this (before `plus`),
  // e.g. B x 8 programs: 8 segments of each of B sequences.
  int64_t times = 1;
  // Grid entries only: no programs at all where these two symbols are equal
  // (empty: none), e.g. the gradient's sums of dq over the value heads of a
  // q head, which have nothing to do where H = HV (the chunk grid wrote dq
  // in place): the launch is skipped.
  std::string zeroIfEqual[2];
  int zeroIfEqualIndex[2] = {-1, -1}; // into Kernel::symbols

  bool isSymbol() const { return !symbol.empty(); }
  std::string str() const {
    if (!isSymbol())
      return std::to_string(value);
    std::string base = ceilDiv == 1 ? symbol
                                    : "ceil(" + symbol + " / " +
                                          std::to_string(ceilDiv) + ")";
    if (times != 1)
      base += " x " + std::to_string(times);
    if (!plus.empty())
      base += " + " + plus;
    if (!zeroIfEqual[0].empty())
      base += " (0 where " + zeroIfEqual[0] + " = " + zeroIfEqual[1] + ")";
    return base;
  }
};

struct Param {
  std::string name;
  ParamKind kind = ParamKind::Tensor;
  // kind == Tensor
  kda_dtype dtype = KDA_F32;
  std::vector<Extent> shape;
  int64_t alignment = 0; // bytes, a power of two
  // kind == Dim: the symbol whose value is passed (named like the param)
  int symbolIndex = -1;
  // kind == F32 / I64: the constant baked into the manifest
  double f32Value = 0;
  int64_t i64Value = 0;
};

struct Kernel {
  std::string name;                 // what kda_launch is called with
  const char *what = "kernel";      // "kernel", or "entry" for Entry::signature
  std::string binary;               // file name inside the bundle directory
  std::string entry;                // symbol inside the binary
  std::vector<Param> params;        // one kernel argument each, in this order
  std::vector<size_t> tensorParams; // indices of the tensor params, in order
  std::vector<std::string>
      symbols; // every shape symbol, in order of first appearance
  Extent grid[3];
  // "at_least": pairs of symbol indices (a, b) whose values must satisfy
  // symbols[a] >= symbols[b] at launch (a window's key rows S and its query
  // rows T with earlier keys).
  std::vector<std::pair<size_t, size_t>> atLeast;
  uint32_t block[3] = {1, 1, 1};
  uint32_t dynamicSharedMemory = 0;                  // bytes
  std::vector<std::pair<std::string, int64_t>> tile; // informational
  std::vector<std::pair<std::string, int64_t>> resources; // informational
  // How the compiler wrote it (informational): "lanes" or "tiles", with the
  // reason for tiles (kda-gpu-select-strategy); a chunk run as sub-chunk
  // steps gives the step and the op's chunk (0 otherwise).
  std::string strategyKind, strategyReason;
  int64_t strategyStep = 0, strategyTileChunk = 0;
  int64_t strategyStages = 0; // chunks in flight (0: none staged)
  std::string image; // the binary's bytes (filled by loadBundle)
};

// A buffer an entry allocates for each call and passes between its launches.
struct Workspace {
  std::string name;
  kda_dtype dtype = KDA_F32;
  std::vector<Extent> shape; // symbolIndex into the entry's signature.symbols
  int64_t alignment = 256;   // bytes, a power of two, as declared
  // At least `alignment` and every alignment of a kernel parameter it feeds:
  // what the runtime rounds the workspace's offset up to.
  int64_t effectiveAlignment = 256;
};

// One argument of an entry launch: an entry parameter (the index of the
// caller's tensor) or a workspace.
struct LaunchArg {
  bool isWorkspace = false;
  size_t index = 0;
};

struct EntryLaunch {
  size_t kernel = 0;            // into Manifest::kernels
  std::vector<LaunchArg> args;  // one per tensor param of that kernel
  // 1: on the side stream (the device's greatest priority) beside the
  // caller's; `after` then names the earlier launches it must follow (the
  // manifest's, checked to be earlier), each waited for through an event
  // where it runs on the other stream (BUNDLE.md, "Two streams").
  int stream = 0;
  std::vector<size_t> after;
  // A multiprocessor a block: launched with the device's largest dynamic
  // shared memory, so that no other block fits beside it, where its grid
  // holds at most half the multiprocessors (a latency-bound state pass
  // beside compute-bound work: BUNDLE.md, "Two streams").
  bool alone = false;
  // "progress": {"counter": NAME, "after": I}: launch I (on the other
  // stream, in `after`) publishes its progress for this one, and each of its
  // blocks adds one to the first 32-bit word of NAME (an i32 entry parameter
  // or workspace) as it starts. Where the runtime can, it launches this one
  // as soon as every block of I has started instead of after I ends
  // (BUNDLE.md, "Two streams"). progressAfter < 0: none.
  int progressAfter = -1;
  LaunchArg progressCounter;
  // Set at parse: a later launch on the other stream waits for this one.
  bool recordEvent = false;
};

// Version 2: one callable made of kernels run in order on one stream, passing
// intermediates through workspaces (BUNDLE.md, "Entries").
struct Entry {
  std::string name;
  // The caller's tensors as a kernel signature (tensor params only, grid
  // [1, 1, 1], what = "entry"), so that bindTensors checks them with the
  // same messages as a kernel's.
  Kernel signature;
  std::vector<Workspace> workspaces;
  std::vector<EntryLaunch> launches;
  bool sideStream = false; // some launch has stream 1
};

struct Target {
  Vendor vendor = Vendor::Nvidia;
  std::string chip; // "sm_90a", "gfx942", ...
};

struct Manifest {
  int64_t version = 0;
  Target target;
  std::string sourceHash;
  std::vector<Kernel> kernels;
  std::vector<Entry> entries; // version 2 only

  const Kernel *findKernel(std::string_view name) const;
  const Entry *findEntry(std::string_view name) const;
};

// Parses and validates manifest text; touches no files. `origin` starts every
// message ("DIR/manifest.json"). Errors are KDA_ERROR_CORRUPT_BUNDLE and read
// "ORIGIN:LINE:COLUMN: FIELD.PATH: what is wrong".
Status parseManifest(std::string_view text, const std::string &origin,
                     Manifest &out);

// Reads DIR/manifest.json and every binary it names, checking that each
// binary is an ELF file for the manifest's vendor and chip.
Status loadBundle(const std::string &directory, Manifest &out);

// Checks that a binary's ELF header matches the target (machine, and the chip
// where the header records one). `what` names the binary in messages.
Status checkBinaryHeader(const std::string &image, const Target &target,
                         const std::string &what);

const char *dtypeName(kda_dtype dtype);
size_t dtypeSize(kda_dtype dtype);
const char *vendorName(Vendor vendor);

// CUDA's rules for running a cubin: one built for sm_XY runs on compute
// capability X.Z with Z >= Y; one built for an arch-specific target (sm_90a)
// runs only on exactly X.Y. Returns true when `chip` runs on `major.minor`;
// otherwise `why` says which rule fails.
bool nvidiaChipRunsOn(const std::string &chip, int major, int minor,
                      std::string &why);

} // namespace kda::rt

#endif // KDA_RUNTIME_MANIFEST_H
