// A file's bytes, as tests compare outputs and prove inputs untouched.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mh::test {

// The whole file; empty when it cannot be opened (the comparison then fails).
inline std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace mh::test
