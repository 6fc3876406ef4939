#include "runtime/Manifest.h"

#include "runtime/Json.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <initializer_list>
#include <map>
#include <set>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>

namespace kda::rt {

using json::Value;

const Kernel *Manifest::findKernel(std::string_view name) const {
  for (const Kernel &k : kernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

const Entry *Manifest::findEntry(std::string_view name) const {
  for (const Entry &e : entries)
    if (e.name == name)
      return &e;
  return nullptr;
}

const char *dtypeName(kda_dtype dtype) {
  switch (dtype) {
  case KDA_F32:
    return "f32";
  case KDA_F16:
    return "f16";
  case KDA_BF16:
    return "bf16";
  case KDA_I32:
    return "i32";
  case KDA_I64:
    return "i64";
  }
  return "unknown dtype";
}

size_t dtypeSize(kda_dtype dtype) {
  switch (dtype) {
  case KDA_F16:
  case KDA_BF16:
    return 2;
  case KDA_F32:
  case KDA_I32:
    return 4;
  case KDA_I64:
    return 8;
  }
  return 0;
}

const char *vendorName(Vendor vendor) {
  return vendor == Vendor::Nvidia ? "nvidia" : "amd";
}

namespace {

// Chips the runtime knows how to check. A chip outside these lists is far
// more likely a typo than a real target, so it is rejected at load time.
const char *const kNvidiaChips[] = {"sm_70",  "sm_75",   "sm_80",  "sm_86",
                                    "sm_87",  "sm_89",   "sm_90",  "sm_90a",
                                    "sm_100", "sm_100a", "sm_120", "sm_120a"};

// AMD chips and their EF_AMDGPU_MACH value in a code object's e_flags.
const std::pair<const char *, unsigned> kAmdChips[] = {
    {"gfx90a", 0x03f}, {"gfx942", 0x04c}, {"gfx1100", 0x041}};

constexpr uint16_t kEmCuda = 190, kEmAmdgpu = 224;
constexpr size_t kMaxManifestBytes = 16u << 20;

template <class List> std::string joinChips(const List &list) {
  std::string s;
  for (const auto &c : list) {
    if (!s.empty())
      s += ", ";
    if constexpr (std::is_same_v<std::decay_t<decltype(c)>, const char *>)
      s += c;
    else
      s += c.first;
  }
  return s;
}

bool isKnownChip(Vendor vendor, const std::string &chip) {
  if (vendor == Vendor::Nvidia) {
    for (const char *c : kNvidiaChips)
      if (chip == c)
        return true;
    return false;
  }
  for (const auto &c : kAmdChips)
    if (chip == c.first)
      return true;
  return false;
}

bool isIdentifier(const std::string &s) {
  if (s.empty() || !(isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return true;
}

std::string quote(const std::string &s) { return "\"" + s + "\""; }

// Walks the JSON tree keeping the field path ("kernels[0].params[2].dtype")
// so that every message says exactly which field is wrong, and where.
class Reader {
public:
  explicit Reader(const std::string &origin) : origin_(origin) {}

  Status error(const Value &at, const std::string &path,
               const std::string &message) const {
    return Status(KDA_ERROR_CORRUPT_BUNDLE,
                  origin_ + ":" + std::to_string(at.line) + ":" +
                      std::to_string(at.column) + ": " +
                      (path.empty() ? "" : path + ": ") + message);
  }

  // `v` must be an object whose keys are all in `known`.
  Status object(const Value &v, const std::string &path,
                std::initializer_list<const char *> known) const {
    if (!v.isObject())
      return error(v, path, "expected an object, found " + json::aKind(v.kind));
    for (const json::Member &m : v.members) {
      bool ok = false;
      for (const char *k : known)
        ok = ok || m.key == k;
      if (!ok) {
        std::string list;
        for (const char *k : known)
          list += (list.empty() ? "" : ", ") + std::string(k);
        return error(m.value, join(path, m.key),
                     "unknown field (expected one of: " + list + ")");
      }
    }
    return Status::ok();
  }

  Status field(const Value &obj, const std::string &path, const char *key,
               const Value *&out) const {
    out = obj.find(key);
    if (!out)
      return error(obj, path, std::string("missing field \"") + key + "\"");
    return Status::ok();
  }

  Status string(const Value &obj, const std::string &path, const char *key,
                std::string &out) const {
    const Value *v;
    if (Status s = field(obj, path, key, v))
      return s;
    if (!v->isString())
      return error(*v, join(path, key),
                   "expected a string, found " + json::aKind(v->kind));
    if (v->string.empty())
      return error(*v, join(path, key), "must not be empty");
    out = v->string;
    return Status::ok();
  }

  Status integer(const Value &v, const std::string &path, int64_t min,
                 int64_t max, int64_t &out) const {
    if (!v.isNumber() || !v.isInteger)
      return error(v, path,
                   "expected an integer, found " +
                       (v.isNumber() ? "the number " + formatNumber(v.number)
                                     : json::aKind(v.kind)));
    if (v.integer < min || v.integer > max)
      return error(v, path,
                   "expected an integer in [" + std::to_string(min) + ", " +
                       std::to_string(max) + "], found " +
                       std::to_string(v.integer));
    out = v.integer;
    return Status::ok();
  }

  static std::string join(const std::string &path, const std::string &key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string index(const std::string &path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }
  // The shortest form that reads back as `d` (1e+39,
  // not 9.9999999999999994e+38).
  static std::string formatNumber(double d) {
    char buf[64];
    for (int precision = 1; precision <= 17; ++precision) {
      snprintf(buf, sizeof buf, "%.*g", precision, d);
      if (strtod(buf, nullptr) == d)
        break;
    }
    return buf;
  }

private:
  std::string origin_;
};

bool parseDtype(const std::string &s, kda_dtype &out) {
  for (kda_dtype d : {KDA_F32, KDA_F16, KDA_BF16, KDA_I32, KDA_I64})
    if (s == dtypeName(d)) {
      out = d;
      return true;
    }
  return false;
}

// A shape or grid entry: an integer in [min, max] or a symbol name.
Status parseExtent(const Reader &r, const Value &v, const std::string &path,
                   int64_t min, Extent &out) {
  if (v.isString()) {
    if (!isIdentifier(v.string))
      return r.error(v, path,
                     "symbol " + quote(v.string) +
                         " is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
    out.symbol = v.string;
    return Status::ok();
  }
  if (v.isNumber())
    return r.integer(v, path, min, INT64_MAX, out.value);
  return r.error(v, path,
                 "expected an integer or a symbol name, found " +
                     json::aKind(v.kind));
}

Status parseParam(const Reader &r, const Value &v, const std::string &path,
                  Param &p) {
  if (!v.isObject())
    return r.error(v, path, "expected an object, found " + json::aKind(v.kind));
  std::string kind;
  if (Status s = r.string(v, path, "kind", kind))
    return s;
  if (Status s = r.string(v, path, "name", p.name))
    return s;
  if (!isIdentifier(p.name))
    return r.error(*v.find("name"), Reader::join(path, "name"),
                   quote(p.name) +
                       " is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");

  if (kind == "tensor") {
    p.kind = ParamKind::Tensor;
    if (Status s =
            r.object(v, path, {"name", "kind", "dtype", "shape", "alignment"}))
      return s;
    std::string dtype;
    if (Status s = r.string(v, path, "dtype", dtype))
      return s;
    if (!parseDtype(dtype, p.dtype))
      return r.error(*v.find("dtype"), Reader::join(path, "dtype"),
                     "unknown dtype " + quote(dtype) +
                         " (expected f32, f16, bf16, i32 or i64)");
    const Value *shape;
    if (Status s = r.field(v, path, "shape", shape))
      return s;
    std::string shapePath = Reader::join(path, "shape");
    if (!shape->isArray())
      return r.error(*shape, shapePath,
                     "expected an array, found " + json::aKind(shape->kind));
    for (size_t i = 0; i < shape->array.size(); ++i) {
      p.shape.emplace_back();
      if (Status s =
              parseExtent(r, shape->array[i], Reader::index(shapePath, i), 0,
                          p.shape.back()))
        return s;
    }
    p.alignment = static_cast<int64_t>(
        dtypeSize(p.dtype)); // natural alignment unless stated
    if (const Value *a = v.find("alignment")) {
      std::string aPath = Reader::join(path, "alignment");
      if (Status s = r.integer(*a, aPath, 1, 4096, p.alignment))
        return s;
      if (p.alignment & (p.alignment - 1))
        return r.error(*a, aPath,
                       "must be a power of two, found " +
                           std::to_string(p.alignment));
    }
    return Status::ok();
  }
  if (kind == "dim") {
    p.kind = ParamKind::Dim;
    return r.object(v, path, {"name", "kind"});
  }
  if (kind == "f32" || kind == "i64") {
    if (Status s = r.object(v, path, {"name", "kind", "value"}))
      return s;
    const Value *value;
    if (Status s = r.field(v, path, "value", value))
      return s;
    std::string vPath = Reader::join(path, "value");
    if (kind == "i64") {
      p.kind = ParamKind::I64;
      return r.integer(*value, vPath, INT64_MIN, INT64_MAX, p.i64Value);
    }
    p.kind = ParamKind::F32;
    if (!value->isNumber())
      return r.error(*value, vPath,
                     "expected a number, found " + json::aKind(value->kind));
    if (value->number > 3.4028234663852886e38 ||
        value->number < -3.4028234663852886e38)
      return r.error(*value, vPath,
                     Reader::formatNumber(value->number) +
                         " does not fit in f32");
    p.f32Value = value->number;
    return Status::ok();
  }
  return r.error(*v.find("kind"), Reader::join(path, "kind"),
                 "unknown kind " + quote(kind) +
                     " (expected tensor, dim, f32 or i64)");
}

// [A, B]: two symbol names, each in some tensor's shape (`symbolIndex`):
// their indices (zero_if_equal, at_least).
Status parseSymbolPair(const Reader &r, const Value &v, const std::string &path,
                       const std::map<std::string, int> &symbolIndex,
                       std::string names[2], int indices[2]) {
  if (!v.isArray() || v.array.size() != 2)
    return r.error(v, path, "expected an array of 2 symbol names");
  for (size_t j = 0; j < 2; ++j) {
    const Value &name = v.array[j];
    std::string namePath = Reader::index(path, j);
    if (!name.isString())
      return r.error(name, namePath,
                     "expected a symbol name, found " + json::aKind(name.kind));
    auto it = symbolIndex.find(name.string);
    if (it == symbolIndex.end())
      return r.error(name, namePath,
                     "symbol " + quote(name.string) +
                         " does not appear in any tensor's shape");
    names[j] = name.string;
    indices[j] = it->second;
  }
  return Status::ok();
}

Status parseKernel(const Reader &r, const Value &v, const std::string &path,
                   Vendor vendor, Kernel &k) {
  if (Status s = r.object(v, path,
                          {"name", "binary", "entry", "params", "grid", "block",
                           "dynamic_shared_memory", "tile", "resources",
                           "strategy", "at_least"}))
    return s;
  if (Status s = r.string(v, path, "name", k.name))
    return s;
  if (Status s = r.string(v, path, "entry", k.entry))
    return s;
  if (Status s = r.string(v, path, "binary", k.binary))
    return s;
  // A plain file name: a bundle is one directory and must not reach outside it.
  const Value &binary = *v.find("binary");
  std::string binaryPath = Reader::join(path, "binary");
  if (k.binary.find('/') != std::string::npos || k.binary == "." ||
      k.binary == "..")
    return r.error(binary, binaryPath,
                   quote(k.binary) +
                       " must be a file name inside the bundle directory");
  // open() stops at a NUL: "k\u0000.cubin" would pass the suffix check below
  // and open "k". Control characters have no place in a file name either.
  for (size_t i = 0; i < k.binary.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(k.binary[i]);
    if (c < 0x20 || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", c);
      return r.error(binary, binaryPath,
                     "must be a plain file name, found the control character " +
                         std::string(code) + " at byte " + std::to_string(i));
    }
  }
  const char *extension = vendor == Vendor::Nvidia ? ".cubin" : ".hsaco";
  size_t extLen = strlen(extension);
  if (k.binary.size() <= extLen ||
      k.binary.compare(k.binary.size() - extLen, extLen, extension) != 0)
    return r.error(binary, binaryPath,
                   quote(k.binary) + " must end in " + extension +
                       " for vendor " + vendorName(vendor));

  // Parameters.
  const Value *params;
  if (Status s = r.field(v, path, "params", params))
    return s;
  std::string paramsPath = Reader::join(path, "params");
  if (!params->isArray())
    return r.error(*params, paramsPath,
                   "expected an array, found " + json::aKind(params->kind));
  std::map<std::string, size_t> paramNames;
  for (size_t i = 0; i < params->array.size(); ++i) {
    std::string pPath = Reader::index(paramsPath, i);
    k.params.emplace_back();
    Param &p = k.params.back();
    if (Status s = parseParam(r, params->array[i], pPath, p))
      return s;
    auto inserted = paramNames.emplace(p.name, i);
    if (!inserted.second)
      return r.error(params->array[i], pPath,
                     "duplicate parameter name " + quote(p.name) +
                         " (also params[" +
                         std::to_string(inserted.first->second) + "])");
    if (p.kind == ParamKind::Tensor)
      k.tensorParams.push_back(i);
  }
  // Symbols the tensors can bind; a dim or grid symbol outside this set could
  // never get a value at launch. Indices let a launch bind into a flat array.
  std::map<std::string, int> symbolIndex;
  for (Param &p : k.params)
    for (Extent &e : p.shape)
      if (e.isSymbol()) {
        auto inserted =
            symbolIndex.emplace(e.symbol, static_cast<int>(k.symbols.size()));
        if (inserted.second)
          k.symbols.push_back(e.symbol);
        e.symbolIndex = inserted.first->second;
      }
  for (size_t i = 0; i < k.params.size(); ++i) {
    Param &p = k.params[i];
    if (p.kind != ParamKind::Dim)
      continue;
    auto it = symbolIndex.find(p.name);
    if (it == symbolIndex.end())
      return r.error(params->array[i], Reader::index(paramsPath, i),
                     "dim " + quote(p.name) +
                         " does not appear in any tensor's shape, so no launch "
                         "can bind it");
    p.symbolIndex = it->second;
  }

  // Launch geometry.
  const Value *grid, *block;
  if (Status s = r.field(v, path, "grid", grid))
    return s;
  std::string gridPath = Reader::join(path, "grid");
  if (!grid->isArray() || grid->array.size() != 3)
    return r.error(*grid, gridPath, "expected an array of 3 entries (x, y, z)");
  for (size_t i = 0; i < 3; ++i) {
    std::string gPath = Reader::index(gridPath, i);
    const Value &g = grid->array[i];
    if (g.isObject()) {
      // {"symbol": "T", "ceil_div": 64}: ceil(T / 64) programs;
      // {"symbol": "T", "ceil_div": 16, "plus": "N_plus_1"}: that plus N + 1;
      // {"symbol": "B", "ceil_div": 1, "times": 8}: B x 8 (segments);
      // {"symbol": "H", "ceil_div": 1, "zero_if_equal": ["H", "HV"]}: H,
      // or none where H = HV.
      if (Status s = r.object(g, gPath,
                              {"symbol", "ceil_div", "plus", "times",
                               "zero_if_equal"}))
        return s;
      const Value *sym, *div;
      if (Status s = r.field(g, gPath, "symbol", sym))
        return s;
      if (!sym->isString())
        return r.error(*sym, Reader::join(gPath, "symbol"),
                       "expected a symbol name, found " +
                           json::aKind(sym->kind));
      if (Status s = parseExtent(r, *sym, Reader::join(gPath, "symbol"), 1,
                                 k.grid[i]))
        return s;
      if (Status s = r.field(g, gPath, "ceil_div", div))
        return s;
      if (Status s = r.integer(*div, Reader::join(gPath, "ceil_div"), 1,
                               UINT32_MAX, k.grid[i].ceilDiv))
        return s;
      if (const Value *times = g.find("times"))
        if (Status s = r.integer(*times, Reader::join(gPath, "times"), 1,
                                 65536, k.grid[i].times))
          return s;
      if (const Value *plus = g.find("plus")) {
        std::string plusPath = Reader::join(gPath, "plus");
        if (!plus->isString())
          return r.error(*plus, plusPath,
                         "expected a symbol name, found " +
                             json::aKind(plus->kind));
        auto it = symbolIndex.find(plus->string);
        if (it == symbolIndex.end())
          return r.error(*plus, plusPath,
                         "symbol " + quote(plus->string) +
                             " does not appear in any tensor's shape");
        k.grid[i].plus = plus->string;
        k.grid[i].plusIndex = it->second;
      }
      if (const Value *eq = g.find("zero_if_equal"))
        if (Status s = parseSymbolPair(r, *eq,
                                       Reader::join(gPath, "zero_if_equal"),
                                       symbolIndex, k.grid[i].zeroIfEqual,
                                       k.grid[i].zeroIfEqualIndex))
          return s;
    } else if (Status s = parseExtent(r, g, gPath, 1, k.grid[i])) {
      return s;
    }
    if (k.grid[i].isSymbol()) {
      auto it = symbolIndex.find(k.grid[i].symbol);
      if (it == symbolIndex.end())
        return r.error(grid->array[i], gPath,
                       "symbol " + quote(k.grid[i].symbol) +
                           " does not appear in any tensor's shape");
      k.grid[i].symbolIndex = it->second;
    }
    if (!k.grid[i].isSymbol() && k.grid[i].value > UINT32_MAX)
      return r.error(grid->array[i], gPath,
                     "grid size " + std::to_string(k.grid[i].value) +
                         " does not fit in 32 bits");
  }
  // [[A, B], ...]: symbol A's value at least symbol B's at every launch.
  if (const Value *atLeast = v.find("at_least")) {
    std::string alPath = Reader::join(path, "at_least");
    if (!atLeast->isArray())
      return r.error(*atLeast, alPath,
                     "expected an array of [A, B] symbol pairs, found " +
                         json::aKind(atLeast->kind));
    for (size_t i = 0; i < atLeast->array.size(); ++i) {
      std::string names[2];
      int index[2];
      if (Status s = parseSymbolPair(r, atLeast->array[i],
                                     Reader::index(alPath, i), symbolIndex,
                                     names, index))
        return s;
      k.atLeast.emplace_back(static_cast<size_t>(index[0]),
                             static_cast<size_t>(index[1]));
    }
  }
  if (Status s = r.field(v, path, "block", block))
    return s;
  std::string blockPath = Reader::join(path, "block");
  if (!block->isArray() || block->array.size() != 3)
    return r.error(*block, blockPath,
                   "expected an array of 3 integers (x, y, z)");
  int64_t threads = 1;
  for (size_t i = 0; i < 3; ++i) {
    int64_t b;
    if (Status s =
            r.integer(block->array[i], Reader::index(blockPath, i), 1, 1024, b))
      return s;
    k.block[i] = static_cast<uint32_t>(b);
    threads *= b;
  }
  // Both vendors cap a block at 1024 threads.
  if (threads > 1024)
    return r.error(*block, blockPath,
                   std::to_string(threads) +
                       " threads per block; the limit is 1024");

  if (const Value *smem = v.find("dynamic_shared_memory")) {
    int64_t bytes;
    if (Status s = r.integer(*smem, Reader::join(path, "dynamic_shared_memory"),
                             0, UINT32_MAX, bytes))
      return s;
    k.dynamicSharedMemory = static_cast<uint32_t>(bytes);
  }
  // Informational name -> integer objects: the tile configuration and the
  // resources the compiler reported (registers, spills, scratch).
  for (auto [field, out] :
       {std::pair<const char *, std::vector<std::pair<std::string, int64_t>> *>{
            "tile", &k.tile},
        {"resources", &k.resources}}) {
    const Value *obj = v.find(field);
    if (!obj)
      continue;
    std::string objPath = Reader::join(path, field);
    if (!obj->isObject())
      return r.error(*obj, objPath,
                     "expected an object, found " + json::aKind(obj->kind));
    for (const json::Member &m : obj->members) {
      int64_t value;
      if (Status s = r.integer(m.value, Reader::join(objPath, m.key), 0,
                               INT64_MAX, value))
        return s;
      out->emplace_back(m.key, value);
    }
  }
  // Informational: {kernel, kind: lanes | tiles, reason, instruction,
  // program: derived | per_lane (bundles of compilers that still wrote the
  // intra-chunk kernel per lane: the kernels are valid, the field only
  // says how they were written)}, stages (chunks in flight, 2 to 8)
  // (strings), and {step, tile_chunk} for a chunk run as sub-chunk steps
  // (integers: the op's chunk a multiple of the step).
  if (const Value *st = v.find("strategy")) {
    std::string stPath = Reader::join(path, "strategy");
    if (Status s = r.object(*st, stPath,
                            {"kernel", "kind", "reason", "step", "tile_chunk",
                             "instruction", "program", "stages"}))
      return s;
    const Value *step = st->find("step"), *tileChunk = st->find("tile_chunk");
    if (bool(step) != bool(tileChunk))
      return r.error(*st, stPath,
                     "step and tile_chunk go together (a chunk run as "
                     "sub-chunk steps)");
    if (step) {
      if (Status s = r.integer(*step, Reader::join(stPath, "step"), 1, 64,
                               k.strategyStep))
        return s;
      if (Status s = r.integer(*tileChunk, Reader::join(stPath, "tile_chunk"),
                               1, 64, k.strategyTileChunk))
        return s;
      if (k.strategyTileChunk % k.strategyStep != 0)
        return r.error(*tileChunk, Reader::join(stPath, "tile_chunk"),
                       std::to_string(k.strategyTileChunk) +
                           " is not a multiple of the step " +
                           std::to_string(k.strategyStep));
    }
    std::string kernelRole;
    if (Status s = r.string(*st, stPath, "kernel", kernelRole))
      return s;
    if (Status s = r.string(*st, stPath, "kind", k.strategyKind))
      return s;
    if (k.strategyKind != "lanes" && k.strategyKind != "tiles")
      return r.error(*st->find("kind"), Reader::join(stPath, "kind"),
                     "unknown kind " + quote(k.strategyKind) +
                         " (expected lanes or tiles)");
    if (st->find("reason"))
      if (Status s = r.string(*st, stPath, "reason", k.strategyReason))
        return s;
    if (st->find("instruction")) {
      std::string instruction;
      if (Status s = r.string(*st, stPath, "instruction", instruction))
        return s;
      // wmma_emulated: kda-compile --emulate-wmma's test bundles (gfx1100's
      // lane program on an NVIDIA GPU).
      if (instruction != "mma_sync" && instruction != "wgmma" &&
          instruction != "mfma" && instruction != "wmma" &&
          instruction != "wmma_emulated")
        return r.error(*st->find("instruction"),
                       Reader::join(stPath, "instruction"),
                       "unknown matrix instruction " + quote(instruction) +
                           " (expected mma_sync, wgmma, mfma, wmma or "
                           "wmma_emulated)");
    }
    if (st->find("program")) {
      std::string program;
      if (Status s = r.string(*st, stPath, "program", program))
        return s;
      if (program != "derived" && program != "per_lane")
        return r.error(*st->find("program"), Reader::join(stPath, "program"),
                       "unknown program " + quote(program) +
                           " (expected derived or per_lane)");
    }
    if (const Value *stages = st->find("stages"))
      if (Status s = r.integer(*stages, Reader::join(stPath, "stages"), 2, 8,
                               k.strategyStages))
        return s;
  }
  return Status::ok();
}

std::string shapeText(const std::vector<Extent> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + shape[i].str();
  return s + "]";
}

bool sameShape(const std::vector<Extent> &a, const std::vector<Extent> &b,
               const std::map<std::string, std::string> *rename = nullptr) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].isSymbol() != b[i].isSymbol() ||
        (!a[i].isSymbol() && a[i].value != b[i].value))
      return false;
    if (!a[i].isSymbol())
      continue;
    // b is the kernel's: its symbol under the launch's renaming.
    const std::string *symbol = &b[i].symbol;
    if (rename)
      if (auto it = rename->find(b[i].symbol); it != rename->end())
        symbol = &it->second;
    if (a[i].symbol != *symbol)
      return false;
  }
  return true;
}

// An array field; `optional` fields that are absent give `out` = nullptr.
Status arrayField(const Reader &r, const Value &obj, const std::string &path,
                  const char *key, bool optional, const Value *&out) {
  out = obj.find(key);
  if (!out) {
    if (optional)
      return Status::ok();
    return r.error(obj, path, std::string("missing field \"") + key + "\"");
  }
  if (!out->isArray())
    return r.error(*out, Reader::join(path, key),
                   "expected an array, found " + json::aKind(out->kind));
  return Status::ok();
}

// Version 2's entries[i]: the caller's tensors, the workspaces, and the
// kernels to launch in order with their arguments (BUNDLE.md, "Entries").
Status parseEntry(const Reader &r, const Value &v, const std::string &path,
                  const std::vector<Kernel> &kernels, Entry &e) {
  if (Status s =
          r.object(v, path, {"name", "params", "workspaces", "launches"}))
    return s;
  if (Status s = r.string(v, path, "name", e.name))
    return s;
  Kernel &sig = e.signature;
  sig.name = e.name;
  sig.what = "entry";
  for (Extent &g : sig.grid)
    g.value = 1;

  // Names of params and workspaces share one namespace.
  std::map<std::string, std::string> names; // name -> "params[i]" / ...
  const Value *params;
  if (Status s = arrayField(r, v, path, "params", false, params))
    return s;
  std::string paramsPath = Reader::join(path, "params");
  for (size_t i = 0; i < params->array.size(); ++i) {
    std::string pPath = Reader::index(paramsPath, i);
    sig.params.emplace_back();
    Param &p = sig.params.back();
    if (Status s = parseParam(r, params->array[i], pPath, p))
      return s;
    if (p.kind != ParamKind::Tensor)
      return r.error(*params->array[i].find("kind"), Reader::join(pPath, "kind"),
                     "an entry's parameters are tensors only (its kernels "
                     "bind their dims from the tensors they receive)");
    auto inserted = names.emplace(p.name, Reader::index("params", i));
    if (!inserted.second)
      return r.error(params->array[i], pPath,
                     "duplicate name " + quote(p.name) + " (also " +
                         inserted.first->second + ")");
    sig.tensorParams.push_back(i);
  }
  std::map<std::string, int> symbolIndex;
  for (Param &p : sig.params)
    for (Extent &x : p.shape)
      if (x.isSymbol()) {
        auto inserted =
            symbolIndex.emplace(x.symbol, static_cast<int>(sig.symbols.size()));
        if (inserted.second)
          sig.symbols.push_back(x.symbol);
        x.symbolIndex = inserted.first->second;
      }

  const Value *workspaces;
  if (Status s = arrayField(r, v, path, "workspaces", true, workspaces))
    return s;
  std::string wsPath = Reader::join(path, "workspaces");
  for (size_t i = 0; workspaces && i < workspaces->array.size(); ++i) {
    const Value &w = workspaces->array[i];
    std::string wPath = Reader::index(wsPath, i);
    if (Status s = r.object(w, wPath, {"name", "dtype", "shape", "alignment"}))
      return s;
    e.workspaces.emplace_back();
    Workspace &ws = e.workspaces.back();
    if (Status s = r.string(w, wPath, "name", ws.name))
      return s;
    if (!isIdentifier(ws.name))
      return r.error(*w.find("name"), Reader::join(wPath, "name"),
                     quote(ws.name) +
                         " is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
    auto inserted = names.emplace(ws.name, Reader::index("workspaces", i));
    if (!inserted.second)
      return r.error(w, wPath,
                     "duplicate name " + quote(ws.name) + " (also " +
                         inserted.first->second + ")");
    std::string dtype;
    if (Status s = r.string(w, wPath, "dtype", dtype))
      return s;
    if (!parseDtype(dtype, ws.dtype))
      return r.error(*w.find("dtype"), Reader::join(wPath, "dtype"),
                     "unknown dtype " + quote(dtype) +
                         " (expected f32, f16, bf16, i32 or i64)");
    const Value *shape;
    if (Status s = arrayField(r, w, wPath, "shape", false, shape))
      return s;
    std::string shapePath = Reader::join(wPath, "shape");
    for (size_t d = 0; d < shape->array.size(); ++d) {
      std::string dPath = Reader::index(shapePath, d);
      ws.shape.emplace_back();
      Extent &x = ws.shape.back();
      if (Status s = parseExtent(r, shape->array[d], dPath, 0, x))
        return s;
      if (x.isSymbol()) {
        auto it = symbolIndex.find(x.symbol);
        if (it == symbolIndex.end())
          return r.error(shape->array[d], dPath,
                         "symbol " + quote(x.symbol) +
                             " does not appear in any entry parameter's "
                             "shape, so no launch can bind it");
        x.symbolIndex = it->second;
      }
    }
    if (const Value *a = w.find("alignment")) {
      std::string aPath = Reader::join(wPath, "alignment");
      if (Status s = r.integer(*a, aPath, 1, 4096, ws.alignment))
        return s;
      if (ws.alignment & (ws.alignment - 1))
        return r.error(*a, aPath,
                       "must be a power of two, found " +
                           std::to_string(ws.alignment));
    }
    ws.effectiveAlignment = ws.alignment;
  }

  const Value *launches;
  if (Status s = arrayField(r, v, path, "launches", false, launches))
    return s;
  std::string launchesPath = Reader::join(path, "launches");
  if (launches->array.empty())
    return r.error(*launches, launchesPath,
                   "an entry needs at least one launch");
  for (size_t i = 0; i < launches->array.size(); ++i) {
    const Value &l = launches->array[i];
    std::string lPath = Reader::index(launchesPath, i);
    if (Status s = r.object(l, lPath,
                            {"kernel", "args", "symbols", "stream", "after", "alone",
                             "progress"}))
      return s;
    e.launches.emplace_back();
    EntryLaunch &launch = e.launches.back();
    std::string kernelName;
    if (Status s = r.string(l, lPath, "kernel", kernelName))
      return s;
    bool found = false;
    for (size_t k = 0; k < kernels.size() && !found; ++k)
      if (kernels[k].name == kernelName) {
        launch.kernel = k;
        found = true;
      }
    if (!found) {
      std::string list;
      for (const Kernel &k : kernels)
        list += (list.empty() ? "" : ", ") + k.name;
      return r.error(*l.find("kernel"), Reader::join(lPath, "kernel"),
                     "no kernel " + quote(kernelName) +
                         " in this bundle (kernels: " + list + ")");
    }
    const Kernel &kernel = kernels[launch.kernel];
    // A layer's entry launches kernels written for different ops, which may
    // name one dimension differently (the window kernel's HO is the gated
    // delta's HV): "symbols" maps the kernel's names to the entry's for the
    // shape checks below. The launch binds the kernel's own symbols from
    // the tensors it receives, as always.
    std::map<std::string, std::string> rename;
    if (const Value *symbols = l.find("symbols")) {
      std::string sPath = Reader::join(lPath, "symbols");
      if (!symbols->isObject())
        return r.error(*symbols, sPath,
                       "expected an object (kernel symbol -> entry symbol), "
                       "found " + json::aKind(symbols->kind));
      for (const json::Member &m : symbols->members) {
        std::string mPath = Reader::join(sPath, m.key);
        bool known = false;
        for (size_t t : kernel.tensorParams)
          for (const Extent &x : kernel.params[t].shape)
            known = known || (x.isSymbol() && x.symbol == m.key);
        if (!known)
          return r.error(m.value, mPath,
                         "kernel " + quote(kernel.name) +
                             " has no dimension " + quote(m.key));
        if (!m.value.isString())
          return r.error(m.value, mPath,
                         "expected a string (an entry symbol), found " +
                             json::aKind(m.value.kind));
        bool bound = false;
        for (const Param &p : sig.params)
          for (const Extent &x : p.shape)
            bound = bound || (x.isSymbol() && x.symbol == m.value.string);
        if (!bound)
          return r.error(m.value, mPath,
                         "symbol " + quote(m.value.string) +
                             " is in no parameter of entry " + quote(e.name));
        rename[m.key] = m.value.string;
      }
    }
    // Two streams: which one, and the earlier launches this one follows.
    if (const Value *stream = l.find("stream")) {
      if (!stream->isNumber() ||
          (stream->number != 0 && stream->number != 1))
        return r.error(*stream, Reader::join(lPath, "stream"),
                       "expected 0 (the caller's stream) or 1 (the side "
                       "stream)");
      launch.stream = static_cast<int>(stream->number);
      e.sideStream = e.sideStream || launch.stream == 1;
    }
    if (const Value *alone = l.find("alone")) {
      if (!alone->isBool())
        return r.error(*alone, Reader::join(lPath, "alone"),
                       "expected true or false");
      launch.alone = alone->boolean;
    }
    const Value *after;
    if (Status s = arrayField(r, l, lPath, "after", true, after))
      return s;
    if (after)
      for (size_t k = 0; k < after->array.size(); ++k) {
        const Value &a = after->array[k];
        std::string kPath = Reader::index(Reader::join(lPath, "after"), k);
        if (!a.isNumber() || a.number < 0 || a.number >= double(i) ||
            a.number != double(static_cast<size_t>(a.number)))
          return r.error(a, kPath,
                         "expected the index of an earlier launch (0 to " +
                             std::to_string(i == 0 ? 0 : i - 1) + ")" +
                             (i == 0 ? ", but launch 0 has none" : ""));
        launch.after.push_back(static_cast<size_t>(a.number));
      }
    const Value *args;
    if (Status s = arrayField(r, l, lPath, "args", false, args))
      return s;
    std::string argsPath = Reader::join(lPath, "args");
    std::string expectedNames;
    for (size_t t : kernel.tensorParams)
      expectedNames +=
          (expectedNames.empty() ? "" : ", ") + kernel.params[t].name;
    if (args->array.size() != kernel.tensorParams.size())
      return r.error(*args, argsPath,
                     "kernel " + quote(kernel.name) + " takes " +
                         std::to_string(kernel.tensorParams.size()) +
                         " tensors (" + expectedNames + "), found " +
                         std::to_string(args->array.size()) + " args");
    for (size_t j = 0; j < args->array.size(); ++j) {
      const Value &a = args->array[j];
      std::string aPath = Reader::index(argsPath, j);
      if (!a.isString())
        return r.error(a, aPath,
                       "expected a string (an entry parameter or workspace "
                       "name), found " +
                           json::aKind(a.kind));
      LaunchArg arg;
      const std::vector<Extent> *shape = nullptr;
      kda_dtype dtype = KDA_F32;
      const char *what = "";
      for (size_t p = 0; p < sig.params.size() && !shape; ++p)
        if (sig.params[p].name == a.string) {
          arg = {false, p};
          shape = &sig.params[p].shape;
          dtype = sig.params[p].dtype;
          what = "entry parameter";
        }
      for (size_t w = 0; w < e.workspaces.size() && !shape; ++w)
        if (e.workspaces[w].name == a.string) {
          arg = {true, w};
          shape = &e.workspaces[w].shape;
          dtype = e.workspaces[w].dtype;
          what = "workspace";
        }
      if (!shape) {
        std::string list;
        for (const auto &n : names)
          list += (list.empty() ? "" : ", ") + n.first;
        return r.error(a, aPath,
                       "unknown name " + quote(a.string) +
                           " (expected an entry parameter or workspace" +
                           (list.empty() ? "" : ": " + list) + ")");
      }
      const Param &target = kernel.params[kernel.tensorParams[j]];
      if (dtype != target.dtype || !sameShape(*shape, target.shape, &rename))
        return r.error(
            a, aPath,
            "entry " + quote(e.name) + " launch " + std::to_string(i) +
                " arg " + std::to_string(j) + ": " + what + " " +
                quote(a.string) + " is " + dtypeName(dtype) + " " +
                shapeText(*shape) + ", but kernel " + quote(kernel.name) +
                " parameter " + quote(target.name) + " is " +
                dtypeName(target.dtype) + " " + shapeText(target.shape) +
                (rename.empty() ? "" : " (after the launch's symbols)"));
      if (arg.isWorkspace) {
        Workspace &ws = e.workspaces[arg.index];
        ws.effectiveAlignment = std::max(ws.effectiveAlignment, target.alignment);
      }
      launch.args.push_back(arg);
    }
    if (const Value *progress = l.find("progress")) {
      std::string pPath = Reader::join(lPath, "progress");
      if (Status s = r.object(*progress, pPath, {"counter", "after"}))
        return s;
      std::string counter;
      if (Status s = r.string(*progress, pPath, "counter", counter))
        return s;
      const Value &cv = *progress->find("counter");
      bool found = false;
      kda_dtype dtype = KDA_F32;
      for (size_t p = 0; p < sig.params.size() && !found; ++p)
        if (sig.params[p].name == counter) {
          launch.progressCounter = {false, p};
          dtype = sig.params[p].dtype;
          found = true;
        }
      for (size_t w = 0; w < e.workspaces.size() && !found; ++w)
        if (e.workspaces[w].name == counter) {
          launch.progressCounter = {true, w};
          dtype = e.workspaces[w].dtype;
          found = true;
        }
      if (!found)
        return r.error(cv, Reader::join(pPath, "counter"),
                       "unknown name " + quote(counter) +
                           " (expected an entry parameter or workspace)");
      if (dtype != KDA_I32)
        return r.error(cv, Reader::join(pPath, "counter"),
                       quote(counter) + " is " + dtypeName(dtype) +
                           ", expected i32 (its first word counts the "
                           "started blocks)");
      const Value *pa;
      if (Status s = r.field(*progress, pPath, "after", pa))
        return s;
      int64_t index = 0;
      if (Status s = r.integer(*pa, Reader::join(pPath, "after"), 0,
                               static_cast<int64_t>(i) - 1, index))
        return s;
      const size_t producer = static_cast<size_t>(index);
      if (std::find(launch.after.begin(), launch.after.end(), producer) ==
              launch.after.end() ||
          e.launches[producer].stream == launch.stream)
        return r.error(*pa, Reader::join(pPath, "after"),
                       "expected a launch on the other stream that \"after\" "
                       "names, found launch " +
                           std::to_string(producer));
      launch.progressAfter = static_cast<int>(producer);
    }
  }
  // Each launch another stream's launch follows records an event.
  for (EntryLaunch &launch : e.launches)
    for (size_t d : launch.after)
      if (e.launches[d].stream != launch.stream)
        e.launches[d].recordEvent = true;
  return Status::ok();
}

[[maybe_unused]] std::string errnoText(int rc, const char *buf) {
  return rc == 0 ? buf : "unknown error";
}
[[maybe_unused]] std::string errnoText(const char *text, const char *) {
  return text;
}
// strerror is not thread-safe; strerror_r has a GNU and an XSI flavour.
std::string describeErrno(int e) {
  char buf[256] = {0};
  return errnoText(strerror_r(e, buf, sizeof buf), buf);
}

// Reads a whole regular file. `missing` is the code for a file that cannot be
// opened (the caller knows whether that means a bad argument or a bad bundle).
Status readFile(const std::string &path, size_t maxBytes, kda_status missing,
                std::string &out) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer forever,
  // before the S_ISREG check below could refuse it (no effect on regular
  // files).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return Status(missing, path + ": cannot open: " + describeErrno(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(missing, path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > maxBytes) {
    ::close(fd);
    return Status(KDA_ERROR_CORRUPT_BUNDLE,
                  path + ": " + std::to_string(st.st_size) +
                      " bytes is larger than the limit of " +
                      std::to_string(maxBytes));
  }
  out.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd, &out[done], out.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      return Status(KDA_ERROR_CORRUPT_BUNDLE,
                    path + ": read failed: " +
                        (n == 0 ? std::string("file shrank while reading")
                                : describeErrno(e)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::ok();
}

uint16_t read16(const std::string &s, size_t at) {
  return static_cast<uint16_t>(static_cast<unsigned char>(s[at]) |
                               (static_cast<unsigned char>(s[at + 1]) << 8));
}
uint32_t read32(const std::string &s, size_t at) {
  return static_cast<uint32_t>(read16(s, at)) |
         (static_cast<uint32_t>(read16(s, at + 2)) << 16);
}

} // namespace

Status parseManifest(std::string_view text, const std::string &origin,
                     Manifest &out) {
  out = Manifest();
  Value root;
  std::string jsonError;
  if (!json::parse(text, root, jsonError))
    return Status(KDA_ERROR_CORRUPT_BUNDLE, origin + ":" + jsonError);
  Reader r(origin);
  if (Status s = r.object(root, "",
                          {"format", "version", "target", "source_hash",
                           "compiler_fingerprint", "kernels", "entries"}))
    return s;

  std::string format;
  if (Status s = r.string(root, "", "format", format))
    return s;
  if (format != "kda-bundle")
    return r.error(*root.find("format"), "format",
                   "expected \"kda-bundle\", found " + quote(format));
  const Value *version;
  if (Status s = r.field(root, "", "version", version))
    return s;
  if (!version->isNumber() || !version->isInteger ||
      (version->integer != 1 && version->integer != 2))
    return r.error(*version, "version",
                   "unsupported version " +
                       (version->isNumber()
                            ? Reader::formatNumber(version->number)
                            : json::aKind(version->kind)) +
                       " (this runtime reads versions 1 and 2)");
  out.version = version->integer;

  const Value *target;
  if (Status s = r.field(root, "", "target", target))
    return s;
  if (Status s = r.object(*target, "target", {"vendor", "chip"}))
    return s;
  std::string vendor;
  if (Status s = r.string(*target, "target", "vendor", vendor))
    return s;
  if (vendor == "nvidia")
    out.target.vendor = Vendor::Nvidia;
  else if (vendor == "amd")
    out.target.vendor = Vendor::Amd;
  else
    return r.error(*target->find("vendor"), "target.vendor",
                   "unknown vendor " + quote(vendor) +
                       " (expected \"nvidia\" or \"amd\")");
  if (Status s = r.string(*target, "target", "chip", out.target.chip))
    return s;
  if (!isKnownChip(out.target.vendor, out.target.chip))
    return r.error(
        *target->find("chip"), "target.chip",
        "unknown " + vendor + " chip " + quote(out.target.chip) + " (known: " +
            (out.target.vendor == Vendor::Nvidia ? joinChips(kNvidiaChips)
                                                 : joinChips(kAmdChips)) +
            ")");

  if (Status s = r.string(root, "", "source_hash", out.sourceHash))
    return s;
  bool hex = out.sourceHash.size() == 64;
  for (char c : out.sourceHash)
    hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!hex)
    return r.error(*root.find("source_hash"), "source_hash",
                   "expected 64 lowercase hex digits (a SHA-256), found " +
                       quote(out.sourceHash));

  // Which compiler build wrote the bundle (kda-compile --fingerprint):
  // provenance for caches and the tuning database, not used to launch, so
  // only its type is checked. Optional: older bundles lack it.
  if (root.find("compiler_fingerprint")) {
    std::string fingerprint;
    if (Status s = r.string(root, "", "compiler_fingerprint", fingerprint))
      return s;
  }

  const Value *kernels;
  if (Status s = r.field(root, "", "kernels", kernels))
    return s;
  if (!kernels->isArray())
    return r.error(*kernels, "kernels",
                   "expected an array, found " + json::aKind(kernels->kind));
  if (kernels->array.empty())
    return r.error(*kernels, "kernels", "a bundle needs at least one kernel");
  std::map<std::string, size_t> names;
  for (size_t i = 0; i < kernels->array.size(); ++i) {
    std::string kPath = Reader::index("kernels", i);
    out.kernels.emplace_back();
    if (Status s = parseKernel(r, kernels->array[i], kPath, out.target.vendor,
                               out.kernels.back()))
      return s;
    auto inserted = names.emplace(out.kernels.back().name, i);
    if (!inserted.second)
      return r.error(kernels->array[i], kPath,
                     "duplicate kernel name " + quote(out.kernels.back().name) +
                         " (also kernels[" +
                         std::to_string(inserted.first->second) + "])");
  }

  const Value *entries = root.find("entries");
  if (entries && out.version < 2)
    return r.error(*entries, "entries",
                   "entries need version 2 (this manifest is version " +
                       std::to_string(out.version) + ")");
  if (Status s = arrayField(r, root, "", "entries", true, entries))
    return s;
  std::map<std::string, size_t> entryNames;
  for (size_t i = 0; entries && i < entries->array.size(); ++i) {
    std::string ePath = Reader::index("entries", i);
    out.entries.emplace_back();
    Entry &e = out.entries.back();
    if (Status s = parseEntry(r, entries->array[i], ePath, out.kernels, e))
      return s;
    auto kernel = names.find(e.name);
    if (kernel != names.end())
      return r.error(entries->array[i], ePath,
                     "entry name " + quote(e.name) +
                         " is also the name of kernels[" +
                         std::to_string(kernel->second) + "]");
    auto inserted = entryNames.emplace(e.name, i);
    if (!inserted.second)
      return r.error(entries->array[i], ePath,
                     "duplicate entry name " + quote(e.name) + " (also entries[" +
                         std::to_string(inserted.first->second) + "])");
  }
  return Status::ok();
}

Status checkBinaryHeader(const std::string &image, const Target &target,
                         const std::string &what) {
  bool nvidia = target.vendor == Vendor::Nvidia;
  const char *kind = nvidia ? "a cubin" : "an AMDGPU code object";
  if (image.size() < 64 || image.compare(0, 4,
                                         "\x7f"
                                         "ELF") != 0)
    return Status(KDA_ERROR_CORRUPT_BUNDLE, what + " is not an ELF file (" +
                                                kind +
                                                " starts with \\x7fELF)");
  if (image[4] != 2 || image[5] != 1)
    return Status(KDA_ERROR_CORRUPT_BUNDLE,
                  what + " is not a 64-bit little-endian ELF file");
  uint16_t machine = read16(image, 18);
  uint16_t expected = nvidia ? kEmCuda : kEmAmdgpu;
  if (machine != expected)
    return Status(KDA_ERROR_CORRUPT_BUNDLE,
                  what + " is an ELF file for machine " +
                      std::to_string(machine) + ", not " + kind + " (machine " +
                      std::to_string(expected) + ")");
  unsigned osAbiVersion = static_cast<unsigned char>(image[8]);
  uint32_t flags = read32(image, 48);
  if (nvidia) {
    // The SM number sits in e_flags; where depends on the cubin ABI version
    // (LLVM's ELF.h: EF_CUDA_SM before Blackwell-era toolkits, EF_CUDA_SM_MASK
    // after). The 'a' suffix is not reliably recorded, so only the number is
    // compared. Unknown ABI versions are not checked.
    unsigned sm = 0;
    if (osAbiVersion == 7)
      sm = flags & 0xff;
    else if (osAbiVersion == 8)
      sm = (flags >> 8) & 0xff;
    std::string digits;
    for (char c : target.chip)
      if (c >= '0' && c <= '9')
        digits += c;
    if (sm != 0 && std::to_string(sm) != digits)
      return Status(KDA_ERROR_CORRUPT_BUNDLE,
                    what + " is a cubin for sm_" + std::to_string(sm) +
                        ", but target.chip is " + target.chip);
  } else if (
      static_cast<unsigned char>(image[7]) == 64 /* ELFOSABI_AMDGPU_HSA */ &&
      osAbiVersion >= 1) {
    // Code objects v3 and later record the processor in EF_AMDGPU_MACH.
    unsigned mach = flags & 0xff;
    for (const auto &c : kAmdChips) {
      if (c.second == mach && target.chip != c.first)
        return Status(KDA_ERROR_CORRUPT_BUNDLE,
                      what + " is a code object for " + c.first +
                          ", but target.chip is " + target.chip);
    }
  }
  return Status::ok();
}

Status loadBundle(const std::string &directory, Manifest &out) {
  struct stat st;
  if (::stat(directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status(
        KDA_ERROR_INVALID_ARGUMENT,
        directory +
            ": not a directory (a bundle is a directory with manifest.json)");
  std::string manifestPath = directory + "/manifest.json";
  std::string text;
  if (Status s = readFile(manifestPath, kMaxManifestBytes,
                          KDA_ERROR_CORRUPT_BUNDLE, text))
    return s;
  if (Status s = parseManifest(text, manifestPath, out))
    return s;
  // Kernels may share one binary (one module with several entries).
  std::map<std::string, std::string> images;
  for (size_t i = 0; i < out.kernels.size(); ++i) {
    Kernel &k = out.kernels[i];
    auto it = images.find(k.binary);
    if (it == images.end()) {
      std::string image;
      std::string what = directory + "/" + k.binary;
      if (Status s =
              readFile(what, size_t(1) << 31, KDA_ERROR_CORRUPT_BUNDLE, image))
        return s.prefix(manifestPath + ": kernels[" + std::to_string(i) +
                        "].binary: ");
      if (Status s = checkBinaryHeader(image, out.target, what))
        return s.prefix(manifestPath + ": kernels[" + std::to_string(i) +
                        "].binary: ");
      it = images.emplace(k.binary, std::move(image)).first;
    }
    k.image = it->second;
  }
  return Status::ok();
}

bool nvidiaChipRunsOn(const std::string &chip, int major, int minor,
                      std::string &why) {
  // "sm_" + 2 or 3 digits (+ "a"); the last digit is the minor version.
  size_t end = chip.size();
  bool archSpecific = end > 0 && chip[end - 1] == 'a';
  if (archSpecific)
    --end;
  int n = 0;
  bool wellFormed = chip.compare(0, 3, "sm_") == 0 && end >= 5 && end <= 6;
  for (size_t i = 3; wellFormed && i < end; ++i) {
    wellFormed = chip[i] >= '0' && chip[i] <= '9';
    n = n * 10 + (chip[i] - '0');
  }
  if (!wellFormed) {
    why = "cannot read a compute capability from chip " + quote(chip);
    return false;
  }
  int chipMajor = n / 10, chipMinor = n % 10;
  if (archSpecific ? major == chipMajor && minor == chipMinor
                   : major == chipMajor && minor >= chipMinor)
    return true;
  std::string device = "compute capability " + std::to_string(major) + "." +
                       std::to_string(minor);
  std::string needed =
      std::to_string(chipMajor) + "." + std::to_string(chipMinor);
  if (archSpecific)
    why = chip + " code runs only on compute capability " + needed +
          ", not on " + device;
  else
    why = chip + " code runs only on compute capability " + needed + " to " +
          std::to_string(chipMajor) +
          ".x (same major version, minor >= " + std::to_string(chipMinor) +
          "), not on " + device;
  return false;
}

} // namespace kda::rt
