//===- ReplayMain.cpp - run fuzz inputs without libFuzzer -----------------===//
//
// In the default build (KDA_FUZZ off) each fuzz target is linked with this
// main instead of libFuzzer's: `kda-replay-TARGET FILE...` runs
// LLVMFuzzerTestOneInput once per file (a directory: once per file in it)
// and prints one line each. The lit test fuzz/replay.test runs the seeds and
// every reproducer kept in test/fuzz/regressions/ through them, so the
// targets keep compiling and fixed crashes stay fixed, without libFuzzer.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>
#include <algorithm>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int runFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 1;
  }
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()),
                         bytes.size());
  std::printf("ran %s\n", path.c_str());
  return 0;
}

int main(int argc, char **argv) {
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    std::string path = argv[i];
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      std::vector<std::string> files;
      if (DIR *d = opendir(path.c_str())) {
        while (dirent *e = readdir(d))
          if (e->d_name[0] != '.')
            files.push_back(path + "/" + e->d_name);
        closedir(d);
      }
      std::sort(files.begin(), files.end());
      for (const std::string &f : files)
        failures += runFile(f);
    } else {
      failures += runFile(path);
    }
  }
  return failures ? 1 : 0;
}
