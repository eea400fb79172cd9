#include "data/pretokenizer.hpp"

#include "data/unicode_classes.hpp"

#include <megahost/error.hpp>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <optional>
#include <string>

namespace mh::data {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

[[noreturn]] void unsupported(std::string_view pattern, const std::string& what) {
  throw Error(MH_INVALID_ARGUMENT,
              "pre-tokenizer pattern '" + std::string(pattern) + "': " + what +
                  "; megahost supports \\p{L}, \\p{N}, \\s and their negations as Unicode classes");
}

// A class escape at pattern[at] ('\' already seen at at - 1): which class,
// whether negated, and how many characters after the '\' it spans.
struct ClassEscape {
  CharClass c;
  bool negated;
  size_t length;
};

std::optional<ClassEscape> class_escape(std::string_view pattern, size_t at) {
  const char kind = pattern[at];
  if (kind == 's' || kind == 'S') return ClassEscape{CharClass::kWhitespace, kind == 'S', 1};
  if (kind != 'p' && kind != 'P') return std::nullopt;
  bool negated = kind == 'P';
  std::string_view name;
  size_t length = 2;
  if (at + 1 < pattern.size() && pattern[at + 1] == '{') {
    size_t close = pattern.find('}', at + 2);
    if (close == std::string_view::npos) unsupported(pattern, "unterminated \\p{");
    name = pattern.substr(at + 2, close - at - 2);
    length = close - at + 1;
    if (name.starts_with('^')) negated = !negated, name.remove_prefix(1);
  } else if (at + 1 < pattern.size()) {
    name = pattern.substr(at + 1, 1);
  }
  if (name == "L" || name == "Letter") return ClassEscape{CharClass::kLetter, negated, length};
  if (name == "N" || name == "Number") return ClassEscape{CharClass::kNumber, negated, length};
  unsupported(pattern, "the Unicode property \\" + std::string(pattern.substr(at, length)) +
                           " is not supported");
}

}  // namespace

std::string expand_unicode_classes(std::string_view pattern) {
  std::string out;
  bool in_brackets = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '[' && !in_brackets) {
      in_brackets = true;
      out += c;
      // A ']' first in a bracket class (after an optional '^') is literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == '[' && in_brackets && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      unsupported(pattern, "POSIX classes ([:alpha:], ...) depend on the regex library's tables");
    }
    if (c == ']' && in_brackets) in_brackets = false;
    if (c != '\\' || i + 1 == pattern.size()) {
      out += c;
      continue;
    }
    const char next = pattern[i + 1];
    if (std::string_view("dDwWbBhHvVRX").find(next) != std::string_view::npos) {
      unsupported(pattern, std::string("\\") + next + " depends on the regex library's Unicode tables");
    }
    std::optional<ClassEscape> escape = class_escape(pattern, i + 1);
    if (!escape) {
      out.append(pattern.substr(i, 2));
      ++i;
      continue;
    }
    const std::string body = pcre2_class_body(escape->c);
    if (in_brackets && escape->negated) {
      unsupported(pattern, "a negated class inside [...] cannot be spelled out");
    }
    out += in_brackets ? body : (escape->negated ? "[^" : "[") + body + "]";
    i += escape->length;
  }
  return out;
}

Pretokenizer::Pretokenizer(std::string_view pattern) {
  const std::string expanded = expand_unicode_classes(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UTF without UCP: nothing left in the pattern consults PCRE2's Unicode
  // tables except caseless matching in (?i:...), which only the ASCII
  // contractions of current patterns use.
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expanded.data()), expanded.size(), PCRE2_UTF,
                        &error, &offset, nullptr);
  require(code_ != nullptr, "pre-tokenizer pattern '" + std::string(pattern) +
                                "' does not compile: " + pcre2_message(error));
  // The JIT makes the long spelled-out classes cheap; without it (an
  // unsupported CPU) the interpreter gives the same pieces, slower.
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

Pretokenizer::~Pretokenizer() { pcre2_code_free(code_); }

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
      pcre2_match_data_create_from_pattern(code_, nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::vector<std::string_view> pieces;
  // PCRE2 checks the whole subject for valid UTF-8 on every call unless told
  // not to: check once, on the first call, to stay linear in the text size.
  uint32_t options = 0;
  size_t done = 0;  // text before this is in pieces
  for (size_t start = 0; start < text.size(); options = PCRE2_NO_UTF_CHECK) {
    int rc = pcre2_match(code_, subject, text.size(), start, options, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // On a UTF error the start character is the offset of the bad byte.
    const bool utf_error = rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21;
    require(!utf_error, "text is not valid UTF-8 at byte " + std::to_string(pcre2_get_startchar(match.get())) +
                            " (" + pcre2_message(rc) + "); convert the input to UTF-8 or use --tokenizer=byte");
    // Other failures are the pattern's: backtracking or stack past PCRE2's limits.
    require(rc > 0, "the pre-tokenizer pattern failed on this text at byte " + std::to_string(start) + ": " +
                        pcre2_message(rc) + "; the pattern backtracks too much for it");
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    if (ovector[0] == ovector[1]) {
      // An empty match cuts nothing: step over one character.
      start = ovector[1] + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
      continue;
    }
    if (ovector[0] > done) pieces.push_back(text.substr(done, ovector[0] - done));
    pieces.push_back(text.substr(ovector[0], ovector[1] - ovector[0]));
    done = start = ovector[1];
  }
  if (done < text.size()) pieces.push_back(text.substr(done));
  return pieces;
}

}  // namespace mh::data
