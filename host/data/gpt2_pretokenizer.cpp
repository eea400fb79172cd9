#include "data/gpt2_pretokenizer.hpp"

#include <megahost/error.hpp>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <string>

namespace mh::data {
namespace {

constexpr char kPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

}  // namespace

Gpt2Pretokenizer::Gpt2Pretokenizer() {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UCP makes \s and the classes Unicode-aware, as in the Python regex GPT-2 used.
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                        PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  require(code_ != nullptr,
          "gpt2 pre-tokenizer: PCRE2 rejected the pattern at offset " + std::to_string(offset) +
              ": " + pcre2_message(error),
          MH_INTERNAL);
}

Gpt2Pretokenizer::~Gpt2Pretokenizer() { pcre2_code_free(code_); }

std::vector<std::string_view> Gpt2Pretokenizer::split(std::string_view text) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
      pcre2_match_data_create_from_pattern(code_, nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::vector<std::string_view> pieces;
  // PCRE2 checks the whole subject for valid UTF-8 on every call unless told
  // not to: check once, on the first call, to stay linear in the text size.
  uint32_t options = 0;
  for (size_t start = 0; start < text.size(); options = PCRE2_NO_UTF_CHECK) {
    int rc = pcre2_match(code_, subject, text.size(), start, options, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // On a UTF error the start character is the offset of the bad byte.
    require(rc > 0, "gpt2 tokenizer: text is not valid UTF-8 at byte " +
                        std::to_string(pcre2_get_startchar(match.get())) + " (" +
                        pcre2_message(rc) +
                        "); convert the input to UTF-8 or use --tokenizer=byte");
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    pieces.push_back(text.substr(ovector[0], ovector[1] - ovector[0]));
    start = ovector[1];
  }
  return pieces;
}

}  // namespace mh::data
