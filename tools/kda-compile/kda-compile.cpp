//===- kda-compile.cpp - kda module -> GPU bundle -------------------------===//
//
// The compile driver: runs the target's pipeline on a module of kda ops and
// writes a bundle (runtime/BUNDLE.md): one binary per kernel and a
// manifest.json with each kernel's parameters (named after the op's
// dimensions), launch geometry, shared memory and tiles, the target chip and
// the SHA-256 of the source and the compiler's fingerprint. Bundles are
// built here, on any host; GPU servers need only libkda_runtime.
//
// `kda-compile --fingerprint` prints the fingerprint alone: caches of
// bundles (python/kda/bundles.py) and the tuning database (python/kda/tune.py)
// key on it, so that a rebuilt or upgraded compiler never reuses their
// entries.
//
//===----------------------------------------------------------------------===//

#include "dialect/KdaAttrs.h"
#include "dialect/KdaOps.h"
#include "lowering/GpuPipeline.h"
#include "passes/Passes.h"
#include "tools/Registration.h"

#include "KdaSourceHash.h" // KDA_SOURCE_HASH, generated at build time

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm-c/Core.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/bit.h"
#include "llvm/BinaryFormat/ELF.h"
#include "llvm/BinaryFormat/MsgPackDocument.h"
#include "llvm/Object/ELF.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstdlib>
#include "llvm/Support/SHA256.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

// Only these are listed by --help (LLVM and MLIR register hundreds more).
static cl::OptionCategory compileCategory("kda-compile options");

static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("<module of kda ops .mlir>"),
                                      cl::Required, cl::cat(compileCategory));
static cl::opt<std::string> outputDir("o", cl::desc("bundle directory"),
                                      cl::Required, cl::cat(compileCategory));
static cl::opt<std::string>
    chip("chip",
         cl::desc("target chip: sm_80, sm_90a (NVIDIA); gfx90a, gfx942, "
                  "gfx1100 (AMD)"),
         cl::init("sm_90a"), cl::cat(compileCategory));
static cl::opt<int64_t>
    chunk("chunk",
          cl::desc("chunk size for ops without #kda.tile (0: the chip's "
                   "default, 16)"),
          cl::init(0), cl::cat(compileCategory));
static cl::opt<int64_t> subChunk("sub-chunk", cl::desc("sub-chunk size"),
                                 cl::init(16), cl::cat(compileCategory));
static cl::opt<int64_t>
    vBlock("v-block",
           cl::desc("columns of V per program (0: the chip's default, 16)"),
           cl::init(0), cl::cat(compileCategory));
static cl::opt<int64_t> segments(
    "segments",
    cl::desc("sequence-parallel segments per sequence of kda.gated_delta "
             "(1: none): a summary kernel gives each segment its transition "
             "and offset, a combine kernel scans them, and the state kernel "
             "runs the segments side by side (long sequences, few heads)"),
    cl::init(1), cl::cat(compileCategory));
static cl::opt<std::string>
    schedule("schedule",
             cl::desc("chunk schedule of kda.gated_delta: chunk-parallel "
                      "(default: an intra-chunk kernel over every chunk, then "
                      "the state kernel, run as one bundle entry) or "
                      "sequential (one kernel)"),
             cl::init("chunk-parallel"), cl::cat(compileCategory));
static cl::opt<int64_t> threads("block-threads", cl::desc("threads per block"),
                                cl::init(128), cl::cat(compileCategory));
static cl::opt<bool> noTensorCores(
    "no-tensor-cores",
    cl::desc("tile matmuls on the vector ALUs (no mma.sync / MFMA / WMMA)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<bool> emulateWmma(
    "emulate-wmma",
    cl::desc("NVIDIA, for tests: lane kernels (state, intra, window) written "
             "for gfx1100's WMMA, each step emulated (the AMD lane programs "
             "on an NVIDIA GPU)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<bool> stepRegisters(
    "step-registers",
    cl::desc("NVIDIA: the gradient's step grid on the state program's lanes "
             "(--step-registers=false: the tile lowering)"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<bool> chunkRegisters(
    "chunk-registers",
    cl::desc("NVIDIA: the gradient's chunk grid (the intra-chunk part's "
             "adjoint) on lanes (--chunk-registers=false: the tile "
             "lowering)"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<int64_t> stateStages(
    "state-stages",
    cl::desc("NVIDIA: chunks in flight (cp.async stages, 2 to 8) of the "
             "register state kernel: deeper stages hide more of a chunk's "
             "load latency behind the products of the chunks before it"),
    cl::init(2), cl::cat(compileCategory));
static cl::opt<int64_t> stepVBlock(
    "step-v-block",
    cl::desc("NVIDIA: V columns a loop iteration of the gradient's step "
             "program (0: the grid's V block; a multiple of 16 dividing V)"),
    cl::init(0), cl::cat(compileCategory));
static cl::opt<int64_t> stepMaxRegisters(
    "step-max-registers",
    cl::desc("NVIDIA: registers per thread of the gradient's step program "
             "(0: ptxas decides; 128: two blocks of 256 threads per SM)"),
    cl::init(0), cl::cat(compileCategory));
static cl::opt<int64_t> stepThreads(
    "step-threads",
    cl::desc("NVIDIA: threads per block of the gradient's step program (0: "
             "--threads; 128: two blocks per SM at K = 128)"),
    cl::init(0), cl::cat(compileCategory));
static cl::opt<bool> stepTf32(
    "step-tf32",
    cl::desc("NVIDIA: the gradient's step program's f32 products one TF32 "
             "product where the call's inputs are 16-bit (the default; "
             "=false: 3xTF32)"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<bool> stepScatterSums(
    "step-scatter-sums",
    cl::desc("NVIDIA: the gradient's step program sums across warps in two "
             "steps (a share of the registers a warp, then all read them)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<bool> stepPrefetch(
    "step-prefetch",
    cl::desc("NVIDIA: the gradient's step program loads each V block's "
             "inputs one block ahead of their use (registers for latency)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<bool> stepVNewFirst(
    "step-vnew-first",
    cl::desc("NVIDIA: the gradient's step program computes V_new of the whole "
             "chunk first, split by V (no sum across warps in its V blocks)"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<int64_t> stepStages(
    "step-stages",
    cl::desc("NVIDIA: the gradient's step program copies each V block's "
             "inputs by cp.async into this many stages of shared memory, "
             "blocks ahead of their use (0: loads at their use; default 2)"),
    cl::init(2), cl::cat(compileCategory));
static cl::opt<bool> stateRotateStages(
    "state-rotate-stages",
    cl::desc("the state program carries each chunk's stage (i mod stages) "
             "through its loop and rotates it where the stages are not a "
             "power of two, instead of two 64-bit remainders a step (fewer "
             "instructions, yet 17 to 20 % slower on the H100 where the "
             "state pass is the long part: off)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<bool> stateStagedOutput(
    "state-staged-output",
    cl::desc("the forward state program's outputs through shared memory: "
             "each chunk step writes its rows there, the next stores them as "
             "16-byte rows (a measuring knob; default off: 2-byte stores of "
             "the registers' transposed pairs)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<int64_t> intraBlocks(
    "intra-blocks",
    cl::desc("NVIDIA: resident blocks per SM the forward intra-chunk "
             "kernel's register budget is cut for (.maxnreg = 65536 / "
             "(threads x blocks), in ptxas's granule of 8; 0, the default: "
             "four blocks of 128 threads for 16-bit kernels, three for fp32)"),
    cl::init(0), cl::cat(compileCategory));
static cl::opt<int64_t> elementwiseTileElements(
    "elementwise-tile-elements",
    cl::desc("elementwise kernels (a multi-scale layer's scaled gates and "
             "mix, a mix of three branches): up to this many elements a "
             "program, a power of two from 128 to 8192 (4096, the default; "
             "0: one row of the trailing dimension a program)"),
    cl::init(4096), cl::cat(compileCategory));
static cl::opt<int64_t> stateCopyRuns(
    "state-copy-runs",
    cl::desc("the state program's whole-chunk copies (cp.async; AMD: 16-byte "
             "loads and stores) give "
             "each thread runs of this many consecutive 16-byte pieces of a "
             "row: one address a run instead of one a piece, fewer "
             "instructions a chunk step (1, the default: pieces a block "
             "apart, every warp instruction whole sectors)"),
    cl::init(1), cl::cat(compileCategory));
static cl::opt<bool> reversePrefetch(
    "reverse-prefetch",
    cl::desc("NVIDIA: the gradient's reverse scan loads each chunk's dO rows "
             "a step ahead (off its sequential chain)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<int64_t> reverseThreads(
    "reverse-threads",
    cl::desc("NVIDIA: threads per block of the gradient's reverse scan (0: "
             "--block-threads; 128, the default: 4 warps, a shorter sum across "
             "them)"),
    cl::init(128), cl::cat(compileCategory));
static cl::opt<bool> reverseTf32(
    "reverse-tf32",
    cl::desc("NVIDIA: the gradient's reverse scan's f32 products as one TF32 "
             "product a step where the call's inputs are 16-bit (the default; "
             "=false: 3xTF32)"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<bool> reverseSplitV(
    "reverse-split-v",
    cl::desc("NVIDIA: the gradient's reverse scan's warps split V, each all of "
             "K (no sum across warps a step; default false: they split K)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<bool> reverseStageDO(
    "reverse-stage-do",
    cl::desc("NVIDIA: the gradient's reverse scan copies each chunk's dO rows "
             "by cp.async with its workspaces, stages ahead (the default; "
             "=false: loaded at their use)"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<bool> chunkExchangePads(
    "chunk-exchange-pads",
    cl::desc("NVIDIA: the gradient's chunk grid pads the rows of its layout "
             "conversions' shared regions by what bank conflicts counted on "
             "the host say (0 to 8 elements), not by one (the default; =false: "
             "by one)"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<bool> chunkGateOutside(
    "chunk-gate-outside",
    cl::desc("the gradient's chunk grid applies the gate's activation outside "
             "its tape, a grid of its own takes the activated gate's gradient "
             "to d_gate, dA_log and ddt_bias (NVIDIA's chunk lanes then take "
             "the softplus gate; default: off)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<bool> reverseDStatesBf16(
    "reverse-ds-bf16",
    cl::desc("the gradient's reverse scan records dS after every chunk in "
             "bf16 where q is 16-bit, which the step grid reads (half the "
             "bytes; the default; =false: f32)"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<bool> chunkExchangeSwizzle(
    "chunk-exchange-swizzle",
    cl::desc("NVIDIA: with --chunk-exchange-pads, the chunk grid's exchange "
             "rows may instead be unpadded with their columns permuted per "
             "row, where that counts fewer bank conflicts (its index "
             "arithmetic costs registers)"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<bool> chunkStageSeeds(
    "chunk-stage-seeds",
    cl::desc("NVIDIA: the gradient's chunk grid copies its seeds by cp.async "
             "into shared memory when it starts (in flight while the forward "
             "is recomputed; the default; =false: loaded at their use)"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<bool> chunkTf32(
    "chunk-tf32",
    cl::desc("NVIDIA: the gradient's chunk grid's products as one TF32 "
             "product a step where the call's inputs are 16-bit, but for the "
             "factored decayed pairs' adjoint (the default; =false: 3xTF32 "
             "throughout)"),
    cl::init(true), cl::cat(compileCategory));
static cl::opt<std::string>
    toolkit("toolkit",
            cl::desc("CUDA toolkit root (ptxas) or, for AMD, a folder with "
                     "llvm/bin/ld.lld"),
            cl::init(""), cl::cat(compileCategory));
// Handled before parsing (main), as --fingerprint; declared so that --help
// lists it.
static cl::opt<bool> printChips(
    "print-chips",
    cl::desc("print the chip table the compiler decides from (JSON: vendor, "
             "warp size, matrix instructions, shared memory and registers, "
             "default tiles) and exit"),
    cl::init(false), cl::cat(compileCategory));
// Handled before parsing (main); declared so that --help lists it.
static cl::opt<bool> fingerprintOnly(
    "fingerprint",
    cl::desc("print the compiler's fingerprint (what bundle caches and the "
             "tuning database key on) and exit"),
    cl::init(false), cl::cat(compileCategory));
static cl::opt<std::string> tuningDb(
    "tuning-db",
    cl::desc("kda-tune's database (python/kda/tune.py): its tile for this "
             "module, chip, compiler and --tuning-shape replaces the chip's "
             "default (tile options given here still win)"),
    cl::init(""), cl::cat(compileCategory));
static cl::opt<std::string> tuningShape(
    "tuning-shape",
    cl::desc("T,N,HV: tokens per sequence, sequences, value heads of the "
             "calls to tune for: the tile of --tuning-db, else of the first "
             "database with one among $KDA_TUNING_DB (alone when set; empty: "
             "none), ~/.cache/kda/tuning.json and the package's "
             "kda/tuning.json"),
    cl::init(""), cl::cat(compileCategory));
static cl::opt<bool> keepPtx("keep-ptx",
                             cl::desc("also write each kernel's assembly "
                                      "(PTX, or AMDGPU assembly as .s)"),
                             cl::init(false), cl::cat(compileCategory));

namespace {

int fail(const llvm::Twine &message) {
  llvm::errs() << "kda-compile: " << message << "\n";
  return 1;
}

llvm::json::Value toJson(Attribute attr) {
  if (auto b = dyn_cast<BoolAttr>(attr))
    return b.getValue();
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return i.getInt();
  if (auto s = dyn_cast<StringAttr>(attr))
    return s.getValue().str();
  if (auto a = dyn_cast<ArrayAttr>(attr)) {
    llvm::json::Array out;
    for (Attribute e : a)
      out.push_back(toJson(e));
    return out;
  }
  if (auto d = dyn_cast<DenseI64ArrayAttr>(attr)) {
    llvm::json::Array out;
    for (int64_t e : d.asArrayRef())
      out.push_back(e);
    return out;
  }
  if (auto d = dyn_cast<DictionaryAttr>(attr)) {
    llvm::json::Object out;
    for (NamedAttribute n : d)
      out[n.getName().str()] = toJson(n.getValue());
    return out;
  }
  if (auto s = dyn_cast<mlir::kda::StrategyAttr>(attr)) {
    // The manifest's "strategy" (runtime/BUNDLE.md): kernel, kind, and the
    // reason for tiles, step and tile_chunk, the matrix instruction where
    // present.
    llvm::json::Object out{{"kernel", s.getKernel().str()},
                           {"kind", s.getKind().str()}};
    if (!s.getReason().empty())
      out["reason"] = s.getReason().str();
    if (s.getStep() > 0) {
      out["step"] = s.getStep();
      out["tile_chunk"] = s.getTileChunk();
    }
    if (!s.getInstruction().empty())
      out["instruction"] = s.getInstruction().str();
    if (!s.getProgram().empty())
      out["program"] = s.getProgram().str();
    if (s.getStages() > 0)
      out["stages"] = s.getStages();
    return llvm::json::Value(std::move(out));
  }
  return nullptr;
}

/// What the AMDGPU backend reports about a kernel (the HSACO's
/// NT_AMDGPU_METADATA note): registers, spills, scratch and static LDS.
FailureOr<llvm::json::Object> amdResources(StringRef hsaco, StringRef kernel,
                                           std::string &error) {
  auto elf = llvm::object::ELF64LEFile::create(hsaco);
  if (!elf) {
    error = llvm::toString(elf.takeError());
    return failure();
  }
  auto sections = elf->sections();
  if (!sections) {
    error = llvm::toString(sections.takeError());
    return failure();
  }
  for (const auto &section : *sections) {
    if (section.sh_type != llvm::ELF::SHT_NOTE)
      continue;
    llvm::Error err = llvm::Error::success();
    for (auto note : elf->notes(section, err)) {
      if (note.getName() != "AMDGPU" ||
          note.getType() != llvm::ELF::NT_AMDGPU_METADATA)
        continue;
      llvm::msgpack::Document doc;
      if (!doc.readFromBlob(llvm::toStringRef(note.getDesc(section.sh_addralign)),
                            /*Multi=*/false))
        continue;
      auto &root = doc.getRoot().getMap(/*Convert=*/true);
      for (auto &k : root["amdhsa.kernels"].getArray(/*Convert=*/true)) {
        auto &map = k.getMap(/*Convert=*/true);
        if (map[".name"].getString() != kernel)
          continue;
        llvm::json::Object out;
        for (StringRef key :
             {"vgpr_count", "agpr_count", "sgpr_count", "vgpr_spill_count",
              "sgpr_spill_count", "private_segment_fixed_size",
              "group_segment_fixed_size"}) {
          auto it = map.find(("." + key).str());
          if (it != map.end() && it->second.getKind() == llvm::msgpack::Type::UInt)
            out[key] = static_cast<int64_t>(it->second.getUInt());
          else if (it != map.end() &&
                   it->second.getKind() == llvm::msgpack::Type::Int)
            out[key] = it->second.getInt();
        }
        consumeError(std::move(err));
        return out;
      }
    }
    if (err)
      consumeError(std::move(err));
  }
  error = "no AMDGPU metadata for kernel " + kernel.str();
  return failure();
}

/// A stable string naming this compiler: "kda-<hash>-llvm<x.y.z>".
///
/// <hash> is the SHA-256 (first 16 hex digits) of the compiler's sources
/// (dialect/, passes/, lowering/, tools/kda-compile/, tools/Registration.*:
/// every file, by path and content), computed at build time
/// (cmake/KdaSourceHash.cmake). Any edit of them, committed or not, changes
/// it, and two builds of the same sources share it whatever the machine or
/// build directory: a tuning database (kda-tune) or bundle cache made by
/// one build serves the other. (The executable's bytes would not: they embed
/// build paths.) What the sources do not cover are the shared libLLVM /
/// libMLIR the executable loads: their version, as the loaded library
/// reports it (LLVMGetVersion, not the headers'), is the suffix, so a
/// Debian LLVM upgrade changes the fingerprint too. (Not covered: the host
/// C++ compiler that built kda-compile, and the CUDA toolkit's ptxas, found
/// per call.)
std::string compilerFingerprint() {
  unsigned major = 0, minor = 0, patch = 0;
  LLVMGetVersion(&major, &minor, &patch);
  return llvm::formatv("kda-{0}-llvm{1}.{2}.{3}",
                       llvm::StringRef(KDA_SOURCE_HASH).substr(0, 16), major,
                       minor, patch)
      .str();
}

/// kda.tune.shape_bucket: T and N x HV in power-of-two ranges.
std::string shapeBucket(int64_t t, int64_t n, int64_t hv) {
  auto range = [](int64_t x) {
    uint64_t lo = llvm::bit_floor(static_cast<uint64_t>(std::max<int64_t>(x, 1)));
    return std::to_string(lo) + "-" + std::to_string(2 * lo - 1);
  };
  return "T" + range(t) + "/NHV" + range(n * hv);
}

/// The winning tile of kda-tune's database (python/kda/tune.py documents the
/// file) for this source (entries record the SHA-256 of the module the
/// Python package generates, which is what kda-compile gets), chip,
/// compiler fingerprint and shape bucket. Entries of another compiler are
/// never used: their times were measured on other kernels. Returns
/// std::nullopt when there is none; fails on an unreadable database.
FailureOr<std::optional<llvm::json::Object>>
lookupTunedTile(StringRef path, StringRef sourceHash, StringRef chipName,
                StringRef fingerprint, StringRef bucket, std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    error = "cannot read " + path.str() + ": " + buffer.getError().message();
    return failure();
  }
  llvm::Expected<llvm::json::Value> root =
      llvm::json::parse((*buffer)->getBuffer());
  if (!root) {
    error = path.str() + ": " + llvm::toString(root.takeError());
    return failure();
  }
  const llvm::json::Object *db = root->getAsObject();
  if (!db || db->getString("format") != "kda-tuning-db" ||
      db->getInteger("version") != 1 || !db->getObject("entries")) {
    error = path.str() + ": not a version 1 kda tuning database";
    return failure();
  }
  for (const auto &kv : *db->getObject("entries")) {
    const llvm::json::Object *e = kv.second.getAsObject();
    if (!e || e->getString("source_hash") != sourceHash ||
        e->getString("chip") != chipName ||
        e->getString("compiler_fingerprint") != fingerprint ||
        e->getString("bucket") != bucket)
      continue;
    const llvm::json::Object *winner = e->getObject("winner");
    if (winner && winner->getObject("tile"))
      return std::optional<llvm::json::Object>(*winner->getObject("tile"));
  }
  return std::optional<llvm::json::Object>();
}


/// Where the bundle's files are written before they are put in place: a new
/// directory next to the bundle directory (same file system, so the final
/// renames cannot fail half-way for lack of space), removed on any exit that
/// did not commit. A failed compile leaves the target as it was.
class Staging {
public:
  ~Staging() {
    if (!dir.empty())
      (void)llvm::sys::fs::remove_directories(dir);
  }

  /// Creates the staging directory next to `target`.
  std::error_code create(StringRef target) {
    StringRef parent = llvm::sys::path::parent_path(target);
    if (!parent.empty())
      if (std::error_code ec = llvm::sys::fs::create_directories(parent))
        return ec;
    llvm::SmallString<256> prefix(parent);
    llvm::sys::path::append(prefix,
                            "." + llvm::sys::path::filename(target) + ".tmp");
    // createUniqueDirectory puts a relative prefix in the system's temporary
    // directory, not next to the target.
    if (std::error_code ec = llvm::sys::fs::make_absolute(prefix))
      return ec;
    llvm::SmallString<256> created;
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory(prefix, created))
      return ec;
    dir = created.str().str();
    return {};
  }

  std::string path(StringRef file) const {
    llvm::SmallString<256> p(dir);
    llvm::sys::path::append(p, file);
    return p.str().str();
  }

  /// Puts the files in place: the whole directory at once when `target`
  /// does not exist, else file by file into it with manifest.json last (a
  /// reader that sees the new manifest sees the new binaries).
  std::error_code commit(StringRef target, ArrayRef<std::string> files) {
    if (!llvm::sys::fs::exists(target)) {
      if (std::error_code ec = llvm::sys::fs::rename(dir, target))
        return ec;
      dir.clear();
      return {};
    }
    for (const std::string &file : files) {
      llvm::SmallString<256> to(target);
      llvm::sys::path::append(to, file);
      if (std::error_code ec = llvm::sys::fs::rename(path(file), to))
        return ec;
    }
    return {};
  }

private:
  std::string dir;
};

bool writeFile(StringRef path, StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return false;
  os << bytes;
  return !os.has_error();
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // Before option parsing: the input and -o are required for compiling,
  // not for asking which compiler this is.
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (arg == "--fingerprint" || arg == "-fingerprint") {
      llvm::outs() << compilerFingerprint() << "\n";
      return 0;
    }
    if (arg == "--print-chips" || arg == "-print-chips") {
      mlir::kda::printChipTable(llvm::outs());
      return 0;
    }
  }
  cl::HideUnrelatedOptions(compileCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "kda compile driver: module -> GPU bundle\n");
  // LLVM's libraries register a hidden --threads (a thread count of their
  // own): taken for threads per block, it would be accepted and do nothing.
  if (auto it = cl::getRegisteredOptions().find("threads");
      it != cl::getRegisteredOptions().end() &&
      it->second->getNumOccurrences() > 0)
    return fail("--threads is not a kda-compile option (LLVM's own, hidden): "
                "threads per block are --block-threads");
  if (schedule != "chunk-parallel" && schedule != "sequential")
    return fail("unknown --schedule '" + schedule +
                "' (expected chunk-parallel or sequential)");
  std::optional<mlir::kda::GpuTarget> target =
      mlir::kda::gpuTargetForChip(chip);
  if (!target)
    return fail("unsupported chip '" + chip + "' (expected " +
                mlir::kda::knownChips() + ")");
  const bool amd = target->vendor == mlir::kda::GpuTarget::Vendor::Amd;
  if (!tuningDb.empty() || !tuningShape.empty()) {
    int64_t t = 0, n = 0, hv = 0;
    llvm::SmallVector<StringRef> parts;
    StringRef(tuningShape).split(parts, ',');
    if (parts.size() != 3 || parts[0].getAsInteger(10, t) ||
        parts[1].getAsInteger(10, n) || parts[2].getAsInteger(10, hv) ||
        t < 1 || n < 1 || hv < 1)
      return fail("--tuning-db needs --tuning-shape=T,N,HV (positive "
                  "integers), found '" + tuningShape + "'");
    // The databases to consult, in order (kda.tune.db_paths).
    std::vector<std::string> databases;
    if (!tuningDb.empty()) {
      databases.push_back(tuningDb);
    } else if (const char *env = std::getenv("KDA_TUNING_DB")) {
      if (*env)
        databases.push_back(env);
    } else {
      llvm::SmallString<256> user;
      if (llvm::sys::path::home_directory(user)) {
        llvm::sys::path::append(user, ".cache", "kda", "tuning.json");
        if (llvm::sys::fs::exists(user))
          databases.push_back(std::string(user));
      }
      static int anchor;
      llvm::SmallString<256> installed(llvm::sys::path::parent_path(
          llvm::sys::fs::getMainExecutable(argv[0],
                                           reinterpret_cast<void *>(&anchor))));
      llvm::sys::path::append(installed, "..", "share", "kda", "python");
      llvm::sys::path::append(installed, "kda", "tuning.json");
      for (std::string candidate :
           {std::string(installed), std::string(KDA_SOURCE_TUNING_DB)})
        if (llvm::sys::fs::exists(candidate)) {
          databases.push_back(candidate);
          break;
        }
    }
    std::string error;
    auto input = llvm::MemoryBuffer::getFileOrSTDIN(inputFile);
    if (!input)
      return fail("cannot read " + inputFile + ": " +
                  input.getError().message());
    std::string hash = llvm::toHex(
        llvm::SHA256::hash(llvm::arrayRefFromStringRef((*input)->getBuffer())),
        /*LowerCase=*/true);
    std::string bucket = shapeBucket(t, n, hv);
    FailureOr<std::optional<llvm::json::Object>> tile =
        std::optional<llvm::json::Object>();
    for (const std::string &db : databases) {
      tile = lookupTunedTile(db, hash, chip, compilerFingerprint(), bucket,
                             error);
      if (failed(tile))
        return fail(error);
      if (*tile)
        break;
    }
    if (!*tile) {
      llvm::outs() << "kda-compile: no tuned tile for this module on " << chip
                   << " in bucket " << bucket << ": the chip's defaults\n";
    } else {
      // Options given on the command line win over the database.
      auto take = [&](cl::opt<int64_t> &opt, StringRef key) {
        if (opt.getNumOccurrences() == 0)
          if (std::optional<int64_t> v = (*tile)->getInteger(key))
            opt = *v;
      };
      take(chunk, "chunk");
      take(subChunk, "sub_chunk");
      take(vBlock, "v_block");
      take(threads, "threads");
      take(segments, "segments");
      if (stateStages.getNumOccurrences() == 0)
        if (std::optional<int64_t> v = (*tile)->getInteger("state_stages"))
          stateStages = *v;
      llvm::outs() << "kda-compile: tuned tile for bucket " << bucket
                   << ": chunk=" << chunk << " sub_chunk=" << subChunk
                   << " v_block=" << vBlock << " threads=" << threads
                   << (stateStages == 2
                           ? std::string()
                           : " state_stages=" + std::to_string(stateStages))
                   << "\n";
    }
  }
  // Before anything slow: tiles are static, so an unbounded --chunk would
  // build (and allocate) chunk x chunk tiles. 0 stands for the chip's default.
  int64_t resolvedChunk = chunk > 0 ? static_cast<int64_t>(chunk)
                          : chunk == 0 ? target->defaultChunk
                                       : static_cast<int64_t>(chunk);
  std::string invalid =
      mlir::kda::checkTileOptions(resolvedChunk, subChunk, vBlock, "--");
  if (!invalid.empty())
    return fail(invalid + (chunk == 0 && llvm::StringRef(invalid).contains(
                                             "--chunk (")
                               ? " (--chunk=0: the chip's default, " +
                                     std::to_string(resolvedChunk) + ")"
                               : std::string()));
  if (segments < 1 || segments > mlir::kda::kMaxSegments)
    return fail("--segments must be 1 to " +
                std::to_string(mlir::kda::kMaxSegments) + ", found " +
                std::to_string(static_cast<int64_t>(segments)));
  // Past 8 blocks of 128 threads the budget is under 64 registers a lane:
  // every intra-chunk program would spill.
  if (intraBlocks < 0 || intraBlocks > 8)
    return fail("--intra-blocks must be 0 (the default rule) to 8, found " +
                std::to_string(static_cast<int64_t>(intraBlocks)));
  if (elementwiseTileElements != 0 &&
      (elementwiseTileElements < 128 || elementwiseTileElements > 8192 ||
       (elementwiseTileElements & (elementwiseTileElements - 1)) != 0))
    return fail("--elementwise-tile-elements must be 0 or a power of two "
                "from 128 to 8192, found " +
                std::to_string(static_cast<int64_t>(elementwiseTileElements)));
  if (stateCopyRuns < 1 || stateCopyRuns > 16)
    return fail("--state-copy-runs must be 1 to 16, found " +
                std::to_string(static_cast<int64_t>(stateCopyRuns)));
  if (threads < 1 || threads > 1024 || threads % target->warpSize != 0)
    return fail("--block-threads must be a positive multiple of the warp "
                "size (" +
                llvm::Twine(target->warpSize) + " on " + chip +
                "), at most 1024, found " + llvm::Twine(threads));

  // The bundle directory, without trailing separators (its staging
  // directory is named after it); it may exist, but as a directory.
  if (outputDir.empty())
    return fail("-o: expected the bundle directory, found an empty path");
  std::string bundleDir = outputDir;
  while (bundleDir.size() > 1 &&
         llvm::sys::path::is_separator(bundleDir.back()))
    bundleDir.pop_back();
  if (llvm::sys::fs::exists(bundleDir) &&
      !llvm::sys::fs::is_directory(bundleDir))
    return fail("-o " + outputDir + ": exists and is not a directory");

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> source =
      openInputFile(inputFile, &error);
  if (!source)
    return fail(error);

  DialectRegistry registry;
  ::kda::registerEverything(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(
                                   source->getBuffer(), inputFile),
                               llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return fail("cannot parse " + inputFile);

  // The derived gradient takes the chip table's V block and block threads
  // (its kernels are the tile lowering's, tuned apart from the forward's),
  // unless the command line gives them.
  bool gradient = false;
  module->walk([&](mlir::kda::GatedDeltaGradOp) { gradient = true; });
  if (gradient && threads.getNumOccurrences() == 0)
    threads = target->gradientThreads;

  // A recurrence or attention op with a static size of 0 (no sequences,
  // tokens or heads) would make kernels that launch nothing (a decode step's
  // was an internal error): a bundle serves calls, and a call may pass 0
  // where the size is dynamic. Refused here, naming the op, the value and
  // the dimension. (Empty elementwise work, a gate or a mix, gets no kernel
  // and the ops around it still compile: kda-gpu-outline-elementwise.)
  {
    std::string zero;
    Location zeroLoc = UnknownLoc::get(&context);
    module->walk([&](Operation *op) {
      if (!zero.empty() ||
          !isa<mlir::kda::GatedDeltaOp, mlir::kda::DecodeStepOp,
               mlir::kda::WindowAttentionOp, mlir::kda::MultiScaleOp>(op))
        return;
      auto scan = [&](ValueRange values, const char *kind) {
        for (auto [i, v] : llvm::enumerate(values))
          if (auto t = dyn_cast<RankedTensorType>(v.getType()))
            for (auto [d, size] : llvm::enumerate(t.getShape()))
              if (size == 0 && zero.empty()) {
                std::string type;
                llvm::raw_string_ostream os(type);
                os << t;
                zero = op->getName().getStringRef().str() + " " + kind + " #" +
                       std::to_string(i) + " (" + type +
                       ") has a static size 0 in dimension " +
                       std::to_string(d);
                zeroLoc = op->getLoc();
              }
      };
      scan(op->getOperands(), "operand");
      scan(op->getResults(), "result");
    });
    if (!zero.empty()) {
      mlir::emitError(zeroLoc)
          << zero << ": a bundle of it would launch nothing; make that "
                     "dimension dynamic (a call may then pass 0)";
      return fail("nothing to compile for a GPU");
    }
  }

  // --v-block applies to the ops whose V it divides and that have no
  // v_block of their own; one it cannot apply to anywhere would be ignored
  // while the manifest recorded it.
  if (vBlock > 0) {
    std::string unusable;
    bool applies = false;
    module->walk([&](Operation *op) {
      Value v;
      if (auto g = dyn_cast<mlir::kda::GatedDeltaOp>(op))
        v = g.getV();
      else if (auto d = dyn_cast<mlir::kda::DecodeStepOp>(op))
        v = d.getV();
      else
        return;
      if (auto t = dyn_cast_or_null<mlir::kda::TileAttr>(op->getAttr("tile")))
        if (t.getVBlock() > 0)
          return;
      int64_t vd = cast<ShapedType>(v.getType()).getShape().back();
      if (vd % vBlock == 0)
        applies = true;
      else if (unusable.empty())
        unusable = op->getName().getStringRef().str() + " with V = " +
                   std::to_string(vd);
    });
    if (!applies && !unusable.empty())
      return fail("--v-block=" + std::to_string(vBlock) +
                  " divides the V of no op (" + unusable +
                  "): expected a divisor of V");
  }

  // The strategy stage's remarks (kernels given tiles instead of lanes) of
  // the run whose kernels are kept, printed once that run is known.
  std::vector<std::pair<Location, std::string>> strategyRemarks;
  auto runPipeline = [&](ModuleOp m, StringRef format) {
    if (format == "bin")
      strategyRemarks.clear();
    ScopedDiagnosticHandler holdRemarks(&context, [&](Diagnostic &d) {
      if (d.getSeverity() != DiagnosticSeverity::Remark)
        return failure(); // errors and warnings: printed as they come
      if (format == "bin")
        strategyRemarks.emplace_back(d.getLocation(), d.str());
      return success();
    });
    PassManager pm(&context);
    mlir::kda::GpuPipelineOptions options;
    options.chip = chip;
    options.chunk = chunk;
    options.subChunk = subChunk;
    options.threads = threads;
    options.vBlock = vBlock;
    options.segments = segments;
    options.tensorCores = !noTensorCores;
    options.stateStages = stateStages;
    options.emulateWmma = emulateWmma;
    options.stepRegisters = stepRegisters;
    options.chunkRegisters = chunkRegisters;
    options.stepVBlock = stepVBlock;
    options.stepMaxRegisters = stepMaxRegisters;
    options.reverseTf32 = reverseTf32;
    options.reverseSplitV = reverseSplitV;
    options.reverseStageDO = reverseStageDO;
    options.chunkTf32 = chunkTf32;
    options.chunkExchangePads = chunkExchangePads;
    options.chunkStageSeeds = chunkStageSeeds;
    options.chunkExchangeSwizzle = chunkExchangeSwizzle;
    options.reverseDStatesBf16 = reverseDStatesBf16;
    options.chunkGateOutside = chunkGateOutside;
    options.stepPrefetch = stepPrefetch;
    options.stepThreads = stepThreads;
    options.stepScatterSums = stepScatterSums;
    options.stepTf32 = stepTf32;
    options.stepVNewFirst = stepVNewFirst;
    options.stepStages = stepStages;
    options.reversePrefetch = reversePrefetch;
    options.stateCopyRuns = stateCopyRuns;
    options.intraBlocks = intraBlocks;
    options.elementwiseTileElements = elementwiseTileElements;
    options.stateStagedOutput = stateStagedOutput;
    options.stateRotateStages = stateRotateStages;
    options.reverseThreads = reverseThreads;
    options.schedule = schedule;
    options.format = format.str();
    options.toolkit = toolkit;
    // Kernels given the tile lowering instead of lanes are named (held
    // until the kept run is known; not again for --keep-ptx's PTX).
    options.strategyRemarks = format == "bin";
    mlir::kda::buildGpuPipeline(pm, *target, options);
    return pm.run(m);
  };

  // The tile of ops without their own #kda.tile: the command line's, else
  // the chip's defaults (what the pipeline options resolve to).
  const int64_t flagChunk =
      chunk > 0 ? static_cast<int64_t>(chunk) : target->defaultChunk;
  const int64_t flagSubChunk = std::min<int64_t>(subChunk, flagChunk);
  const int64_t flagVBlock = vBlock > 0 ? static_cast<int64_t>(vBlock)
                             : gradient ? target->gradientVBlock
                                        : target->defaultVBlock;

  OwningOpRef<ModuleOp> unlowered = module->clone();
  OwningOpRef<ModuleOp> ptxModule;
  if (keepPtx)
    ptxModule = module->clone();
  if (failed(runPipeline(*module, "bin")))
    return fail("compilation failed (see the errors above)");
  auto launches = (*module)->getAttrOfType<ArrayAttr>("kda.launches");
  if (!launches || launches.empty())
    return fail(inputFile + " holds no kda op to compile");

  // Ops may carry their own #kda.tile (a model description's, a hand-written
  // module's) chosen for another chip. Where a kernel would need more shared
  // memory than this chip gives a block, the ops' tiles give way to the
  // chip's, with a remark naming each op, its tile and what it needed; the
  // check further down still refuses what does not fit even then.
  int64_t mostSmem = 0;
  std::string biggest;
  for (Attribute a : launches) {
    auto launch = cast<DictionaryAttr>(a);
    int64_t smem =
        cast<IntegerAttr>(launch.get("dynamic_shared_memory")).getInt();
    if (smem > mostSmem) {
      mostSmem = smem;
      biggest = cast<StringAttr>(launch.get("name")).str();
    }
  }
  if (mostSmem > target->sharedMemoryPerBlock) {
    SmallVector<Operation *> tiled;
    unlowered->walk([&](Operation *op) {
      if (isa_and_nonnull<mlir::kda::TileAttr>(op->getAttr("tile")))
        tiled.push_back(op);
    });
    if (!tiled.empty()) {
      // One remark per distinct tile (a model's layers share theirs).
      llvm::MapVector<Attribute, SmallVector<Operation *>> byTile;
      for (Operation *op : tiled)
        byTile[op->getAttr("tile")].push_back(op);
      for (auto &[tileAttr, ops] : byTile) {
        auto t = cast<mlir::kda::TileAttr>(tileAttr);
        std::string loc;
        llvm::raw_string_ostream os(loc);
        ops.front()->getLoc().print(os);
        llvm::errs() << "kda-compile: remark: " << ops.front()->getName()
                     << " at " << loc;
        if (ops.size() > 1)
          llvm::errs() << " (and " << ops.size() - 1 << " more ops)";
        llvm::errs() << ": its tile (chunk " << t.getChunk() << ", sub_chunk "
                     << t.getSubChunk() << ", v_block " << t.getVBlock()
                     << (t.getSegments() != 1
                             ? ", segments " + std::to_string(t.getSegments())
                             : std::string())
                     << ") needs " << mostSmem << " bytes of shared memory ("
                     << biggest << "); " << chip << " gives a block "
                     << target->sharedMemoryPerBlock << ": compiled with the tile "
                     << "of ops without one (chunk " << flagChunk
                     << ", sub_chunk " << flagSubChunk << ", v_block "
                     << flagVBlock
                     << (segments != 1
                             ? ", segments " + std::to_string(segments)
                             : std::string())
                     << ") instead\n";
        for (Operation *op : ops)
          op->removeAttr("tile");
      }
      module = unlowered->clone();
      if (keepPtx)
        ptxModule = unlowered->clone();
      if (failed(runPipeline(*module, "bin")))
        return fail("compilation without the ops' tiles failed (see the errors "
                    "above)");
      launches = (*module)->getAttrOfType<ArrayAttr>("kda.launches");
      if (!launches || launches.empty())
        return fail(inputFile + " holds no kda op to compile");
    }
  }

  for (auto &[loc, message] : strategyRemarks)
    mlir::emitRemark(loc) << message;

  Staging staging;
  if (std::error_code ec = staging.create(bundleDir))
    return fail("cannot create a directory next to " + outputDir + ": " +
                ec.message());
  // In the order they are put in place (manifest.json last).
  std::vector<std::string> written;

  llvm::StringMap<std::string> ptxByModule;
  if (keepPtx) {
    if (failed(runPipeline(*ptxModule, "isa")))
      return fail("assembly generation failed");
    for (auto bin : ptxModule->getOps<gpu::BinaryOp>())
      for (Attribute o : bin.getObjects())
        ptxByModule[bin.getSymName()] =
            cast<gpu::ObjectAttr>(o).getObject().getValue().str();
  }

  llvm::StringMap<std::string> binaries;
  for (auto bin : module->getOps<gpu::BinaryOp>()) {
    if (bin.getObjects().size() != 1)
      return fail("expected one object per kernel module");
    binaries[bin.getSymName()] =
        cast<gpu::ObjectAttr>(bin.getObjects()[0]).getObject().getValue().str();
  }

  llvm::json::Array kernels;
  for (Attribute a : launches) {
    auto launch = cast<DictionaryAttr>(a);
    std::string name = cast<StringAttr>(launch.get("name")).str();
    std::string moduleName = cast<StringAttr>(launch.get("module")).str();
    auto it = binaries.find(moduleName);
    if (it == binaries.end())
      return fail("no binary for kernel " + name);
    std::string file = name + "." + chip + (amd ? ".hsaco" : ".cubin");
    if (!writeFile(staging.path(file), it->second))
      return fail("cannot write " + staging.path(file));
    written.push_back(file);
    if (keepPtx) {
      std::string ptxFile = name + "." + chip + (amd ? ".s" : ".ptx");
      if (!writeFile(staging.path(ptxFile), ptxByModule[moduleName]))
        return fail("cannot write " + staging.path(ptxFile));
      written.push_back(ptxFile);
    }
    // The chip must hold what the kernel asks for: refuse here rather than
    // at launch on a machine far away.
    int64_t smem = cast<IntegerAttr>(launch.get("dynamic_shared_memory")).getInt();
    llvm::json::Object resources;
    if (amd) {
      std::string error;
      FailureOr<llvm::json::Object> r = amdResources(it->second, name, error);
      if (failed(r))
        return fail("cannot read the resources of " + name + ": " + error);
      resources = std::move(*r);
      smem += resources.getInteger("group_segment_fixed_size").value_or(0);
      int64_t vgprs = resources.getInteger("vgpr_count").value_or(0) +
                      resources.getInteger("agpr_count").value_or(0);
      if (vgprs > target->registersPerLane)
        return fail(name + " needs " + llvm::Twine(vgprs) +
                    " vector registers; " + chip + " has " +
                    llvm::Twine(target->registersPerLane));
    }
    if (smem > target->sharedMemoryPerBlock)
      return fail(name + " needs " + llvm::Twine(smem) +
                  " bytes of shared memory; " + chip + " gives a block " +
                  llvm::Twine(target->sharedMemoryPerBlock) +
                  " (use smaller tiles: --chunk, --v-block)");
    // Static grid extents past what a launch takes (CUDA's 2^31 - 1 blocks
    // in x, 65535 in y and z; HIP's are no smaller) would make a bundle that
    // never launches: refuse it here, naming the kernel and the axis.
    static const int64_t maxGrid[3] = {2147483647, 65535, 65535};
    auto grid = cast<ArrayAttr>(launch.get("grid"));
    for (auto [axis, extent] : llvm::enumerate(grid))
      if (auto c = dyn_cast<IntegerAttr>(extent);
          c && axis < 3 && c.getInt() > maxGrid[axis])
        return fail(name + ": grid " + std::string(1, "xyz"[axis]) + " is " +
                    llvm::Twine(c.getInt()) + " blocks; a launch takes at most " +
                    llvm::Twine(maxGrid[axis]) + " in " +
                    std::string(1, "xyz"[axis]) +
                    " (fewer heads, sequences or tokens per call, or dynamic "
                    "sizes: the runtime checks each call's)");
    llvm::json::Object kernel;
    kernel["name"] = name;
    kernel["binary"] = file;
    kernel["entry"] = name;
    kernel["params"] = toJson(launch.get("params"));
    kernel["grid"] = toJson(launch.get("grid"));
    kernel["block"] = toJson(launch.get("block"));
    kernel["dynamic_shared_memory"] = toJson(launch.get("dynamic_shared_memory"));
    // How it is written (kda-gpu-select-strategy): lanes, or tiles and why.
    if (auto strategy = launch.get("strategy"))
      kernel["strategy"] = toJson(strategy);
    // Symbol pairs the runtime checks at launch (a window's key rows at
    // least its query rows).
    if (auto atLeast = launch.get("at_least"))
      kernel["at_least"] = toJson(atLeast);
    // The tiles the kernel was built with: the op's #kda.tile where it has
    // one (a v_block of 0 there means the default), else the defaults.
    llvm::json::Object tile;
    tile["chunk"] = flagChunk;
    tile["sub_chunk"] = flagSubChunk;
    tile["v_block"] = flagVBlock;
    if (auto t = launch.get("tile")) {
      llvm::json::Value opTile = toJson(t);
      for (auto &[key, value] : *opTile.getAsObject())
        if (key != "v_block" || value.getAsInteger().value_or(0) > 0)
          tile[key] = value;
    }
    tile["threads"] = static_cast<int64_t>(threads);
    tile["tensor_cores"] = noTensorCores ? 0 : 1;
    if (stateStages != 2)
      tile["state_stages"] = static_cast<int64_t>(stateStages);
    kernel["tile"] = std::move(tile);
    if (!resources.empty())
      kernel["resources"] = std::move(resources);
    kernels.push_back(std::move(kernel));
  }

  // Schedules of several kernels (the chunk-parallel gated delta rule):
  // entries the runtime runs behind one call, with their workspaces.
  llvm::json::Array entries;
  if (auto list = (*module)->getAttrOfType<ArrayAttr>("kda.entries")) {
    for (Attribute a : list) {
      auto entry = cast<DictionaryAttr>(a);
      llvm::json::Object e;
      e["name"] = cast<StringAttr>(entry.get("name")).str();
      llvm::json::Array params;
      for (Attribute p : cast<ArrayAttr>(entry.get("params"))) {
        auto param = cast<DictionaryAttr>(p);
        StringRef dtype = cast<StringAttr>(param.get("dtype")).getValue();
        int64_t bytes = dtype == "f32" || dtype == "i32" ? 4
                        : dtype == "i64"                 ? 8
                                                         : 2;
        params.push_back(llvm::json::Object{
            {"name", toJson(param.get("name"))},
            {"kind", "tensor"},
            {"dtype", dtype.str()},
            {"shape", toJson(param.get("shape"))},
            {"alignment", bytes}});
      }
      e["params"] = std::move(params);
      e["workspaces"] = toJson(entry.get("workspaces"));
      e["launches"] = toJson(entry.get("launches"));
      entries.push_back(std::move(e));
    }
  }

  llvm::json::Object manifest;
  manifest["format"] = "kda-bundle";
  manifest["version"] = entries.empty() ? 1 : 2;
  manifest["target"] =
      llvm::json::Object{{"vendor", amd ? "amd" : "nvidia"}, {"chip", chip}};
  manifest["source_hash"] = llvm::toHex(
      llvm::SHA256::hash(llvm::arrayRefFromStringRef(source->getBuffer())),
      /*LowerCase=*/true);
  manifest["compiler_fingerprint"] = compilerFingerprint();
  manifest["kernels"] = std::move(kernels);
  if (!entries.empty())
    manifest["entries"] = std::move(entries);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest))) << "\n";
  if (!writeFile(staging.path("manifest.json"), text))
    return fail("cannot write " + staging.path("manifest.json"));
  written.push_back("manifest.json");
  if (std::error_code ec = staging.commit(bundleDir, written))
    return fail("cannot put the bundle in place at " + outputDir + ": " +
                ec.message());
  llvm::outs() << "kda-compile: wrote " << outputDir << " (" << launches.size()
               << " kernel" << (launches.size() == 1 ? "" : "s") << ", "
               << chip << ")\n";
  return 0;
}
