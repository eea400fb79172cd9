// Files' bytes, as tests compare outputs and prove inputs untouched.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
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

// Every regular file below `dir`, by path, to its bytes.
inline std::map<std::string, std::string> folder_bytes(const std::filesystem::path& dir) {
  std::map<std::string, std::string> all;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) all[e.path().string()] = file_bytes(e.path());
  return all;
}

}  // namespace mh::test
