// fuzz_replay <target> <file or folder>...: runs committed inputs (the seed
// corpus, the regression inputs of fixed crashes) through a fuzz target in
// any build, without libFuzzer. Exits non-zero if the target is unknown; a
// finding crashes it as it would crash the fuzzer.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "targets.hpp"

namespace fs = std::filesystem;

namespace {

void replay(mh::fuzz::Target target, const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::printf("%s (%zu bytes)\n", file.c_str(), bytes.size());
  std::fflush(stdout);
  target(bytes);
}

}  // namespace

int main(int argc, char** argv) {
  mh::fuzz::Target target = argc > 1 ? mh::fuzz::find_target(argv[1]) : nullptr;
  if (target == nullptr) {
    std::fprintf(stderr, "usage: %s config|overrides|gpt2_tokenizer|indexed_dataset|plugin_descriptor PATH...\n", argv[0]);
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    if (!fs::exists(argv[i])) {
      std::fprintf(stderr, "%s: no such file or folder\n", argv[i]);
      return 2;
    }
    if (!fs::is_directory(argv[i])) {
      replay(target, argv[i]);
      continue;
    }
    std::vector<fs::path> files(fs::directory_iterator(argv[i]), fs::directory_iterator());
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) replay(target, file);
  }
  return 0;
}
