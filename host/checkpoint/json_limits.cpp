#include "checkpoint/json_limits.hpp"

#include <megahost/error.hpp>

#include <algorithm>

namespace mh {

int json_nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}') --depth;
  }
  return deepest;
}

nlohmann::json parse_json_limited(std::string_view text, const std::string& path, int max_depth) {
  const int depth = json_nesting_depth(text);
  require(depth <= max_depth, path + ": JSON nested " + std::to_string(depth) + " levels deep (at most " +
                                  std::to_string(max_depth) + " allowed); the file is not what it should be");
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw Error(MH_INVALID_ARGUMENT, path + ": not valid JSON: " + e.what());
  }
}

}  // namespace mh
