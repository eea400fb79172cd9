#include "scratch.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace mh::fuzz {
namespace {

namespace fs = std::filesystem;

struct ScratchDir {
  ScratchDir() : path(fs::temp_directory_path() / ("megahost_fuzz_" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  fs::path path;
};

}  // namespace

std::string scratch_file(const std::string& name, std::string_view bytes) {
  static const ScratchDir dir;
  std::string path = (dir.path / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
  return path;
}

}  // namespace mh::fuzz
