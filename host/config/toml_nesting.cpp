#include "config/toml_nesting.hpp"

namespace mh {
namespace {

// Scans one character at a time, tracking the position for the report.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  bool done() const { return i_ >= text_.size(); }
  char peek() const { return text_[i_]; }
  bool starts_with(std::string_view s) const { return text_.substr(i_, s.size()) == s; }
  TomlPosition position() const { return at_; }

  void advance() {
    if (text_[i_] == '\n') {
      ++at_.line;
      at_.column = 1;
    } else {
      ++at_.column;
    }
    ++i_;
  }
  void advance(size_t n) {
    for (size_t k = 0; k < n && !done(); ++k) advance();
  }

  // Past a string that opens here with `quote` (", ', """ or '''); only
  // basic strings (") have escapes. Unterminated strings end the text; the
  // parser reports them.
  void skip_string(std::string_view quote) {
    const bool escapes = quote[0] == '"';
    advance(quote.size());
    while (!done() && !starts_with(quote)) {
      if (quote.size() == 1 && peek() == '\n') return;
      if (escapes && peek() == '\\') advance();
      advance();
    }
    advance(quote.size());
  }

  void skip_comment() {
    while (!done() && peek() != '\n') advance();
  }

 private:
  std::string_view text_;
  size_t i_ = 0;
  TomlPosition at_;
};

bool ends_segment(char c) {
  return c == '=' || c == ',' || c == '\n' || c == '[' || c == ']' || c == '{' || c == '}';
}

}  // namespace

std::optional<TomlPosition> first_nesting_beyond(std::string_view toml, size_t limit) {
  Scanner s(toml);
  size_t brackets = 0, dots = 0;  // dots: in the key or value being read
  while (!s.done()) {
    const char c = s.peek();
    if (s.starts_with("\"\"\"") || s.starts_with("'''")) {
      s.skip_string(s.starts_with("'''") ? "'''" : "\"\"\"");
      continue;
    }
    if (c == '"' || c == '\'') {
      s.skip_string(std::string_view(&c, 1));
      continue;
    }
    if (c == '#') {
      s.skip_comment();
      continue;
    }
    if (ends_segment(c)) dots = 0;
    if (c == '[' || c == '{') ++brackets;
    if ((c == ']' || c == '}') && brackets > 0) --brackets;
    if (c == '.') ++dots;
    if (brackets + dots > limit) return s.position();
    s.advance();
  }
  return std::nullopt;
}

}  // namespace mh
