//===- SupportTest.cpp - unit tests of kda-run's support library ----------===//
//
// .npy I/O (round trips, headers, every error path, corrupt files), element
// type rounding, argument role inference, random input distributions and
// validation, and the oracle evaluation of kda functions (compared bitwise
// with direct oracle calls).
//
//===----------------------------------------------------------------------===//

#include "tools/kda-run/Emulator.h"
#include "tools/kda-run/Inputs.h"
#include "tools/kda-run/Npy.h"
#include "tools/kda-run/OracleEval.h"

#include "dialect/KdaDialect.h"
#include "dialect/KdaOps.h"
#include "test/oracle/Oracle.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/APFloat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <unistd.h>

using namespace kda;
using namespace kda::run;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// A fresh directory under $TMPDIR (or /tmp), removed with its files.
class TempDir {
public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") +
                        "/kda-run-support-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()))
      path = buf.data();
  }
  ~TempDir() {
    for (const std::string &f : files)
      std::remove(f.c_str());
    if (!path.empty())
      rmdir(path.c_str());
  }
  std::string file(const std::string &name) {
    std::string p = path + "/" + name;
    files.push_back(p);
    return p;
  }
  std::string path;

private:
  std::vector<std::string> files;
};

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

/// A hand-built .npy file: given version, header dict and data.
std::string npyFile(int major, const std::string &dict,
                    const std::string &data) {
  std::string header = dict;
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64)
    header.push_back(' ');
  header.push_back('\n');
  std::string s = "\x93NUMPY";
  s.push_back(static_cast<char>(major));
  s.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i)
    s.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return s + header + data;
}

std::string floatBytes(const std::vector<float> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()),
                     v.size() * sizeof(float));
}

bool sameBits(const std::vector<double> &a, const std::vector<double> &b) {
  return a.size() == b.size() &&
         (a.empty() ||
          std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

double apRound(double x, const llvm::fltSemantics &sem) {
  llvm::APFloat a(x);
  bool loses = false;
  a.convert(sem, llvm::APFloat::rmNearestTiesToEven, &loses);
  a.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &loses);
  return a.convertToDouble();
}

/// An MLIR context with the kda, func and arith dialects, and a parser.
class MlirTest : public ::testing::Test {
protected:
  MlirTest() {
    mlir::DialectRegistry registry;
    registry.insert<mlir::kda::KdaDialect, mlir::func::FuncDialect,
                    mlir::arith::ArithDialect>();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Parses `source` and returns its function `name` (null on failure).
  mlir::func::FuncOp parse(const std::string &source,
                           const std::string &name) {
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    if (!module)
      return nullptr;
    return module->lookupSymbol<mlir::func::FuncOp>(name);
  }

  oracle::Tensor tensorOf(mlir::func::FuncOp f, unsigned arg,
                          const std::vector<double> &data) {
    auto type = mlir::cast<mlir::RankedTensorType>(f.getArgument(arg).getType());
    oracle::Tensor t(
        std::vector<int64_t>(type.getShape().begin(), type.getShape().end()));
    t.data = data;
    return t;
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

//===----------------------------------------------------------------------===//
// Npy
//===----------------------------------------------------------------------===//

TEST(Npy, RoundTripEveryDType) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  // Values every dtype represents exactly.
  std::vector<double> values = {0.0, 1.0, -2.5, 1024.0, 3.25, -7.0};
  for (npy::DType dt : {npy::DType::F16, npy::DType::F32, npy::DType::F64,
                        npy::DType::I32, npy::DType::I64}) {
    std::vector<double> v = values;
    if (dt == npy::DType::I32 || dt == npy::DType::I64)
      v[2] = -3.0, v[4] = 2147483647.0;
    if (dt == npy::DType::I64)
      v[5] = -9007199254740992.0; // -2^53
    npy::Array a = npy::fromDoubles(v, {2, 3}, dt);
    std::string path = dir.file("rt" + npy::dtypeName(dt).substr(1) + ".npy");
    ASSERT_EQ(npy::write(path, a), "");
    npy::Array b;
    ASSERT_EQ(npy::read(path, b), "") << npy::dtypeName(dt);
    EXPECT_EQ(b.dtype, dt);
    EXPECT_EQ(b.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(b.bytes, a.bytes);
    EXPECT_TRUE(sameBits(npy::toDoubles(b), v)) << npy::dtypeName(dt);
  }
}

TEST(Npy, RoundTripScalarEmptyAndOneDimensional) {
  TempDir dir;
  struct Case {
    std::vector<int64_t> shape;
    std::vector<double> v;
  };
  for (const Case &c : {Case{{}, {42.0}}, Case{{0, 3}, {}},
                        Case{{5}, {1, 2, 3, 4, 5}}}) {
    std::string path = dir.file("s" + std::to_string(c.shape.size()) + ".npy");
    ASSERT_EQ(npy::write(path, npy::fromDoubles(c.v, c.shape,
                                                npy::DType::F64)),
              "");
    npy::Array b;
    ASSERT_EQ(npy::read(path, b), "");
    EXPECT_EQ(b.shape, c.shape);
    EXPECT_EQ(npy::toDoubles(b), c.v);
  }
}

TEST(Npy, WritesAlignedVersion1Header) {
  TempDir dir;
  std::string path = dir.file("h.npy");
  ASSERT_EQ(npy::write(path, npy::fromDoubles({1, 2, 3}, {3},
                                              npy::DType::F32)),
            "");
  std::string s = readBytes(path);
  ASSERT_GE(s.size(), 10u);
  EXPECT_EQ(s.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(s[6], 1);
  EXPECT_EQ(s[7], 0);
  size_t len = static_cast<unsigned char>(s[8]) |
               (static_cast<unsigned char>(s[9]) << 8);
  EXPECT_EQ((10 + len) % 64, 0u);
  EXPECT_EQ(s[10 + len - 1], '\n');
  std::string header = s.substr(10, len);
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos);
  EXPECT_NE(header.find("'shape': (3,)"), std::string::npos);
  EXPECT_EQ(s.size(), 10 + len + 12);
}

TEST(Npy, ReadsVersion2And3Headers) {
  TempDir dir;
  for (int major : {2, 3}) {
    std::string path = dir.file("v" + std::to_string(major) + ".npy");
    writeBytes(path, npyFile(major,
                             "{'descr': '<f4', 'fortran_order': False, "
                             "'shape': (2, 2), }",
                             floatBytes({1.5f, -2.0f, 0.25f, 8.0f})));
    npy::Array a;
    ASSERT_EQ(npy::read(path, a), "") << "version " << major;
    EXPECT_EQ(a.dtype, npy::DType::F32);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(npy::toDoubles(a), (std::vector<double>{1.5, -2.0, 0.25, 8.0}));
  }
}

TEST(Npy, AcceptsHeaderVariants) {
  // Key order, double quotes, no trailing comma, Python 2 longs.
  TempDir dir;
  std::string path = dir.file("variants.npy");
  writeBytes(path, npyFile(1,
                           "{\"shape\": (2L,), \"fortran_order\": False, "
                           "\"descr\": \"<i8\"}",
                           std::string("\x07\0\0\0\0\0\0\0\xff\xff\xff\xff"
                                       "\xff\xff\xff\xff",
                                       16)));
  npy::Array a;
  ASSERT_EQ(npy::read(path, a), "");
  EXPECT_EQ(npy::toDoubles(a), (std::vector<double>{7.0, -1.0}));
}

TEST(Npy, MissingFile) {
  TempDir dir;
  std::string path = dir.path + "/does-not-exist.npy";
  npy::Array a;
  std::string err = npy::read(path, a);
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
  // A directory is no .npy file either.
  err = npy::read(dir.path, a);
  EXPECT_NE(err.find(dir.path), std::string::npos) << err;
}

TEST(Npy, BadMagic) {
  TempDir dir;
  std::string path = dir.file("magic.npy");
  std::string bytes = npyFile(1,
                              "{'descr': '<f4', 'fortran_order': False, "
                              "'shape': (1,), }",
                              floatBytes({1.0f}));
  bytes[1] = 'X';
  writeBytes(path, bytes);
  npy::Array a;
  std::string err = npy::read(path, a);
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("bad magic"), std::string::npos) << err;
}

TEST(Npy, TruncatedData) {
  TempDir dir;
  std::string path = dir.file("trunc.npy");
  std::string full = npyFile(1,
                             "{'descr': '<f4', 'fortran_order': False, "
                             "'shape': (2, 3), }",
                             floatBytes({1, 2, 3, 4, 5, 6}));
  writeBytes(path, full.substr(0, full.size() - 4));
  npy::Array a;
  std::string err = npy::read(path, a);
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("truncated data: expected 24 bytes found 20"),
            std::string::npos)
      << err;
}

TEST(Npy, TrailingDataIsAnError) {
  TempDir dir;
  std::string path = dir.file("trail.npy");
  writeBytes(path, npyFile(1,
                           "{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (1,), }",
                           floatBytes({1, 2})));
  npy::Array a;
  std::string err = npy::read(path, a);
  EXPECT_NE(err.find("expected 4 bytes found 8"), std::string::npos) << err;
}

TEST(Npy, FortranOrderIsAnError) {
  TempDir dir;
  std::string path = dir.file("fortran.npy");
  writeBytes(path, npyFile(1,
                           "{'descr': '<f4', 'fortran_order': True, "
                           "'shape': (2, 2), }",
                           floatBytes({1, 2, 3, 4})));
  npy::Array a;
  std::string err = npy::read(path, a);
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("fortran order"), std::string::npos) << err;
}

TEST(Npy, UnsupportedDTypes) {
  TempDir dir;
  for (std::string descr : {"<u2", ">f4", "|b1", "<c8"}) {
    std::string path = dir.file("dt" + std::to_string(descr[1]) + ".npy");
    writeBytes(path, npyFile(1,
                             "{'descr': '" + descr +
                                 "', 'fortran_order': False, 'shape': (1,), }",
                             std::string(8, '\0')));
    npy::Array a;
    std::string err = npy::read(path, a);
    EXPECT_NE(err.find("unsupported dtype '" + descr + "'"),
              std::string::npos)
        << err;
  }
  std::string path = dir.file("structured.npy");
  writeBytes(path, npyFile(1,
                           "{'descr': [('a', '<f4')], 'fortran_order': "
                           "False, 'shape': (1,), }",
                           std::string(4, '\0')));
  npy::Array a;
  EXPECT_NE(npy::read(path, a).find("unsupported dtype"), std::string::npos);
}

TEST(Npy, MalformedHeadersAndUnsupportedVersion) {
  TempDir dir;
  npy::Array a;
  std::string p1 = dir.file("nokeys.npy");
  writeBytes(p1, npyFile(1, "{'descr': '<f4', }", ""));
  EXPECT_NE(npy::read(p1, a).find("malformed header"), std::string::npos);
  std::string p2 = dir.file("garbage.npy");
  writeBytes(p2, npyFile(1, "not a dict", ""));
  EXPECT_NE(npy::read(p2, a).find("malformed header"), std::string::npos);
  std::string p3 = dir.file("version.npy");
  std::string bytes = npyFile(1,
                              "{'descr': '<f4', 'fortran_order': False, "
                              "'shape': (1,), }",
                              floatBytes({1}));
  bytes[6] = 9;
  writeBytes(p3, bytes);
  EXPECT_NE(npy::read(p3, a).find("unsupported .npy format version 9.0"),
            std::string::npos);
  std::string p4 = dir.file("huge.npy");
  writeBytes(p4, npyFile(1,
                         "{'descr': '<f8', 'fortran_order': False, "
                         "'shape': (4294967296, 4294967296, 16), }",
                         ""));
  EXPECT_NE(npy::read(p4, a).find("too large"), std::string::npos);
}

TEST(Npy, CorruptFilesNeverCrash) {
  TempDir dir;
  std::string good = npyFile(1,
                             "{'descr': '<f4', 'fortran_order': False, "
                             "'shape': (3, 2), }",
                             floatBytes({1, 2, 3, 4, 5, 6}));
  std::string path = dir.file("corrupt.npy");
  // Every truncation.
  for (size_t n = 0; n < good.size(); ++n) {
    writeBytes(path, good.substr(0, n));
    npy::Array a;
    EXPECT_NE(npy::read(path, a), "") << "truncated to " << n;
  }
  // Random byte mutations: any result is fine as long as it is consistent.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::string bytes = good;
    int flips = 1 + trial % 4;
    for (int f = 0; f < flips; ++f)
      bytes[rng() % bytes.size()] = static_cast<char>(rng() & 0xff);
    writeBytes(path, bytes);
    npy::Array a;
    if (npy::read(path, a).empty())
      EXPECT_EQ(static_cast<int64_t>(a.bytes.size()),
                npy::numElements(a.shape) *
                    static_cast<int64_t>(npy::itemSize(a.dtype)));
  }
}

TEST(Npy, WriteRejectsSizeMismatch) {
  TempDir dir;
  npy::Array a = npy::fromDoubles({1, 2, 3}, {2, 2}, npy::DType::F32);
  std::string err = npy::write(dir.file("bad.npy"), a);
  EXPECT_NE(err.find("needs 16 bytes"), std::string::npos) << err;
}

TEST(Npy, HalfConversionMatchesAPFloat) {
  std::mt19937_64 rng(3);
  std::vector<double> xs = {0.0,     -0.0,     1.0,        65504.0,
                            65519.99, 65520.0,  1e6,        -1e6,
                            0x1p-24,  0x1p-25,  0x1.8p-25,  0x1p-14,
                            0x1.ffcp-15, 1.0 + 0x1p-11, 1.0 + 0x1.8p-11};
  for (int i = 0; i < 20000; ++i) {
    double mant = std::ldexp(static_cast<double>(rng() >> 11), -53);
    int exp = static_cast<int>(rng() % 50) - 30;
    xs.push_back((rng() & 1 ? -1 : 1) * std::ldexp(1.0 + mant, exp));
  }
  for (double x : xs) {
    double want = apRound(x, llvm::APFloat::IEEEhalf());
    double got = npy::halfBitsToDouble(npy::doubleToHalfBits(x));
    EXPECT_TRUE(sameBits({got}, {want})) << x << ": " << got << " vs " << want;
  }
  EXPECT_TRUE(std::isinf(npy::halfBitsToDouble(npy::doubleToHalfBits(65520))));
  EXPECT_TRUE(std::isnan(npy::halfBitsToDouble(npy::doubleToHalfBits(NAN))));
}

TEST(Npy, IntegerConversionRoundsAndSaturates) {
  npy::Array a = npy::fromDoubles({2.5, 3.5, -1.4, 1e12, -1e12, NAN}, {6},
                                  npy::DType::I32);
  EXPECT_EQ(npy::toDoubles(a), (std::vector<double>{2, 4, -1, 2147483647,
                                                    -2147483648.0, 0}));
}

//===----------------------------------------------------------------------===//
// Rounding to element types
//===----------------------------------------------------------------------===//

TEST_F(MlirTest, Bf16RoundsToNearestEven) {
  mlir::Type bf16 = mlir::BFloat16Type::get(&context);
  std::vector<double> v = {
      1.0 + 0x1p-8,             // tie, even neighbour 1
      1.0 + 3 * 0x1p-9,         // above the tie: up to 1 + 2^-7
      1.0 + 0x1p-7 + 0x1p-8,    // tie, odd below: up to 1 + 2^-6
      -(1.0 + 3 * 0x1p-9),      // symmetric
      0x1.fep127,               // bf16 max, exact
      0x1.ffp127,               // halfway to 2^128: rounds to inf
      0x1p-133,                 // smallest subnormal, exact
      0x1p-134,                 // tie with 0: even is 0
      3.0e-39,                  // subnormal range
  };
  roundToElementType(bf16, v);
  EXPECT_EQ(v[0], 1.0);
  EXPECT_EQ(v[1], 1.0 + 0x1p-7);
  EXPECT_EQ(v[2], 1.0 + 0x1p-6);
  EXPECT_EQ(v[3], -(1.0 + 0x1p-7));
  EXPECT_EQ(v[4], 0x1.fep127);
  EXPECT_TRUE(std::isinf(v[5]) && v[5] > 0);
  EXPECT_EQ(v[6], 0x1p-133);
  EXPECT_EQ(v[7], 0.0);
  EXPECT_EQ(v[8], apRound(3.0e-39, llvm::APFloat::BFloat()));
}

TEST_F(MlirTest, FloatRoundingMatchesAPFloat) {
  std::mt19937_64 rng(11);
  std::vector<double> xs;
  for (int i = 0; i < 20000; ++i) {
    double mant = std::ldexp(static_cast<double>(rng() >> 11), -53);
    int exp = static_cast<int>(rng() % 300) - 150;
    xs.push_back((rng() & 1 ? -1 : 1) * std::ldexp(1.0 + mant, exp));
  }
  struct Case {
    mlir::Type type;
    const llvm::fltSemantics &sem;
  };
  for (const Case &c : {Case{mlir::BFloat16Type::get(&context),
                             llvm::APFloat::BFloat()},
                        Case{mlir::Float16Type::get(&context),
                             llvm::APFloat::IEEEhalf()},
                        Case{mlir::Float32Type::get(&context),
                             llvm::APFloat::IEEEsingle()}}) {
    std::vector<double> v = xs;
    roundToElementType(c.type, v);
    for (size_t i = 0; i < xs.size(); ++i)
      ASSERT_TRUE(sameBits({v[i]}, {apRound(xs[i], c.sem)}))
          << xs[i] << " -> " << v[i];
  }
  std::vector<double> f64 = xs;
  roundToElementType(mlir::Float64Type::get(&context), f64);
  EXPECT_TRUE(sameBits(f64, xs));
  std::vector<double> ints = {2.5, -2.5, 3.7};
  roundToElementType(mlir::IntegerType::get(&context, 32), ints);
  EXPECT_EQ(ints, (std::vector<double>{2, -2, 4}));
}

//===----------------------------------------------------------------------===//
// Role inference
//===----------------------------------------------------------------------===//

const char *kKdaModule = R"mlir(
func.func @kda(%q: tensor<1x12x2x8xf32>, %k: tensor<1x12x2x8xf32>,
               %v: tensor<1x12x4x6xf32>, %g: tensor<1x12x4x8xf32>,
               %b: tensor<1x12x4xf32>, %s0: tensor<2x4x6x8xf32>,
               %cu: tensor<3xi32>, %a: tensor<4xf32>, %d: tensor<4x8xf32>)
    -> (tensor<1x12x4x6xf32>, tensor<2x4x6x8xf32>, tensor<2x3x4x6x8xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v
      gate(%g : tensor<1x12x4x8xf32>) beta(%b : tensor<1x12x4xf32>)
      initial_state(%s0 : tensor<2x4x6x8xf32>) cu_seqlens(%cu : tensor<3xi32>)
      A_log(%a : tensor<4xf32>) dt_bias(%d : tensor<4x8xf32>)
      {qk_l2norm, beta_activation = #kda<beta sigmoid>,
       gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64,
       state_layout = #kda<layout v_major>, boundary_interval = 4 : i64,
       scale = 0.3 : f64}
      : tensor<1x12x2x8xf32>, tensor<1x12x2x8xf32>, tensor<1x12x4x6xf32>
      -> tensor<1x12x4x6xf32> final_state tensor<2x4x6x8xf32>
         boundary_states tensor<2x3x4x6x8xf32>
  return %o, %s, %bs : tensor<1x12x4x6xf32>, tensor<2x4x6x8xf32>,
                       tensor<2x3x4x6x8xf32>
}
)mlir";

const char *kGdnModule = R"mlir(
func.func @gdn(%q: tensor<2x10x2x8xbf16>, %k: tensor<2x10x2x8xbf16>,
               %v: tensor<2x10x2x8xbf16>, %g: tensor<2x10x2xf32>,
               %b: tensor<2x10x2xbf16>) -> tensor<2x10x2x8xbf16> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x10x2xf32>)
      beta(%b : tensor<2x10x2xbf16>)
      : tensor<2x10x2x8xbf16>, tensor<2x10x2x8xbf16>, tensor<2x10x2x8xbf16>
      -> tensor<2x10x2x8xbf16>
  return %o : tensor<2x10x2x8xbf16>
}
)mlir";

const char *kDecodeModule = R"mlir(
func.func @dec(%q: tensor<6x2x8xf32>, %k: tensor<6x2x8xf32>,
               %v: tensor<6x4x6xf32>, %g: tensor<6x4xf32>,
               %b: tensor<6x4xf32>, %idx: tensor<6xi32>,
               %o0: tensor<6x4x6xf32>, %pool: tensor<9x4x8x6xf32>)
    -> (tensor<6x4x6xf32>, tensor<9x4x8x6xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<6x4xf32>)
      beta(%b : tensor<6x4xf32>) indices(%idx : tensor<6xi32>)
      outs(%o0, %pool : tensor<6x4x6xf32>, tensor<9x4x8x6xf32>)
      {scale = 0.5 : f64}
      : tensor<6x2x8xf32>, tensor<6x2x8xf32>, tensor<6x4x6xf32>
  return %o, %p : tensor<6x4x6xf32>, tensor<9x4x8x6xf32>
}
)mlir";

const char *kHybridModule = R"mlir(
func.func @hyb(%q: tensor<1x10x2x8xf32>, %k: tensor<1x10x2x8xf32>,
               %v: tensor<1x10x2x8xf32>, %raw: tensor<1x10x2x8xf32>,
               %a: tensor<2xf32>, %d: tensor<2x8xf32>,
               %ws: tensor<10xi64>, %z: tensor<1x10x2xf32>)
    -> tensor<1x10x2x8xf32> {
  %g = kda.gate softplus channel %raw A_log(%a : tensor<2xf32>)
      dt_bias(%d : tensor<2x8xf32>)
      : tensor<1x10x2x8xf32> -> tensor<1x10x2x8xf32>
  %lin = kda.gated_delta additive %q, %k, %v gate(%g : tensor<1x10x2x8xf32>)
      : tensor<1x10x2x8xf32>, tensor<1x10x2x8xf32>, tensor<1x10x2x8xf32>
      -> tensor<1x10x2x8xf32>
  %win = kda.window_attention %q, %k, %v window_sizes(%ws : tensor<10xi64>)
      : tensor<1x10x2x8xf32>, tensor<1x10x2x8xf32>, tensor<1x10x2x8xf32>
      -> tensor<1x10x2x8xf32>
  %o = kda.hybrid gated %lin, %win gate(%z : tensor<1x10x2xf32>)
      : tensor<1x10x2x8xf32>, tensor<1x10x2x8xf32> -> tensor<1x10x2x8xf32>
  return %o : tensor<1x10x2x8xf32>
}
)mlir";

const char *kMultiScaleModule = R"mlir(
func.func @ms(%q: tensor<1x10x2x8xf32>, %k: tensor<1x10x2x8xf32>,
              %v: tensor<1x10x2x8xf32>, %g: tensor<1x10x2xf32>,
              %b: tensor<1x10x2xf32>, %s: tensor<2x1x2x8x8xf32>,
              %z: tensor<1x10x2x2xf32>)
    -> (tensor<1x10x2x8xf32>, tensor<2x1x2x8x8xf32>) {
  %o, %fs = kda.multi_scale delta gated %q, %k, %v
      gates(%g : tensor<1x10x2xf32>) beta(%b : tensor<1x10x2xf32>)
      initial_states(%s : tensor<2x1x2x8x8xf32>)
      z(%z : tensor<1x10x2x2xf32>) {decay_scales = [1.0, 0.25]}
      : tensor<1x10x2x8xf32>, tensor<1x10x2x8xf32>, tensor<1x10x2x8xf32>
      -> tensor<1x10x2x8xf32> final_states tensor<2x1x2x8x8xf32>
  return %o, %fs : tensor<1x10x2x8xf32>, tensor<2x1x2x8x8xf32>
}
)mlir";

std::vector<Role> rolesOf(const std::vector<InputSpec> &specs) {
  std::vector<Role> r;
  for (const InputSpec &s : specs)
    r.push_back(s.role);
  return r;
}

TEST_F(MlirTest, RolesOfKdaWithFullPrologue) {
  mlir::func::FuncOp f = parse(kKdaModule, "kda");
  ASSERT_TRUE(f);
  std::vector<InputSpec> specs;
  std::string err;
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(f, specs, err))) << err;
  EXPECT_EQ(rolesOf(specs),
            (std::vector<Role>{Role::Q, Role::K, Role::V, Role::RawGate,
                               Role::BetaLogits, Role::InitialState,
                               Role::CuSeqlens, Role::ALog, Role::DtBias}));
  EXPECT_FALSE(specs[0].unitRows); // qk_l2norm: the op normalises
  EXPECT_FALSE(specs[1].unitRows);
  EXPECT_EQ(specs[6].tokens, 12);
  EXPECT_EQ(specs[3].use, "operand 'gate' of kda.gated_delta");
  EXPECT_EQ(roleName(specs[4].role), "beta_logits");
}

TEST_F(MlirTest, RolesOfGdnDecodeHybridMultiScale) {
  std::vector<InputSpec> specs;
  std::string err;
  mlir::func::FuncOp gdn = parse(kGdnModule, "gdn");
  ASSERT_TRUE(gdn);
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(gdn, specs, err))) << err;
  EXPECT_EQ(rolesOf(specs), (std::vector<Role>{Role::Q, Role::K, Role::V,
                                               Role::Gate, Role::Beta}));
  EXPECT_TRUE(specs[0].unitRows);
  EXPECT_TRUE(specs[1].unitRows);

  mlir::func::FuncOp dec = parse(kDecodeModule, "dec");
  ASSERT_TRUE(dec);
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(dec, specs, err))) << err;
  EXPECT_EQ(rolesOf(specs),
            (std::vector<Role>{Role::Q, Role::K, Role::V, Role::Gate,
                               Role::Beta, Role::Indices, Role::OInit,
                               Role::StatePool}));
  EXPECT_EQ(specs[5].poolSlots, 9);

  mlir::func::FuncOp hyb = parse(kHybridModule, "hyb");
  ASSERT_TRUE(hyb);
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(hyb, specs, err))) << err;
  EXPECT_EQ(rolesOf(specs),
            (std::vector<Role>{Role::Q, Role::K, Role::V, Role::RawGate,
                               Role::ALog, Role::DtBias, Role::WindowSizes,
                               Role::Z}));
  EXPECT_EQ(specs[6].tokens, 10);

  mlir::func::FuncOp ms = parse(kMultiScaleModule, "ms");
  ASSERT_TRUE(ms);
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(ms, specs, err))) << err;
  EXPECT_EQ(rolesOf(specs),
            (std::vector<Role>{Role::Q, Role::K, Role::V, Role::Gate,
                               Role::Beta, Role::InitialState, Role::Z}));
}

// Element counts are checked products: getNumElements() wraps, and a
// wrapped count sized a tiny host buffer that the kernel then overran.
TEST_F(MlirTest, HugeShapesAreErrors) {
  mlir::func::FuncOp f = parse(R"mlir(
func.func @huge(%a: tensor<4611686018427387904x4611686018427387904x1x16xf32>,
                %b: tensor<2305843009213693952x2xf32>,
                %c: tensor<1152921504606846976x1xf32>) {
  return
}
)mlir",
                               "huge");
  ASSERT_TRUE(f);
  auto type = [&](unsigned i) {
    return mlir::cast<mlir::RankedTensorType>(f.getArgument(i).getType());
  };
  EXPECT_EQ(checkedNumElements(type(0)), std::nullopt);
  EXPECT_EQ(checkedNumElements(type(1)), int64_t(1) << 62);
  EXPECT_EQ(checkedByteSize(type(1)), std::nullopt); // 2^64 bytes
  EXPECT_EQ(checkedByteSize(type(2)), int64_t(1) << 62);
  std::vector<InputSpec> specs;
  std::string err;
  EXPECT_TRUE(mlir::failed(inferInputSpecs(f, specs, err)));
  EXPECT_EQ(err, "argument #0: tensor<4611686018427387904x4611686018427387904x"
                 "1x16xf32> has more elements than a 64-bit count holds");
}

TEST_F(MlirTest, RoleConflictsAndBadTypesAreErrors) {
  // %q feeds q, k and v at once: v is incompatible with q.
  mlir::func::FuncOp f = parse(R"mlir(
func.func @conflict(%q: tensor<1x4x2x8xf32>, %g: tensor<1x4x2xf32>,
                    %b: tensor<1x4x2xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) {
  %o1 = kda.gated_delta delta %q, %q, %q gate(%g : tensor<1x4x2xf32>)
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
      -> tensor<1x4x2x8xf32>
  %o2 = kda.gated_delta delta %q, %q, %q gate(%g : tensor<1x4x2xf32>)
      beta(%b : tensor<1x4x2xf32>)
      {gate_activation = #kda<gate softplus>}
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
      -> tensor<1x4x2x8xf32>
  return %o1, %o2 : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
}
)mlir",
                               "conflict");
  ASSERT_TRUE(f);
  std::vector<InputSpec> specs;
  std::string err;
  EXPECT_TRUE(mlir::failed(inferInputSpecs(f, specs, err)));
  EXPECT_NE(err.find("argument #0"), std::string::npos) << err;
  EXPECT_NE(err.find("'v'"), std::string::npos) << err;

  // q shared by an op that normalises (qk_l2norm) and one that does not:
  // compatible, and generated rows must be unit rows for the second.
  mlir::func::FuncOp g = parse(R"mlir(
func.func @mixed(%q: tensor<1x4x2x8xf32>, %v: tensor<1x4x2x8xf32>)
    -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) {
  %o1 = kda.gated_delta additive %q, %q, %v {qk_l2norm}
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
      -> tensor<1x4x2x8xf32>
  %o2 = kda.gated_delta additive %q, %q, %v
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
      -> tensor<1x4x2x8xf32>
  return %o1, %o2 : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
}
)mlir",
                               "mixed");
  ASSERT_TRUE(g);
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(g, specs, err))) << err;
  EXPECT_EQ(specs[0].role, Role::Q);
  EXPECT_TRUE(specs[0].unitRows);
  // The same gate tensor as a log-space gate and as a raw gate.
  mlir::func::FuncOp h = parse(R"mlir(
func.func @gates2(%q: tensor<1x4x2x8xf32>, %v: tensor<1x4x2x8xf32>,
                  %g: tensor<1x4x2xf32>)
    -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) {
  %o1 = kda.gated_delta additive %q, %q, %v gate(%g : tensor<1x4x2xf32>)
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
      -> tensor<1x4x2x8xf32>
  %o2 = kda.gated_delta additive %q, %q, %v gate(%g : tensor<1x4x2xf32>)
      {gate_activation = #kda<gate softplus>}
      : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
      -> tensor<1x4x2x8xf32>
  return %o1, %o2 : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
}
)mlir",
                               "gates2");
  ASSERT_TRUE(h);
  EXPECT_TRUE(mlir::failed(inferInputSpecs(h, specs, err)));
  EXPECT_NE(err.find("argument #2"), std::string::npos) << err;
  EXPECT_NE(err.find("'gate'"), std::string::npos) << err;
  EXPECT_NE(err.find("'raw_gate'"), std::string::npos) << err;

  mlir::func::FuncOp dyn = parse(R"mlir(
func.func @dyn(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  return %x : tensor<?x4xf32>
}
)mlir",
                                 "dyn");
  ASSERT_TRUE(dyn);
  EXPECT_TRUE(mlir::failed(inferInputSpecs(dyn, specs, err)));
  EXPECT_NE(err.find("statically shaped"), std::string::npos) << err;
}

//===----------------------------------------------------------------------===//
// Random inputs and validation
//===----------------------------------------------------------------------===//

TEST_F(MlirTest, RandomInputsSatisfyTheirConstraints) {
  mlir::func::FuncOp f = parse(kGdnModule, "gdn");
  ASSERT_TRUE(f);
  std::vector<InputSpec> specs;
  std::string err;
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(f, specs, err))) << err;
  std::vector<std::vector<double>> v;
  ASSERT_EQ(makeRandomInputs(f, specs, 1234, {}, v), "");
  ASSERT_EQ(v.size(), 5u);
  for (int a : {0, 1}) { // q, k: unit rows (up to bf16 rounding)
    ASSERT_EQ(v[a].size(), 2u * 10 * 2 * 8);
    for (size_t r = 0; r < v[a].size() / 8; ++r) {
      double ss = 0;
      for (int c = 0; c < 8; ++c)
        ss += v[a][r * 8 + c] * v[a][r * 8 + c];
      EXPECT_NEAR(std::sqrt(ss), 1.0, 8 * 0x1p-8);
    }
  }
  for (int a = 0; a < 5; ++a) { // every value is already bf16 / f32
    std::vector<double> copy = v[a];
    roundToElementType(specs[a].type.getElementType(), copy);
    EXPECT_TRUE(sameBits(copy, v[a])) << "argument " << a;
  }
  for (double g : v[3])
    EXPECT_LE(g, 0.0);
  double gMean = 0;
  for (double g : v[3])
    gMean += g / v[3].size();
  EXPECT_LT(gMean, -0.05); // mild decay on average: log(sigmoid(2)) ~ -0.13
  EXPECT_GT(gMean, -0.5);
  for (double b : v[4]) {
    EXPECT_GT(b, 0.0);
    EXPECT_LT(b, 1.0);
  }
  double vMean = 0, vVar = 0;
  for (double x : v[2])
    vMean += x / v[2].size();
  for (double x : v[2])
    vVar += (x - vMean) * (x - vMean) / v[2].size();
  EXPECT_NEAR(vMean, 0.0, 0.2);
  EXPECT_NEAR(vVar, 1.0, 0.3);
  for (unsigned a = 0; a < 5; ++a)
    EXPECT_EQ(validateInput(specs[a], a, v[a]), "");

  // Deterministic per seed; a different seed gives different values.
  std::vector<std::vector<double>> again, other;
  ASSERT_EQ(makeRandomInputs(f, specs, 1234, {}, again), "");
  ASSERT_EQ(makeRandomInputs(f, specs, 99, {}, other), "");
  EXPECT_EQ(again, v);
  EXPECT_NE(other[0], v[0]);
}

TEST_F(MlirTest, RandomInputsOfTheFullPrologue) {
  mlir::func::FuncOp f = parse(kKdaModule, "kda");
  ASSERT_TRUE(f);
  std::vector<InputSpec> specs;
  std::string err;
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(f, specs, err))) << err;
  std::vector<std::vector<double>> v;
  ASSERT_EQ(makeRandomInputs(f, specs, 5, {}, v), "");
  EXPECT_EQ(v[6], (std::vector<double>{0, 6, 12})); // even split of T = 12
  bool anyNormAway = false; // qk_l2norm: rows are raw normal draws
  for (size_t r = 0; r < v[0].size() / 8; ++r) {
    double ss = 0;
    for (int c = 0; c < 8; ++c)
      ss += v[0][r * 8 + c] * v[0][r * 8 + c];
    anyNormAway |= std::fabs(std::sqrt(ss) - 1.0) > 0.1;
  }
  EXPECT_TRUE(anyNormAway);
  bool anyBetaOutside = false; // logits, not probabilities
  for (double b : v[4])
    anyBetaOutside |= b < 0.0 || b > 1.0;
  EXPECT_TRUE(anyBetaOutside);
  for (double a : v[7]) {
    EXPECT_GE(a, 0.0);
    EXPECT_LE(a, std::log(16.0) + 1e-6);
  }
  double sMax = 0;
  for (double s : v[5])
    sMax = std::max(sMax, std::fabs(s));
  EXPECT_LT(sMax, 1.0); // 0.1 * normal
  EXPECT_GT(sMax, 0.0);

  ASSERT_EQ(makeRandomInputs(f, specs, 5, {5, 7}, v), "");
  EXPECT_EQ(v[6], (std::vector<double>{0, 5, 12}));
  err = makeRandomInputs(f, specs, 5, {5, 6}, v);
  EXPECT_NE(err.find("sum to 11"), std::string::npos) << err;
  EXPECT_NE(err.find("T = 12"), std::string::npos) << err;
  err = makeRandomInputs(f, specs, 5, {12}, v);
  EXPECT_NE(err.find("N = 2"), std::string::npos) << err;
  // A sum past int64 is an error, not a wrapped (maybe matching) total.
  err = makeRandomInputs(f, specs, 5,
                         {std::numeric_limits<int64_t>::max(), 1}, v);
  EXPECT_NE(err.find("sum to more than 2^63 - 1"), std::string::npos) << err;
}

TEST_F(MlirTest, RandomDecodeAndWindowInputs) {
  mlir::func::FuncOp f = parse(kDecodeModule, "dec");
  ASSERT_TRUE(f);
  std::vector<InputSpec> specs;
  std::string err;
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(f, specs, err))) << err;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::vector<std::vector<double>> v;
    ASSERT_EQ(makeRandomInputs(f, specs, seed, {}, v), "");
    std::set<double> seen;
    int skipped = 0;
    for (double i : v[5]) {
      EXPECT_EQ(i, std::nearbyint(i));
      EXPECT_LT(i, 9);
      if (i < 0) {
        EXPECT_EQ(i, -1);
        ++skipped;
      } else {
        EXPECT_TRUE(seen.insert(i).second) << "repeated slot " << i;
      }
    }
    EXPECT_EQ(skipped, 1); // N = 6 >= 4
    for (double o : v[6])
      EXPECT_EQ(o, 0.0);
    for (unsigned a = 0; a < v.size(); ++a)
      EXPECT_EQ(validateInput(specs[a], a, v[a]), "");
  }

  mlir::func::FuncOp h = parse(kHybridModule, "hyb");
  ASSERT_TRUE(h);
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(h, specs, err))) << err;
  std::vector<std::vector<double>> v;
  ASSERT_EQ(makeRandomInputs(h, specs, 3, {}, v), "");
  for (double w : v[6]) {
    EXPECT_GE(w, 1);
    EXPECT_LE(w, 10);
    EXPECT_EQ(w, std::nearbyint(w));
  }
}

TEST_F(MlirTest, ValidateInputNamesTheOffendingElement) {
  mlir::func::FuncOp f = parse(kKdaModule, "kda");
  ASSERT_TRUE(f);
  std::vector<InputSpec> specs;
  std::string err;
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(f, specs, err))) << err;
  std::vector<std::vector<double>> v;
  ASSERT_EQ(makeRandomInputs(f, specs, 1, {}, v), "");

  std::vector<double> q = v[0];
  q[8 * 3 + 1] = NAN; // [0, 1, 1, 1]
  err = validateInput(specs[0], 0, q);
  EXPECT_NE(err.find("argument #0 (q)"), std::string::npos) << err;
  EXPECT_NE(err.find("[0, 1, 1, 1]"), std::string::npos) << err;
  EXPECT_NE(err.find("not finite"), std::string::npos) << err;

  err = validateInput(specs[0], 0, std::vector<double>(5, 0.0));
  EXPECT_NE(err.find("expected 192 values"), std::string::npos) << err;

  err = validateInput(specs[6], 6, {0, 7, 11});
  EXPECT_NE(err.find("argument #6 (cu_seqlens)"), std::string::npos) << err;
  EXPECT_NE(err.find("T = 12"), std::string::npos) << err;
  err = validateInput(specs[6], 6, {1, 7, 12});
  EXPECT_NE(err.find("must be 0"), std::string::npos) << err;
  err = validateInput(specs[6], 6, {0, 7, 5});
  EXPECT_NE(err.find("[2]"), std::string::npos) << err;
  err = validateInput(specs[6], 6, {0, 6.5, 12});
  EXPECT_NE(err.find("not an integer"), std::string::npos) << err;
  EXPECT_EQ(validateInput(specs[6], 6, {0, 0, 12}), "");

  mlir::func::FuncOp d = parse(kDecodeModule, "dec");
  ASSERT_TRUE(d);
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(d, specs, err))) << err;
  err = validateInput(specs[5], 5, {0, 1, 9, 3, 4, 5});
  EXPECT_NE(err.find("argument #5 (indices)"), std::string::npos) << err;
  EXPECT_NE(err.find("P = 9"), std::string::npos) << err;
  err = validateInput(specs[5], 5, {0, 1, 2, 1, -1, -1});
  EXPECT_NE(err.find("repeats element [1]"), std::string::npos) << err;
  EXPECT_EQ(validateInput(specs[5], 5, {8, 1, 2, -1, -1, 0}), "");

  // A positive log-space gate (alpha = exp(g) > 1) is not a decay: refused,
  // not run to a wrong o. 0 (no decay) is fine.
  mlir::func::FuncOp gdn = parse(kGdnModule, "gdn");
  ASSERT_TRUE(gdn);
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(gdn, specs, err))) << err;
  ASSERT_EQ(specs[3].role, Role::Gate);
  std::vector<double> g(40, -0.5);
  g[5] = 0.0;
  EXPECT_EQ(validateInput(specs[3], 3, g), "");
  g[5] = 0.25; // [0, 2, 1]
  err = validateInput(specs[3], 3, g);
  EXPECT_NE(err.find("argument #3 (gate)"), std::string::npos) << err;
  EXPECT_NE(err.find("element [0, 2, 1] = 2.5"), std::string::npos) << err;
  EXPECT_NE(err.find("log-space gates must be <= 0"), std::string::npos) << err;

  mlir::func::FuncOp h = parse(kHybridModule, "hyb");
  ASSERT_TRUE(h);
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(h, specs, err))) << err;
  err = validateInput(specs[6], 6, {1, 2, 3, 0, 5, 6, 7, 8, 9, 10});
  EXPECT_NE(err.find("argument #6 (window_sizes)"), std::string::npos) << err;
  EXPECT_NE(err.find("[3]"), std::string::npos) << err;
}

//===----------------------------------------------------------------------===//
// Oracle evaluation
//===----------------------------------------------------------------------===//

TEST_F(MlirTest, GatedDeltaEqualsDirectOracleCall) {
  mlir::func::FuncOp f = parse(kKdaModule, "kda");
  ASSERT_TRUE(f);
  std::vector<InputSpec> specs;
  std::string err;
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(f, specs, err))) << err;
  std::vector<std::vector<double>> v;
  ASSERT_EQ(makeRandomInputs(f, specs, 42, {5, 7}, v), "");

  std::vector<std::vector<double>> results;
  ASSERT_EQ(evaluateWithOracle(f, v, results), "");
  ASSERT_EQ(results.size(), 3u);

  oracle::GatedDeltaArgs a;
  a.q = tensorOf(f, 0, v[0]);
  a.k = tensorOf(f, 1, v[1]);
  a.v = tensorOf(f, 2, v[2]);
  a.g = tensorOf(f, 3, v[3]);
  a.beta = tensorOf(f, 4, v[4]);
  a.initialState = tensorOf(f, 5, v[5]);
  a.cuSeqlens = {0, 5, 12};
  a.gate.aLog = tensorOf(f, 7, v[7]);
  a.gate.dtBias = tensorOf(f, 8, v[8]);
  a.gate.activation = oracle::GateActivation::LowerBound;
  a.gate.lowerBound = -5.0;
  a.update = oracle::Update::Delta;
  a.scale = 0.3;
  a.layout = oracle::StateLayout::VMajor;
  a.qkL2Norm = true;
  a.betaActivation = oracle::BetaActivation::Sigmoid;
  a.boundaryInterval = 4;
  oracle::GatedDeltaResult r;
  oracle::Status st = oracle::gatedDelta(a, r);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_TRUE(sameBits(results[0], r.o.data));
  EXPECT_TRUE(sameBits(results[1], r.finalState.data));
  // boundary_states: the oracle's NT = ceil(7 / 4) = 2, the type's 3; the
  // extra boundary is zero-padded.
  ASSERT_EQ(r.boundaryStates.shape, (std::vector<int64_t>{2, 2, 4, 6, 8}));
  ASSERT_EQ(results[2].size(), 2u * 3 * 4 * 6 * 8);
  const size_t inner = 4 * 6 * 8;
  for (size_t n = 0; n < 2; ++n)
    for (size_t j = 0; j < 3; ++j)
      for (size_t i = 0; i < inner; ++i) {
        double got = results[2][(n * 3 + j) * inner + i];
        double want =
            j < 2 ? r.boundaryStates.data[(n * 2 + j) * inner + i] : 0.0;
        ASSERT_EQ(got, want) << n << " " << j << " " << i;
      }
}

TEST_F(MlirTest, GdnWithDefaultScaleEqualsDirectOracleCall) {
  mlir::func::FuncOp f = parse(kGdnModule, "gdn");
  ASSERT_TRUE(f);
  std::vector<InputSpec> specs;
  std::string err;
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(f, specs, err))) << err;
  std::vector<std::vector<double>> v, results;
  ASSERT_EQ(makeRandomInputs(f, specs, 8, {}, v), "");
  ASSERT_EQ(evaluateWithOracle(f, v, results), "");
  oracle::GatedDeltaArgs a;
  a.q = tensorOf(f, 0, v[0]);
  a.k = tensorOf(f, 1, v[1]);
  a.v = tensorOf(f, 2, v[2]);
  a.g = tensorOf(f, 3, v[3]);
  a.beta = tensorOf(f, 4, v[4]);
  a.scale = 1.0 / std::sqrt(8.0);
  oracle::GatedDeltaResult r;
  ASSERT_TRUE(oracle::gatedDelta(a, r).ok());
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(sameBits(results[0], r.o.data));
}

TEST_F(MlirTest, DecodeStepEqualsDirectOracleCall) {
  mlir::func::FuncOp f = parse(kDecodeModule, "dec");
  ASSERT_TRUE(f);
  std::vector<InputSpec> specs;
  std::string err;
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(f, specs, err))) << err;
  std::vector<std::vector<double>> v, results;
  ASSERT_EQ(makeRandomInputs(f, specs, 17, {}, v), "");
  ASSERT_EQ(evaluateWithOracle(f, v, results), "");
  oracle::DecodeArgs a;
  a.q = tensorOf(f, 0, v[0]);
  a.k = tensorOf(f, 1, v[1]);
  a.v = tensorOf(f, 2, v[2]);
  a.g = tensorOf(f, 3, v[3]);
  a.beta = tensorOf(f, 4, v[4]);
  for (double i : v[5])
    a.indices.push_back(static_cast<int64_t>(i));
  a.statePool = tensorOf(f, 7, v[7]);
  a.scale = 0.5;
  oracle::DecodeResult r;
  oracle::Status st = oracle::decodeStep(a, r);
  ASSERT_TRUE(st.ok()) << st.message;
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(sameBits(results[0], r.o.data));
  EXPECT_TRUE(sameBits(results[1], r.statePool.data));
}

TEST_F(MlirTest, HybridOfGateLinearAndWindowEqualsDirectOracleCalls) {
  mlir::func::FuncOp f = parse(kHybridModule, "hyb");
  ASSERT_TRUE(f);
  std::vector<InputSpec> specs;
  std::string err;
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(f, specs, err))) << err;
  std::vector<std::vector<double>> v, results;
  ASSERT_EQ(makeRandomInputs(f, specs, 23, {}, v), "");
  ASSERT_EQ(evaluateWithOracle(f, v, results), "");

  oracle::GateParams p;
  p.activation = oracle::GateActivation::Softplus;
  p.aLog = tensorOf(f, 4, v[4]);
  p.dtBias = tensorOf(f, 5, v[5]);
  oracle::Tensor g;
  ASSERT_TRUE(oracle::gateActivation(tensorOf(f, 3, v[3]), p, true, g).ok());
  oracle::GatedDeltaArgs lin;
  lin.q = tensorOf(f, 0, v[0]);
  lin.k = tensorOf(f, 1, v[1]);
  lin.v = tensorOf(f, 2, v[2]);
  lin.g = g;
  lin.update = oracle::Update::Additive;
  oracle::GatedDeltaResult lr;
  ASSERT_TRUE(oracle::gatedDelta(lin, lr).ok());
  oracle::WindowArgs w;
  w.q = lin.q;
  w.k = lin.k;
  w.v = lin.v;
  for (double x : v[6])
    w.windowPerPosition.push_back(static_cast<int64_t>(x));
  oracle::Tensor wo, o;
  ASSERT_TRUE(oracle::windowAttention(w, wo).ok());
  ASSERT_TRUE(oracle::hybridCombine({lr.o, wo}, oracle::Combine::Gated,
                                    tensorOf(f, 7, v[7]), o)
                  .ok());
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(sameBits(results[0], o.data));
}

TEST_F(MlirTest, MultiScaleWithInitialStatesMatchesOracle) {
  mlir::func::FuncOp f = parse(kMultiScaleModule, "ms");
  ASSERT_TRUE(f);
  std::vector<InputSpec> specs;
  std::string err;
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(f, specs, err))) << err;
  std::vector<std::vector<double>> v, results;
  ASSERT_EQ(makeRandomInputs(f, specs, 31, {}, v), "");

  // With zero initial states the result must equal oracle::multiScale
  // without them (which has no stacked initial states).
  std::vector<std::vector<double>> zeroed = v;
  std::fill(zeroed[5].begin(), zeroed[5].end(), 0.0);
  ASSERT_EQ(evaluateWithOracle(f, zeroed, results), "");
  oracle::MultiScaleArgs ms;
  ms.base.q = tensorOf(f, 0, v[0]);
  ms.base.k = tensorOf(f, 1, v[1]);
  ms.base.v = tensorOf(f, 2, v[2]);
  ms.base.g = tensorOf(f, 3, v[3]);
  ms.base.beta = tensorOf(f, 4, v[4]);
  ms.decayScales = {1.0, 0.25};
  ms.combine = oracle::Combine::Gated;
  ms.z = tensorOf(f, 6, v[6]);
  oracle::MultiScaleResult r;
  oracle::Status st = oracle::multiScale(ms, r);
  ASSERT_TRUE(st.ok()) << st.message;
  ASSERT_EQ(results.size(), 2u);
  EXPECT_LT(oracle::maxAbsError(results[0], r.o.data), 1e-12);
  EXPECT_LT(oracle::maxAbsError(results[1], r.finalStates.data), 1e-12);

  // With real initial states: scale m's run starts from slice m.
  ASSERT_EQ(evaluateWithOracle(f, v, results), "");
  oracle::GatedDeltaArgs s1 = ms.base;
  s1.initialState = oracle::Tensor({1, 2, 8, 8});
  std::copy(v[5].begin() + 128, v[5].end(), s1.initialState.data.begin());
  for (double &x : s1.g.data)
    x *= 0.25;
  oracle::GatedDeltaResult r1;
  ASSERT_TRUE(oracle::gatedDelta(s1, r1).ok());
  std::vector<double> fs1(results[1].begin() + 128, results[1].end());
  EXPECT_TRUE(sameBits(fs1, r1.finalState.data));
}

TEST_F(MlirTest, ConstantsFeedOps) {
  mlir::func::FuncOp f = parse(R"mlir(
func.func @c(%q: tensor<1x4x1x2xf32>, %k: tensor<1x4x1x2xf32>,
             %v: tensor<1x4x1x2xf32>) -> (tensor<1x4x1x2xf32>, tensor<1x4x1xf32>) {
  %b = arith.constant dense<0.5> : tensor<1x4x1xf32>
  %o = kda.gated_delta delta %q, %k, %v beta(%b : tensor<1x4x1xf32>)
      : tensor<1x4x1x2xf32>, tensor<1x4x1x2xf32>, tensor<1x4x1x2xf32>
      -> tensor<1x4x1x2xf32>
  return %o, %b : tensor<1x4x1x2xf32>, tensor<1x4x1xf32>
}
)mlir",
                               "c");
  ASSERT_TRUE(f);
  std::vector<double> q = {1, 0, 0, 1, 1, 0, 0, 1};
  std::vector<std::vector<double>> results;
  ASSERT_EQ(evaluateWithOracle(f, {q, q, q}, results), "");
  EXPECT_EQ(results[1], (std::vector<double>{0.5, 0.5, 0.5, 0.5}));
  oracle::GatedDeltaArgs a;
  a.q = a.k = a.v = oracle::Tensor({1, 4, 1, 2});
  a.q.data = a.k.data = a.v.data = q;
  a.beta = oracle::Tensor({1, 4, 1}, 0.5);
  oracle::GatedDeltaResult r;
  ASSERT_TRUE(oracle::gatedDelta(a, r).ok());
  EXPECT_TRUE(sameBits(results[0], r.o.data));
}

TEST_F(MlirTest, UnknownOpsAndBadArgumentsAreErrors) {
  mlir::func::FuncOp f = parse(R"mlir(
func.func @u(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
)mlir",
                               "u");
  ASSERT_TRUE(f);
  std::vector<std::vector<double>> results;
  std::string err = evaluateWithOracle(f, {{1, 2, 3, 4}}, results);
  EXPECT_NE(err.find("unsupported operation 'arith.addf'"), std::string::npos)
      << err;

  mlir::func::FuncOp g = parse(kGdnModule, "gdn");
  ASSERT_TRUE(g);
  err = evaluateWithOracle(g, {{1, 2}}, results);
  EXPECT_NE(err.find("takes 5 arguments, 1 given"), std::string::npos) << err;
  std::vector<std::vector<double>> wrong(5, std::vector<double>(3, 0.0));
  err = evaluateWithOracle(g, wrong, results);
  EXPECT_NE(err.find("argument #0: expected 320 values"), std::string::npos)
      << err;

  // Oracle errors come back as messages naming the op.
  mlir::func::FuncOp k = parse(kKdaModule, "kda");
  ASSERT_TRUE(k);
  std::vector<InputSpec> specs;
  ASSERT_TRUE(mlir::succeeded(inferInputSpecs(k, specs, err))) << err;
  std::vector<std::vector<double>> v;
  ASSERT_EQ(makeRandomInputs(k, specs, 2, {}, v), "");
  v[6] = {0, 6, 13}; // ends past T
  err = evaluateWithOracle(k, v, results);
  EXPECT_NE(err.find("kda.gated_delta"), std::string::npos) << err;
  EXPECT_NE(err.find("oracle: "), std::string::npos) << err;
  v[6] = {0, 6.5, 12}; // not integral
  err = evaluateWithOracle(k, v, results);
  EXPECT_NE(err.find("not an integer"), std::string::npos) << err;
}

//===----------------------------------------------------------------------===//
// Emulator (kda-run --emulate's interpreter) on hand-written lane programs
//===----------------------------------------------------------------------===//

/// A block of 64 threads per program (kda.explicit_threads): each thread
/// writes its id to shared memory, (BARRIER), then reads its neighbour's
/// (thread t reads t + 1 mod 64, a thread of the other warp for t = 31 and
/// 63) and a shuffle adds lane t ^ 1's; the result goes to out[program][t].
constexpr const char *kLaneProgram = R"mlir(
func.func @k(%out: memref<2x64xf32>) attributes {kda.explicit_threads, kda.block_threads = 64 : i64} {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %w = arith.constant 32 : i32
  %one = arith.constant 1 : i32
  scf.forall (%p) in (2) {
    %t = gpu.thread_id x
    %sh = memref.alloc() : memref<64xf32, #gpu.address_space<workgroup>>
    %ti = arith.index_cast %t : index to i32
    %tf = arith.sitofp %ti : i32 to f32
    memref.store %tf, %sh[%t] : memref<64xf32, #gpu.address_space<workgroup>>
    BARRIER
    %n = arith.addi %t, %c1 : index
    %m = arith.remui %n, %c64 : index
    %x = memref.load %sh[%m] : memref<64xf32, #gpu.address_space<workgroup>>
    %y, %ok = gpu.shuffle xor %x, %one, %w : f32
    %z = arith.addf %x, %y : f32
    memref.store %z, %out[%p, %t] : memref<2x64xf32>
  }
  return
}
)mlir";

struct EmulatorTest : ::testing::Test {
  EmulatorTest() {
    context.loadDialect<mlir::func::FuncDialect, mlir::arith::ArithDialect,
                        mlir::scf::SCFDialect, mlir::memref::MemRefDialect,
                        mlir::gpu::GPUDialect, mlir::NVVM::NVVMDialect,
                        mlir::nvgpu::NVGPUDialect,
                        mlir::vector::VectorDialect>();
  }
  /// Runs @k of `text` on a [2, 64] f32 output; the error (empty: none).
  std::string run(const std::string &text, std::vector<double> &out) {
    module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    if (!module)
      return "does not parse";
    auto k = module->lookupSymbol<mlir::func::FuncOp>("k");
    std::vector<std::unique_ptr<emu::Memory>> owner;
    owner.push_back(std::make_unique<emu::Memory>());
    owner[0]->element = mlir::Float32Type::get(&context);
    owner[0]->data.assign(128, -1.0);
    emu::View v;
    v.memory = owner[0].get();
    v.sizes = {2, 64};
    v.strides = {64, 1};
    std::vector<emu::View> results;
    emu::Stats stats;
    std::string err = emu::run(k, 64, 32, {v}, results, owner, stats);
    out = owner[0]->data;
    return err;
  }
  static std::string with(const std::string &barrier) {
    std::string t = kLaneProgram;
    t.replace(t.find("BARRIER"), 7, barrier);
    return t;
  }
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

TEST_F(EmulatorTest, LanesRunInLockStepWithSharedMemoryAndShuffles) {
  std::vector<double> out;
  ASSERT_EQ(run(with("gpu.barrier"), out), "");
  for (int p = 0; p < 2; ++p)
    for (int t = 0; t < 64; ++t) {
      // x(t) = (t + 1) mod 64; the shuffle reads lane t ^ 1 of the warp.
      double x = (t + 1) % 64, y = ((t ^ 1) + 1) % 64;
      EXPECT_EQ(out[p * 64 + t], x + y) << "program " << p << " thread " << t;
    }
}

TEST_F(EmulatorTest, ReadingAnotherThreadsWriteWithoutABarrierIsARace) {
  std::vector<double> out;
  // No barrier: thread 0 reads what thread 1 wrote.
  std::string err = run(with(""), out);
  EXPECT_NE(err.find("a race on shared memory (read after write): thread 0 "
                     "and thread 1"),
            std::string::npos)
      << err;
  // A warp's sync orders its own threads only: thread 31 reads thread 32's.
  err = run(with("nvvm.bar.warp.sync %one : i32"), out);
  EXPECT_NE(err.find("thread 31 and thread 32"), std::string::npos) << err;
}

TEST_F(EmulatorTest, WarpWideInstructionsNeedTheirWholeWarp) {
  // A shuffle from a lane the branch left out (lanes 0..15 read 16..31):
  // named, not run.
  std::string t = with("gpu.barrier");
  t.replace(t.find("%y, %ok = gpu.shuffle xor %x, %one, %w : f32"),
            std::string("%y, %ok = gpu.shuffle xor %x, %one, %w : f32").size(),
            "%c16 = arith.constant 16 : index\n"
            "    %i16 = arith.constant 16 : i32\n"
            "    %lo = arith.cmpi ult, %t, %c16 : index\n"
            "    %y = scf.if %lo -> f32 {\n"
            "      %s, %v = gpu.shuffle xor %x, %i16, %w : f32\n"
            "      scf.yield %s : f32\n"
            "    } else {\n"
            "      scf.yield %x : f32\n"
            "    }");
  std::vector<double> out;
  std::string err = run(t, out);
  EXPECT_NE(err.find("a shuffle from a lane not running it"), std::string::npos)
      << err;
}

TEST_F(EmulatorTest, VectorAccessesHoldTheAlignmentTheyClaim) {
  // Thread t stores the pair (t, t) at out[p, 2 * (t / 2) + SHIFT .. + 1]
  // claiming 8 bytes: at an even column it is aligned (threads 2j and 2j + 1
  // write the same pair), at an odd one a GPU faults and the emulator says so.
  auto program = [](int shift) {
    std::string t = R"mlir(
func.func @k(%out: memref<2x64xf32>) attributes {kda.explicit_threads, kda.block_threads = 64 : i64} {
  %c2 = arith.constant 2 : index
  %s = arith.constant SHIFT : index
  %c62 = arith.constant 62 : index
  scf.forall (%p) in (2) {
    %t = gpu.thread_id x
    %h = arith.divui %t, %c2 : index
    %e = arith.muli %h, %c2 : index
    %j = arith.addi %e, %s : index
    %c = arith.minui %j, %c62 : index
    %ti = arith.index_cast %t : index to i32
    %tf = arith.sitofp %ti : i32 to f32
    %v = vector.from_elements %tf, %tf : vector<2xf32>
    vector.store %v, %out[%p, %c] {alignment = 8} : memref<2x64xf32>, vector<2xf32>
  }
  return
}
)mlir";
    t.replace(t.find("SHIFT"), 5, std::to_string(shift));
    return t;
  };
  std::vector<double> out;
  EXPECT_EQ(run(program(0), out), "");
  EXPECT_EQ(out[64 + 7], 7.0); // program 1, thread 7's pair at columns 6, 7
  std::string err = run(program(1), out);
  EXPECT_NE(err.find("a vector store claiming 8-byte alignment at byte offset 4 "
                     "(thread 0)"),
            std::string::npos)
      << err;
}

} // namespace
