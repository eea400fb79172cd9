// How deeply a TOML text nests, found without parsing it. toml++ parses
// nested tables and dotted keys recursively, so tens of thousands of levels
// overflow the stack before it can report anything; the host measures first.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace mh {

// No run config nests deeper than a few levels (parallel.tensor.size); this
// bound leaves room for any hand-written TOML and stays far below the stack.
constexpr size_t kMaxTomlNesting = 100;

struct TomlPosition {
  size_t line = 1, column = 1;
};

// Where the text first nests deeper than `limit` levels, counting unclosed
// brackets and braces plus the parts of a dotted key; nullopt if it never
// does. Strings and comments are skipped, not counted.
std::optional<TomlPosition> first_nesting_beyond(std::string_view toml, size_t limit);

}  // namespace mh
