// Guards run before nlohmann::json parses text from outside: its parser
// recurses once per nesting level, so a file nested tens of thousands deep
// would overflow the stack instead of being refused.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mh {

// The deepest nesting of arrays and objects in `text`, brackets inside
// strings not counted.
int json_nesting_depth(std::string_view text);

// Parses `text` (read from `path`) after checking its depth; throws
// mh::Error naming the path and the parser's reason.
nlohmann::json parse_json_limited(std::string_view text, const std::string& path, int max_depth = 64);

}  // namespace mh
