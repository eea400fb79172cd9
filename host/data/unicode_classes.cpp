#include "data/unicode_classes.hpp"

#include <cstdio>

namespace mh::data {
namespace {
#include "data/unicode_classes.inc"
}  // namespace

std::span<const CodePointRange> code_points(CharClass c) {
  switch (c) {
    case CharClass::kLetter: return kLetters;
    case CharClass::kNumber: return kNumbers;
    case CharClass::kWhitespace: return kWhitespace;
  }
  return {};
}

std::string pcre2_class_body(CharClass c) {
  std::string body;
  char buffer[32];
  for (const CodePointRange& r : code_points(c)) {
    const auto first = static_cast<unsigned>(r.first), last = static_cast<unsigned>(r.last);
    if (first == last) {
      std::snprintf(buffer, sizeof buffer, "\\x{%X}", first);
    } else {
      std::snprintf(buffer, sizeof buffer, "\\x{%X}-\\x{%X}", first, last);
    }
    body += buffer;
  }
  return body;
}

}  // namespace mh::data
