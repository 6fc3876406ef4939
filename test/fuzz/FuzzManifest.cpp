//===- FuzzManifest.cpp - libFuzzer: the runtime's bundle manifest parser -===//
//
// Input: manifest.json text (runtime/BUNDLE.md), parsed and validated by
// kda::rt::parseManifest (runtime/Manifest.cpp over runtime/Json.cpp). It
// must return a status for every input: corrupt manifests are
// KDA_ERROR_CORRUPT_BUNDLE with a message, never a crash; an accepted
// manifest's kernels and entries are then looked up by name.
// Run: scripts/fuzz.sh manifest [seconds]   (README "Reliability")
//
//===----------------------------------------------------------------------===//

#include "runtime/Manifest.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 256 * 1024)
    return -1;
  std::string_view text(reinterpret_cast<const char *>(data), size);
  kda::rt::Manifest m;
  kda::rt::Status s = kda::rt::parseManifest(text, "fuzz/manifest.json", m);
  if (!s.isOk()) {
    if (s.message().empty())
      std::abort(); // every error names what is wrong
    return 0;
  }
  for (const kda::rt::Kernel &k : m.kernels)
    if (m.findKernel(k.name) == nullptr)
      std::abort();
  for (const kda::rt::Entry &e : m.entries)
    if (m.findEntry(e.name) == nullptr)
      std::abort();
  return 0;
}
