//===- FuzzNpy.cpp - libFuzzer: kda-run's .npy reader ---------------------===//
//
// Input: the bytes of a .npy file, read by kda::npy::parse (the in-memory
// twin of npy::read, tools/kda-run/Npy.cpp; both share one implementation).
// Arrays it accepts must hold exactly product(shape) * itemSize bytes, and
// converting them to doubles (what kda-run does next) must not fault.
// Run: scripts/fuzz.sh npy [seconds]   (README "Reliability")
//
//===----------------------------------------------------------------------===//

#include "tools/kda-run/Npy.h"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 20)
    return -1;
  kda::npy::Array a;
  std::string err = kda::npy::parse(data, size, "fuzz.npy", a);
  if (!err.empty())
    return 0;
  if (static_cast<uint64_t>(kda::npy::numElements(a.shape)) *
          kda::npy::itemSize(a.dtype) !=
      a.bytes.size())
    std::abort();
  std::vector<double> values = kda::npy::toDoubles(a);
  if (values.size() != static_cast<size_t>(kda::npy::numElements(a.shape)))
    std::abort();
  return 0;
}
