// Unit tests of the runtime, on the CPU: the JSON parser, manifest
// validation, symbol binding and tensor checks, the C API, the no-driver
// path, and every driver path against FakeDriver.cpp (a stand-in for
// libcuda.so.1 / libamdhip64.so loaded through KDA_CUDA_LIBRARY /
// KDA_HIP_LIBRARY).
#include "runtime/Runtime.h"
#include "runtime/Json.h"
#include "runtime/Manifest.h"
#include "runtime/kda_runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace kda::rt;

// Counts heap allocations, so that a test can check that a launch makes none
// (the runtime's objects are linked into this executable and use these).
static std::atomic<long> heapAllocations{0};
void *operator new(size_t size) {
  heapAllocations.fetch_add(1, std::memory_order_relaxed);
  if (void *p = std::malloc(size ? size : 1))
    return p;
  std::abort();
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }

namespace {

// ---- helpers ----------------------------------------------------------------

// "LINE:COLUMN" of the first occurrence of `needle` in `text`.
std::string positionOf(const std::string &text, const std::string &needle) {
  size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  int line = 1;
  size_t lineStart = 0;
  for (size_t i = 0; i < at; ++i)
    if (text[i] == '\n') {
      ++line;
      lineStart = i + 1;
    }
  return std::to_string(line) + ":" + std::to_string(at - lineStart + 1);
}

std::string replaced(std::string s, const std::string &from,
                     const std::string &to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos)
      << "test bug: '" << from << "' not in the manifest";
  if (at != std::string::npos)
    s.replace(at, from.size(), to);
  return s;
}

// A minimal 64-bit ELF file: header, then the strings NUL-separated (entry
// names, chip names, as a real binary's string table has them). FakeDriver
// reads the total size from e_shoff (bytes 40..47), which it otherwise ignores.
std::string elfImage(uint16_t machine, unsigned char osAbi,
                     unsigned char abiVersion, uint32_t flags,
                     const std::vector<std::string> &strings) {
  std::string image(64, '\0');
  image[0] = 0x7f, image[1] = 'E', image[2] = 'L', image[3] = 'F';
  image[4] = 2; // ELFCLASS64
  image[5] = 1; // little endian
  image[6] = 1;
  image[7] = static_cast<char>(osAbi);
  image[8] = static_cast<char>(abiVersion);
  image[18] = static_cast<char>(machine & 0xff);
  image[19] = static_cast<char>(machine >> 8);
  std::memcpy(&image[48], &flags, 4);
  image += '\0';
  for (const std::string &s : strings)
    image += s + '\0';
  uint64_t size = image.size();
  std::memcpy(&image[40], &size, 8);
  return image;
}

// A cubin header as nvcc 13 writes it (ABI version 8: SM number in bits 8..15).
std::string cubin(unsigned sm, const std::vector<std::string> &entries) {
  return elfImage(190, 51, 8, (sm << 8) | 0x6000004u, entries);
}

// An AMDGPU code object v4 header (EF_AMDGPU_MACH in the low byte).
std::string hsaco(unsigned mach, const std::string &chip,
                  std::vector<std::string> entries) {
  entries.push_back(chip);
  return elfImage(224, 64, 2, mach, entries);
}

class TempDir {
public:
  TempDir() {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/kda-runtime-test-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    EXPECT_NE(mkdtemp(buf.data()), nullptr);
    path_ = buf.data();
  }
  ~TempDir() {
    for (const std::string &f : files_)
      ::unlink((path_ + "/" + f).c_str());
    ::rmdir(path_.c_str());
  }
  void write(const std::string &name, const std::string &content) {
    std::ofstream(path_ + "/" + name, std::ios::binary) << content;
    files_.push_back(name);
  }
  void remove(const std::string &name) {
    ::unlink((path_ + "/" + name).c_str());
  }
  const std::string &path() const { return path_; }

private:
  std::string path_;
  std::vector<std::string> files_;
};

const char *const kHash =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

// The reference bundle: a KDA-shaped kernel with every parameter kind, and a
// small one without dynamic shared memory.
std::string nvidiaManifest() {
  return std::string(R"({
  "format": "kda-bundle",
  "version": 1,
  "target": {"vendor": "nvidia", "chip": "sm_90a"},
  "source_hash": ")") +
         kHash + R"(",
  "kernels": [
    {
      "name": "kda_gated_delta_kernel",
      "binary": "kda_gated_delta_kernel.sm_90a.cubin",
      "entry": "kda_gated_delta_kernel",
      "params": [
        {"name": "q", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", 32, 128], "alignment": 16},
        {"name": "k", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", 32, 128], "alignment": 16},
        {"name": "g", "kind": "tensor", "dtype": "f32",
         "shape": ["B", "T", 32, 128]},
        {"name": "o", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", 32, 128], "alignment": 16},
        {"name": "T", "kind": "dim"},
        {"name": "scale", "kind": "f32", "value": 0.088},
        {"name": "chunks", "kind": "i64", "value": -7}
      ],
      "grid": ["B", 32, 1],
      "block": [128, 1, 1],
      "dynamic_shared_memory": 49152,
      "tile": {"chunk": 64, "sub_chunk": 16},
      "resources": {"vgpr_count": 96, "private_segment_fixed_size": 0},
      "strategy": {"kernel": "state", "kind": "lanes", "step": 16,
                   "tile_chunk": 64, "instruction": "mma_sync",
                   "program": "derived", "stages": 3}
    },
    {
      "name": "kda_small",
      "binary": "small.sm_90a.cubin",
      "entry": "small_entry",
      "params": [
        {"name": "x", "kind": "tensor", "dtype": "f32", "shape": ["N"]}
      ],
      "grid": ["N", 1, 1],
      "block": [64, 1, 1]
    }
  ]
}
)";
}

std::string amdManifest() {
  return std::string(R"({
  "format": "kda-bundle", "version": 1,
  "target": {"vendor": "amd", "chip": "gfx942"},
  "compiler_fingerprint": "kda-0123456789abcdef-llvm22.1.0",
  "source_hash": ")") +
         kHash + R"(",
  "kernels": [{
    "name": "axpy", "binary": "axpy.gfx942.hsaco", "entry": "axpy_entry",
    "params": [
      {"name": "x", "kind": "tensor", "dtype": "f32", "shape": ["N", 4]},
      {"name": "N", "kind": "dim"},
      {"name": "a", "kind": "f32", "value": 2.5}
    ],
    "grid": ["N", 1, 1], "block": [256, 1, 1], "dynamic_shared_memory": 1024
  }]
}
)";
}

// A bundle directory with the reference manifest (or `manifest`) and binaries.
struct BundleDir {
  TempDir dir;
  explicit BundleDir(const std::string &manifest = nvidiaManifest()) {
    dir.write("manifest.json", manifest);
    dir.write("kda_gated_delta_kernel.sm_90a.cubin",
              cubin(90, {"kda_gated_delta_kernel"}));
    dir.write("small.sm_90a.cubin", cubin(90, {"small_entry"}));
    dir.write("axpy.gfx942.hsaco", hsaco(0x04c, "gfx942", {"axpy_entry"}));
    // The kernels of entriesManifest().
    dir.write("intra.sm_90a.cubin", cubin(90, {"intra_entry"}));
    dir.write("state.sm_90a.cubin", cubin(90, {"state_entry"}));
    dir.write("window.sm_90a.cubin", cubin(90, {"window_entry"}));
  }
  const std::string &path() const { return dir.path(); }
};

kda_status load(const BundleDir &b, kda_bundle **out) {
  return kda_bundle_load(b.path().c_str(), out);
}

// Owns a tensor's shape, strides and (host) storage; `view()` is what the C
// API takes. Storage is 256-byte aligned so alignment tests control offsets.
struct Tensor {
  std::vector<int64_t> shape, strides;
  kda_dtype dtype;
  int32_t device = 0;
  void *data = nullptr;
  size_t bytes = 0;
  size_t offset = 0;

  Tensor(kda_dtype dtype, std::vector<int64_t> shape)
      : shape(std::move(shape)), dtype(dtype) {
    size_t n = 1;
    for (int64_t d : this->shape)
      n *= static_cast<size_t>(d);
    bytes = n * dtypeSize(dtype);
    data = std::aligned_alloc(256, (bytes + 256) / 256 * 256 + 256);
  }
  ~Tensor() { std::free(data); }
  Tensor(const Tensor &) = delete;

  kda_tensor view() const {
    kda_tensor t;
    t.data = bytes ? static_cast<char *>(data) + offset : nullptr;
    t.dtype = dtype;
    t.rank = static_cast<int32_t>(shape.size());
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.device = device;
    return t;
  }
};

// q, k, g, o of the reference kernel, [B, T, 32, 128].
struct KdaTensors {
  Tensor q, k, g, o;
  KdaTensors(int64_t b = 2, int64_t t = 100)
      : q(KDA_BF16, {b, t, 32, 128}), k(KDA_BF16, {b, t, 32, 128}),
        g(KDA_F32, {b, t, 32, 128}), o(KDA_BF16, {b, t, 32, 128}) {}
  std::vector<kda_tensor> views() const {
    return {q.view(), k.view(), g.view(), o.view()};
  }
};

const char *const kKda = "kda_gated_delta_kernel";

// ---- JSON -----------------------------------------------------------------

TEST(Json, ParsesValuesWithPositions) {
  json::Value v;
  std::string error;
  ASSERT_TRUE(json::parse(
      "{\"a\": [1, -2.5e1, \"x\\u00e9\\ud83d\\ude00\\n\"],\n \"b\": {\"c\": "
      "true, \"d\": null},\n"
      " \"big\": 123456789012345678901234, \"min\": -9223372036854775808}",
      v, error))
      << error;
  ASSERT_TRUE(v.isObject());
  const json::Value *a = v.find("a");
  ASSERT_TRUE(a && a->isArray());
  ASSERT_EQ(a->array.size(), 3u);
  EXPECT_TRUE(a->array[0].isInteger);
  EXPECT_EQ(a->array[0].integer, 1);
  EXPECT_FALSE(a->array[1].isInteger);
  EXPECT_DOUBLE_EQ(a->array[1].number, -25.0);
  EXPECT_EQ(a->array[2].string, "x\xc3\xa9\xf0\x9f\x98\x80\n");
  EXPECT_EQ(a->array[2].line, 1);
  EXPECT_EQ(a->array[2].column, 19);
  const json::Value *b = v.find("b");
  ASSERT_TRUE(b && b->isObject());
  EXPECT_EQ(b->line, 2);
  EXPECT_EQ(b->column, 7);
  EXPECT_TRUE(b->find("c")->boolean);
  EXPECT_TRUE(b->find("d")->isNull());
  EXPECT_FALSE(v.find("big")->isInteger); // beyond int64: only the double
  EXPECT_TRUE(v.find("min")->isInteger);
  EXPECT_EQ(v.find("min")->integer, INT64_MIN);
  EXPECT_EQ(v.find("nope"), nullptr);
}

TEST(Json, ErrorsSayWhereAndWhat) {
  struct Case {
    std::string text, expected;
  } cases[] = {
      {"", "1:1: expected a JSON value, found end of input"},
      {"{\"a\": 1,}", "1:9: trailing comma before '}'"},
      {"[1, 2,]", "1:7: trailing comma before ']'"},
      {"{\"a\": 1, \"a\": 2}", "1:10: duplicate key \"a\" (first at 1:2)"},
      {"{\n  \"a\": 1 // the answer\n}",
       "2:10: comments are not allowed in JSON"},
      {"{\"a\": 01}", "1:8: leading zeros are not allowed"},
      {"{\"a\": NaN}", "1:7: unknown literal 'NaN'"},
      {"{\n  \"ok\": tru\n}", "2:9: unknown literal 'tru'"},
      {"{'a': 1}", "1:2: expected a key in double quotes, found '''"},
      {"{\"a\" 1}", "1:6: expected ':' after key \"a\", found '1'"},
      {"[1 2]", "1:4: expected ',' or ']' in array, found '2'"},
      {"{\"a\": 1 \"b\": 2}", "1:9: expected ',' or '}' in object, found '\"'"},
      {"[1, 2", "1:6: unterminated array"},
      {"\"abc", "1:5: unterminated string"},
      {"\"a\tb\"", "1:3: control character byte 0x09 in string"},
      {"\"\\q\"", "1:3: invalid escape \\q"},
      {"\"\\ud800x\"",
       "high surrogate \\u escape not followed by a low surrogate"},
      {"\"\\udc00\"", "unpaired low surrogate"},
      {"\"\\u12g4\"", "expected 4 hex digits after \\u, found 'g'"},
      {"\"\xff\"", "1:2: invalid UTF-8 byte 0xFF in string"},
      {"\"\xc3", "truncated UTF-8 sequence"},
      {"\"\xc0\xaf\"", "1:2: invalid UTF-8 byte 0xC0"},
      {"\"\xed\xa0\x80\"", "invalid UTF-8 sequence"}, // an encoded surrogate
      {"{} x", "1:4: unexpected 'x' after the JSON value"},
      {"-", "1:2: expected a digit after '-'"},
      {"1.", "1:3: expected a digit after '.'"},
      {"1e+", "1:4: expected a digit in the exponent"},
      {"1e999", "1:1: number 1e999 is out of range"},
      {"\xEF\xBB\xBF{}", "byte order mark"},
      {std::string(100, '['), "1:65: nesting deeper than 64 levels"},
  };
  for (const Case &c : cases) {
    json::Value v;
    std::string error;
    EXPECT_FALSE(json::parse(c.text, v, error)) << c.text;
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << "input: " << c.text << "\nerror: " << error
        << "\nexpected: " << c.expected;
  }
}

TEST(Json, NumbersIgnoreTheProcessLocale) {
  // A host application may run under a locale with ',' as decimal point.
  const char *old = setlocale(LC_NUMERIC, nullptr);
  std::string saved = old ? old : "C";
  bool switched = setlocale(LC_NUMERIC, "de_DE.UTF-8") != nullptr;
  json::Value v;
  std::string error;
  ASSERT_TRUE(json::parse("0.25", v, error)) << error;
  EXPECT_DOUBLE_EQ(v.number, 0.25);
  setlocale(LC_NUMERIC, saved.c_str());
  if (!switched)
    GTEST_LOG_(INFO)
        << "de_DE.UTF-8 locale not installed; checked under the C locale only";
}

// ---- manifest ---------------------------------------------------------------

TEST(Manifest, ParsesTheReferenceBundle) {
  Manifest m;
  Status s = parseManifest(nvidiaManifest(), "m.json", m);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(m.target.vendor, Vendor::Nvidia);
  EXPECT_EQ(m.target.chip, "sm_90a");
  EXPECT_EQ(m.sourceHash, kHash);
  ASSERT_EQ(m.kernels.size(), 2u);
  const Kernel &k = m.kernels[0];
  EXPECT_EQ(k.entry, "kda_gated_delta_kernel");
  ASSERT_EQ(k.params.size(), 7u);
  EXPECT_EQ(k.tensorParams, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(k.symbols, (std::vector<std::string>{"B", "T"}));
  EXPECT_EQ(k.params[0].dtype, KDA_BF16);
  EXPECT_EQ(k.params[0].alignment, 16);
  EXPECT_EQ(k.params[2].alignment, 4); // natural alignment of f32 by default
  EXPECT_EQ(shapeString(k.params[0].shape), "[B, T, 32, 128]");
  EXPECT_EQ(k.params[4].kind, ParamKind::Dim);
  EXPECT_EQ(k.params[4].symbolIndex, 1);
  EXPECT_EQ(k.params[5].kind, ParamKind::F32);
  EXPECT_DOUBLE_EQ(k.params[5].f32Value, 0.088);
  EXPECT_EQ(k.params[6].i64Value, -7);
  EXPECT_EQ(k.grid[0].symbolIndex, 0);
  EXPECT_EQ(k.grid[1].value, 32);
  EXPECT_EQ(k.block[0], 128u);
  EXPECT_EQ(k.dynamicSharedMemory, 49152u);
  EXPECT_EQ(k.tile, (std::vector<std::pair<std::string, int64_t>>{
                        {"chunk", 64}, {"sub_chunk", 16}}));
  EXPECT_EQ(k.resources, (std::vector<std::pair<std::string, int64_t>>{
                             {"vgpr_count", 96},
                             {"private_segment_fixed_size", 0}}));
  EXPECT_EQ(k.strategyKind, "lanes");
  EXPECT_EQ(k.strategyStep, 16);
  EXPECT_EQ(k.strategyStages, 3);
  EXPECT_EQ(k.strategyTileChunk, 64);
  EXPECT_EQ(m.kernels[1].dynamicSharedMemory, 0u);
  EXPECT_NE(m.findKernel("kda_small"), nullptr);

  Manifest amd;
  s = parseManifest(amdManifest(), "a.json", amd);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(amd.target.vendor, Vendor::Amd);
}

// Each case edits the reference manifest once; the message must name the
// field (and where it is) and what is wrong.
TEST(Manifest, ErrorsNameTheField) {
  struct Case {
    std::string from, to, expected;
  } cases[] = {
      {"\"kda-bundle\"", "\"kda-blob\"",
       "format: expected \"kda-bundle\", found \"kda-blob\""},
      {"\"version\": 1", "\"version\": 3",
       "version: unsupported version 3 (this runtime reads versions 1 and 2)"},
      {"\"version\": 1,", "", ": missing field \"version\""},
      {"\"nvidia\"", "\"intel\"",
       "target.vendor: unknown vendor \"intel\" (expected \"nvidia\" or "
       "\"amd\")"},
      {"\"sm_90a\"}", "\"sm_91\"}",
       "target.chip: unknown nvidia chip \"sm_91\" (known: sm_70, sm_75"},
      {"\"vendor\": \"nvidia\", \"chip\": \"sm_90a\"",
       "\"vendor\": \"amd\", \"chip\": \"gfx9999\"",
       "target.chip: unknown amd chip \"gfx9999\" (known: gfx90a, gfx942, "
       "gfx1100)"},
      {"\"chip\": \"sm_90a\"", "\"chip\": \"sm_90a\", \"os\": \"linux\"",
       "target.os: unknown field (expected one of: vendor, chip)"},
      {kHash, "abc",
       "source_hash: expected 64 lowercase hex digits (a SHA-256), found "
       "\"abc\""},
      {"\"source_hash\"", "\"compiler_fingerprint\": 7, \"source_hash\"",
       "compiler_fingerprint: expected a string, found a number"},
      {"\"dtype\": \"bf16\"", "\"dtype\": \"bf8\"",
       "kernels[0].params[0].dtype: unknown dtype \"bf8\" (expected f32, f16, "
       "bf16, i32 or i64)"},
      {"\"dtype\": \"bf16\"", "\"dtype\": 16",
       "kernels[0].params[0].dtype: expected a string, found a number"},
      {"\"entry\": \"kda_gated_delta_kernel\",", "",
       "kernels[0]: missing field \"entry\""},
      {"\"dynamic_shared_memory\": 49152", "\"dynamic_shared_mem\": 49152",
       "kernels[0].dynamic_shared_mem: unknown field"},
      {"\"dynamic_shared_memory\": 49152", "\"dynamic_shared_memory\": -1",
       "kernels[0].dynamic_shared_memory: expected an integer in [0, "
       "4294967295], found -1"},
      {"\"kind\": \"tensor\"", "\"kind\": \"tensr\"",
       "kernels[0].params[0].kind: unknown kind \"tensr\" (expected tensor, "
       "dim, f32 or i64)"},
      {"[\"B\", \"T\", 32, 128], \"alignment\": 16}",
       "[\"B\", \"T\", -32, 128], \"alignment\": 16}",
       "kernels[0].params[0].shape[2]: expected an integer in [0, "
       "9223372036854775807], found -32"},
      {"[\"B\", \"T\", 32, 128], \"alignment\": 16}",
       "[\"B\", \"T-1\", 32, 128], \"alignment\": 16}",
       "kernels[0].params[0].shape[1]: symbol \"T-1\" is not an identifier"},
      {"[\"B\", \"T\", 32, 128], \"alignment\": 16}",
       "[\"B\", \"T\", 32.5, 128], \"alignment\": 16}",
       "kernels[0].params[0].shape[2]: expected an integer, found the number "
       "32.5"},
      {"\"alignment\": 16", "\"alignment\": 24",
       "kernels[0].params[0].alignment: must be a power of two, found 24"},
      {"{\"name\": \"T\", \"kind\": \"dim\"}",
       "{\"name\": \"X\", \"kind\": \"dim\"}",
       "kernels[0].params[4]: dim \"X\" does not appear in any tensor's shape"},
      {"{\"name\": \"T\", \"kind\": \"dim\"}",
       "{\"name\": \"q\", \"kind\": \"dim\"}",
       "kernels[0].params[4]: duplicate parameter name \"q\" (also params[0])"},
      {"{\"name\": \"T\", \"kind\": \"dim\"}",
       "{\"name\": \"T\", \"kind\": \"dim\", \"value\": 3}",
       "kernels[0].params[4].value: unknown field (expected one of: name, "
       "kind)"},
      {"\"value\": 0.088", "\"value\": \"0.088\"",
       "kernels[0].params[5].value: expected a number, found a string"},
      {"\"value\": 0.088", "\"value\": 1e39",
       "kernels[0].params[5].value: 1e+39 does not fit in f32"},
      {"\"value\": -7", "\"value\": 1.5",
       "kernels[0].params[6].value: expected an integer, found the number 1.5"},
      {"{\"name\": \"chunks\", \"kind\": \"i64\", \"value\": -7}",
       "{\"name\": \"chunks\", \"kind\": \"i64\"}",
       "kernels[0].params[6]: missing field \"value\""},
      {"\"grid\": [\"B\", 32, 1]", "\"grid\": [\"Z\", 32, 1]",
       "kernels[0].grid[0]: symbol \"Z\" does not appear in any tensor's "
       "shape"},
      {"\"grid\": [\"B\", 32, 1]", "\"grid\": [\"B\", 32]",
       "kernels[0].grid: expected an array of 3 entries"},
      {"\"grid\": [\"B\", 32, 1]", "\"grid\": [\"B\", 0, 1]",
       "kernels[0].grid[1]: expected an integer in [1, 9223372036854775807], "
       "found 0"},
      {"\"grid\": [\"B\", 32, 1]", "\"grid\": [\"B\", 4294967296, 1]",
       "kernels[0].grid[1]: grid size 4294967296 does not fit in 32 bits"},
      {"\"block\": [128, 1, 1]", "\"block\": [2048, 1, 1]",
       "kernels[0].block[0]: expected an integer in [1, 1024], found 2048"},
      {"\"block\": [128, 1, 1]", "\"block\": [128, 16, 1]",
       "kernels[0].block: 2048 threads per block; the limit is 1024"},
      {"\"binary\": \"kda_gated_delta_kernel.sm_90a.cubin\"",
       "\"binary\": \"../kernel.cubin\"",
       "kernels[0].binary: \"../kernel.cubin\" must be a file name inside the "
       "bundle directory"},
      // A NUL would end the path open() sees ("kernel"), past the suffix
      // check.
      {"\"binary\": \"kda_gated_delta_kernel.sm_90a.cubin\"",
       "\"binary\": \"kernel\\u0000.cubin\"",
       "kernels[0].binary: must be a plain file name, found the control "
       "character 0x00 at byte 6"},
      {"\"binary\": \"kda_gated_delta_kernel.sm_90a.cubin\"",
       "\"binary\": \"kernel\\n.cubin\"",
       "kernels[0].binary: must be a plain file name, found the control "
       "character 0x0a at byte 6"},
      {"\"binary\": \"kda_gated_delta_kernel.sm_90a.cubin\"",
       "\"binary\": \"kernel.hsaco\"",
       "kernels[0].binary: \"kernel.hsaco\" must end in .cubin for vendor "
       "nvidia"},
      {"\"name\": \"kda_small\"", "\"name\": \"kda_gated_delta_kernel\"",
       "kernels[1]: duplicate kernel name \"kda_gated_delta_kernel\" (also "
       "kernels[0])"},
      {"\"tile\": {\"chunk\": 64", "\"tile\": {\"chunk\": \"64\"",
       "kernels[0].tile.chunk: expected an integer"},
      {"\"resources\": {\"vgpr_count\": 96", "\"resources\": {\"vgpr_count\": -1",
       "kernels[0].resources.vgpr_count:"},
      {"\"resources\": {\"vgpr_count\": 96, \"private_segment_fixed_size\": 0}",
       "\"resources\": [96, 0]", "kernels[0].resources: expected an object"},
      {"\"kind\": \"lanes\", \"step\": 16,", "\"kind\": \"fast\", \"step\": 16,",
       "kernels[0].strategy.kind: unknown kind \"fast\" (expected lanes or tiles)"},
      {"\"step\": 16,", "\"steps\": 16,",
       "kernels[0].strategy.steps: unknown field"},
      {"\"step\": 16,", "\"step\": 24,",
       "kernels[0].strategy.tile_chunk: 64 is not a multiple of the step 24"},
      {"\"step\": 16,\n                   \"tile_chunk\": 64", "\"tile_chunk\": 64",
       "kernels[0].strategy: step and tile_chunk go together"},
      {"\"instruction\": \"mma_sync\"", "\"instruction\": \"xdl\"",
       "kernels[0].strategy.instruction: unknown matrix instruction \"xdl\" "
       "(expected mma_sync, wgmma, mfma, wmma or wmma_emulated)"},
      {"\"instruction\": \"mma_sync\"", "\"instruction\": 1",
       "kernels[0].strategy.instruction:"},
      {"\"program\": \"derived\"", "\"program\": \"handwritten\"",
       "kernels[0].strategy.program: unknown program \"handwritten\" "
       "(expected derived or per_lane)"},
      {"\"stages\": 3", "\"stages\": 9", "kernels[0].strategy.stages:"},
      {"\"stages\": 3", "\"stages\": \"3\"", "kernels[0].strategy.stages:"},
  };
  for (const Case &c : cases) {
    std::string text = replaced(nvidiaManifest(), c.from, c.to);
    Manifest m;
    Status s = parseManifest(text, "dir/manifest.json", m);
    EXPECT_EQ(s.code(), KDA_ERROR_CORRUPT_BUNDLE) << c.to;
    EXPECT_NE(s.message().find(c.expected), std::string::npos)
        << "edit: " << c.from << " -> " << c.to << "\nmessage:  " << s.message()
        << "\nexpected: " << c.expected;
    EXPECT_EQ(s.message().rfind("dir/manifest.json:", 0), 0u) << s.message();
  }
}

TEST(Manifest, ErrorsPointAtTheValue) {
  std::string text =
      replaced(nvidiaManifest(), "\"dtype\": \"f32\"", "\"dtype\": \"f64\"");
  Manifest m;
  Status s = parseManifest(text, "m.json", m);
  EXPECT_EQ(s.message(), "m.json:" + positionOf(text, "\"f64\"") +
                             ": kernels[0].params[2].dtype: unknown dtype "
                             "\"f64\" (expected f32, f16, bf16, i32 or i64)");
  // A missing field points at the object that lacks it.
  text = replaced(nvidiaManifest(), "\"block\": [64, 1, 1]",
                  "\"blocks\": [64, 1, 1]");
  s = parseManifest(text, "m.json", m);
  EXPECT_NE(s.message().find("kernels[1].blocks: unknown field"),
            std::string::npos)
      << s.message();
}

TEST(Manifest, RejectsOtherTopLevels) {
  Manifest m;
  EXPECT_NE(parseManifest("[]", "m", m)
                .message()
                .find("m:1:1: expected an object, found an array"),
            std::string::npos);
  std::string noKernels =
      replaced(nvidiaManifest(), "\"kernels\": [", "\"kernels\": [], \"x\": [");
  EXPECT_NE(parseManifest(noKernels, "m", m).message().find("unknown field"),
            std::string::npos);
  std::string empty =
      std::string("{\"format\": \"kda-bundle\", \"version\": 1, \"target\": "
                  "{\"vendor\": \"amd\", "
                  "\"chip\": \"gfx90a\"}, \"source_hash\": \"") +
      kHash + "\", \"kernels\": []}";
  EXPECT_NE(parseManifest(empty, "m", m)
                .message()
                .find("kernels: a bundle needs at least one kernel"),
            std::string::npos);
}

TEST(Manifest, NvidiaChipCompatibility) {
  struct Case {
    const char *chip;
    int major, minor;
    bool runs;
  } cases[] = {
      {"sm_90a", 9, 0, true},    {"sm_90a", 9, 1, false},
      {"sm_90a", 8, 0, false},   {"sm_90a", 10, 0, false},
      {"sm_90", 9, 0, true},     {"sm_90", 10, 0, false},
      {"sm_80", 8, 0, true},     {"sm_80", 8, 6, true},
      {"sm_80", 8, 9, true},     {"sm_80", 7, 5, false},
      {"sm_80", 9, 0, false},    {"sm_86", 8, 9, true},
      {"sm_86", 8, 0, false},    {"sm_100a", 10, 0, true},
      {"sm_100a", 10, 3, false}, {"sm_120", 12, 1, true},
  };
  for (const Case &c : cases) {
    std::string why;
    EXPECT_EQ(nvidiaChipRunsOn(c.chip, c.major, c.minor, why), c.runs)
        << c.chip << " on " << c.major << "." << c.minor << ": " << why;
    if (!c.runs)
      EXPECT_NE(why.find(c.chip), std::string::npos) << why;
  }
  std::string why;
  EXPECT_FALSE(nvidiaChipRunsOn("sm_80", 9, 0, why));
  EXPECT_EQ(why, "sm_80 code runs only on compute capability 8.0 to 8.x (same "
                 "major version, minor >= 0), "
                 "not on compute capability 9.0");
  EXPECT_FALSE(nvidiaChipRunsOn("gfx942", 9, 0, why));
  EXPECT_NE(why.find("cannot read a compute capability"), std::string::npos);
}

TEST(Manifest, BinaryHeaders) {
  Target sm90{Vendor::Nvidia, "sm_90a"}, gfx942{Vendor::Amd, "gfx942"};
  EXPECT_TRUE(checkBinaryHeader(cubin(90, {}), sm90, "f").isOk());
  // The layout of nvcc <= 12.x (ABI version 7: SM number in the low byte).
  EXPECT_TRUE(
      checkBinaryHeader(elfImage(190, 51, 7, 0x5a055a, {}), sm90, "f").isOk());
  EXPECT_NE(checkBinaryHeader(elfImage(190, 51, 7, 0x500550, {}), sm90, "f")
                .message()
                .find("cubin for sm_80"),
            std::string::npos);
  EXPECT_EQ(checkBinaryHeader(cubin(80, {}), sm90, "f").message(),
            "f is a cubin for sm_80, but target.chip is sm_90a");
  EXPECT_EQ(checkBinaryHeader("hello", sm90, "f").message(),
            "f is not an ELF file (a cubin starts with \\x7fELF)");
  EXPECT_EQ(checkBinaryHeader(elfImage(62, 0, 0, 0, {}), sm90, "f").message(),
            "f is an ELF file for machine 62, not a cubin (machine 190)");
  EXPECT_TRUE(
      checkBinaryHeader(hsaco(0x04c, "gfx942", {}), gfx942, "f").isOk());
  EXPECT_EQ(
      checkBinaryHeader(hsaco(0x03f, "gfx90a", {}), gfx942, "f").message(),
      "f is a code object for gfx90a, but target.chip is gfx942");
  EXPECT_NE(checkBinaryHeader(cubin(90, {}), gfx942, "f")
                .message()
                .find("not an AMDGPU code object"),
            std::string::npos);
}

// ---- loading bundles through the C API --------------------------------------

TEST(Bundle, LoadsAndDescribesItself) {
  BundleDir b;
  kda_bundle *bundle = nullptr;
  ASSERT_EQ(load(b, &bundle), KDA_OK) << kda_last_error();
  EXPECT_STREQ(kda_last_error(), "");
  EXPECT_EQ(kda_bundle_num_kernels(bundle), 2);
  EXPECT_STREQ(kda_bundle_kernel_name(bundle, 0), kKda);
  EXPECT_STREQ(kda_bundle_kernel_name(bundle, 1), "kda_small");
  EXPECT_EQ(kda_bundle_kernel_name(bundle, 2), nullptr);
  EXPECT_STREQ(kda_last_error(),
               "kernel index 2 is out of range (the bundle has 2 kernels)");
  EXPECT_EQ(kda_bundle_kernel_name(bundle, -1), nullptr);
  EXPECT_STREQ(kda_bundle_target_chip(bundle), "sm_90a");
  kda_bundle_free(bundle);
}

TEST(Bundle, NullArguments) {
  kda_bundle *bundle = reinterpret_cast<kda_bundle *>(0x1);
  EXPECT_EQ(kda_bundle_load(nullptr, &bundle), KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bundle, nullptr);
  EXPECT_STREQ(kda_last_error(), "directory is NULL");
  EXPECT_EQ(kda_bundle_load("/tmp", nullptr), KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kda_bundle_num_kernels(nullptr), -1);
  EXPECT_EQ(kda_bundle_kernel_name(nullptr, 0), nullptr);
  EXPECT_EQ(kda_bundle_target_chip(nullptr), nullptr);
  EXPECT_EQ(kda_check_tensors(nullptr, kKda, nullptr, 0),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kda_last_error(), "bundle is NULL");
  EXPECT_EQ(kda_launch(nullptr, kKda, nullptr, 0, nullptr),
            KDA_ERROR_INVALID_ARGUMENT);
  kda_bundle_free(nullptr); // a no-op
  EXPECT_STREQ(kda_status_name(KDA_ERROR_BAD_TENSOR), "KDA_ERROR_BAD_TENSOR");
  // kda_status_name of a value outside the enum: capi_smoke.c (valid in C
  // only).
}

TEST(Bundle, MissingOrCorruptFiles) {
  kda_bundle *bundle;
  EXPECT_EQ(kda_bundle_load("/nonexistent/bundle", &bundle),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kda_last_error())
                .find("/nonexistent/bundle: not a directory"),
            std::string::npos);

  {
    TempDir empty;
    EXPECT_EQ(kda_bundle_load(empty.path().c_str(), &bundle),
              KDA_ERROR_CORRUPT_BUNDLE);
    EXPECT_EQ(std::string(kda_last_error()),
              empty.path() +
                  "/manifest.json: cannot open: No such file or directory");
  }
  {
    // Corrupt JSON: the message has the file, line and column.
    BundleDir b("{\n  \"format\": \"kda-bundle\",\n  \"version\": 1\n  "
                "\"target\": {}\n}\n");
    EXPECT_EQ(load(b, &bundle), KDA_ERROR_CORRUPT_BUNDLE);
    EXPECT_EQ(
        std::string(kda_last_error()),
        b.path() +
            "/manifest.json:4:3: expected ',' or '}' in object, found '\"'");
  }
  {
    BundleDir b;
    b.dir.remove("small.sm_90a.cubin");
    EXPECT_EQ(load(b, &bundle), KDA_ERROR_CORRUPT_BUNDLE);
    EXPECT_EQ(
        std::string(kda_last_error()),
        b.path() + "/manifest.json: kernels[1].binary: " + b.path() +
            "/small.sm_90a.cubin: cannot open: No such file or directory");
  }
  {
    // A FIFO is refused as not a regular file; opening it must not wait for
    // a writer (it blocked forever).
    BundleDir b;
    b.dir.remove("manifest.json");
    ASSERT_EQ(::mkfifo((b.path() + "/manifest.json").c_str(), 0600), 0);
    EXPECT_EQ(load(b, &bundle), KDA_ERROR_CORRUPT_BUNDLE);
    EXPECT_EQ(std::string(kda_last_error()),
              b.path() + "/manifest.json: not a regular file");
  }
  {
    BundleDir b;
    b.dir.remove("small.sm_90a.cubin");
    ASSERT_EQ(::mkfifo((b.path() + "/small.sm_90a.cubin").c_str(), 0600), 0);
    EXPECT_EQ(load(b, &bundle), KDA_ERROR_CORRUPT_BUNDLE);
    EXPECT_EQ(std::string(kda_last_error()),
              b.path() + "/manifest.json: kernels[1].binary: " + b.path() +
                  "/small.sm_90a.cubin: not a regular file");
  }
  {
    BundleDir b;
    b.dir.write("small.sm_90a.cubin", "not a cubin");
    EXPECT_EQ(load(b, &bundle), KDA_ERROR_CORRUPT_BUNDLE);
    EXPECT_NE(std::string(kda_last_error())
                  .find("small.sm_90a.cubin is not an ELF file"),
              std::string::npos)
        << kda_last_error();
  }
  {
    BundleDir b;
    b.dir.write("small.sm_90a.cubin", cubin(80, {"small_entry"}));
    EXPECT_EQ(load(b, &bundle), KDA_ERROR_CORRUPT_BUNDLE);
    EXPECT_NE(std::string(kda_last_error())
                  .find("is a cubin for sm_80, but target.chip is sm_90a"),
              std::string::npos)
        << kda_last_error();
  }
  {
    BundleDir b(replaced(nvidiaManifest(), "\"dtype\": \"bf16\"",
                         "\"dtype\": \"complex64\""));
    EXPECT_EQ(load(b, &bundle), KDA_ERROR_CORRUPT_BUNDLE);
    EXPECT_NE(std::string(kda_last_error()).find("unknown dtype \"complex64\""),
              std::string::npos);
    EXPECT_EQ(bundle, nullptr);
  }
}

// ---- tensor checks and symbol binding (no driver) ---------------------------

class Tensors : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(load(dir, &bundle), KDA_OK) << kda_last_error();
  }
  void TearDown() override { kda_bundle_free(bundle); }

  kda_status check(const std::vector<kda_tensor> &views,
                   const char *kernel = kKda) {
    return kda_check_tensors(bundle, kernel, views.data(),
                             static_cast<int32_t>(views.size()));
  }
  std::string error() const { return kda_last_error(); }

  BundleDir dir;
  kda_bundle *bundle = nullptr;
};

TEST_F(Tensors, ConsistentShapesBindSymbols) {
  KdaTensors t(2, 100);
  EXPECT_EQ(check(t.views()), KDA_OK) << error();
  EXPECT_EQ(error(), "");

  Manifest m;
  ASSERT_TRUE(parseManifest(nvidiaManifest(), "m", m).isOk());
  Binding binding;
  std::vector<kda_tensor> views = t.views();
  ASSERT_TRUE(bindTensors(m.kernels[0], views.data(), 4, binding).isOk());
  EXPECT_EQ(binding.symbols, (std::vector<int64_t>{2, 100}));
  EXPECT_EQ(binding.device, 0);
  EXPECT_EQ(binding.grid[0], 2u);
  EXPECT_EQ(binding.grid[1], 32u);
  EXPECT_EQ(binding.bytes[0], 2u * 100 * 32 * 128 * 2);
  EXPECT_EQ(binding.bytes[2], 2u * 100 * 32 * 128 * 4);

  // Arguments in params order: 4 pointers, T as i64, scale as f32, chunks.
  std::vector<uint64_t> storage;
  std::vector<void *> args;
  packArguments(m.kernels[0], views.data(), binding, storage, args);
  ASSERT_EQ(args.size(), 7u);
  EXPECT_EQ(*static_cast<void **>(args[0]), views[0].data);
  EXPECT_EQ(*static_cast<void **>(args[3]), views[3].data);
  EXPECT_EQ(*static_cast<int64_t *>(args[4]), 100);
  EXPECT_EQ(*static_cast<float *>(args[5]), 0.088f);
  EXPECT_EQ(*static_cast<int64_t *>(args[6]), -7);
}

TEST_F(Tensors, InconsistentSymbolNamesBothTensors) {
  KdaTensors t(2, 100);
  t.k.shape[1] = 64;
  EXPECT_EQ(check(t.views()), KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(error(), "tensor 1 ('k') dimension 1 (symbol T) is 64, but tensor "
                     "0 ('q') dimension 1 bound T = 100");
  t.k.shape[1] = 100;
  t.o.shape[0] = 3;
  EXPECT_EQ(check(t.views()), KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(error(), "tensor 3 ('o') dimension 0 (symbol B) is 3, but tensor 0 "
                     "('q') dimension 0 bound B = 2");
}

TEST_F(Tensors, FixedDimensionRankAndDtype) {
  KdaTensors t;
  t.q.shape[2] = 16;
  EXPECT_EQ(check(t.views()), KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(error(), "tensor 0 ('q') dimension 2 is 16, but kernel "
                     "'kda_gated_delta_kernel' expects 32 (shape [B, T, "
                     "32, 128])");
  t.q.shape = {2, 100, 4096};
  EXPECT_EQ(check(t.views()), KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(error(), "tensor 0 ('q') has rank 3, but kernel "
                     "'kda_gated_delta_kernel' expects rank 4 [B, T, 32, 128]");
  KdaTensors u;
  u.g.dtype = KDA_BF16;
  EXPECT_EQ(check(u.views()), KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(error(), "tensor 2 ('g') has dtype bf16, but kernel "
                     "'kda_gated_delta_kernel' expects f32");
  std::vector<kda_tensor> views = u.views();
  int notADtype = 17; // what a C caller can store in the field
  std::memcpy(&views[2].dtype, &notADtype, sizeof notADtype);
  EXPECT_EQ(check(views), KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(error(), "tensor 2 ('g') has dtype 17, which is not a kda_dtype");
  KdaTensors v;
  v.k.shape[3] = -128;
  EXPECT_EQ(check(v.views()), KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(error(), "tensor 1 ('k') dimension 3 is -128 (negative)");
}

TEST_F(Tensors, Strides) {
  KdaTensors t(2, 100);
  t.q.strides = {409600, 4096, 128, 1}; // explicit but contiguous
  t.k.shape = {2, 1, 32, 128};
  t.k.strides = {4096, 999, 128, 1}; // a size-1 dimension may have any stride
  t.g.shape[1] = t.o.shape[1] = 1;
  t.q.shape[1] = 1;
  t.q.strides = {4096, 4096, 128, 1};
  EXPECT_EQ(check(t.views()), KDA_OK) << error();

  KdaTensors u(2, 100);
  u.o.strides = {409600, 4096, 1, 32}; // last two dimensions transposed
  EXPECT_EQ(check(u.views()), KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(error(), "tensor 3 ('o') is not contiguous: dimension 3 has stride "
                     "32, row-major needs 1 (the kernel "
                     "takes a bare pointer: make the tensor contiguous first)");
  u.o.strides = {819200, 4096, 128, 1}; // a slice of a larger batch
  EXPECT_EQ(check(u.views()), KDA_ERROR_BAD_TENSOR);
  EXPECT_NE(
      error().find("dimension 0 has stride 819200, row-major needs 409600"),
      std::string::npos)
      << error();
}

TEST_F(Tensors, PointersAlignmentAndDevices) {
  KdaTensors t;
  t.k.offset = 2; // bf16-aligned, but the manifest asks for 16 bytes
  EXPECT_EQ(check(t.views()), KDA_ERROR_BAD_TENSOR);
  EXPECT_NE(error().find("tensor 1 ('k') data pointer 0x"), std::string::npos)
      << error();
  EXPECT_NE(error().find(" is not aligned to 16 bytes, as kernel "
                         "'kda_gated_delta_kernel' requires"),
            std::string::npos)
      << error();
  t.k.offset = 0;
  t.g.offset = 4; // f32 keeps its natural 4-byte alignment
  EXPECT_EQ(check(t.views()), KDA_OK) << error();

  KdaTensors h;
  h.g.device = -1;
  EXPECT_EQ(check(h.views()), KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(error(), "tensor 2 ('g') is in host memory (device -1); kernel "
                     "'kda_gated_delta_kernel' needs device memory");
  h.g.device = -3;
  EXPECT_EQ(check(h.views()), KDA_ERROR_BAD_TENSOR);
  EXPECT_NE(error().find("has device -3"), std::string::npos);

  KdaTensors d;
  d.o.device = 1;
  EXPECT_EQ(check(d.views()), KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(error(), "tensor 3 ('o') is on device 1, but tensor 0 ('q') is on "
                     "device 0; a launch runs on one device");

  KdaTensors n;
  std::vector<kda_tensor> views = n.views();
  views[1].data = nullptr;
  EXPECT_EQ(check(views), KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(error(), "tensor 1 ('k') has a NULL data pointer");
  views = n.views();
  views[0].shape = nullptr;
  EXPECT_EQ(check(views), KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(error(), "tensor 0 ('q') has rank 4 but a NULL shape");

  // Empty tensors need no storage.
  KdaTensors e(0, 100);
  EXPECT_EQ(check(e.views()), KDA_OK) << error();
}

TEST_F(Tensors, CountAndKernelName) {
  KdaTensors t;
  std::vector<kda_tensor> views = t.views();
  views.pop_back();
  EXPECT_EQ(check(views), KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(
      error(),
      "kernel 'kda_gated_delta_kernel' takes 4 tensors (q, k, g, o), got 3");
  EXPECT_EQ(kda_check_tensors(bundle, kKda, nullptr, 4),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(error(),
            "tensors is NULL, but kernel 'kda_gated_delta_kernel' takes 4");
  EXPECT_EQ(check(t.views(), "kda_nope"), KDA_ERROR_NOT_FOUND);
  EXPECT_EQ(error(), "bundle " + dir.path() +
                         " has no kernel 'kda_nope' (it has: "
                         "kda_gated_delta_kernel, kda_small)");
  EXPECT_EQ(kda_check_tensors(bundle, nullptr, nullptr, 0),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(error(), "kernel name is NULL");
}

TEST_F(Tensors, LastErrorIsPerThread) {
  KdaTensors t;
  t.q.dtype = KDA_F32;
  EXPECT_EQ(check(t.views()), KDA_ERROR_BAD_TENSOR);
  std::string other;
  std::thread([&] { other = kda_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(error(), "");
}

// ---- drivers ----------------------------------------------------------------

// Sets an environment variable for one test.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const std::string &value) : name_(name) {
    const char *old = std::getenv(name);
    had_ = old != nullptr;
    if (had_)
      old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

private:
  const char *name_;
  bool had_;
  std::string old_;
};

TEST(NoDriver, LaunchSaysWhichLibraryIsMissing) {
  ScopedEnv env("KDA_CUDA_LIBRARY", "/nonexistent/libcuda.so.1");
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK); // loading needs no driver
  KdaTensors t;
  EXPECT_EQ(kda_check_tensors(bundle, kKda, t.views().data(), 4), KDA_OK);
  EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
            KDA_ERROR_NO_DRIVER);
  std::string error = kda_last_error();
  EXPECT_NE(
      error.find(
          "cannot load the CUDA driver library /nonexistent/libcuda.so.1"),
      std::string::npos)
      << error;
  EXPECT_NE(error.find("(named by KDA_CUDA_LIBRARY)"), std::string::npos)
      << error;
  // Tensor errors come first: they need no driver.
  t.q.dtype = KDA_F16;
  EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
            KDA_ERROR_BAD_TENSOR);
  kda_bundle_free(bundle);
}

TEST(NoDriver, LibraryWithoutTheDriverApi) {
  ScopedEnv env("KDA_CUDA_LIBRARY", "libm.so.6");
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  KdaTensors t;
  EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
            KDA_ERROR_NO_DRIVER);
  EXPECT_STREQ(kda_last_error(), "the CUDA driver library libm.so.6 has no "
                                 "cuGetErrorName (driver too old?)");
  kda_bundle_free(bundle);
}

TEST(NoDriver, Hip) {
  ScopedEnv env("KDA_HIP_LIBRARY", "/nonexistent/libamdhip64.so");
  BundleDir b(amdManifest());
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK) << kda_last_error();
  Tensor x(KDA_F32, {10, 4});
  kda_tensor view = x.view();
  EXPECT_EQ(kda_launch(bundle, "axpy", &view, 1, nullptr), KDA_ERROR_NO_DRIVER);
  EXPECT_NE(std::string(kda_last_error())
                .find("cannot load the HIP runtime library "
                      "(/nonexistent/libamdhip64.so"),
            std::string::npos)
      << kda_last_error();
  kda_bundle_free(bundle);
}

// The fake driver's bookkeeping (FakeDriver.cpp).
struct FakeState {
  int inits, retains, moduleLoads, moduleUnloads, launches, setCurrentCalls;
  int funcAttribute, funcAttributeValue;
  struct {
    char entry[128];
    unsigned grid[3], block[3], shared;
    void *stream;
    void *context;
    int hipDevice;
    int numArgs;
    unsigned char args[16][8];
  } last;
  int allocs, frees;
  unsigned long long lastAllocBytes;
  void *lastAllocStream, *lastAllocPointer;
  void *lastFreeStream, *lastFreePointer;
  int historyCount;
  struct {
    char entry[64];
    void *stream;
    unsigned long long args[8];
    unsigned shared;
  } history[16];
  char events[1024];
};

// Runs against FakeDriver.cpp. The runtime caches one driver (and what it
// learnt about each device) per library path, so every test loads the fake
// under a path spelling of its own ("dir/././lib...so"): same library, fresh
// runtime state, as a new process would have.
class Fake : public ::testing::Test {
protected:
  void SetUp() override {
    handle = dlopen(KDA_FAKE_DRIVER, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle, nullptr) << dlerror();
    reset = reinterpret_cast<void (*)()>(dlsym(handle, "kda_fake_reset"));
    getState = reinterpret_cast<const FakeState *(*)()>(
        dlsym(handle, "kda_fake_get_state"));
    addAllocation = reinterpret_cast<void (*)(void *, size_t, int, int)>(
        dlsym(handle, "kda_fake_add_allocation"));
    setArgSizes = reinterpret_cast<void (*)(int, const int *)>(
        dlsym(handle, "kda_fake_set_arg_sizes"));
    failLaunchesAfter = reinterpret_cast<void (*)(int)>(
        dlsym(handle, "kda_fake_fail_launches_after"));
    ctxSetCurrent =
        reinterpret_cast<int (*)(void *)>(dlsym(handle, "cuCtxSetCurrent"));
    ctxGetCurrent =
        reinterpret_cast<int (*)(void **)>(dlsym(handle, "cuCtxGetCurrent"));
    hipSetDevice =
        reinterpret_cast<int (*)(int)>(dlsym(handle, "hipSetDevice"));
    hipGetDevice =
        reinterpret_cast<int (*)(int *)>(dlsym(handle, "hipGetDevice"));
    reset();
    for (const char *v : {"KDA_FAKE_DEVICES", "KDA_FAKE_CC", "KDA_FAKE_GFX",
                          "KDA_FAKE_FAIL", "KDA_FAKE_SMEM_OPTIN"})
      unsetenv(v);
    static int counter = 0;
    std::string path = KDA_FAKE_DRIVER;
    size_t slash = path.rfind('/');
    std::string spelled = path.substr(0, slash);
    for (int i = 0, n = ++counter; i < n; ++i)
      spelled += "/.";
    spelled += path.substr(slash);
    cudaEnv = std::make_unique<ScopedEnv>("KDA_CUDA_LIBRARY", spelled);
    hipEnv = std::make_unique<ScopedEnv>("KDA_HIP_LIBRARY", spelled);
  }
  void TearDown() override {
    for (const char *v : {"KDA_FAKE_DEVICES", "KDA_FAKE_CC", "KDA_FAKE_GFX",
                          "KDA_FAKE_FAIL", "KDA_FAKE_SMEM_OPTIN"})
      unsetenv(v);
    ctxSetCurrent(nullptr);
  }

  // Registers the tensors' storage as device memory of `device`.
  void onDevice(const Tensor &t, int device = 0, int memoryType = 2) {
    addAllocation(t.data, t.bytes + t.offset, device, memoryType);
  }
  void onDevice(const KdaTensors &t) {
    for (const Tensor *x : {&t.q, &t.k, &t.g, &t.o})
      onDevice(*x);
  }
  const FakeState &state() { return *getState(); }

  void *handle = nullptr;
  void (*reset)();
  const FakeState *(*getState)();
  void (*addAllocation)(void *, size_t, int, int);
  void (*setArgSizes)(int, const int *);
  void (*failLaunchesAfter)(int);
  int (*ctxSetCurrent)(void *);
  int (*ctxGetCurrent)(void **);
  int (*hipSetDevice)(int);
  int (*hipGetDevice)(int *);
  std::unique_ptr<ScopedEnv> cudaEnv, hipEnv;
};

void *const kStream = reinterpret_cast<void *>(0x5700);
void *const kForeignContext = reinterpret_cast<void *>(0xabc0);
void *const kDevice0Context =
    reinterpret_cast<void *>(0x1000); // FakeDriver's contextOf(0)

TEST_F(Fake, LaunchPassesTheKernelAbi) {
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  KdaTensors t(3, 100);
  onDevice(t);
  const int sizes[] = {8, 8, 8, 8, 8, 4, 8};
  setArgSizes(7, sizes);
  ctxSetCurrent(kForeignContext); // the caller's own context

  std::vector<kda_tensor> views = t.views();
  ASSERT_EQ(kda_launch(bundle, kKda, views.data(), 4, kStream), KDA_OK)
      << kda_last_error();
  EXPECT_STREQ(kda_last_error(), "");
  const FakeState &s = state();
  EXPECT_EQ(s.launches, 1);
  EXPECT_STREQ(s.last.entry, "kda_gated_delta_kernel");
  EXPECT_EQ(s.last.grid[0], 3u);
  EXPECT_EQ(s.last.grid[1], 32u);
  EXPECT_EQ(s.last.grid[2], 1u);
  EXPECT_EQ(s.last.block[0], 128u);
  EXPECT_EQ(s.last.shared, 49152u);
  EXPECT_EQ(s.last.stream, kStream);
  EXPECT_EQ(s.last.context,
            kDevice0Context); // launched in device 0's primary context
  EXPECT_EQ(s.funcAttribute,
            8); // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  EXPECT_EQ(s.funcAttributeValue, 49152);
  for (int i = 0; i < 4; ++i) {
    void *p;
    std::memcpy(&p, s.last.args[i], 8);
    EXPECT_EQ(p, views[i].data) << "argument " << i;
  }
  int64_t T, chunks;
  float scale;
  std::memcpy(&T, s.last.args[4], 8);
  std::memcpy(&scale, s.last.args[5], 4);
  std::memcpy(&chunks, s.last.args[6], 8);
  EXPECT_EQ(T, 100);
  EXPECT_EQ(scale, 0.088f);
  EXPECT_EQ(chunks, -7);

  // The caller's context is current again.
  void *current = nullptr;
  ctxGetCurrent(&current);
  EXPECT_EQ(current, kForeignContext);

  // The module loads once, on first use; the context is retained once.
  ASSERT_EQ(kda_launch(bundle, kKda, views.data(), 4, nullptr), KDA_OK)
      << kda_last_error();
  EXPECT_EQ(state().launches, 2);
  EXPECT_EQ(state().moduleLoads, 1);
  EXPECT_EQ(state().retains, 1);

  // A kernel without dynamic shared memory does not touch the attribute.
  Tensor x(KDA_F32, {1000});
  onDevice(x);
  setArgSizes(1, sizes);
  kda_tensor xv = x.view();
  ASSERT_EQ(kda_launch(bundle, "kda_small", &xv, 1, nullptr), KDA_OK)
      << kda_last_error();
  EXPECT_EQ(state().last.grid[0], 1000u);
  EXPECT_STREQ(state().last.entry, "small_entry");
  EXPECT_EQ(state().funcAttributeValue, 49152); // unchanged
  EXPECT_EQ(state().moduleLoads, 2);

  kda_bundle_free(bundle);
  EXPECT_EQ(state().moduleUnloads, 2);
}

// Decode runs hundreds of small launches per token: after the first launch
// (driver, device and module set up), a launch must not touch the heap.
TEST_F(Fake, LaunchAllocatesNothing) {
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  KdaTensors t;
  onDevice(t);
  std::vector<kda_tensor> views = t.views();
  ASSERT_EQ(kda_launch(bundle, kKda, views.data(), 4, nullptr), KDA_OK)
      << kda_last_error();
  long before = heapAllocations.load();
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(kda_launch(bundle, kKda, views.data(), 4, nullptr), KDA_OK)
        << kda_last_error();
  EXPECT_EQ(kda_check_tensors(bundle, kKda, views.data(), 4), KDA_OK);
  EXPECT_EQ(heapAllocations.load() - before, 0);
  kda_bundle_free(bundle);
}

TEST_F(Fake, ConcurrentLaunchesLoadOnce) {
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  KdaTensors t;
  onDevice(t);
  std::vector<kda_tensor> views = t.views();
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      for (int j = 0; j < 50; ++j)
        failures[i] +=
            kda_launch(bundle, kKda, views.data(), 4, nullptr) != KDA_OK;
    });
  for (std::thread &th : threads)
    th.join();
  for (int f : failures)
    EXPECT_EQ(f, 0);
  EXPECT_EQ(state().launches, 400);
  EXPECT_EQ(state().moduleLoads, 1);
  kda_bundle_free(bundle);
}

TEST_F(Fake, WrongArchitecture) {
  setenv("KDA_FAKE_CC", "80", 1);
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  KdaTensors t;
  onDevice(t);
  EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
            KDA_ERROR_WRONG_ARCHITECTURE);
  EXPECT_STREQ(kda_last_error(), "the bundle is built for sm_90a, but CUDA "
                                 "device 0 (Fake GPU 0) is sm_80: sm_90a "
                                 "code runs only on compute capability 9.0, "
                                 "not on compute capability 8.0");
  EXPECT_EQ(state().retains, 0); // refused before creating a context
  EXPECT_EQ(state().moduleLoads, 0);
  kda_bundle_free(bundle);
}

TEST_F(Fake, CompatibleNewerMinor) {
  setenv("KDA_FAKE_CC", "89", 1);
  BundleDir b(
      replaced(replaced(replaced(nvidiaManifest(), "\"chip\": \"sm_90a\"",
                                 "\"chip\": \"sm_80\""),
                        "\"small.sm_90a.cubin\"", "\"small.sm_80.cubin\""),
               "\"binary\": \"kda_gated_delta_kernel.sm_90a.cubin\"",
               "\"binary\": \"kda_gated_delta_kernel.sm_80.cubin\""));
  b.dir.write("kda_gated_delta_kernel.sm_80.cubin",
              cubin(80, {"kda_gated_delta_kernel"}));
  b.dir.write("small.sm_80.cubin", cubin(80, {"small_entry"}));
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK) << kda_last_error();
  KdaTensors t;
  onDevice(t);
  EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr), KDA_OK)
      << kda_last_error();
  kda_bundle_free(bundle);
}

TEST_F(Fake, NoDevice) {
  setenv("KDA_FAKE_DEVICES", "0", 1);
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  KdaTensors t;
  EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
            KDA_ERROR_NO_DEVICE);
  EXPECT_NE(
      std::string(kda_last_error())
          .find("did not initialise: cuInit failed: CUDA_ERROR_NO_DEVICE"),
      std::string::npos)
      << kda_last_error();
  kda_bundle_free(bundle);
}

TEST_F(Fake, DeviceOrdinalOutOfRange) {
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  KdaTensors t;
  for (Tensor *x : {&t.q, &t.k, &t.g, &t.o})
    x->device = 1;
  EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
            KDA_ERROR_NO_DEVICE);
  EXPECT_STREQ(kda_last_error(),
               "CUDA device 1 does not exist (the driver sees 1 device)");
  kda_bundle_free(bundle);
}

TEST_F(Fake, DriverInitialisationFails) {
  setenv("KDA_FAKE_FAIL", "cuInit=804", 1);
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  KdaTensors t;
  EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
            KDA_ERROR_NO_DRIVER);
  EXPECT_NE(
      std::string(kda_last_error())
          .find("cuInit failed: CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"),
      std::string::npos)
      << kda_last_error();
  kda_bundle_free(bundle);
}

TEST_F(Fake, PointerChecks) {
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  {
    KdaTensors t; // nothing registered: plain host memory
    EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
              KDA_ERROR_BAD_TENSOR);
    std::string error = kda_last_error();
    EXPECT_EQ(error.rfind("tensor 0 ('q') data pointer 0x", 0), 0u) << error;
    EXPECT_NE(error.find(" is not memory the CUDA driver knows (plain host "
                         "memory?); the kernel needs device memory"),
              std::string::npos)
        << error;
  }
  {
    KdaTensors t;
    onDevice(t);
    reset();
    onDevice(t.q);
    onDevice(t.k);
    onDevice(t.g, 0, /*CU_MEMORYTYPE_HOST*/ 1);
    onDevice(t.o);
    EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
              KDA_ERROR_BAD_TENSOR);
    EXPECT_NE(
        std::string(kda_last_error()).find("tensor 2 ('g') data pointer 0x"),
        std::string::npos);
    EXPECT_NE(std::string(kda_last_error())
                  .find("is page-locked host memory, not device memory"),
              std::string::npos);
  }
  {
    setenv("KDA_FAKE_DEVICES", "2", 1);
    KdaTensors t;
    reset();
    onDevice(t.q);
    onDevice(t.k, 1);
    onDevice(t.g);
    onDevice(t.o);
    EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
              KDA_ERROR_BAD_TENSOR);
    EXPECT_NE(
        std::string(kda_last_error())
            .find("tensor 1 ('k') says device 0, but its data pointer 0x"),
        std::string::npos)
        << kda_last_error();
    EXPECT_NE(std::string(kda_last_error()).find("is memory of CUDA device 1"),
              std::string::npos);
  }
  {
    KdaTensors t;
    reset();
    onDevice(t.q);
    onDevice(t.k);
    onDevice(t.g);
    addAllocation(t.o.data, t.o.bytes - 256, 0,
                  2); // an allocation too small for the shape
    EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
              KDA_ERROR_BAD_TENSOR);
    EXPECT_EQ(std::string(kda_last_error()),
              "tensor 3 ('o') spans " + std::to_string(t.o.bytes) +
                  " bytes from its data pointer, but its allocation has only " +
                  std::to_string(t.o.bytes - 256) + " bytes from there");
  }
  EXPECT_EQ(state().launches, 0);
  kda_bundle_free(bundle);
}

TEST_F(Fake, EmptyGridLaunchesNothing) {
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  KdaTensors t(0, 100); // B = 0: empty tensors, NULL data
  EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr), KDA_OK)
      << kda_last_error();
  EXPECT_EQ(state().launches, 0);
  EXPECT_EQ(state().moduleLoads, 0);
  kda_bundle_free(bundle);
}

// kda_launch_trusted: the caller vouches for its pointers (a framework's
// tensors), so the driver is not asked about them, and every other check
// stays.
TEST_F(Fake, TrustedLaunchSkipsOnlyThePointerQuery) {
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  KdaTensors t;
  onDevice(t);
  {
    // A driver that cannot answer pointer queries: kda_launch stops, the
    // trusted launch runs.
    ScopedEnv fail("KDA_FAKE_FAIL", "cuPointerGetAttributes=3");
    EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
              KDA_ERROR_BAD_TENSOR);
    const int before = state().launches;
    EXPECT_EQ(kda_launch_trusted(bundle, kKda, t.views().data(), 4, nullptr, 0,
                                 nullptr),
              KDA_OK)
        << kda_last_error();
    EXPECT_EQ(state().launches, before + 1);
  }
  // The manifest's checks still apply: a wrong head count is named.
  Tensor badK(KDA_BF16, {2, 100, 31, 128});
  onDevice(badK);
  std::vector<kda_tensor> wrong = t.views();
  wrong[1] = badK.view();
  EXPECT_EQ(kda_launch_trusted(bundle, kKda, wrong.data(), 4, nullptr, 0,
                               nullptr),
            KDA_ERROR_BAD_TENSOR);
  EXPECT_NE(std::string(kda_last_error()).find("('k')"), std::string::npos)
      << kda_last_error();
  EXPECT_EQ(kda_launch_trusted(nullptr, kKda, t.views().data(), 4, nullptr, 0,
                               nullptr),
            KDA_ERROR_INVALID_ARGUMENT);
  kda_bundle_free(bundle);
}

TEST_F(Fake, ModuleAndLaunchErrors) {
  struct Case {
    const char *fail;
    kda_status status;
    const char *expected;
  } cases[] = {
      {"cuModuleLoadData=209", KDA_ERROR_WRONG_ARCHITECTURE,
       "kernel 'kda_gated_delta_kernel' (kda_gated_delta_kernel.sm_90a.cubin) "
       "on CUDA device 0 (Fake GPU 0): the "
       "sm_90a binary does not run here: cuModuleLoadData failed: "
       "CUDA_ERROR_NO_BINARY_FOR_GPU"},
      {"cuModuleLoadData=200", KDA_ERROR_CORRUPT_BUNDLE,
       "cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE"},
      {"cuModuleLoadData=2", KDA_ERROR_LAUNCH_FAILED,
       "cuModuleLoadData failed: CUDA_ERROR_OUT_OF_MEMORY"},
      {"cuFuncSetAttribute=1", KDA_ERROR_LAUNCH_FAILED,
       "allowing 49152 bytes of dynamic shared memory: cuFuncSetAttribute "
       "failed: CUDA_ERROR_INVALID_VALUE"},
      {"cuLaunchKernel=701", KDA_ERROR_LAUNCH_FAILED,
       "kernel 'kda_gated_delta_kernel' (grid [2, 32, 1], block [128, 1, 1], "
       "49152 bytes of dynamic shared "
       "memory): cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
      {"cuLaunchKernel=12345", KDA_ERROR_LAUNCH_FAILED,
       "cuLaunchKernel failed: CUresult 12345"},
      {"cuPointerGetAttributes=3", KDA_ERROR_BAD_TENSOR,
       "cannot be checked: cuPointerGetAttributes failed: CUresult 3"},
      {"cuCtxSetCurrent=201", KDA_ERROR_LAUNCH_FAILED,
       "making the primary context of CUDA device 0 current: cuCtxSetCurrent "
       "failed: CUresult 201"},
  };
  KdaTensors t;
  onDevice(t);
  for (const Case &c : cases) {
    ScopedEnv fail("KDA_FAKE_FAIL", c.fail);
    BundleDir b;
    kda_bundle *bundle;
    ASSERT_EQ(load(b, &bundle), KDA_OK);
    EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr), c.status)
        << c.fail;
    EXPECT_NE(std::string(kda_last_error()).find(c.expected), std::string::npos)
        << c.fail << "\nmessage:  " << kda_last_error()
        << "\nexpected: " << c.expected;
    kda_bundle_free(bundle);
  }
}

// Its own test: the primary context is retained once per process and device.
TEST_F(Fake, ContextRetainFails) {
  setenv("KDA_FAKE_FAIL", "cuDevicePrimaryCtxRetain=2", 1);
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  KdaTensors t;
  onDevice(t);
  EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
            KDA_ERROR_NO_DEVICE);
  EXPECT_STREQ(kda_last_error(),
               "cannot use CUDA device 0 (Fake GPU 0): "
               "cuDevicePrimaryCtxRetain failed: CUDA_ERROR_OUT_OF_MEMORY");
  kda_bundle_free(bundle);
}

TEST_F(Fake, EntryMissingFromBinary) {
  BundleDir b(replaced(nvidiaManifest(), "\"entry\": \"small_entry\"",
                       "\"entry\": \"renamed_entry\""));
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  Tensor x(KDA_F32, {10});
  onDevice(x);
  kda_tensor v = x.view();
  EXPECT_EQ(kda_launch(bundle, "kda_small", &v, 1, nullptr),
            KDA_ERROR_CORRUPT_BUNDLE);
  EXPECT_STREQ(
      kda_last_error(),
      "kernel 'kda_small' (small.sm_90a.cubin) on CUDA device 0 (Fake GPU 0): "
      "entry "
      "'renamed_entry': cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND");
  EXPECT_EQ(state().moduleUnloads, 1); // the module that lacked it is not kept
  kda_bundle_free(bundle);
}

TEST_F(Fake, SharedMemoryAboveTheDeviceLimit) {
  setenv("KDA_FAKE_SMEM_OPTIN", "32768", 1);
  BundleDir b;
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  KdaTensors t;
  onDevice(t);
  EXPECT_EQ(kda_launch(bundle, kKda, t.views().data(), 4, nullptr),
            KDA_ERROR_LAUNCH_FAILED);
  EXPECT_NE(std::string(kda_last_error())
                .find("needs 49152 bytes of dynamic shared memory; the device "
                      "allows 32768 "
                      "per block"),
            std::string::npos)
      << kda_last_error();
  kda_bundle_free(bundle);
}

TEST_F(Fake, HipLaunch) {
  setenv("KDA_FAKE_DEVICES", "2", 1);
  BundleDir b(amdManifest());
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK) << kda_last_error();
  Tensor x(KDA_F32, {10, 4});
  x.device = 1;
  kda_tensor v = x.view();
  const int sizes[] = {8, 8, 4};
  setArgSizes(3, sizes);
  ASSERT_EQ(kda_launch(bundle, "axpy", &v, 1, kStream), KDA_OK)
      << kda_last_error();
  const FakeState &s = state();
  EXPECT_STREQ(s.last.entry, "axpy_entry");
  EXPECT_EQ(s.last.hipDevice, 1); // launched on the tensors' device
  EXPECT_EQ(s.last.grid[0], 10u);
  EXPECT_EQ(s.last.block[0], 256u);
  EXPECT_EQ(s.last.shared, 1024u);
  EXPECT_EQ(s.last.stream, kStream);
  void *p;
  int64_t n;
  float a;
  std::memcpy(&p, s.last.args[0], 8);
  std::memcpy(&n, s.last.args[1], 8);
  std::memcpy(&a, s.last.args[2], 4);
  EXPECT_EQ(p, v.data);
  EXPECT_EQ(n, 10);
  EXPECT_EQ(a, 2.5f);
  int current = -1;
  hipGetDevice(&current);
  EXPECT_EQ(current, 0); // the caller's device is current again
  kda_bundle_free(bundle);
  EXPECT_EQ(state().moduleUnloads, 1);
}

TEST_F(Fake, HipWrongArchitecture) {
  setenv("KDA_FAKE_GFX", "gfx90a", 1);
  BundleDir b(amdManifest());
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  Tensor x(KDA_F32, {10, 4});
  kda_tensor v = x.view();
  EXPECT_EQ(kda_launch(bundle, "axpy", &v, 1, nullptr),
            KDA_ERROR_WRONG_ARCHITECTURE);
  EXPECT_STREQ(
      kda_last_error(),
      "kernel 'axpy' (axpy.gfx942.hsaco) on HIP device 0 (Fake AMD GPU 0): the "
      "gfx942 "
      "code object does not run on this device: hipModuleLoadData failed: "
      "hipErrorNoBinaryForGpu");
  kda_bundle_free(bundle);
}

TEST_F(Fake, HipNoDevice) {
  setenv("KDA_FAKE_DEVICES", "0", 1);
  BundleDir b(amdManifest());
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK);
  Tensor x(KDA_F32, {10, 4});
  kda_tensor v = x.view();
  EXPECT_EQ(kda_launch(bundle, "axpy", &v, 1, nullptr), KDA_ERROR_NO_DEVICE);
  EXPECT_NE(
      std::string(kda_last_error()).find("hipInit failed: hipErrorNoDevice"),
      std::string::npos)
      << kda_last_error();
  kda_bundle_free(bundle);
}

// ---- version 2: entries -----------------------------------------------------

// Two kernels that run as one entry: "intra" writes the workspaces ws0 and
// ws1, "state" reads them; and an entry that runs kda_small twice, the second
// time on a workspace.
std::string entriesManifest() {
  return std::string(R"({
  "format": "kda-bundle",
  "version": 2,
  "target": {"vendor": "nvidia", "chip": "sm_90a"},
  "source_hash": ")") +
         kHash + R"(",
  "kernels": [
    {
      "name": "kda_small",
      "binary": "small.sm_90a.cubin",
      "entry": "small_entry",
      "params": [
        {"name": "x", "kind": "tensor", "dtype": "f32", "shape": ["N"]}
      ],
      "grid": ["N", 1, 1],
      "block": [64, 1, 1]
    },
    {
      "name": "kda_ws_intra",
      "binary": "intra.sm_90a.cubin",
      "entry": "intra_entry",
      "params": [
        {"name": "q", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "k", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "w", "kind": "tensor", "dtype": "f32",
         "shape": ["B", "T", "H", 64]},
        {"name": "c", "kind": "tensor", "dtype": "i32", "shape": [3]},
        {"name": "T", "kind": "dim"}
      ],
      "grid": ["B", "H", 1],
      "block": [128, 1, 1]
    },
    {
      "name": "kda_ws_state",
      "binary": "state.sm_90a.cubin",
      "entry": "state_entry",
      "params": [
        {"name": "q", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "w", "kind": "tensor", "dtype": "f32",
         "shape": ["B", "T", "H", 64], "alignment": 512},
        {"name": "c", "kind": "tensor", "dtype": "i32", "shape": [3]},
        {"name": "o", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "H", "kind": "dim"}
      ],
      "grid": ["T", 1, 1],
      "block": [64, 1, 1],
      "dynamic_shared_memory": 1024
    }
  ],
  "entries": [
    {
      "name": "kda_ws",
      "params": [
        {"name": "q", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "k", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "o", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16}
      ],
      "workspaces": [
        {"name": "ws0", "dtype": "f32", "shape": ["B", "T", "H", 64]},
        {"name": "ws1", "dtype": "i32", "shape": [3], "alignment": 1024}
      ],
      "launches": [
        {"kernel": "kda_ws_intra", "args": ["q", "k", "ws0", "ws1"]},
        {"kernel": "kda_ws_state", "args": ["q", "ws0", "ws1", "o"]}
      ]
    },
    {
      "name": "kda_small_twice",
      "params": [
        {"name": "x", "kind": "tensor", "dtype": "f32", "shape": ["N"]}
      ],
      "workspaces": [{"name": "tmp", "dtype": "f32", "shape": ["N"]}],
      "launches": [
        {"kernel": "kda_small", "args": ["x"]},
        {"kernel": "kda_small", "args": ["tmp"]}
      ]
    }
  ]
}
)";
}

// q, k, o of entry kda_ws, [B, T, H, 128].
struct WsTensors {
  Tensor q, k, o;
  WsTensors(int64_t b, int64_t t, int64_t h)
      : q(KDA_BF16, {b, t, h, 128}), k(KDA_BF16, {b, t, h, 128}),
        o(KDA_BF16, {b, t, h, 128}) {}
  std::vector<kda_tensor> views() const { return {q.view(), k.view(), o.view()}; }
};

TEST(Entries, ParsesVersion2) {
  Manifest m;
  Status s = parseManifest(entriesManifest(), "m", m);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(m.version, 2);
  ASSERT_EQ(m.entries.size(), 2u);
  const Entry &e = m.entries[0];
  EXPECT_EQ(e.name, "kda_ws");
  EXPECT_EQ(m.findEntry("kda_small_twice"), &m.entries[1]);
  EXPECT_EQ(m.findEntry("kda_ws_intra"), nullptr);
  EXPECT_EQ(e.signature.name, "kda_ws");
  EXPECT_STREQ(e.signature.what, "entry");
  EXPECT_EQ(e.signature.tensorParams, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(e.signature.symbols, (std::vector<std::string>{"B", "T", "H"}));
  ASSERT_EQ(e.workspaces.size(), 2u);
  EXPECT_EQ(e.workspaces[0].name, "ws0");
  EXPECT_EQ(e.workspaces[0].dtype, KDA_F32);
  EXPECT_EQ(e.workspaces[0].alignment, 256); // the default
  // Raised to what kernel kda_ws_state's parameter w needs.
  EXPECT_EQ(e.workspaces[0].effectiveAlignment, 512);
  EXPECT_EQ(e.workspaces[0].shape[2].symbolIndex, 2);
  EXPECT_EQ(e.workspaces[1].alignment, 1024);
  ASSERT_EQ(e.launches.size(), 2u);
  EXPECT_EQ(e.launches[0].kernel, 1u);
  EXPECT_EQ(e.launches[1].kernel, 2u);
  ASSERT_EQ(e.launches[1].args.size(), 4u);
  EXPECT_FALSE(e.launches[1].args[0].isWorkspace);
  EXPECT_EQ(e.launches[1].args[0].index, 0u);
  EXPECT_TRUE(e.launches[1].args[1].isWorkspace);
  EXPECT_EQ(e.launches[1].args[1].index, 0u);
  EXPECT_TRUE(e.launches[1].args[2].isWorkspace);
  EXPECT_EQ(e.launches[1].args[2].index, 1u);
  EXPECT_EQ(e.launches[1].args[3].index, 2u);

  // Entries are optional in version 2, and may be empty.
  size_t at = entriesManifest().find(",\n  \"entries\"");
  std::string none = entriesManifest().substr(0, at) + "\n}\n";
  s = parseManifest(none, "m", m);
  EXPECT_TRUE(s.isOk()) << s.message();
  EXPECT_TRUE(m.entries.empty());
  s = parseManifest(none.substr(0, none.rfind('}')) + ", \"entries\": []}", "m",
                    m);
  EXPECT_TRUE(s.isOk()) << s.message();
  s = parseManifest(none.substr(0, none.rfind('}')) + ", \"entries\": {}}", "m",
                    m);
  EXPECT_NE(s.message().find("entries: expected an array, found an object"),
            std::string::npos)
      << s.message();
  // Version 1 stays as it was.
  s = parseManifest(nvidiaManifest(), "m", m);
  EXPECT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(m.version, 1);
}

TEST(Entries, ErrorsNameTheField) {
  struct Case {
    std::string from, to, expected;
  } cases[] = {
      {"\"kernel\": \"kda_ws_intra\"", "\"kernel\": \"kda_ws_intro\"",
       "entries[0].launches[0].kernel: no kernel \"kda_ws_intro\" in this "
       "bundle (kernels: kda_small, kda_ws_intra, kda_ws_state)"},
      {"\"args\": [\"q\", \"k\", \"ws0\", \"ws1\"]",
       "\"args\": [\"q\", \"k\", \"ws0\"]",
       "entries[0].launches[0].args: kernel \"kda_ws_intra\" takes 4 tensors "
       "(q, k, w, c), found 3 args"},
      {"\"args\": [\"q\", \"k\", \"ws0\", \"ws1\"]",
       "\"args\": [\"q\", \"k\", \"ws0\", \"ws1\", \"o\"]",
       "kernel \"kda_ws_intra\" takes 4 tensors (q, k, w, c), found 5 args"},
      {"\"args\": [\"q\", \"k\", \"ws0\", \"ws1\"]",
       "\"args\": [\"q\", \"k\", \"ws9\", \"ws1\"]",
       "entries[0].launches[0].args[2]: unknown name \"ws9\" (expected an "
       "entry parameter or workspace: k, o, q, ws0, ws1)"},
      {"\"args\": [\"q\", \"k\", \"ws0\", \"ws1\"]",
       "\"args\": [\"q\", \"k\", 2, \"ws1\"]",
       "entries[0].launches[0].args[2]: expected a string"},
      // dtype mismatch: a bf16 parameter where the kernel takes f32.
      {"\"args\": [\"q\", \"k\", \"ws0\", \"ws1\"]",
       "\"args\": [\"q\", \"k\", \"o\", \"ws1\"]",
       "entries[0].launches[0].args[2]: entry \"kda_ws\" launch 0 arg 2: entry "
       "parameter \"o\" is bf16 [B, T, H, 128], but kernel \"kda_ws_intra\" "
       "parameter \"w\" is f32 [B, T, H, 64]"},
      // shape mismatch: a fixed size.
      {"{\"name\": \"ws0\", \"dtype\": \"f32\", \"shape\": [\"B\", \"T\", \"H\", "
       "64]}",
       "{\"name\": \"ws0\", \"dtype\": \"f32\", \"shape\": [\"B\", \"T\", \"H\", "
       "32]}",
       "entries[0].launches[0].args[2]: entry \"kda_ws\" launch 0 arg 2: "
       "workspace \"ws0\" is f32 [B, T, H, 32], but kernel \"kda_ws_intra\" "
       "parameter \"w\" is f32 [B, T, H, 64]"},
      // shape mismatch: another symbol of the same entry.
      {"{\"name\": \"ws0\", \"dtype\": \"f32\", \"shape\": [\"B\", \"T\", \"H\", "
       "64]}",
       "{\"name\": \"ws0\", \"dtype\": \"f32\", \"shape\": [\"B\", \"H\", \"T\", "
       "64]}",
       "workspace \"ws0\" is f32 [B, H, T, 64], but kernel \"kda_ws_intra\" "
       "parameter \"w\" is f32 [B, T, H, 64]"},
      // shape mismatch: rank.
      {"{\"name\": \"ws1\", \"dtype\": \"i32\", \"shape\": [3]",
       "{\"name\": \"ws1\", \"dtype\": \"i32\", \"shape\": [3, 1]",
       "workspace \"ws1\" is i32 [3, 1], but kernel \"kda_ws_intra\" parameter "
       "\"c\" is i32 [3]"},
      {"{\"name\": \"ws1\", \"dtype\": \"i32\", \"shape\": [3]",
       "{\"name\": \"ws1\", \"dtype\": \"i32\", \"shape\": [\"S\"]",
       "entries[0].workspaces[1].shape[0]: symbol \"S\" does not appear in any "
       "entry parameter's shape, so no launch can bind it"},
      {"{\"name\": \"ws1\", \"dtype\": \"i32\"", "{\"name\": \"q\", \"dtype\": \"i32\"",
       "entries[0].workspaces[1]: duplicate name \"q\" (also params[0])"},
      {"{\"name\": \"ws1\", \"dtype\": \"i32\"",
       "{\"name\": \"ws0\", \"dtype\": \"i32\"",
       "entries[0].workspaces[1]: duplicate name \"ws0\" (also workspaces[0])"},
      {"{\"name\": \"o\", \"kind\": \"tensor\", \"dtype\": \"bf16\",\n         "
       "\"shape\": [\"B\", \"T\", \"H\", 128], \"alignment\": 16}\n      ],\n     "
       " \"workspaces\"",
       "{\"name\": \"k\", \"kind\": \"tensor\", \"dtype\": \"bf16\",\n         "
       "\"shape\": [\"B\", \"T\", \"H\", 128], \"alignment\": 16}\n      ],\n     "
       " \"workspaces\"",
       "entries[0].params[2]: duplicate name \"k\" (also params[1])"},
      {"\"name\": \"kda_small_twice\"", "\"name\": \"kda_ws\"",
       "entries[1]: duplicate entry name \"kda_ws\" (also entries[0])"},
      {"\"name\": \"kda_small_twice\"", "\"name\": \"kda_small\"",
       "entries[1]: entry name \"kda_small\" is also the name of kernels[0]"},
      {"\"version\": 2", "\"version\": 1",
       "entries: entries need version 2 (this manifest is version 1)"},
      {"\"launches\": [\n        {\"kernel\": \"kda_small\", \"args\": "
       "[\"x\"]},\n        {\"kernel\": \"kda_small\", \"args\": [\"tmp\"]}\n   "
       "   ]",
       "\"launches\": []",
       "entries[1].launches: an entry needs at least one launch"},
      {"\"workspaces\": [{\"name\": \"tmp\", \"dtype\": \"f32\", \"shape\": "
       "[\"N\"]}],",
       "\"workspaces\": [{\"name\": \"tmp\", \"dtype\": \"f32\", \"shape\": "
       "[\"N\"], \"alignment\": 48}],",
       "entries[1].workspaces[0].alignment: must be a power of two, found 48"},
      {"\"workspaces\": [{\"name\": \"tmp\", \"dtype\": \"f32\", \"shape\": "
       "[\"N\"]}],",
       "\"workspaces\": [{\"name\": \"tmp\", \"dtype\": \"f64\", \"shape\": "
       "[\"N\"]}],",
       "entries[1].workspaces[0].dtype: unknown dtype \"f64\""},
      {"\"workspaces\": [{\"name\": \"tmp\", \"dtype\": \"f32\", \"shape\": "
       "[\"N\"]}],",
       "\"workspaces\": [{\"name\": \"tmp\", \"dtype\": \"f32\", \"shape\": "
       "[\"N\"], \"bytes\": 4}],",
       "entries[1].workspaces[0].bytes: unknown field (expected one of: name, "
       "dtype, shape, alignment)"},
      {"{\"kernel\": \"kda_small\", \"args\": [\"x\"]}",
       "{\"kernel\": \"kda_small\", \"args\": [\"x\"], \"grid\": [1, 1, 1]}",
       "entries[1].launches[0].grid: unknown field (expected one of: kernel, "
       "args, symbols, stream, after, alone, progress)"},
      {"\"name\": \"kda_small_twice\",",
       "\"name\": \"kda_small_twice\", \"stream\": 0,",
       "entries[1].stream: unknown field (expected one of: name, params, "
       "workspaces, launches)"},
      {"\"params\": [\n        {\"name\": \"x\", \"kind\": \"tensor\", "
       "\"dtype\": \"f32\", \"shape\": [\"N\"]}\n      ],\n      \"workspaces\"",
       "\"params\": [\n        {\"name\": \"x\", \"kind\": \"tensor\", "
       "\"dtype\": \"f32\", \"shape\": [\"N\"]}, {\"name\": \"N\", \"kind\": "
       "\"dim\"}\n      ],\n      \"workspaces\"",
       "entries[1].params[1].kind: an entry's parameters are tensors only"},
  };
  for (const Case &c : cases) {
    std::string text = replaced(entriesManifest(), c.from, c.to);
    Manifest m;
    Status s = parseManifest(text, "dir/manifest.json", m);
    EXPECT_EQ(s.code(), KDA_ERROR_CORRUPT_BUNDLE) << c.to;
    EXPECT_NE(s.message().find(c.expected), std::string::npos)
        << "edit: " << c.from << " -> " << c.to << "\nmessage:  " << s.message()
        << "\nexpected: " << c.expected;
    EXPECT_EQ(s.message().rfind("dir/manifest.json:", 0), 0u) << s.message();
  }
}

// A layer's entry launches kernels that name one dimension differently (the
// window kernel's HO is the gated delta's HV): a launch's "symbols" maps the
// kernel's names to the entry's for the load-time shape checks.
TEST(Entries, LaunchSymbols) {
  // kda_small_twice with its dimension called M: each launch maps N -> M.
  std::string renamed = replaced(
      replaced(entriesManifest(),
               "{\"name\": \"x\", \"kind\": \"tensor\", \"dtype\": "
               "\"f32\", \"shape\": [\"N\"]}\n      ],\n      \"workspaces\"",
               "{\"name\": \"x\", \"kind\": \"tensor\", \"dtype\": "
               "\"f32\", \"shape\": [\"M\"]}\n      ],\n      \"workspaces\""),
      "\"workspaces\": [{\"name\": \"tmp\", \"dtype\": \"f32\", \"shape\": "
      "[\"N\"]}],",
      "\"workspaces\": [{\"name\": \"tmp\", \"dtype\": \"f32\", \"shape\": "
      "[\"M\"]}],");
  const std::string launches =
      "{\"kernel\": \"kda_small\", \"args\": [\"x\"]},\n        "
      "{\"kernel\": \"kda_small\", \"args\": [\"tmp\"]}";
  auto withSymbols = [&](const std::string &first, const std::string &second) {
    return replaced(renamed, launches,
                    "{\"kernel\": \"kda_small\", \"args\": [\"x\"]" + first +
                        "},\n        {\"kernel\": \"kda_small\", \"args\": "
                        "[\"tmp\"]" +
                        second + "}");
  };
  Manifest m;
  // Without the map the names differ.
  Status s = parseManifest(renamed, "m", m);
  EXPECT_NE(s.message().find("entries[1].launches[0].args[0]: entry "
                             "\"kda_small_twice\" launch 0 arg 0: entry "
                             "parameter \"x\" is f32 [M], but kernel "
                             "\"kda_small\" parameter \"x\" is f32 [N]"),
            std::string::npos)
      << s.message();
  const std::string map = ", \"symbols\": {\"N\": \"M\"}";
  s = parseManifest(withSymbols(map, map), "m", m);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(m.entries[1].signature.symbols, (std::vector<std::string>{"M"}));
  // A map on one launch only: the other still differs.
  s = parseManifest(withSymbols(map, ""), "m", m);
  EXPECT_NE(s.message().find("entries[1].launches[1].args[0]: entry "
                             "\"kda_small_twice\" launch 1 arg 0: workspace "
                             "\"tmp\" is f32 [M], but kernel \"kda_small\" "
                             "parameter \"x\" is f32 [N]"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(s.message().find("after the launch's symbols"), std::string::npos)
      << s.message();
  struct Case {
    std::string symbols, expected;
  } cases[] = {
      {", \"symbols\": [\"N\"]",
       "entries[1].launches[0].symbols: expected an object (kernel symbol -> "
       "entry symbol), found an array"},
      {", \"symbols\": {\"Q\": \"M\"}",
       "entries[1].launches[0].symbols.Q: kernel \"kda_small\" has no "
       "dimension \"Q\""},
      {", \"symbols\": {\"N\": 3}",
       "entries[1].launches[0].symbols.N: expected a string (an entry symbol), "
       "found a number"},
      {", \"symbols\": {\"N\": \"Z\"}",
       "entries[1].launches[0].symbols.N: symbol \"Z\" is in no parameter of "
       "entry \"kda_small_twice\""},
  };
  for (const Case &c : cases) {
    s = parseManifest(withSymbols(c.symbols, map), "m", m);
    EXPECT_EQ(s.code(), KDA_ERROR_CORRUPT_BUNDLE) << c.symbols;
    EXPECT_NE(s.message().find(c.expected), std::string::npos)
        << c.symbols << "\nmessage:  " << s.message()
        << "\nexpected: " << c.expected;
  }
}

TEST(Entries, CApiListsAndChecks) {
  BundleDir b(entriesManifest());
  kda_bundle *bundle = nullptr;
  ASSERT_EQ(load(b, &bundle), KDA_OK) << kda_last_error();
  EXPECT_EQ(kda_bundle_num_kernels(bundle), 3);
  EXPECT_EQ(kda_bundle_num_entries(bundle), 2);
  EXPECT_STREQ(kda_bundle_entry_name(bundle, 0), "kda_ws");
  EXPECT_STREQ(kda_bundle_entry_name(bundle, 1), "kda_small_twice");
  EXPECT_EQ(kda_bundle_entry_name(bundle, 2), nullptr);
  EXPECT_STREQ(kda_last_error(),
               "entry index 2 is out of range (the bundle has 2 entries)");
  EXPECT_EQ(kda_bundle_num_entries(nullptr), -1);
  EXPECT_EQ(kda_bundle_entry_name(nullptr, 0), nullptr);

  // kda_check_tensors takes an entry name; messages say "entry".
  WsTensors t(1, 3, 5);
  std::vector<kda_tensor> views = t.views();
  EXPECT_EQ(kda_check_tensors(bundle, "kda_ws", views.data(), 3), KDA_OK)
      << kda_last_error();
  EXPECT_EQ(kda_check_tensors(bundle, "kda_ws", views.data(), 2),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kda_last_error(), "entry 'kda_ws' takes 3 tensors (q, k, o), got 2");
  WsTensors other(1, 4, 5);
  views[2] = other.o.view();
  EXPECT_EQ(kda_check_tensors(bundle, "kda_ws", views.data(), 3),
            KDA_ERROR_BAD_TENSOR);
  EXPECT_STREQ(kda_last_error(),
               "tensor 2 ('o') dimension 1 (symbol T) is 4, but tensor 0 ('q') "
               "dimension 1 bound T = 3");
  EXPECT_EQ(kda_check_tensors(bundle, "kda_nope", views.data(), 3),
            KDA_ERROR_NOT_FOUND);
  EXPECT_EQ(std::string(kda_last_error()),
            "bundle " + b.path() +
                " has no kernel or entry 'kda_nope' (kernels: kda_small, "
                "kda_ws_intra, kda_ws_state; entries: kda_ws, "
                "kda_small_twice)");
  // Kernels called by entries stay launchable by name.
  views = t.views();
  Tensor w(KDA_F32, {1, 3, 5, 64}), c(KDA_I32, {3});
  std::vector<kda_tensor> intra = {views[0], views[1], w.view(), c.view()};
  EXPECT_EQ(kda_check_tensors(bundle, "kda_ws_intra", intra.data(), 4), KDA_OK)
      << kda_last_error();
  kda_bundle_free(bundle);
}

TEST(Entries, WorkspaceBytes) {
  BundleDir b(entriesManifest());
  kda_bundle *bundle = nullptr;
  ASSERT_EQ(load(b, &bundle), KDA_OK) << kda_last_error();
  WsTensors t(1, 3, 5);
  std::vector<kda_tensor> views = t.views();
  uint64_t bytes = 99;
  // ws0: 1*3*5*64 f32 = 3840 bytes at 0; ws1: 12 bytes at 4096 (aligned to
  // 1024).
  ASSERT_EQ(kda_entry_workspace_bytes(bundle, "kda_ws", views.data(), 3, &bytes),
            KDA_OK)
      << kda_last_error();
  EXPECT_EQ(bytes, 4096u + 12);
  // An empty batch: ws0 is empty, ws1 is fixed.
  WsTensors e(0, 3, 5);
  views = e.views();
  ASSERT_EQ(kda_entry_workspace_bytes(bundle, "kda_ws", views.data(), 3, &bytes),
            KDA_OK);
  EXPECT_EQ(bytes, 12u);
  Tensor x(KDA_F32, {0});
  kda_tensor xv = x.view();
  ASSERT_EQ(kda_entry_workspace_bytes(bundle, "kda_small_twice", &xv, 1, &bytes),
            KDA_OK);
  EXPECT_EQ(bytes, 0u);
  // A kernel needs none.
  ASSERT_EQ(kda_entry_workspace_bytes(bundle, "kda_small", &xv, 1, &bytes),
            KDA_OK);
  EXPECT_EQ(bytes, 0u);
  // Tensor errors are reported as by kda_check_tensors; bytes is 0.
  bytes = 5;
  views = t.views();
  views[1].dtype = KDA_F16;
  EXPECT_EQ(kda_entry_workspace_bytes(bundle, "kda_ws", views.data(), 3, &bytes),
            KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(bytes, 0u);
  EXPECT_STREQ(kda_last_error(),
               "tensor 1 ('k') has dtype f16, but entry 'kda_ws' expects bf16");
  EXPECT_EQ(kda_entry_workspace_bytes(bundle, "kda_ws", t.views().data(), 3,
                                      nullptr),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kda_last_error(), "bytes is NULL");
  kda_bundle_free(bundle);

  // Overflow: one workspace beyond 2^62 bytes, and a total beyond it.
  Manifest m;
  std::string big = replaced(
      entriesManifest(), "\"workspaces\": [\n",
      "\"workspaces\": [\n{\"name\": \"big\", \"dtype\": \"i64\", \"shape\": "
      "[\"T\", \"T\", \"T\", \"T\"]},\n");
  ASSERT_TRUE(parseManifest(big, "m", m).isOk());
  WsTensors huge(0, 65536, 1); // empty tensors, T = 2^16: 2^64 elements
  views = huge.views();
  Binding binding;
  ASSERT_TRUE(bindTensors(m.entries[0].signature, views.data(), 3, binding)
                  .isOk());
  WorkspaceLayout layout;
  Status s = layoutWorkspaces(m.entries[0], binding, layout);
  EXPECT_EQ(s.code(), KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(s.message(), "workspace 'big' of entry 'kda_ws' (i64 [T, T, T, T] "
                         "with T = 65536, T = 65536, T = 65536, T = 65536) "
                         "needs more than 2^62 bytes");
  std::string three = replaced(
      entriesManifest(), "\"workspaces\": [\n",
      "\"workspaces\": [\n"
      "{\"name\": \"a\", \"dtype\": \"i64\", \"shape\": [\"T\", \"T\", \"T\", 2]},"
      "{\"name\": \"b\", \"dtype\": \"i64\", \"shape\": [\"T\", \"T\", \"T\", 2]},"
      "{\"name\": \"c\", \"dtype\": \"i64\", \"shape\": [\"T\", \"T\", \"T\", 2]},"
      "\n");
  ASSERT_TRUE(parseManifest(three, "m", m).isOk());
  WsTensors t19(0, 524288, 1); // each workspace 2^61 bytes
  views = t19.views();
  ASSERT_TRUE(bindTensors(m.entries[0].signature, views.data(), 3, binding)
                  .isOk());
  s = layoutWorkspaces(m.entries[0], binding, layout);
  EXPECT_EQ(s.code(), KDA_ERROR_BAD_TENSOR);
  EXPECT_NE(s.message().find("workspace 'c' of entry 'kda_ws' (i64 [T, T, T, "
                             "2] with T = 524288, T = 524288, T = 524288) "
                             "brings the workspaces to more than 2^62 bytes"),
            std::string::npos)
      << s.message();
  // Through the C API too.
  BundleDir bb(big);
  ASSERT_EQ(load(bb, &bundle), KDA_OK) << kda_last_error();
  views = huge.views();
  EXPECT_EQ(kda_entry_workspace_bytes(bundle, "kda_ws", views.data(), 3, &bytes),
            KDA_ERROR_BAD_TENSOR);
  kda_bundle_free(bundle);
}

// Registers entry tensors with the fake driver and loads the bundle.
class FakeEntries : public Fake {
protected:
  void SetUp() override {
    Fake::SetUp();
    ASSERT_EQ(load(dir, &bundle), KDA_OK) << kda_last_error();
    for (const Tensor *x : {&t.q, &t.k, &t.o})
      onDevice(*x);
    const int sizes[] = {8, 8, 8, 8, 8};
    setArgSizes(5, sizes);
  }
  void TearDown() override {
    kda_bundle_free(bundle);
    Fake::TearDown();
  }
  void *arg(int launch, int i) {
    return reinterpret_cast<void *>(
        static_cast<uintptr_t>(state().history[launch].args[i]));
  }
  int64_t dim(int launch, int i) {
    return static_cast<int64_t>(state().history[launch].args[i]);
  }

  BundleDir dir{entriesManifest()};
  kda_bundle *bundle = nullptr;
  WsTensors t{1, 3, 5};
};

TEST_F(FakeEntries, LaunchesInOrderWithWorkspaces) {
  ctxSetCurrent(kForeignContext);
  std::vector<kda_tensor> views = t.views();
  ASSERT_EQ(kda_launch(bundle, "kda_ws", views.data(), 3, kStream), KDA_OK)
      << kda_last_error();
  const FakeState &s = state();
  // One allocation for both workspaces: 4108 bytes, plus 768 to align the
  // start to 1024 (ws1's alignment) within a 256-aligned allocation.
  EXPECT_STREQ(s.events,
               "alloc:4876 launch:intra_entry launch:state_entry free");
  EXPECT_EQ(s.allocs, 1);
  EXPECT_EQ(s.frees, 1);
  EXPECT_EQ(s.lastAllocStream, kStream);
  EXPECT_EQ(s.lastFreeStream, kStream);
  EXPECT_EQ(s.lastFreePointer, s.lastAllocPointer);
  ASSERT_EQ(s.historyCount, 2);
  EXPECT_EQ(s.history[0].stream, kStream);
  EXPECT_EQ(s.history[1].stream, kStream);
  auto base = reinterpret_cast<uintptr_t>(s.lastAllocPointer);
  auto ws0 = reinterpret_cast<uintptr_t>(arg(0, 2));
  EXPECT_EQ(ws0 % 1024, 0u);
  EXPECT_GE(ws0, base);
  EXPECT_LT(ws0, base + 1024);
  // intra(q, k, ws0, ws1, T)
  EXPECT_EQ(arg(0, 0), views[0].data);
  EXPECT_EQ(arg(0, 1), views[1].data);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arg(0, 3)), ws0 + 4096);
  EXPECT_EQ(dim(0, 4), 3); // T
  // state(q, ws0, ws1, o, H)
  EXPECT_EQ(arg(1, 0), views[0].data);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arg(1, 1)), ws0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arg(1, 2)), ws0 + 4096);
  EXPECT_EQ(arg(1, 3), views[2].data);
  EXPECT_EQ(dim(1, 4), 5); // H
  // Each kernel's own geometry: state's grid is [T, 1, 1] with 1024 bytes
  // of dynamic shared memory.
  EXPECT_STREQ(s.last.entry, "state_entry");
  EXPECT_EQ(s.last.grid[0], 3u);
  EXPECT_EQ(s.last.block[0], 64u);
  EXPECT_EQ(s.last.shared, 1024u);
  EXPECT_EQ(s.last.context, kDevice0Context);
  void *current = nullptr;
  ctxGetCurrent(&current);
  EXPECT_EQ(current, kForeignContext);
  EXPECT_EQ(s.moduleLoads, 2);

  // Warm: the same again loads nothing and allocates nothing on the heap.
  long before = heapAllocations.load();
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(kda_launch(bundle, "kda_ws", views.data(), 3, kStream), KDA_OK)
        << kda_last_error();
  EXPECT_EQ(heapAllocations.load() - before, 0);
  EXPECT_EQ(state().moduleLoads, 2);
  EXPECT_EQ(state().allocs, 6);
  EXPECT_EQ(state().frees, 6);
  EXPECT_EQ(state().launches, 12);
}

TEST_F(FakeEntries, WorkspaceAsAKernelsOnlyTensor) {
  Tensor x(KDA_F32, {100});
  onDevice(x);
  kda_tensor xv = x.view();
  ASSERT_EQ(kda_launch(bundle, "kda_small_twice", &xv, 1, nullptr), KDA_OK)
      << kda_last_error();
  const FakeState &s = state();
  EXPECT_STREQ(s.events, "alloc:400 launch:small_entry launch:small_entry free");
  EXPECT_EQ(arg(0, 0), xv.data);
  EXPECT_EQ(arg(1, 0), s.lastAllocPointer);
  EXPECT_EQ(s.last.grid[0], 100u);
  EXPECT_EQ(s.lastAllocStream, nullptr);

  // Zero bytes allocate nothing; empty grids launch nothing.
  Tensor empty(KDA_F32, {0});
  kda_tensor ev = empty.view();
  ASSERT_EQ(kda_launch(bundle, "kda_small_twice", &ev, 1, nullptr), KDA_OK)
      << kda_last_error();
  EXPECT_EQ(state().allocs, 1);
  EXPECT_EQ(state().launches, 2);
}

TEST_F(FakeEntries, FailedLaunchFreesTheWorkspace) {
  std::vector<kda_tensor> views = t.views();
  failLaunchesAfter(1); // the second launch fails
  EXPECT_EQ(kda_launch(bundle, "kda_ws", views.data(), 3, kStream),
            KDA_ERROR_LAUNCH_FAILED);
  EXPECT_STREQ(kda_last_error(),
               "entry 'kda_ws' launch 1 of 2 (kernel 'kda_ws_state'): kernel "
               "'kda_ws_state' (grid [3, 1, 1], block [64, 1, 1], 1024 bytes "
               "of dynamic shared memory): cuLaunchKernel failed: "
               "CUDA_ERROR_LAUNCH_FAILED (launches 0..0 were enqueued before "
               "it)");
  EXPECT_STREQ(state().events,
               "alloc:4876 launch:intra_entry launch-failed free");
  EXPECT_EQ(state().frees, 1);
  EXPECT_EQ(state().lastFreeStream, kStream);

  reset();
  for (const Tensor *x : {&t.q, &t.k, &t.o})
    onDevice(*x);
  failLaunchesAfter(0); // the first launch fails
  EXPECT_EQ(kda_launch(bundle, "kda_ws", views.data(), 3, kStream),
            KDA_ERROR_LAUNCH_FAILED);
  EXPECT_NE(std::string(kda_last_error())
                .find("entry 'kda_ws' launch 0 of 2 (kernel 'kda_ws_intra'): "),
            std::string::npos)
      << kda_last_error();
  EXPECT_STREQ(state().events, "alloc:4876 launch-failed free");
}

TEST_F(FakeEntries, AllocationAndFreeErrors) {
  std::vector<kda_tensor> views = t.views();
  setenv("KDA_FAKE_FAIL", "cuMemAllocAsync=2", 1);
  EXPECT_EQ(kda_launch(bundle, "kda_ws", views.data(), 3, kStream),
            KDA_ERROR_LAUNCH_FAILED);
  EXPECT_STREQ(kda_last_error(),
               "entry 'kda_ws': allocating 4876 bytes of workspace: "
               "cuMemAllocAsync failed: CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(state().launches, 0);
  setenv("KDA_FAKE_FAIL", "cuMemFreeAsync=1", 1);
  EXPECT_EQ(kda_launch(bundle, "kda_ws", views.data(), 3, kStream),
            KDA_ERROR_LAUNCH_FAILED);
  EXPECT_STREQ(kda_last_error(), "entry 'kda_ws': freeing the workspace: "
                                 "cuMemFreeAsync failed: "
                                 "CUDA_ERROR_INVALID_VALUE");
  EXPECT_EQ(state().launches, 2);
  unsetenv("KDA_FAKE_FAIL");
  // Tensor errors come before anything is allocated.
  views[1].dtype = KDA_F32;
  EXPECT_EQ(kda_launch(bundle, "kda_ws", views.data(), 3, kStream),
            KDA_ERROR_BAD_TENSOR);
  EXPECT_STREQ(kda_last_error(),
               "tensor 1 ('k') has dtype f32, but entry 'kda_ws' expects bf16");
  // And pointer checks, naming the entry's tensor.
  Tensor host(KDA_BF16, {1, 3, 5, 128});
  views = t.views();
  views[2] = host.view();
  EXPECT_EQ(kda_launch(bundle, "kda_ws", views.data(), 3, kStream),
            KDA_ERROR_BAD_TENSOR);
  EXPECT_NE(std::string(kda_last_error())
                .find("tensor 2 ('o') data pointer"),
            std::string::npos)
      << kda_last_error();
  EXPECT_EQ(state().allocs, 1); // the failed allocation is not counted
}

TEST_F(FakeEntries, CallerOwnedWorkspace) {
  std::vector<kda_tensor> views = t.views();
  void *ws = std::aligned_alloc(1024, 8192);
  addAllocation(ws, 8192, 0, 2);
  EXPECT_EQ(kda_launch_with_workspace(bundle, "kda_ws", views.data(), 3, ws,
                                      4107, kStream),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kda_last_error(),
               "entry 'kda_ws' needs 4108 bytes of workspace for these tensors "
               "(kda_entry_workspace_bytes), got 4107");
  EXPECT_EQ(kda_launch_with_workspace(bundle, "kda_ws", views.data(), 3,
                                      nullptr, 4108, kStream),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kda_last_error(),
               "workspace is NULL, but entry 'kda_ws' needs 4108 bytes");
  EXPECT_EQ(kda_launch_with_workspace(bundle, "kda_ws", views.data(), 3,
                                      static_cast<char *>(ws) + 512, 4108,
                                      kStream),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kda_last_error())
                .find("is not aligned to 1024 bytes, as entry 'kda_ws' "
                      "requires"),
            std::string::npos)
      << kda_last_error();
  EXPECT_EQ(state().launches, 0);

  ASSERT_EQ(kda_launch_with_workspace(bundle, "kda_ws", views.data(), 3, ws,
                                      8192, kStream),
            KDA_OK)
      << kda_last_error();
  EXPECT_STREQ(state().events, "launch:intra_entry launch:state_entry");
  EXPECT_EQ(state().allocs, 0);
  EXPECT_EQ(arg(0, 2), ws);
  EXPECT_EQ(arg(0, 3), static_cast<char *>(ws) + 4096);
  EXPECT_EQ(arg(1, 1), ws);

  // The workspace is checked with the driver like a tensor.
  void *host = std::aligned_alloc(1024, 8192);
  EXPECT_EQ(kda_launch_with_workspace(bundle, "kda_ws", views.data(), 3, host,
                                      8192, kStream),
            KDA_ERROR_BAD_TENSOR);
  EXPECT_NE(std::string(kda_last_error())
                .find("entry 'kda_ws': tensor 0 ('workspace') data pointer"),
            std::string::npos)
      << kda_last_error();
  std::free(host);
  // A workspace too small for its allocation.
  EXPECT_EQ(kda_launch_with_workspace(bundle, "kda_ws", views.data(), 3,
                                      static_cast<char *>(ws) + 5120, 4108,
                                      kStream),
            KDA_ERROR_BAD_TENSOR);

  // A kernel name ignores the workspace.
  Tensor x(KDA_F32, {10});
  onDevice(x);
  kda_tensor xv = x.view();
  EXPECT_EQ(kda_launch_with_workspace(bundle, "kda_small", &xv, 1, nullptr, 0,
                                      nullptr),
            KDA_OK)
      << kda_last_error();
  std::free(ws);
}

// kda_prepare + kda_launch_prepared: the checks and look-ups once, then
// each launch only stores the new pointers and launches what
// kda_launch_trusted would (the same arguments, context handling and
// messages), allocating nothing.
TEST_F(FakeEntries, PreparedLaunch) {
  ctxSetCurrent(kForeignContext);
  std::vector<kda_tensor> views = t.views();
  kda_prepared *prepared = nullptr;
  uint64_t bytes = 0;
  ASSERT_EQ(kda_prepare(bundle, "kda_ws", views.data(), 3, &prepared, &bytes),
            KDA_OK)
      << kda_last_error();
  ASSERT_NE(prepared, nullptr);
  EXPECT_EQ(bytes, 4108u);
  // Modules are loaded, nothing is launched or allocated, the caller's
  // context is back.
  EXPECT_EQ(state().moduleLoads, 2);
  EXPECT_EQ(state().launches, 0);
  EXPECT_EQ(state().allocs, 0);
  void *current = nullptr;
  ctxGetCurrent(&current);
  EXPECT_EQ(current, kForeignContext);

  // Other tensors of the same shapes; the driver is not asked about them.
  WsTensors other(1, 3, 5);
  void *data[3] = {other.q.data, other.k.data, other.o.data};
  void *ws = std::aligned_alloc(1024, 8192);
  {
    ScopedEnv fail("KDA_FAKE_FAIL", "cuPointerGetAttributes=3");
    ASSERT_EQ(kda_launch_prepared(prepared, data, 3, ws, 4108, kStream), KDA_OK)
        << kda_last_error();
  }
  EXPECT_STREQ(kda_last_error(), "");
  const FakeState &s = state();
  EXPECT_STREQ(s.events, "launch:intra_entry launch:state_entry");
  ASSERT_EQ(s.historyCount, 2);
  EXPECT_EQ(s.history[0].stream, kStream);
  EXPECT_EQ(s.history[1].stream, kStream);
  // intra(q, k, ws0, ws1, T), state(q, ws0, ws1, o, H), as kda_launch.
  EXPECT_EQ(arg(0, 0), data[0]);
  EXPECT_EQ(arg(0, 1), data[1]);
  EXPECT_EQ(arg(0, 2), ws);
  EXPECT_EQ(arg(0, 3), static_cast<char *>(ws) + 4096);
  EXPECT_EQ(dim(0, 4), 3);
  EXPECT_EQ(arg(1, 0), data[0]);
  EXPECT_EQ(arg(1, 1), ws);
  EXPECT_EQ(arg(1, 2), static_cast<char *>(ws) + 4096);
  EXPECT_EQ(arg(1, 3), data[2]);
  EXPECT_EQ(dim(1, 4), 5);
  EXPECT_STREQ(s.last.entry, "state_entry");
  EXPECT_EQ(s.last.grid[0], 3u);
  EXPECT_EQ(s.last.block[0], 64u);
  EXPECT_EQ(s.last.shared, 1024u);
  EXPECT_EQ(s.last.context, kDevice0Context);
  ctxGetCurrent(&current);
  EXPECT_EQ(current, kForeignContext);

  // The same arguments as kda_launch_trusted with these pointers.
  std::vector<kda_tensor> otherViews = other.views();
  ASSERT_EQ(kda_launch_trusted(bundle, "kda_ws", otherViews.data(), 3, ws,
                               4108, kStream),
            KDA_OK)
      << kda_last_error();
  ASSERT_EQ(state().historyCount, 4);
  for (int l = 0; l < 2; ++l)
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(state().history[l].args[i],
                state().history[l + 2].args[i])
          << "launch " << l << " argument " << i;

  // Warm: new pointers each time, no heap allocation, no module load.
  long before = heapAllocations.load();
  for (int i = 0; i < 5; ++i) {
    void *swapped[3] = {data[1], data[0], data[2]};
    ASSERT_EQ(kda_launch_prepared(prepared, i % 2 ? swapped : data, 3, ws,
                                  8192, nullptr),
              KDA_OK)
        << kda_last_error();
  }
  EXPECT_EQ(heapAllocations.load() - before, 0);
  EXPECT_EQ(state().moduleLoads, 2);
  EXPECT_EQ(state().launches, 14);
  EXPECT_EQ(state().last.stream, nullptr);
  kda_prepared_free(prepared);
  kda_prepared_free(nullptr);
  std::free(ws);
}

TEST_F(FakeEntries, PreparedLaunchErrors) {
  std::vector<kda_tensor> views = t.views();
  kda_prepared *prepared = reinterpret_cast<kda_prepared *>(0x1);
  // kda_prepare checks as kda_launch_trusted does (same messages); *out is
  // NULL on failure.
  views[1].dtype = KDA_F32;
  EXPECT_EQ(kda_prepare(bundle, "kda_ws", views.data(), 3, &prepared, nullptr),
            KDA_ERROR_BAD_TENSOR);
  EXPECT_EQ(prepared, nullptr);
  EXPECT_STREQ(kda_last_error(),
               "tensor 1 ('k') has dtype f32, but entry 'kda_ws' expects bf16");
  views = t.views();
  EXPECT_EQ(kda_prepare(bundle, "kda_nope", views.data(), 3, &prepared,
                        nullptr),
            KDA_ERROR_NOT_FOUND);
  EXPECT_EQ(kda_prepare(nullptr, "kda_ws", views.data(), 3, &prepared,
                        nullptr),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kda_prepare(bundle, "kda_ws", views.data(), 3, nullptr, nullptr),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kda_last_error(), "out is NULL");
  {
    ScopedEnv fail("KDA_FAKE_FAIL", "cuModuleLoadData=200");
    EXPECT_EQ(kda_prepare(bundle, "kda_ws", views.data(), 3, &prepared,
                          nullptr),
              KDA_ERROR_CORRUPT_BUNDLE);
    EXPECT_NE(std::string(kda_last_error())
                  .find("entry 'kda_ws' launch 0 of 2 (kernel "
                        "'kda_ws_intra'): "),
              std::string::npos)
        << kda_last_error();
  }
  EXPECT_EQ(state().launches, 0);

  ASSERT_EQ(kda_prepare(bundle, "kda_ws", views.data(), 3, &prepared, nullptr),
            KDA_OK)
      << kda_last_error();
  void *ws = std::aligned_alloc(1024, 8192);
  void *data[3] = {views[0].data, views[1].data, views[2].data};
  EXPECT_EQ(kda_launch_prepared(nullptr, data, 3, ws, 4108, kStream),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kda_last_error(), "prepared launch is NULL");
  EXPECT_EQ(kda_launch_prepared(prepared, data, 2, ws, 4108, kStream),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kda_last_error(),
               "entry 'kda_ws' was prepared for 3 tensors, got 2 data pointers");
  EXPECT_EQ(kda_launch_prepared(prepared, nullptr, 3, ws, 4108, kStream),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kda_last_error(),
               "data is NULL, but entry 'kda_ws' takes 3 tensors");
  void *withNull[3] = {data[0], nullptr, data[2]};
  EXPECT_EQ(kda_launch_prepared(prepared, withNull, 3, ws, 4108, kStream),
            KDA_ERROR_BAD_TENSOR);
  EXPECT_STREQ(kda_last_error(), "tensor 1 ('k') has a NULL data pointer");
  void *misaligned[3] = {data[0], data[1], static_cast<char *>(data[2]) + 2};
  EXPECT_EQ(kda_launch_prepared(prepared, misaligned, 3, ws, 4108, kStream),
            KDA_ERROR_BAD_TENSOR);
  EXPECT_NE(std::string(kda_last_error())
                .find("tensor 2 ('o') data pointer "),
            std::string::npos)
      << kda_last_error();
  EXPECT_NE(std::string(kda_last_error())
                .find(" is not aligned to 16 bytes, as entry 'kda_ws' "
                      "requires"),
            std::string::npos)
      << kda_last_error();
  // The workspace, as kda_launch_with_workspace checks it.
  EXPECT_EQ(kda_launch_prepared(prepared, data, 3, ws, 4107, kStream),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kda_last_error(),
               "entry 'kda_ws' needs 4108 bytes of workspace for these tensors "
               "(kda_entry_workspace_bytes), got 4107");
  EXPECT_EQ(kda_launch_prepared(prepared, data, 3, nullptr, 4108, kStream),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kda_last_error(),
               "workspace is NULL, but entry 'kda_ws' needs 4108 bytes");
  EXPECT_EQ(kda_launch_prepared(prepared, data, 3,
                                static_cast<char *>(ws) + 512, 4108, kStream),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kda_last_error())
                .find("is not aligned to 1024 bytes, as entry 'kda_ws' "
                      "requires"),
            std::string::npos)
      << kda_last_error();
  EXPECT_EQ(state().launches, 0);
  // A failed launch is named as kda_launch names it.
  failLaunchesAfter(1);
  EXPECT_EQ(kda_launch_prepared(prepared, data, 3, ws, 4108, kStream),
            KDA_ERROR_LAUNCH_FAILED);
  EXPECT_STREQ(kda_last_error(),
               "entry 'kda_ws' launch 1 of 2 (kernel 'kda_ws_state'): kernel "
               "'kda_ws_state' (grid [3, 1, 1], block [64, 1, 1], 1024 bytes "
               "of dynamic shared memory): cuLaunchKernel failed: "
               "CUDA_ERROR_LAUNCH_FAILED (launches 0..0 were enqueued before "
               "it)");
  kda_prepared_free(prepared);
  std::free(ws);
}

// A kernel name, and entries whose grids are empty or whose workspace is.
TEST_F(FakeEntries, PreparedKernelAndEmptyLaunches) {
  const int sizes[] = {8}; // kda_small takes one argument
  setArgSizes(1, sizes);
  Tensor x(KDA_F32, {100});
  kda_tensor xv = x.view();
  kda_prepared *prepared = nullptr;
  uint64_t bytes = 7;
  ASSERT_EQ(kda_prepare(bundle, "kda_small", &xv, 1, &prepared, &bytes), KDA_OK)
      << kda_last_error();
  EXPECT_EQ(bytes, 0u);
  Tensor y(KDA_F32, {100});
  void *data[1] = {y.data};
  // A kernel name ignores the workspace.
  ASSERT_EQ(kda_launch_prepared(prepared, data, 1, nullptr, 0, kStream), KDA_OK)
      << kda_last_error();
  EXPECT_STREQ(state().events, "launch:small_entry");
  EXPECT_EQ(arg(0, 0), y.data);
  EXPECT_EQ(state().last.grid[0], 100u);
  kda_prepared_free(prepared);

  // The entry that runs kda_small twice, the second time on its workspace.
  ASSERT_EQ(kda_prepare(bundle, "kda_small_twice", &xv, 1, &prepared, &bytes),
            KDA_OK)
      << kda_last_error();
  EXPECT_EQ(bytes, 400u);
  void *ws = std::aligned_alloc(256, 512);
  ASSERT_EQ(kda_launch_prepared(prepared, data, 1, ws, 400, nullptr), KDA_OK)
      << kda_last_error();
  EXPECT_EQ(arg(1, 0), y.data);
  EXPECT_EQ(arg(2, 0), ws);
  kda_prepared_free(prepared);

  // An empty batch: nothing launched, a NULL data pointer and no workspace
  // are fine.
  Tensor empty(KDA_F32, {0});
  kda_tensor ev = empty.view();
  ASSERT_EQ(kda_prepare(bundle, "kda_small_twice", &ev, 1, &prepared, &bytes),
            KDA_OK)
      << kda_last_error();
  EXPECT_EQ(bytes, 0u);
  void *none[1] = {nullptr};
  const int launches = state().launches;
  ASSERT_EQ(kda_launch_prepared(prepared, none, 1, nullptr, 0, nullptr), KDA_OK)
      << kda_last_error();
  EXPECT_EQ(state().launches, launches);
  kda_prepared_free(prepared);
  std::free(ws);
}

TEST_F(Fake, EntryNeedsStreamOrderedAllocation) {
  // A driver without cuMemAllocAsync (CUDA < 11.2) still launches kernels
  // and entries with caller-owned workspace.
  ScopedEnv env("KDA_CUDA_LIBRARY", KDA_FAKE_DRIVER_NOASYNC);
  void *old = dlopen(KDA_FAKE_DRIVER_NOASYNC, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(old, nullptr) << dlerror();
  auto oldAddAllocation = reinterpret_cast<void (*)(void *, size_t, int, int)>(
      dlsym(old, "kda_fake_add_allocation"));
  ASSERT_EQ(dlsym(old, "cuMemAllocAsync"), nullptr);
  BundleDir b(entriesManifest());
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK) << kda_last_error();
  Tensor x(KDA_F32, {10});
  oldAddAllocation(x.data, x.bytes, 0, 2);
  kda_tensor xv = x.view();
  EXPECT_EQ(kda_launch(bundle, "kda_small", &xv, 1, nullptr), KDA_OK)
      << kda_last_error();
  std::vector<char> ws(1024);
  void *aligned = reinterpret_cast<void *>(
      (reinterpret_cast<uintptr_t>(ws.data()) + 255) / 256 * 256);
  oldAddAllocation(aligned, 512, 0, 2);
  EXPECT_EQ(kda_launch_with_workspace(bundle, "kda_small_twice", &xv, 1,
                                      aligned, 512, nullptr),
            KDA_OK)
      << kda_last_error();
  EXPECT_EQ(kda_launch(bundle, "kda_small_twice", &xv, 1, nullptr),
            KDA_ERROR_NO_DRIVER);
  EXPECT_EQ(std::string(kda_last_error()),
            std::string("entry 'kda_small_twice': allocating 40 bytes of "
                        "workspace: the CUDA driver library ") +
                KDA_FAKE_DRIVER_NOASYNC +
                " has no cuMemAllocAsync (driver older than CUDA 11.2?), "
                "which entries with workspaces need (kda_launch_with_workspace "
                "takes caller-owned memory instead)");
  kda_bundle_free(bundle);
}

TEST_F(Fake, HipEntry) {
  std::string manifest = replaced(
      replaced(amdManifest(), "\"version\": 1", "\"version\": 2"),
      "\"dynamic_shared_memory\": 1024\n  }]",
      "\"dynamic_shared_memory\": 1024\n  }],\n"
      "  \"entries\": [{\"name\": \"axpy2\", \"params\": [{\"name\": \"x\", "
      "\"kind\": \"tensor\", \"dtype\": \"f32\", \"shape\": [\"N\", 4]}],"
      " \"workspaces\": [{\"name\": \"t\", \"dtype\": \"f32\", \"shape\": "
      "[\"N\", 4]}], \"launches\": [{\"kernel\": \"axpy\", \"args\": [\"x\"]}, "
      "{\"kernel\": \"axpy\", \"args\": [\"t\"]}]}]");
  BundleDir b(manifest);
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK) << kda_last_error();
  Tensor x(KDA_F32, {10, 4});
  kda_tensor v = x.view();
  const int sizes[] = {8, 8, 4};
  setArgSizes(3, sizes);
  ASSERT_EQ(kda_launch(bundle, "axpy2", &v, 1, kStream), KDA_OK)
      << kda_last_error();
  EXPECT_STREQ(state().events,
               "alloc:160 launch:axpy_entry launch:axpy_entry free");
  EXPECT_EQ(state().lastAllocStream, kStream);
  EXPECT_EQ(state().lastFreeStream, kStream);
  EXPECT_EQ(reinterpret_cast<void *>(
                static_cast<uintptr_t>(state().history[1].args[0])),
            state().lastAllocPointer);
  kda_bundle_free(bundle);
}

} // namespace

// A grid extent with zero_if_equal: its programs where the two symbols
// differ, none where they are equal (the gradient's sums of dq and dk over
// the value heads of a q head, with nothing to do where H = HV): the launch
// is skipped, the call succeeds, and the message of a too-large grid names
// the condition.
TEST_F(Fake, ZeroIfEqualGrid) {
  std::string m = replaced(
      replaced(nvidiaManifest(), "\"grid\": [\"N\", 1, 1]",
               "\"grid\": [{\"symbol\": \"N\", \"ceil_div\": 1, "
               "\"zero_if_equal\": [\"N\", \"M\"]}, 1, 1]"),
      "\"shape\": [\"N\"]}", "\"shape\": [\"N\", \"M\"]}");
  BundleDir b(m);
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK) << kda_last_error();
  for (auto [n, mm] : {std::pair<int64_t, int64_t>{6, 3}, {6, 6}, {4, 5}}) {
    Tensor x(KDA_F32, {n, mm});
    onDevice(x);
    kda_tensor xv = x.view();
    const int before = state().launches;
    ASSERT_EQ(kda_launch(bundle, "kda_small", &xv, 1, nullptr), KDA_OK)
        << kda_last_error();
    if (n == mm) {
      EXPECT_EQ(state().launches, before) << "N = M = " << n;
    } else {
      EXPECT_EQ(state().launches, before + 1);
      EXPECT_EQ(state().last.grid[0], static_cast<unsigned>(n));
    }
  }
  kda_bundle_free(bundle);
}

// "at_least": [[N, M]]: a launch with N >= M runs; one with N < M is
// refused before the driver, naming both symbols and where they were bound
// (a window's key rows S must be at least its query rows T); malformed
// pairs are corrupt bundles.
TEST_F(Fake, AtLeastSymbols) {
  std::string m = replaced(
      replaced(nvidiaManifest(), "\"grid\": [\"N\", 1, 1]",
               "\"grid\": [\"N\", 1, 1], \"at_least\": [[\"N\", \"M\"]]"),
      "\"shape\": [\"N\"]}", "\"shape\": [\"N\", \"M\"]}");
  BundleDir b(m);
  kda_bundle *bundle;
  ASSERT_EQ(load(b, &bundle), KDA_OK) << kda_last_error();
  for (auto [n, mm] : {std::pair<int64_t, int64_t>{6, 3}, {6, 6}, {4, 5}}) {
    Tensor x(KDA_F32, {n, mm});
    onDevice(x);
    kda_tensor xv = x.view();
    const int before = state().launches;
    kda_status st = kda_launch(bundle, "kda_small", &xv, 1, nullptr);
    if (n >= mm) {
      EXPECT_EQ(st, KDA_OK) << kda_last_error();
      EXPECT_EQ(state().launches, before + 1);
    } else {
      EXPECT_EQ(st, KDA_ERROR_BAD_TENSOR);
      EXPECT_EQ(state().launches, before);
      EXPECT_NE(std::string(kda_last_error())
                    .find("dimension 0 (symbol N) is 4, expected at least M = "
                          "5 (tensor 0 ('x') dimension 1)"),
                std::string::npos)
          << kda_last_error();
    }
  }
  kda_bundle_free(bundle);
  for (auto [field, message] :
       {std::pair<std::string, std::string>{
            "\"at_least\": [\"N\", \"M\"]",
            "kernels[1].at_least[0]: expected an array of 2 symbol names"},
        {"\"at_least\": [[\"N\", \"Q\"]]",
         "kernels[1].at_least[0][1]: symbol \"Q\" does not appear in any "
         "tensor's shape"},
        {"\"at_least\": 3", "kernels[1].at_least: expected an array"}}) {
    BundleDir bad(replaced(
        replaced(nvidiaManifest(), "\"grid\": [\"N\", 1, 1]",
                 "\"grid\": [\"N\", 1, 1], " + field),
        "\"shape\": [\"N\"]}", "\"shape\": [\"N\", \"M\"]}"));
    kda_bundle *out = nullptr;
    EXPECT_EQ(load(bad, &out), KDA_ERROR_CORRUPT_BUNDLE) << field;
    EXPECT_NE(std::string(kda_last_error()).find(message), std::string::npos)
        << kda_last_error();
  }
}

// A grid of ceil(N / d) programs (one per chunk of d tokens), and of
// ceil(N / d) + N (the flat varlen grid's form: the chunks of packed
// sequences, plus one program per sequence): the launch rounds up and adds,
// and a malformed extent is named.
TEST_F(Fake, CeilDivGrid) {
  kda_bundle *bundle;
  struct Case {
    const char *extent;
    unsigned (*expected)(int64_t n);
  } cases[] = {
      {"{\"symbol\": \"N\", \"ceil_div\": 64}",
       [](int64_t n) { return static_cast<unsigned>((n + 63) / 64); }},
      {"{\"symbol\": \"N\", \"ceil_div\": 16, \"plus\": \"N\"}",
       [](int64_t n) { return static_cast<unsigned>((n + 15) / 16 + n); }},
      {"{\"symbol\": \"N\", \"ceil_div\": 1, \"times\": 8}",
       [](int64_t n) { return static_cast<unsigned>(n * 8); }},
      {"{\"symbol\": \"N\", \"ceil_div\": 16, \"times\": 3}",
       [](int64_t n) { return static_cast<unsigned>((n + 15) / 16 * 3); }},
  };
  for (const Case &c : cases) {
    BundleDir b(replaced(nvidiaManifest(), "\"grid\": [\"N\", 1, 1]",
                         std::string("\"grid\": [") + c.extent + ", 1, 1]"));
    ASSERT_EQ(load(b, &bundle), KDA_OK) << kda_last_error();
    for (int64_t n : {1, 16, 17, 64, 65, 1000}) {
      Tensor x(KDA_F32, {n});
      onDevice(x);
      kda_tensor xv = x.view();
      ASSERT_EQ(kda_launch(bundle, "kda_small", &xv, 1, nullptr), KDA_OK)
          << kda_last_error();
      EXPECT_EQ(state().last.grid[0], c.expected(n))
          << c.extent << ", N = " << n;
    }
    kda_bundle_free(bundle);
  }

  // Grids past the hardware's limits are named before any driver call: a
  // sequence of 2^20 tokens in chunks of 16 is 65536 programs, one more than
  // y holds.
  {
    BundleDir big(replaced(nvidiaManifest(), "\"grid\": [\"N\", 1, 1]",
                           "\"grid\": [1, {\"symbol\": \"N\", \"ceil_div\": 16}, 1]"));
    ASSERT_EQ(load(big, &bundle), KDA_OK) << kda_last_error();
    const int launchesBefore = state().launches;
    for (int64_t n : {int64_t(65535) * 16, int64_t(65536) * 16}) {
      Tensor x(KDA_F32, {n});
      onDevice(x);
      kda_tensor xv = x.view();
      kda_status s = kda_launch(bundle, "kda_small", &xv, 1, nullptr);
      if (n == int64_t(65535) * 16) {
        EXPECT_EQ(s, KDA_OK) << kda_last_error();
      } else {
        EXPECT_EQ(s, KDA_ERROR_BAD_TENSOR);
        EXPECT_NE(std::string(kda_last_error()).find(
                      "grid y is ceil(N / 16) = 65536 blocks; a launch takes at "
                      "most 65535 in y"),
                  std::string::npos)
            << kda_last_error();
      }
    }
    EXPECT_EQ(state().launches, launchesBefore + 1);
    kda_bundle_free(bundle);
  }

  for (auto [extent, message] :
       {std::pair<std::string, std::string>{
            "{\"symbol\": \"N\", \"ceil_div\": 0}",
            "kernels[1].grid[0].ceil_div: expected an integer in [1,"},
        {"{\"symbol\": \"M\", \"ceil_div\": 4}",
         "symbol \"M\" does not appear in any tensor's shape"},
        {"{\"symbol\": \"N\", \"div\": 4}", "kernels[1].grid[0].div: unknown field"},
        {"{\"symbol\": 3, \"ceil_div\": 4}",
         "kernels[1].grid[0].symbol: expected a symbol name"},
        {"{\"symbol\": \"N\", \"ceil_div\": 4, \"plus\": \"M\"}",
         "kernels[1].grid[0].plus: symbol \"M\" does not appear in any tensor's shape"},
        {"{\"symbol\": \"N\", \"ceil_div\": 4, \"plus\": 2}",
         "kernels[1].grid[0].plus: expected a symbol name"},
        {"{\"symbol\": \"N\", \"ceil_div\": 1, \"times\": 0}",
         "kernels[1].grid[0].times: expected an integer in [1,"},
        {"{\"symbol\": \"N\", \"ceil_div\": 1, \"zero_if_equal\": [\"N\"]}",
         "kernels[1].grid[0].zero_if_equal: expected an array of 2 symbol "
         "names"},
        {"{\"symbol\": \"N\", \"ceil_div\": 1, \"zero_if_equal\": [\"N\", 2]}",
         "kernels[1].grid[0].zero_if_equal[1]: expected a symbol name"},
        {"{\"symbol\": \"N\", \"ceil_div\": 1, \"zero_if_equal\": [\"N\", \"M\"]}",
         "kernels[1].grid[0].zero_if_equal[1]: symbol \"M\" does not appear "
         "in any tensor's shape"}}) {
    BundleDir bad(replaced(nvidiaManifest(), "\"grid\": [\"N\", 1, 1]",
                           "\"grid\": [" + extent + ", 1, 1]"));
    kda_bundle *out = nullptr;
    EXPECT_EQ(load(bad, &out), KDA_ERROR_CORRUPT_BUNDLE) << extent;
    EXPECT_NE(std::string(kda_last_error()).find(message), std::string::npos)
        << kda_last_error();
  }
}

// ---- pipelined pieces (kda_prepare_pieces / kda_launch_pieces) --------------

// An entry the pieces can split: a chunk-parallel kernel writing ws0 per token,
// then a state pass from initial_state to final_state.
std::string piecesManifest() {
  std::string m = entriesManifest();
  std::string kernels = R"(
    {
      "name": "kda_p_intra",
      "binary": "intra.sm_90a.cubin",
      "entry": "intra_entry",
      "params": [
        {"name": "q", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "initial_state", "kind": "tensor", "dtype": "f32",
         "shape": ["H", 4, 4]},
        {"name": "ws0", "kind": "tensor", "dtype": "f32",
         "shape": ["B", "T", "H", 8]},
        {"name": "T", "kind": "dim"},
        {"name": "H", "kind": "dim"}
      ],
      "grid": [{"symbol": "T", "ceil_div": 16}, "H", 1],
      "block": [128, 1, 1]
    },
    {
      "name": "kda_p_state",
      "binary": "state.sm_90a.cubin",
      "entry": "state_entry",
      "params": [
        {"name": "q", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "initial_state", "kind": "tensor", "dtype": "f32",
         "shape": ["H", 4, 4]},
        {"name": "ws0", "kind": "tensor", "dtype": "f32",
         "shape": ["B", "T", "H", 8]},
        {"name": "o", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "final_state", "kind": "tensor", "dtype": "f32",
         "shape": ["H", 4, 4]}
      ],
      "grid": ["H", 1, 1],
      "block": [32, 1, 1]
    },)";
  std::string entries = R"(
    {
      "name": "kda_p",
      "params": [
        {"name": "q", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "initial_state", "kind": "tensor", "dtype": "f32",
         "shape": ["H", 4, 4]},
        {"name": "o", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "final_state", "kind": "tensor", "dtype": "f32",
         "shape": ["H", 4, 4]}
      ],
      "workspaces": [{"name": "ws0", "dtype": "f32", "shape": ["B", "T", "H", 8]}],
      "launches": [
        {"kernel": "kda_p_intra", "args": ["q", "initial_state", "ws0"]},
        {"kernel": "kda_p_state",
         "args": ["q", "initial_state", "ws0", "o", "final_state"]}
      ]
    },)";
  m = replaced(m, "\"kernels\": [", "\"kernels\": [" + kernels);
  return replaced(m, "\"entries\": [", "\"entries\": [" + entries);
}

class FakePieces : public Fake {
protected:
  void SetUp() override {
    Fake::SetUp();
    ASSERT_EQ(load(dir, &bundle), KDA_OK) << kda_last_error();
    for (const Tensor *x : {&q, &h0, &o, &ht})
      onDevice(*x);
    const int sizes[] = {8, 8, 8, 8, 8};
    setArgSizes(5, sizes);
    liveEvents = reinterpret_cast<int (*)()>(
        dlsym(handle, "kda_fake_live_events"));
  }
  void TearDown() override {
    kda_bundle_free(bundle);
    Fake::TearDown();
  }
  std::vector<kda_tensor> views() const {
    return {q.view(), h0.view(), o.view(), ht.view()};
  }
  uintptr_t arg(int launch, int i) {
    return static_cast<uintptr_t>(state().history[launch].args[i]);
  }

  // The eager schedule (the graph form, the default, has its own test).
  ScopedEnv eagerPieces{"KDA_PIECES_GRAPH", "0"};
  BundleDir dir{piecesManifest()};
  kda_bundle *bundle = nullptr;
  // T = 40 tokens, H = 2 heads: a token is 2 x 128 bf16 of q and o (512
  // bytes), 2 x 8 f32 of ws0 (64 bytes).
  Tensor q{KDA_BF16, {1, 40, 2, 128}}, h0{KDA_F32, {2, 4, 4}},
      o{KDA_BF16, {1, 40, 2, 128}}, ht{KDA_F32, {2, 4, 4}};
  int (*liveEvents)() = nullptr;
};

// KDA_PIECES_ALONE=1: the state passes (grids of H = 2 blocks, at most half
// of 132 multiprocessors) take seven eighths of the opt-in shared memory, so
// that each holds a multiprocessor; the chunk-parallel launches keep theirs.
// Without the multiprocessors' count (a driver that will not say), or a grid
// over half of them, nothing changes.
TEST_F(FakePieces, StatePassesAlone) {
  ScopedEnv alone{"KDA_PIECES_ALONE", "1"};
  auto run = [&](const char *sms) {
    ScopedEnv count{"KDA_FAKE_SMS", sms};
    std::vector<kda_tensor> v = views();
    const int64_t starts[] = {0, 16, 32};
    kda_pieces *pieces = nullptr;
    uint64_t bytes = 0;
    EXPECT_EQ(kda_prepare_pieces(bundle, "kda_p", v.data(), 4, starts, 3,
                                 &pieces, &bytes),
              KDA_OK)
        << kda_last_error();
    char *ws = static_cast<char *>(std::aligned_alloc(256, 4096));
    void *data[4] = {q.data, h0.data, o.data, ht.data};
    const int before = state().historyCount;
    EXPECT_EQ(kda_launch_pieces(pieces, data, 4, ws, bytes, kStream), KDA_OK)
        << kda_last_error();
    std::vector<unsigned> shared;
    for (int i = before; i < state().historyCount && i < 16; ++i)
      shared.push_back(state().history[i].shared);
    kda_pieces_free(pieces);
    std::free(ws);
    return shared;
  };
  const unsigned want = 232448 - 232448 / 8;
  EXPECT_EQ(run("132"),
            (std::vector<unsigned>{0, want, 0, want, 0, want}));
  // (The fake keeps the first 16 launches: the third run's first four.)
  EXPECT_EQ(run("3"), (std::vector<unsigned>(6, 0u))); // 2 blocks > 3 / 2
  EXPECT_EQ(run("0"), (std::vector<unsigned>(4, 0u)));
}

TEST_F(FakePieces, LaunchesPiecesOnTwoStreams) {
  ctxSetCurrent(kForeignContext);
  std::vector<kda_tensor> v = views();
  const int64_t starts[] = {0, 16, 32};
  kda_pieces *pieces = nullptr;
  uint64_t bytes = 0;
  ASSERT_EQ(kda_prepare_pieces(bundle, "kda_p", v.data(), 4, starts, 3,
                               &pieces, &bytes),
            KDA_OK)
      << kda_last_error();
  ASSERT_NE(pieces, nullptr);
  EXPECT_EQ(kda_pieces_count(pieces), 3);
  EXPECT_EQ(kda_pieces_count(nullptr), -1);
  // ws0 of 16, 16 and 8 tokens (1024, 1024, 512 bytes) at 0, 1024, 2048;
  // then two states of 128 bytes, each at a multiple of 256: 2560, 2816.
  EXPECT_EQ(bytes, 3072u);
  // The side stream of the greatest priority and four events; nothing
  // launched; the caller's context back.
  EXPECT_STREQ(state().events, "stream:s1/-5");
  EXPECT_EQ(liveEvents(), 4);
  EXPECT_EQ(state().launches, 0);
  void *current = nullptr;
  ctxGetCurrent(&current);
  EXPECT_EQ(current, kForeignContext);

  Tensor q2{KDA_BF16, {1, 40, 2, 128}}, h02{KDA_F32, {2, 4, 4}},
      o2{KDA_BF16, {1, 40, 2, 128}}, ht2{KDA_F32, {2, 4, 4}};
  void *data[4] = {q2.data, h02.data, o2.data, ht2.data};
  char *ws = static_cast<char *>(std::aligned_alloc(256, 4096));
  ASSERT_EQ(kda_launch_pieces(pieces, data, 4, ws, 3072, kStream), KDA_OK)
      << kda_last_error();
  EXPECT_STREQ(state().events,
               "stream:s1/-5 "
               "launch:intra_entry record:e1@caller wait:s1@e1 "
               "launch:state_entry "
               "launch:intra_entry record:e2@caller wait:s1@e2 "
               "launch:state_entry "
               "launch:intra_entry record:e3@caller wait:s1@e3 "
               "launch:state_entry "
               "record:e4@s1 wait:caller@e4");
  const FakeState &s = state();
  ASSERT_EQ(s.historyCount, 6);
  auto at = [](void *p, uint64_t off) {
    return reinterpret_cast<uintptr_t>(p) + off;
  };
  auto wsAt = [&](uint64_t off) { return reinterpret_cast<uintptr_t>(ws) + off; };
  void *side = s.history[1].stream;
  EXPECT_NE(side, kStream);
  EXPECT_NE(side, nullptr);
  const uint64_t token = 512; // bytes of q / o a token
  for (int p = 0; p < 3; ++p) {
    const int intra = 2 * p, st = 2 * p + 1;
    const uint64_t first = 16 * static_cast<uint64_t>(p);
    EXPECT_EQ(s.history[intra].stream, kStream) << "piece " << p;
    EXPECT_EQ(s.history[st].stream, side) << "piece " << p;
    // intra(q, initial_state, ws0, T, H)
    EXPECT_EQ(arg(intra, 0), at(q2.data, first * token)) << "piece " << p;
    EXPECT_EQ(arg(intra, 2), wsAt(1024 * static_cast<uint64_t>(p)));
    EXPECT_EQ(arg(intra, 3), p < 2 ? 16u : 8u);
    // state(q, initial_state, ws0, o, final_state): the states pass along.
    EXPECT_EQ(arg(st, 0), at(q2.data, first * token));
    EXPECT_EQ(arg(st, 1), p == 0 ? reinterpret_cast<uintptr_t>(h02.data)
                                 : wsAt(2560 + 256 * (p - 1)));
    EXPECT_EQ(arg(st, 2), wsAt(1024 * static_cast<uint64_t>(p)));
    EXPECT_EQ(arg(st, 3), at(o2.data, first * token));
    EXPECT_EQ(arg(st, 4), p == 2 ? reinterpret_cast<uintptr_t>(ht2.data)
                                 : wsAt(2560 + 256 * p));
  }
  EXPECT_EQ(s.last.context, kDevice0Context);
  ctxGetCurrent(&current);
  EXPECT_EQ(current, kForeignContext);

  // Warm: no heap allocation; a second handle takes the same side stream.
  long before = heapAllocations.load();
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(kda_launch_pieces(pieces, data, 4, ws, 4096, kStream), KDA_OK)
        << kda_last_error();
  EXPECT_EQ(heapAllocations.load() - before, 0);
  EXPECT_EQ(state().launches, 24);
  const int64_t one[] = {0};
  kda_pieces *whole = nullptr;
  ASSERT_EQ(kda_prepare_pieces(bundle, "kda_p", v.data(), 4, one, 1, &whole,
                               &bytes),
            KDA_OK)
      << kda_last_error();
  EXPECT_EQ(bytes, 2560u); // 40 tokens of ws0, no state passed on
  EXPECT_EQ(std::string(state().events).find("stream:s2"), std::string::npos);
  kda_pieces_free(whole);
  kda_pieces_free(pieces);
  kda_pieces_free(nullptr);
  EXPECT_EQ(liveEvents(), 0);
  std::free(ws);
}

// A layer's entry in pieces (kda_p with a third launch): the chunk pair,
// then a window over earlier keys (its kernel's key rows S at least T:
// "at_least") reading the layer's `keys` [B, S, H, 128] from row 0 through
// each piece's end.
std::string followerManifest() {
  std::string m = piecesManifest();
  std::string kernel = R"(
    {
      "name": "kda_p_window",
      "binary": "window.sm_90a.cubin",
      "entry": "window_entry",
      "params": [
        {"name": "q", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "k", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "S", "H", 128], "alignment": 16},
        {"name": "out", "kind": "tensor", "dtype": "bf16",
         "shape": ["B", "T", "H", 128], "alignment": 16},
        {"name": "T", "kind": "dim"},
        {"name": "S", "kind": "dim"}
      ],
      "grid": [{"symbol": "T", "ceil_div": 64}, "H", 1],
      "at_least": [["S", "T"]],
      "block": [128, 1, 1]
    },)";
  // kda_p with the window's tensors and its launch.
  m = replaced(m, "\"kernels\": [", "\"kernels\": [" + kernel);
  m = replaced(m,
               "\"shape\": [\"H\", 4, 4]}\n      ],\n      \"workspaces\"",
               "\"shape\": [\"H\", 4, 4]},\n"
               "        {\"name\": \"keys\", \"kind\": \"tensor\", \"dtype\": \"bf16\",\n"
               "         \"shape\": [\"B\", \"S\", \"H\", 128], \"alignment\": 16},\n"
               "        {\"name\": \"out\", \"kind\": \"tensor\", \"dtype\": \"bf16\",\n"
               "         \"shape\": [\"B\", \"T\", \"H\", 128], \"alignment\": 16}\n"
               "      ],\n      \"workspaces\"");
  return replaced(m,
                  "\"args\": [\"q\", \"initial_state\", \"ws0\", \"o\", \"final_state\"]}\n"
                  "      ]",
                  "\"args\": [\"q\", \"initial_state\", \"ws0\", \"o\", \"final_state\"]},\n"
                  "        {\"kernel\": \"kda_p_window\", \"args\": [\"q\", \"keys\", \"out\"]}\n"
                  "      ]");
}

// The window follows its piece's state pass: eagerly on the follower stream
// (the default priority) through an event after it; as one graph after its
// piece's state node only (not in the chain), at the default priority. Its q and out are the piece's rows, its
// keys from row 0 (S = the piece's end). A keys tensor shorter than T, and
// an entry whose third launch is no follower, are refused.
class FakeFollower : public FakePieces {
protected:
  void run(bool graph) {
    ScopedEnv mode{"KDA_PIECES_GRAPH", graph ? "1" : "0"};
    ASSERT_EQ(load(fdir, &fb), KDA_OK) << kda_last_error();
    onDevice(keys);
    onDevice(out);
    std::vector<kda_tensor> v = {q.view(),    h0.view(),   o.view(),
                                 ht.view(),   keys.view(), out.view()};
    kda_pieces *pieces = nullptr;
    uint64_t bytes = 0;
    ASSERT_EQ(kda_prepare_pieces(fb, "kda_p", v.data(), 6, starts, 3, &pieces,
                                 &bytes),
              KDA_OK)
        << kda_last_error();
    EXPECT_EQ(bytes, 3072u); // the workspace as without the window
    void *data[6] = {q.data, h0.data, o.data, ht.data, keys.data, out.data};
    char *ws = static_cast<char *>(std::aligned_alloc(256, 4096));
    ASSERT_EQ(kda_launch_pieces(pieces, data, 6, ws, bytes, kStream), KDA_OK)
        << kda_last_error();
    const std::string events = state().events;
    if (graph)
      EXPECT_NE(events.find("node:intra_entry/0 node:state_entry/1 "
                            "priority:-5@2 node:window_entry/1 "
                            "node:intra_entry/1 node:state_entry/2 "
                            "priority:-5@5 node:window_entry/1 "
                            "node:intra_entry/1 node:state_entry/2 "
                            "priority:-5@8 node:window_entry/1 "),
                std::string::npos)
          << events;
    else // the windows on the follower stream (s2, the default priority)
      EXPECT_NE(
          events.find(
              "stream:s1/-5 stream:s2/0 launch:intra_entry record:e1@caller "
              "wait:s1@e1 launch:state_entry record:e5@s1 wait:s2@e5 "
              "launch:window_entry launch:intra_entry record:e2@caller "
              "wait:s1@e2 launch:state_entry record:e6@s1 wait:s2@e6 "
              "launch:window_entry launch:intra_entry record:e3@caller "
              "wait:s1@e3 launch:state_entry record:e7@s1 wait:s2@e7 "
              "launch:window_entry record:e4@s1 wait:caller@e4 record:e8@s2 "
              "wait:caller@e8"),
          std::string::npos)
          << events;
    const FakeState &s = state();
    ASSERT_EQ(s.historyCount, 9);
    for (int p = 0; p < 3; ++p) {
      const int w = 3 * p + 2;
      const uint64_t off = 16 * 512 * static_cast<uint64_t>(p);
      EXPECT_STREQ(s.history[w].entry, "window_entry");
      if (!graph) // beside the next state pass, not behind it
        EXPECT_NE(s.history[w].stream, s.history[w - 1].stream);
      EXPECT_EQ(arg(w, 0), reinterpret_cast<uintptr_t>(q.data) + off);
      EXPECT_EQ(arg(w, 1), reinterpret_cast<uintptr_t>(keys.data));
      EXPECT_EQ(arg(w, 2), reinterpret_cast<uintptr_t>(out.data) + off);
      EXPECT_EQ(arg(w, 3), p < 2 ? 16u : 8u);      // T: the piece's rows
      EXPECT_EQ(arg(w, 4), p < 2 ? 16u * (p + 1) : 40u); // S: its end
    }
    kda_pieces_free(pieces);
    std::free(ws);
    kda_bundle_free(fb);
  }
  BundleDir fdir{followerManifest()};
  kda_bundle *fb = nullptr;
  Tensor keys{KDA_BF16, {1, 40, 2, 128}}, out{KDA_BF16, {1, 40, 2, 128}};
  const int64_t starts[3] = {0, 16, 32};
};

TEST_F(FakeFollower, Eager) { run(false); }

TEST_F(FakeFollower, OneGraph) { run(true); }

TEST_F(FakeFollower, Errors) {
  ASSERT_EQ(load(fdir, &fb), KDA_OK) << kda_last_error();
  Tensor shortKeys{KDA_BF16, {1, 39, 2, 128}};
  onDevice(shortKeys);
  onDevice(out);
  std::vector<kda_tensor> v = {q.view(),  h0.view(),        o.view(),
                               ht.view(), shortKeys.view(), out.view()};
  kda_pieces *bad = nullptr;
  uint64_t bytes = 0;
  EXPECT_EQ(kda_prepare_pieces(fb, "kda_p", v.data(), 6, starts, 3, &bad,
                               &bytes),
            KDA_ERROR_BAD_TENSOR);
  EXPECT_NE(std::string(kda_last_error())
                .find("tensor 4 ('keys') dimension 1 (S, earlier keys) is 39, "
                      "expected at least T = 40"),
            std::string::npos)
      << kda_last_error();
  kda_bundle_free(fb);
  // A third launch without "at_least" is no follower.
  BundleDir plain{replaced(followerManifest(),
                           "\"at_least\": [[\"S\", \"T\"]],", "")};
  ASSERT_EQ(load(plain, &fb), KDA_OK) << kda_last_error();
  onDevice(keys);
  v[4] = keys.view();
  EXPECT_EQ(kda_prepare_pieces(fb, "kda_p", v.data(), 6, starts, 3, &bad,
                               &bytes),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kda_last_error()).find("or three where the third"),
            std::string::npos)
      << kda_last_error();
  kda_bundle_free(fb);
  fb = nullptr;
}

// An entry whose launches name a stream and the launches they follow (a
// layer's entry: the state pass beside the window, kda-gpu-layer-entry): the
// side stream starts after the allocation, waits for the caller's launch it
// follows, the caller waits for the side's, and joins it before the free.
std::string twoStreamsManifest() {
  return replaced(
      piecesManifest(),
      "{\"kernel\": \"kda_p_state\",\n         \"args\": [\"q\", "
      "\"initial_state\", \"ws0\", \"o\", \"final_state\"]}",
      "{\"kernel\": \"kda_p_state\", \"stream\": 1, \"after\": [0],\n   "
      "      \"args\": [\"q\", \"initial_state\", \"ws0\", \"o\", "
      "\"final_state\"]},\n        {\"kernel\": \"kda_p_intra\", \"after\": "
      "[1], \"args\": [\"q\", \"initial_state\", \"ws0\"]}");
}

TEST(Entries, TwoStreams) {
  std::string m = twoStreamsManifest();
  Manifest parsed;
  Status st = parseManifest(m, "m", parsed);
  ASSERT_TRUE(st.isOk()) << st.message();
  const Entry &e = *parsed.findEntry("kda_p");
  ASSERT_EQ(e.launches.size(), 3u);
  EXPECT_TRUE(e.sideStream);
  EXPECT_EQ(e.launches[1].stream, 1);
  EXPECT_EQ(e.launches[1].after, (std::vector<size_t>{0}));
  EXPECT_TRUE(e.launches[0].recordEvent); // the side's launch follows it
  EXPECT_TRUE(e.launches[1].recordEvent); // the caller's last follows it
  EXPECT_FALSE(e.launches[2].recordEvent);
  EXPECT_FALSE(e.launches[1].alone);
  // "alone": a multiprocessor a block (where the grid leaves half the device).
  {
    Manifest alone;
    Status sa = parseManifest(
        replaced(m, "\"stream\": 1,", "\"stream\": 1, \"alone\": true,"), "m",
        alone);
    ASSERT_TRUE(sa.isOk()) << sa.message();
    EXPECT_TRUE(alone.findEntry("kda_p")->launches[1].alone);
  }
  struct Case {
    std::string from, to, expected;
  } cases[] = {
      {"\"stream\": 1,", "\"stream\": 1, \"alone\": 1,",
       "entries[0].launches[1].alone: expected true or false"},
      {"\"stream\": 1,", "\"stream\": 2,",
       "entries[0].launches[1].stream: expected 0 (the caller's stream) or 1 "
       "(the side stream)"},
      {"\"after\": [0],", "\"after\": [1],",
       "entries[0].launches[1].after[0]: expected the index of an earlier "
       "launch (0 to 0)"},
      {"\"after\": [0],", "\"after\": 0,",
       "entries[0].launches[1].after: expected an array"},
  };
  for (const Case &c : cases) {
    st = parseManifest(replaced(m, c.from, c.to), "m", parsed);
    EXPECT_NE(st.message().find(c.expected), std::string::npos)
        << c.to << "\nmessage:  " << st.message();
  }
}

TEST_F(FakePieces, EntryOnTwoStreams) {
  BundleDir two(twoStreamsManifest());
  kda_bundle *b2 = nullptr;
  ASSERT_EQ(load(two, &b2), KDA_OK) << kda_last_error();
  std::vector<kda_tensor> v = views();
  ASSERT_EQ(kda_launch(b2, "kda_p", v.data(), 4, kStream), KDA_OK)
      << kda_last_error();
  // ws0 of 40 tokens: 2560 bytes. The side stream waits for the allocation
  // (e1) and the intra launch (e2); the caller waits for the state launch
  // (e3) before its own last launch, and joins the side (e1 again) before
  // the free. Every event is destroyed.
  EXPECT_STREQ(state().events,
               "alloc:2560 stream:s1/-5 record:e1@caller wait:s1@e1 "
               "launch:intra_entry record:e2@caller wait:s1@e2 "
               "launch:state_entry record:e3@s1 wait:caller@e3 "
               "launch:intra_entry record:e1@s1 wait:caller@e1 free");
  EXPECT_EQ(liveEvents(), 0);
  ASSERT_EQ(state().historyCount, 3);
  EXPECT_EQ(state().history[0].stream, kStream);
  EXPECT_NE(state().history[1].stream, kStream);
  EXPECT_EQ(state().history[2].stream, kStream);
  // KDA_ENTRY_STREAMS=0: the caller's stream alone, in the manifest's order.
  {
    ScopedEnv oneStream("KDA_ENTRY_STREAMS", "0");
    ASSERT_EQ(kda_launch(b2, "kda_p", v.data(), 4, kStream), KDA_OK)
        << kda_last_error();
  }
  std::string events = state().events;
  EXPECT_EQ(events.substr(events.rfind("alloc:")),
            "alloc:2560 launch:intra_entry launch:state_entry "
            "launch:intra_entry free");
  EXPECT_EQ(state().history[4].stream, kStream);
  kda_bundle_free(b2);
}

// The state pass on the side stream, alone on its multiprocessors, whose
// progress the caller's last launch follows ("progress"): the counter `cnt`
// (i32, its first word the started blocks) a workspace of the entry.
std::string progressManifest() {
  std::string m = replaced(
      twoStreamsManifest(),
      "\"workspaces\": [{\"name\": \"ws0\", \"dtype\": \"f32\", \"shape\": "
      "[\"B\", \"T\", \"H\", 8]}],",
      "\"workspaces\": [{\"name\": \"ws0\", \"dtype\": \"f32\", \"shape\": "
      "[\"B\", \"T\", \"H\", 8]}, {\"name\": \"cnt\", \"dtype\": \"i32\", "
      "\"shape\": [\"H\", 4]}],");
  m = replaced(m, "\"stream\": 1,", "\"stream\": 1, \"alone\": true,");
  return replaced(m, "\"after\": [1],",
                  "\"after\": [1], \"progress\": {\"counter\": \"cnt\", "
                  "\"after\": 1},");
}

TEST(Entries, Progress) {
  std::string m = progressManifest();
  Manifest parsed;
  Status st = parseManifest(m, "m", parsed);
  ASSERT_TRUE(st.isOk()) << st.message();
  const Entry &e = *parsed.findEntry("kda_p");
  EXPECT_EQ(e.launches[2].progressAfter, 1);
  EXPECT_TRUE(e.launches[2].progressCounter.isWorkspace);
  EXPECT_EQ(e.launches[2].progressCounter.index, 1u);
  EXPECT_EQ(e.launches[1].progressAfter, -1);
  struct Case {
    std::string from, to, expected;
  } cases[] = {
      {"\"counter\": \"cnt\"", "\"counter\": \"nope\"",
       "progress.counter: unknown name \"nope\""},
      {"\"counter\": \"cnt\"", "\"counter\": \"ws0\"",
       "progress.counter: \"ws0\" is f32, expected i32"},
      {"\"counter\": \"cnt\", \"after\": 1}", "\"counter\": \"cnt\", \"after\": 0}",
       "progress.after: expected a launch on the other stream that \"after\" "
       "names, found launch 0"},
      {"\"counter\": \"cnt\", \"after\": 1}", "\"counter\": \"cnt\", \"after\": 2}",
       "progress.after: expected an integer in [0, 1], found 2"},
      {"\"counter\": \"cnt\", \"after\": 1}", "\"counter\": \"cnt\"}",
       "progress: missing field \"after\""},
      {"\"counter\": \"cnt\", \"after\": 1}",
       "\"counter\": \"cnt\", \"after\": 1, \"x\": 0}",
       "progress.x: unknown field (expected one of: counter, after)"},
  };
  for (const Case &c : cases) {
    st = parseManifest(replaced(m, c.from, c.to), "m", parsed);
    EXPECT_NE(st.message().find(c.expected), std::string::npos)
        << c.to << "\nmessage:  " << st.message();
  }
}

TEST_F(FakePieces, ProgressWait) {
  BundleDir dir(progressManifest());
  kda_bundle *b2 = nullptr;
  ASSERT_EQ(load(dir, &b2), KDA_OK) << kda_last_error();
  std::vector<kda_tensor> v = views();
  auto tail = [&](const std::string &from) {
    std::string events = state().events;
    return events.substr(events.rfind(from));
  };
  // What the caller's stream does between the state pass and its last
  // launch (event numbers grow from call to call).
  auto beforeLast = [&] {
    std::string events = tail("alloc:");
    size_t a = events.find("launch:state_entry"),
           b = events.find("launch:intra_entry", a);
    return events.substr(a, b - a);
  };
  // 8 multiprocessors: the state pass's 2 blocks hold one each, so the last
  // launch waits on the caller's stream until both have started (2), not
  // for the state pass's end (e3).
  {
    ScopedEnv sms("KDA_FAKE_SMS", "8");
    ASSERT_EQ(kda_launch(b2, "kda_p", v.data(), 4, kStream), KDA_OK)
        << kda_last_error();
    std::string events = tail("alloc:");
    EXPECT_EQ(events.find("alloc:2592 stream:s1/-5 write:caller=0@0x"), 0u)
        << events;
    EXPECT_NE(events.find("launch:state_entry record:e3@s1 "
                          "waitvalue:caller>=2@0x"),
              std::string::npos)
        << events;
    EXPECT_EQ(events.find("wait:caller@e3"), std::string::npos) << events;
    EXPECT_NE(events.find("launch:intra_entry record:e1@s1 wait:caller@e1 free"),
              std::string::npos)
        << events;
    // The counter the stream writes and waits on is the workspace's: the
    // same address in both.
    size_t w = events.find("write:caller=0@"), x = events.find(">=2@");
    EXPECT_EQ(events.substr(w + 15, 14), events.substr(x + 4, 14)) << events;
    EXPECT_EQ(liveEvents(), 0);
  }
  // Without multiprocessors to spare (the device does not say how many),
  // under a capture, or on one stream: the launch follows the whole state
  // pass.
  ASSERT_EQ(kda_launch(b2, "kda_p", v.data(), 4, kStream), KDA_OK);
  EXPECT_NE(beforeLast().find("wait:caller@e"), std::string::npos)
      << tail("alloc:");
  EXPECT_EQ(tail("alloc:").find("waitvalue"), std::string::npos);
  {
    ScopedEnv sms("KDA_FAKE_SMS", "8");
    ScopedEnv capturing("KDA_FAKE_CAPTURING", "1");
    ASSERT_EQ(kda_launch(b2, "kda_p", v.data(), 4, kStream), KDA_OK);
    EXPECT_EQ(tail("alloc:").find("write:"), std::string::npos);
    EXPECT_NE(beforeLast().find("wait:caller@e"), std::string::npos)
        << tail("alloc:");
    EXPECT_EQ(tail("alloc:").find("waitvalue"), std::string::npos);
  }
  {
    ScopedEnv sms("KDA_FAKE_SMS", "8");
    ScopedEnv oneStream("KDA_ENTRY_STREAMS", "0");
    ASSERT_EQ(kda_launch(b2, "kda_p", v.data(), 4, kStream), KDA_OK);
    EXPECT_EQ(tail("alloc:"), "alloc:2592 launch:intra_entry "
                              "launch:state_entry launch:intra_entry free");
  }
  // A failing stream operation is the launch's error, and the side stream
  // is still joined.
  {
    ScopedEnv sms("KDA_FAKE_SMS", "8");
    ScopedEnv fail("KDA_FAKE_FAIL", "cuStreamWaitValue32=2");
    EXPECT_EQ(kda_launch(b2, "kda_p", v.data(), 4, kStream),
              KDA_ERROR_LAUNCH_FAILED);
    EXPECT_NE(std::string(kda_last_error()).find("cuStreamWaitValue32"),
              std::string::npos)
        << kda_last_error();
    std::string events = tail("alloc:");
    size_t join = events.rfind("wait:caller@e");
    EXPECT_TRUE(join != std::string::npos &&
                events.rfind("@s1 ") < join &&
                events.compare(events.size() - 5, 5, " free") == 0)
        << events;
    EXPECT_EQ(events.find("launch:intra_entry", events.find("state_entry")),
              std::string::npos)
        << events;
    EXPECT_EQ(liveEvents(), 0);
  }
  kda_bundle_free(b2);
}

TEST_F(FakePieces, Errors) {
  std::vector<kda_tensor> v = views();
  const int64_t starts[] = {0, 16, 32};
  kda_pieces *pieces = nullptr;
  uint64_t bytes = 7;
  auto expectPrepare = [&](const char *name, const kda_tensor *t,
                           const int64_t *s, int32_t n, kda_status code,
                           const std::string &message) {
    pieces = reinterpret_cast<kda_pieces *>(0x1);
    EXPECT_EQ(kda_prepare_pieces(bundle, name, t, 4, s, n, &pieces, &bytes),
              code)
        << message;
    EXPECT_EQ(pieces, nullptr);
    EXPECT_EQ(bytes, 0u);
    EXPECT_NE(std::string(kda_last_error()).find(message), std::string::npos)
        << kda_last_error();
  };
  expectPrepare("kda_nope", v.data(), starts, 3, KDA_ERROR_NOT_FOUND,
                "no kernel or entry 'kda_nope'");
  expectPrepare("kda_p_state", v.data(), starts, 3,
                KDA_ERROR_INVALID_ARGUMENT,
                "pipelined pieces take an entry (a chunk-parallel launch, "
                "then the state pass), not kernel 'kda_p_state'");
  expectPrepare("kda_ws", v.data(), starts, 3, KDA_ERROR_INVALID_ARGUMENT,
                "pipelined pieces of entry 'kda_ws': the entry must take an "
                "initial_state and a final_state");
  const int64_t late[] = {8, 16}, same[] = {0, 16, 16}, past[] = {0, 40};
  expectPrepare("kda_p", v.data(), late, 2, KDA_ERROR_INVALID_ARGUMENT,
                "piece 0 starts at token 8; pieces start at 0, then strictly "
                "increase below T = 40");
  expectPrepare("kda_p", v.data(), same, 3, KDA_ERROR_INVALID_ARGUMENT,
                "piece 1 starts at token 16;");
  expectPrepare("kda_p", v.data(), past, 2, KDA_ERROR_INVALID_ARGUMENT,
                "piece 1 starts at token 40;");
  expectPrepare("kda_p", v.data(), starts, 0, KDA_ERROR_INVALID_ARGUMENT,
                "0 pieces asked for");
  expectPrepare("kda_p", v.data(), nullptr, 3, KDA_ERROR_INVALID_ARGUMENT,
                "(with starts NULL), expected 1 to 4096");
  // Two sequences: a piece of one is not a piece of the batch.
  Tensor q2{KDA_BF16, {2, 20, 2, 128}}, o2{KDA_BF16, {2, 20, 2, 128}};
  onDevice(q2);
  onDevice(o2);
  std::vector<kda_tensor> batch = {q2.view(), h0.view(), o2.view(), ht.view()};
  const int64_t two[] = {0, 16};
  expectPrepare("kda_p", batch.data(), two, 2, KDA_ERROR_BAD_TENSOR,
                "pipelined pieces of entry 'kda_p' split one sequence: tensor "
                "0 ('q') dimension 0 is 2, expected 1 (before its token "
                "dimension)");
  // States of different sizes.
  std::vector<kda_tensor> bad = views();
  Tensor h3{KDA_F32, {3, 4, 4}};
  bad[1] = h3.view();
  expectPrepare("kda_p", bad.data(), starts, 3, KDA_ERROR_BAD_TENSOR,
                "tensor 1 ('initial_state') dimension 0 (symbol H) is 3");
  // The driver's failures name the call.
  {
    ScopedEnv fail("KDA_FAKE_FAIL", "cuStreamCreateWithPriority=2");
    expectPrepare("kda_p", v.data(), starts, 3, KDA_ERROR_LAUNCH_FAILED,
                  "pipelined pieces of entry 'kda_p': "
                  "cuStreamCreateWithPriority failed");
  }
  EXPECT_EQ(liveEvents(), 0);
  {
    ScopedEnv fail("KDA_FAKE_FAIL", "cuEventCreate=2");
    expectPrepare("kda_p", v.data(), starts, 3, KDA_ERROR_LAUNCH_FAILED,
                  "cuEventCreate failed");
  }
  EXPECT_EQ(kda_prepare_pieces(bundle, "kda_p", v.data(), 4, starts, 3,
                               nullptr, &bytes),
            KDA_ERROR_INVALID_ARGUMENT);

  ASSERT_EQ(kda_prepare_pieces(bundle, "kda_p", v.data(), 4, starts, 3,
                               &pieces, &bytes),
            KDA_OK)
      << kda_last_error();
  void *data[4] = {q.data, h0.data, o.data, ht.data};
  char *ws = static_cast<char *>(std::aligned_alloc(256, 4096));
  auto expectLaunch = [&](void *const *d, int32_t n, void *w, uint64_t wb,
                          kda_status code, const std::string &message) {
    EXPECT_EQ(kda_launch_pieces(pieces, d, n, w, wb, kStream), code)
        << message;
    EXPECT_NE(std::string(kda_last_error()).find(message), std::string::npos)
        << kda_last_error();
  };
  expectLaunch(data, 3, ws, 3072, KDA_ERROR_INVALID_ARGUMENT,
               "were prepared for 4 tensors, got 3 data pointers");
  expectLaunch(nullptr, 4, ws, 3072, KDA_ERROR_INVALID_ARGUMENT,
               "data is NULL");
  expectLaunch(data, 4, ws, 3071, KDA_ERROR_INVALID_ARGUMENT,
               "need 3072 bytes of workspace aligned to 256 bytes");
  expectLaunch(data, 4, ws + 16, 3072, KDA_ERROR_INVALID_ARGUMENT,
               "need 3072 bytes of workspace aligned to 256 bytes");
  void *odd[4] = {static_cast<char *>(q.data) + 2, h0.data, o.data, ht.data};
  expectLaunch(odd, 4, ws, 3072, KDA_ERROR_BAD_TENSOR,
               "tensor 0 ('q') data pointer");
  void *none[4] = {q.data, nullptr, o.data, ht.data};
  expectLaunch(none, 4, ws, 3072, KDA_ERROR_BAD_TENSOR,
               "tensor 1 ('initial_state') has a NULL data pointer");
  EXPECT_EQ(kda_launch_pieces(nullptr, data, 4, ws, 3072, kStream),
            KDA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(state().launches, 0);

  // A launch that fails midway: the error names the piece and the launch, and
  // the caller's stream still joins the side stream.
  failLaunchesAfter(3);
  expectLaunch(data, 4, ws, 3072, KDA_ERROR_LAUNCH_FAILED,
               "pipelined pieces of entry 'kda_p', piece 1 of 3: entry "
               "'kda_p' launch 1 of 2 (kernel 'kda_p_state'): ");
  std::string events = state().events;
  EXPECT_NE(events.find("launch-failed record:e4@s1 wait:caller@e4"),
            std::string::npos)
      << events;
  failLaunchesAfter(-1);
  kda_pieces_free(pieces);
  std::free(ws);
}

TEST_F(FakePieces, HipNeedsItsOwnBundle) {
  // The pieces take the bundle's vendor's driver: an AMD bundle of the same
  // entry goes through HIP's stream and event functions.
  auto all = [](std::string text, const std::string &from,
                const std::string &to) {
    for (size_t at = text.find(from); at != std::string::npos;
         at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
    return text;
  };
  std::string m = all(piecesManifest(), "\"vendor\": \"nvidia\", \"chip\": \"sm_90a\"",
                      "\"vendor\": \"amd\", \"chip\": \"gfx942\"");
  m = all(m, ".sm_90a.cubin", ".gfx942.hsaco");
  BundleDir amd(m);
  amd.dir.write("intra.gfx942.hsaco", hsaco(0x04c, "gfx942", {"intra_entry"}));
  amd.dir.write("state.gfx942.hsaco", hsaco(0x04c, "gfx942", {"state_entry"}));
  amd.dir.write("small.gfx942.hsaco", hsaco(0x04c, "gfx942", {"small_entry"}));
  kda_bundle *b = nullptr;
  ASSERT_EQ(load(amd, &b), KDA_OK) << kda_last_error();
  std::vector<kda_tensor> v = views();
  const int64_t starts[] = {0, 24};
  kda_pieces *pieces = nullptr;
  uint64_t bytes = 0;
  ASSERT_EQ(kda_prepare_pieces(b, "kda_p", v.data(), 4, starts, 2, &pieces,
                               &bytes),
            KDA_OK)
      << kda_last_error();
  void *data[4] = {q.data, h0.data, o.data, ht.data};
  char *ws = static_cast<char *>(std::aligned_alloc(256, 4096));
  ASSERT_EQ(kda_launch_pieces(pieces, data, 4, ws, bytes, kStream), KDA_OK)
      << kda_last_error();
  EXPECT_STREQ(state().events,
               "stream:s1/-1 "
               "launch:intra_entry record:e1@caller wait:s1@e1 "
               "launch:state_entry "
               "launch:intra_entry record:e2@caller wait:s1@e2 "
               "launch:state_entry "
               "record:e3@s1 wait:caller@e3");
  kda_pieces_free(pieces);
  kda_bundle_free(b);
  std::free(ws);
}

TEST_F(FakePieces, OneGraph) {
  unsetenv("KDA_PIECES_GRAPH"); // the default (the fixture restores it)
  std::vector<kda_tensor> v = views();
  const int64_t starts[] = {0, 16, 32};
  kda_pieces *pieces = nullptr;
  uint64_t bytes = 0;
  ASSERT_EQ(kda_prepare_pieces(bundle, "kda_p", v.data(), 4, starts, 3,
                               &pieces, &bytes),
            KDA_OK)
      << kda_last_error();
  auto liveGraphs = reinterpret_cast<int (*)()>(
      dlsym(handle, "kda_fake_live_graphs"));
  EXPECT_EQ(liveGraphs(), 0); // built at the first launch
  void *data[4] = {q.data, h0.data, o.data, ht.data};
  char *ws = static_cast<char *>(std::aligned_alloc(256, 4096));
  ASSERT_EQ(kda_launch_pieces(pieces, data, 4, ws, bytes, kStream), KDA_OK)
      << kda_last_error();
  // The eager schedule's dependencies (a node's count after the slash), the
  // state nodes at the greatest priority, instantiated to honour it (flag 8),
  // launched on the caller's stream.
  EXPECT_STREQ(state().events,
               "stream:s1/-5 graph "
               "node:intra_entry/0 node:state_entry/1 priority:-5@2 "
               "node:intra_entry/1 node:state_entry/2 priority:-5@4 "
               "node:intra_entry/1 node:state_entry/2 priority:-5@6 "
               "instantiate:8 graph-launch "
               "launch:intra_entry launch:state_entry "
               "launch:intra_entry launch:state_entry "
               "launch:intra_entry launch:state_entry");
  EXPECT_EQ(liveGraphs(), 2); // the graph and its executable
  const FakeState &s = state();
  ASSERT_EQ(s.historyCount, 6);
  auto check = [&](int first, void *const *d, int pieces) {
    for (int p = 0; p < pieces; ++p) {
      const int intra = first + 2 * p, st = first + 2 * p + 1;
      const uint64_t off = 16 * 512 * static_cast<uint64_t>(p);
      EXPECT_EQ(s.history[intra].stream, kStream);
      EXPECT_EQ(s.history[st].stream, kStream);
      EXPECT_EQ(arg(intra, 0), reinterpret_cast<uintptr_t>(d[0]) + off);
      EXPECT_EQ(arg(intra, 2),
                reinterpret_cast<uintptr_t>(ws) + 1024 * static_cast<uint64_t>(p));
      EXPECT_EQ(arg(intra, 3), p < 2 ? 16u : 8u);
      EXPECT_EQ(arg(st, 1), p == 0 ? reinterpret_cast<uintptr_t>(d[1])
                                   : reinterpret_cast<uintptr_t>(ws) + 2560 +
                                         256 * (p - 1));
      EXPECT_EQ(arg(st, 3), reinterpret_cast<uintptr_t>(d[2]) + off);
      EXPECT_EQ(arg(st, 4), p == 2 ? reinterpret_cast<uintptr_t>(d[3])
                                   : reinterpret_cast<uintptr_t>(ws) + 2560 +
                                         256 * p);
    }
  };
  check(0, data, 3);

  // The same pointers: the graph again, nothing set. Other pointers: every
  // node's arguments set anew. Neither allocates.
  Tensor q2{KDA_BF16, {1, 40, 2, 128}}, o2{KDA_BF16, {1, 40, 2, 128}};
  void *other[4] = {q2.data, h0.data, o2.data, ht.data};
  long before = heapAllocations.load();
  ASSERT_EQ(kda_launch_pieces(pieces, data, 4, ws, bytes, kStream), KDA_OK)
      << kda_last_error();
  ASSERT_EQ(kda_launch_pieces(pieces, other, 4, ws, bytes, kStream), KDA_OK)
      << kda_last_error();
  EXPECT_EQ(heapAllocations.load() - before, 0);
  std::string events = state().events;
  EXPECT_NE(events.find("launch:state_entry graph-launch launch:intra_entry"),
            std::string::npos)
      << events; // the second call: no set
  EXPECT_NE(events.find("launch:state_entry set set set set set set "
                        "graph-launch"),
            std::string::npos)
      << events; // the third
  size_t sets = 0;
  for (size_t at = events.find("set"); at != std::string::npos;
       at = events.find("set", at + 3))
    ++sets;
  EXPECT_EQ(sets, 6u) << events;
  check(12, other, 2); // (the history keeps the first 16 launches: 12..15)

  // Under a caller's capture the eager launches are captured instead.
  {
    ScopedEnv capturing("KDA_FAKE_CAPTURING", "1");
    ASSERT_EQ(kda_launch_pieces(pieces, data, 4, ws, bytes, kStream), KDA_OK)
        << kda_last_error();
  }
  events = state().events;
  EXPECT_NE(events.find("record:e1@caller wait:s1@e1"), std::string::npos)
      << events;
  // A graph call that fails says so and leaves the handle usable.
  {
    ScopedEnv fail("KDA_FAKE_FAIL", "cuGraphLaunch=2");
    EXPECT_EQ(kda_launch_pieces(pieces, data, 4, ws, bytes, kStream),
              KDA_ERROR_LAUNCH_FAILED);
    EXPECT_NE(std::string(kda_last_error())
                  .find("pipelined pieces of entry 'kda_p', as one graph: "
                        "cuGraphLaunch failed"),
              std::string::npos)
        << kda_last_error();
  }
  ASSERT_EQ(kda_launch_pieces(pieces, data, 4, ws, bytes, kStream), KDA_OK)
      << kda_last_error();
  kda_pieces_free(pieces);
  EXPECT_EQ(liveGraphs(), 0);
  EXPECT_EQ(liveEvents(), 0);
  std::free(ws);
}
