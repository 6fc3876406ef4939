//===- Npy.h - NumPy .npy reader and writer ---------------------*- C++ -*-===//
//
// The subset of the .npy format kda-run needs: little-endian, C order, dtypes
// '<f2', '<f4', '<f8', '<i4', '<i8'. Reads format versions 1.0, 2.0 and 3.0;
// writes 1.0 (2.0 only if a header would not fit 1.0's 16-bit length).
// Nothing here throws or aborts on a corrupt file: every problem comes back
// as a message naming the file.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_TOOLS_KDA_RUN_NPY_H
#define KDA_TOOLS_KDA_RUN_NPY_H

#include <cstdint>
#include <string>
#include <vector>

namespace kda::npy {

enum class DType { F16, F32, F64, I32, I64 };

/// A dense C-order array. `bytes` holds the little-endian element data
/// (product(shape) * itemSize(dtype) bytes; an empty shape is a scalar).
struct Array {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// Bytes per element of `dtype`.
size_t itemSize(DType dtype);

/// Number of elements of `shape` (1 for a scalar).
int64_t numElements(const std::vector<int64_t> &shape);

/// Reads `path` into `out`. Returns "" on success, else a message naming the
/// file and the problem (missing file, bad magic, unsupported version,
/// malformed header, unsupported dtype 'X', fortran order, truncated data:
/// expected N bytes found M, ...). `out` is only written on success.
std::string read(const std::string &path, Array &out);

/// The same for a file's bytes in memory; `name` starts every message.
std::string parse(const uint8_t *data, size_t size, const std::string &name,
                  Array &out);

/// Writes `a` to `path` as format version 1.0. Returns "" on success, else a
/// message (bytes.size() not matching the shape, I/O error).
std::string write(const std::string &path, const Array &a);

/// The elements of `a` as doubles (exact for every dtype except i64 values
/// beyond 2^53). Returns as many values as `a.bytes` holds whole elements.
std::vector<double> toDoubles(const Array &a);

/// An array of `dtype` holding `v` (f16 rounded to nearest even, f32 by
/// conversion, ints rounded to nearest and saturated to the type's range).
/// `shape` is taken as given; write() reports a mismatch with v.size().
Array fromDoubles(const std::vector<double> &v, std::vector<int64_t> shape,
                  DType dtype);

/// The NumPy descr of `dtype`: "<f2", "<f4", "<f8", "<i4", "<i8".
std::string dtypeName(DType dtype);

/// Rounds `x` to the nearest value (ties to even) of a binary floating-point
/// format with `precision` significand bits (implicit bit included) and
/// normal exponents in [minExponent, maxExponent], subnormals included;
/// values rounding beyond the largest finite become +-inf. NaN and inf pass
/// through. bf16: (8, -126, 127), f16: (11, -14, 15), f32: (24, -126, 127).
double roundToBinary(double x, int precision, int minExponent,
                     int maxExponent);

/// IEEE binary16 helpers (round to nearest even; inf/NaN preserved).
uint16_t doubleToHalfBits(double x);
double halfBitsToDouble(uint16_t bits);

} // namespace kda::npy

#endif // KDA_TOOLS_KDA_RUN_NPY_H
