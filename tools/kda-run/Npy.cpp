//===- Npy.cpp - NumPy .npy reader and writer -----------------------------===//
//
// Format reference: numpy/lib/format.py. A file is the magic "\x93NUMPY",
// a major and a minor version byte, the header length (2 bytes little-endian
// for version 1.0, 4 bytes for 2.0 and 3.0), an ASCII (3.0: UTF-8) Python
// dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), } padded
// with spaces and terminated by '\n', then the raw element data.
//
//===----------------------------------------------------------------------===//

#include "tools/kda-run/Npy.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kda-run's .npy support assumes a little-endian host"
#endif

namespace kda::npy {

size_t itemSize(DType dtype) {
  switch (dtype) {
  case DType::F16:
    return 2;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F64:
  case DType::I64:
    return 8;
  }
  return 0;
}

int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F16:
    return "<f2";
  case DType::F32:
    return "<f4";
  case DType::F64:
    return "<f8";
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  }
  return "?";
}

double roundToBinary(double x, int precision, int minExponent,
                     int maxExponent) {
  if (!std::isfinite(x) || x == 0.0)
    return x;
  int e = std::ilogb(x);
  int quantumExp = (e < minExponent ? minExponent : e) - (precision - 1);
  // x / 2^quantumExp is exact (a power-of-two scaling that stays normal in
  // double for every format narrower than double); nearbyint rounds it to
  // the nearest integer, ties to even, in the default rounding mode.
  double r = std::ldexp(std::nearbyint(std::ldexp(x, -quantumExp)), quantumExp);
  if (std::fabs(r) >= std::ldexp(1.0, maxExponent + 1))
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

uint16_t doubleToHalfBits(double x) {
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x))
    return static_cast<uint16_t>(sign | 0x7e00);
  double r = roundToBinary(x, 11, -14, 15);
  if (std::isinf(r))
    return static_cast<uint16_t>(sign | 0x7c00);
  r = std::fabs(r);
  if (r == 0.0)
    return sign;
  int e = std::ilogb(r);
  if (e < -14) // subnormal: r = m * 2^-24
    return static_cast<uint16_t>(sign |
                                 static_cast<uint16_t>(std::ldexp(r, 24)));
  uint16_t mant = static_cast<uint16_t>(std::ldexp(r, 10 - e) - 1024.0);
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | mant);
}

double halfBitsToDouble(uint16_t bits) {
  double sign = (bits & 0x8000) ? -1.0 : 1.0;
  int exp = (bits >> 10) & 0x1f;
  int mant = bits & 0x3ff;
  if (exp == 0x1f)
    return mant ? std::numeric_limits<double>::quiet_NaN()
                : sign * std::numeric_limits<double>::infinity();
  if (exp == 0)
    return sign * std::ldexp(static_cast<double>(mant), -24);
  return sign * std::ldexp(static_cast<double>(mant + 1024), exp - 25);
}

namespace {

//===----------------------------------------------------------------------===//
// Header parsing: a Python dict literal with string / bool / int-tuple values
//===----------------------------------------------------------------------===//

struct Value {
  enum Kind { String, Bool, Tuple, Other } kind = Other;
  std::string str;
  bool flag = false;
  std::vector<int64_t> ints;
};

class HeaderParser {
public:
  explicit HeaderParser(const std::string &text) : s(text) {}

  /// Parses the dict; returns "" or a description of the problem.
  std::string parse(std::map<std::string, Value> &out) {
    skipSpace();
    if (!consume('{'))
      return "expected '{' at the start of the header";
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      if (!parseString(key))
        return "expected a quoted key at header offset " + std::to_string(i);
      skipSpace();
      if (!consume(':'))
        return "expected ':' after key '" + key + "'";
      skipSpace();
      Value v;
      if (std::string err = parseValue(v); !err.empty())
        return err + " (value of key '" + key + "')";
      out[key] = std::move(v);
      skipSpace();
      if (consume(','))
        continue;
      if (consume('}'))
        break;
      return "expected ',' or '}' at header offset " + std::to_string(i);
    }
    return "";
  }

private:
  void skipSpace() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' ||
                            s[i] == '\r'))
      ++i;
  }
  bool consume(char c) {
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool parseString(std::string &out) {
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"'))
      return false;
    char quote = s[i++];
    out.clear();
    while (i < s.size() && s[i] != quote) {
      if (s[i] == '\\' && i + 1 < s.size())
        ++i;
      out.push_back(s[i++]);
    }
    return consume(quote);
  }
  bool parseInt(int64_t &out) {
    size_t start = i;
    int64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      int digit = s[i] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - digit) / 10)
        return false; // overflow
      v = v * 10 + digit;
      ++i;
    }
    if (i == start)
      return false;
    if (i < s.size() && (s[i] == 'L' || s[i] == 'l')) // Python 2 longs
      ++i;
    out = v;
    return true;
  }
  std::string parseValue(Value &v) {
    if (i >= s.size())
      return "unexpected end of header";
    if (s[i] == '\'' || s[i] == '"') {
      v.kind = Value::String;
      return parseString(v.str) ? "" : "unterminated string";
    }
    if (s.compare(i, 4, "True") == 0) {
      i += 4;
      v.kind = Value::Bool;
      v.flag = true;
      return "";
    }
    if (s.compare(i, 5, "False") == 0) {
      i += 5;
      v.kind = Value::Bool;
      v.flag = false;
      return "";
    }
    if (s[i] == '(') {
      ++i;
      v.kind = Value::Tuple;
      while (true) {
        skipSpace();
        if (consume(')'))
          return "";
        int64_t d;
        if (!parseInt(d))
          return "expected a non-negative integer in the shape tuple";
        v.ints.push_back(d);
        skipSpace();
        if (consume(','))
          continue;
        if (consume(')'))
          return "";
        return "expected ',' or ')' in the shape tuple";
      }
    }
    if (s[i] == '[' || s[i] == '{') { // structured dtypes etc.: skip balanced
      v.kind = Value::Other;
      int depth = 0;
      while (i < s.size()) {
        char c = s[i];
        if (c == '\'' || c == '"') {
          std::string ignored;
          if (!parseString(ignored))
            return "unterminated string";
          continue;
        }
        if (c == '[' || c == '{' || c == '(')
          ++depth;
        else if (c == ']' || c == '}' || c == ')')
          --depth;
        ++i;
        if (depth == 0)
          return "";
      }
      return "unbalanced brackets";
    }
    return "unsupported value syntax at header offset " + std::to_string(i);
  }

  const std::string &s;
  size_t i = 0;
};

bool parseDType(const std::string &descr, DType &out) {
  if (descr.size() != 3 || (descr[0] != '<' && descr[0] != '='))
    return false;
  std::string body = descr.substr(1);
  if (body == "f2")
    out = DType::F16;
  else if (body == "f4")
    out = DType::F32;
  else if (body == "f8")
    out = DType::F64;
  else if (body == "i4")
    out = DType::I32;
  else if (body == "i8")
    out = DType::I64;
  else
    return false;
  return true;
}

/// Closes a FILE on scope exit.
struct FileCloser {
  std::FILE *f;
  ~FileCloser() {
    if (f)
      std::fclose(f);
  }
};

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1)
    s += ",";
  return s + ")";
}

} // namespace

namespace {
/// Where read() and parse() take their bytes from: a file (the data section
/// is only read once the header says how large it must be) or memory.
struct Source {
  uint64_t size = 0;
  virtual ~Source() = default;
  /// Reads the next `n` bytes into `dst`; false when fewer remain.
  virtual bool next(void *dst, size_t n) = 0;
};

struct FileSource : Source {
  std::FILE *f;
  explicit FileSource(std::FILE *f) : f(f) {}
  bool next(void *dst, size_t n) override {
    return std::fread(dst, 1, n, f) == n;
  }
};

struct MemorySource : Source {
  const uint8_t *data;
  uint64_t pos = 0;
  MemorySource(const uint8_t *data, size_t n) : data(data) { size = n; }
  bool next(void *dst, size_t n) override {
    if (n > size - pos)
      return false;
    if (n)
      std::memcpy(dst, data + pos, n);
    pos += n;
    return true;
  }
};

std::string readFrom(Source &src, const std::string &name, Array &out);
} // namespace

std::string read(const std::string &path, Array &out) {
  auto fail = [&](const std::string &what) { return path + ": " + what; };
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return fail(std::string("cannot open file: ") + std::strerror(errno));
  FileCloser closer{f};
  if (std::fseek(f, 0, SEEK_END) != 0)
    return fail("cannot seek (not a regular file?)");
  long endPos = std::ftell(f);
  if (endPos < 0 || std::fseek(f, 0, SEEK_SET) != 0)
    return fail("cannot determine the file size");
  FileSource src(f);
  src.size = static_cast<uint64_t>(endPos);
  return readFrom(src, path, out);
}

std::string parse(const uint8_t *data, size_t size, const std::string &name,
                  Array &out) {
  MemorySource src(data, size);
  return readFrom(src, name, out);
}

namespace {
std::string readFrom(Source &src, const std::string &path, Array &out) {
  auto fail = [&](const std::string &what) { return path + ": " + what; };
  uint64_t fileSize = src.size;

  unsigned char prefix[8];
  if (fileSize < 10 || !src.next(prefix, 8))
    return fail("not a .npy file: too short (" + std::to_string(fileSize) +
                " bytes)");
  static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (std::memcmp(prefix, magic, 6) != 0)
    return fail("not a .npy file: bad magic (expected \"\\x93NUMPY\")");
  int major = prefix[6], minor = prefix[7];
  if (major < 1 || major > 3 || minor != 0)
    return fail("unsupported .npy format version " + std::to_string(major) +
                "." + std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  size_t lenBytes = major == 1 ? 2 : 4;
  unsigned char lenBuf[4] = {0, 0, 0, 0};
  if (!src.next(lenBuf, lenBytes))
    return fail("truncated header length");
  uint64_t headerLen = static_cast<uint64_t>(lenBuf[0]) |
                       (static_cast<uint64_t>(lenBuf[1]) << 8) |
                       (static_cast<uint64_t>(lenBuf[2]) << 16) |
                       (static_cast<uint64_t>(lenBuf[3]) << 24);
  uint64_t dataStart = 8 + lenBytes + headerLen;
  if (dataStart > fileSize)
    return fail("truncated header: expected " + std::to_string(headerLen) +
                " bytes found " + std::to_string(fileSize - 8 - lenBytes));
  std::string header(headerLen, '\0');
  if (headerLen && !src.next(header.data(), headerLen))
    return fail("cannot read the header");

  std::map<std::string, Value> dict;
  if (std::string err = HeaderParser(header).parse(dict); !err.empty())
    return fail("malformed header: " + err);
  auto descr = dict.find("descr");
  auto fortran = dict.find("fortran_order");
  auto shapeIt = dict.find("shape");
  if (descr == dict.end() || fortran == dict.end() || shapeIt == dict.end())
    return fail("malformed header: expected the keys 'descr', "
                "'fortran_order' and 'shape'");
  if (descr->second.kind != Value::String)
    return fail("unsupported dtype (structured or sub-array dtypes are not "
                "supported; expected one of <f2, <f4, <f8, <i4, <i8)");
  DType dtype;
  if (!parseDType(descr->second.str, dtype))
    return fail("unsupported dtype '" + descr->second.str +
                "' (expected one of <f2, <f4, <f8, <i4, <i8)");
  if (fortran->second.kind != Value::Bool)
    return fail("malformed header: 'fortran_order' must be True or False");
  if (fortran->second.flag)
    return fail("fortran order (column-major) arrays are not supported; "
                "save a C-order array (np.ascontiguousarray)");
  if (shapeIt->second.kind != Value::Tuple)
    return fail("malformed header: 'shape' must be a tuple of integers");
  const std::vector<int64_t> &shape = shapeIt->second.ints;

  // Expected data size, guarding against overflow on absurd shapes.
  const uint64_t limit = uint64_t(1) << 62;
  uint64_t elems = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d == 0)
      empty = true;
    else if (!empty && elems > limit / static_cast<uint64_t>(d))
      return fail("shape " + shapeString(shape) + " is too large");
    else if (!empty)
      elems *= static_cast<uint64_t>(d);
  }
  if (empty)
    elems = 0;
  uint64_t item = itemSize(dtype);
  if (elems > limit / item)
    return fail("shape " + shapeString(shape) + " is too large");
  uint64_t expected = elems * item;
  uint64_t found = fileSize - dataStart;
  if (found < expected)
    return fail("truncated data: expected " + std::to_string(expected) +
                " bytes found " + std::to_string(found));
  if (found > expected)
    return fail("unexpected trailing data: expected " +
                std::to_string(expected) + " bytes found " +
                std::to_string(found));

  Array a;
  a.dtype = dtype;
  a.shape = shape;
  a.bytes.resize(expected);
  if (expected && !src.next(a.bytes.data(), expected))
    return fail("read error in the data section");
  out = std::move(a);
  return "";
}
} // namespace

std::string write(const std::string &path, const Array &a) {
  auto fail = [&](const std::string &what) { return path + ": " + what; };
  for (int64_t d : a.shape)
    if (d < 0)
      return fail("cannot write a negative dimension in shape " +
                  shapeString(a.shape));
  uint64_t expected =
      static_cast<uint64_t>(numElements(a.shape)) * itemSize(a.dtype);
  if (a.bytes.size() != expected)
    return fail("data size mismatch: shape " + shapeString(a.shape) +
                " of " + dtypeName(a.dtype) + " needs " +
                std::to_string(expected) + " bytes, the array holds " +
                std::to_string(a.bytes.size()));

  std::string dict = "{'descr': '" + dtypeName(a.dtype) +
                     "', 'fortran_order': False, 'shape': " +
                     shapeString(a.shape) + ", }";
  // Version 1.0 when the header fits 16 bits; pad so that the data starts
  // at a multiple of 64 bytes, as numpy does.
  int major = dict.size() + 1 + 10 > 65535 ? 2 : 1;
  size_t prefixLen = major == 1 ? 10 : 12;
  size_t total = prefixLen + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict.push_back('\n');
  uint64_t headerLen = dict.size();

  std::string prefix = "\x93NUMPY";
  prefix.push_back(static_cast<char>(major));
  prefix.push_back(0);
  for (size_t i = 0; i < prefixLen - 8; ++i)
    prefix.push_back(static_cast<char>((headerLen >> (8 * i)) & 0xff));

  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return fail(std::string("cannot open for writing: ") +
                std::strerror(errno));
  FileCloser closer{f};
  if (std::fwrite(prefix.data(), 1, prefix.size(), f) != prefix.size() ||
      std::fwrite(dict.data(), 1, dict.size(), f) != dict.size() ||
      (!a.bytes.empty() &&
       std::fwrite(a.bytes.data(), 1, a.bytes.size(), f) != a.bytes.size()))
    return fail(std::string("write error: ") + std::strerror(errno));
  closer.f = nullptr;
  if (std::fclose(f) != 0)
    return fail(std::string("write error on close: ") + std::strerror(errno));
  return "";
}

std::vector<double> toDoubles(const Array &a) {
  size_t item = itemSize(a.dtype);
  size_t n = a.bytes.size() / item;
  std::vector<double> out(n);
  const uint8_t *p = a.bytes.data();
  for (size_t i = 0; i < n; ++i, p += item) {
    switch (a.dtype) {
    case DType::F16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      out[i] = halfBitsToDouble(b);
      break;
    }
    case DType::F32: {
      float x;
      std::memcpy(&x, p, 4);
      out[i] = x;
      break;
    }
    case DType::F64:
      std::memcpy(&out[i], p, 8);
      break;
    case DType::I32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      out[i] = x;
      break;
    }
    case DType::I64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      out[i] = static_cast<double>(x);
      break;
    }
    }
  }
  return out;
}

namespace {
template <typename Int> Int saturatingInt(double x) {
  if (std::isnan(x))
    return 0;
  double r = std::nearbyint(x);
  // The bounds as doubles: min is exact (a power of two); max + 1 is too.
  double lo = static_cast<double>(std::numeric_limits<Int>::min());
  double hiPlusOne = -lo;
  if (r <= lo)
    return std::numeric_limits<Int>::min();
  if (r >= hiPlusOne)
    return std::numeric_limits<Int>::max();
  return static_cast<Int>(r);
}
} // namespace

Array fromDoubles(const std::vector<double> &v, std::vector<int64_t> shape,
                  DType dtype) {
  Array a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  size_t item = itemSize(dtype);
  a.bytes.resize(v.size() * item);
  uint8_t *p = a.bytes.data();
  for (size_t i = 0; i < v.size(); ++i, p += item) {
    switch (dtype) {
    case DType::F16: {
      uint16_t b = doubleToHalfBits(v[i]);
      std::memcpy(p, &b, 2);
      break;
    }
    case DType::F32: {
      // Rounded in double first so that the narrowing below is exact (or
      // an infinity), never an out-of-range conversion.
      float x = static_cast<float>(roundToBinary(v[i], 24, -126, 127));
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::F64:
      std::memcpy(p, &v[i], 8);
      break;
    case DType::I32: {
      int32_t x = saturatingInt<int32_t>(v[i]);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::I64: {
      int64_t x = saturatingInt<int64_t>(v[i]);
      std::memcpy(p, &x, 8);
      break;
    }
    }
  }
  return a;
}

} // namespace kda::npy
