// The character classes that regex pre-tokenizers use (\p{L}, \p{N}, \s),
// as Hugging Face `tokenizers` defines them for every code point: a table
// generated from `tokenizers` itself (scripts/gen_unicode_classes.py), so
// token ids depend neither on the build machine's PCRE2 nor its Unicode
// version.
#pragma once

#include <span>
#include <string>

namespace mh::data {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

enum class CharClass { kLetter, kNumber, kWhitespace };

// Ascending, disjoint ranges of the class's code points.
std::span<const CodePointRange> code_points(CharClass c);

// The ranges as the body of a PCRE2 bracket class: \x{41}-\x{5A}\x{61}...
std::string pcre2_class_body(CharClass c);

}  // namespace mh::data
