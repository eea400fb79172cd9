// Files a fuzz target hands to code that reads paths: one folder per process
// under the temporary directory, rewritten on every input and removed at exit.
#pragma once

#include <string>
#include <string_view>

#include "targets.hpp"

namespace mh::fuzz {

// Writes `bytes` to `name` in this process's scratch folder; returns its path.
std::string scratch_file(const std::string& name, std::string_view bytes);

inline std::string_view as_text(Input input) {
  return {reinterpret_cast<const char*>(input.data()), input.size()};
}

}  // namespace mh::fuzz
