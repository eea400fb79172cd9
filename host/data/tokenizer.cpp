#include "data/tokenizer.hpp"

#include "data/byte_tokenizer.hpp"
#include "data/gpt2_tokenizer.hpp"
#include "data/hf_tokenizer.hpp"
#include "data/sentencepiece_tokenizer.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <string_view>

namespace mh::data {

std::string decode_continuation(const Tokenizer& tokenizer, std::span<const int32_t> context,
                                std::span<const int32_t> ids) {
  // Enough tokens to begin at a whole character whose bytes are byte
  // fallback tokens (up to 4), and more to spare.
  constexpr size_t kContext = 8;
  context = context.subspan(context.size() - std::min(context.size(), kContext));
  std::vector<int32_t> all(context.begin(), context.end());
  all.insert(all.end(), ids.begin(), ids.end());
  const std::string before = tokenizer.decode(context), whole = tokenizer.decode(all);
  // A context that ends inside a character can decode otherwise once
  // continued; then the ids are decoded alone.
  return whole.starts_with(before) ? whole.substr(before.size()) : tokenizer.decode(ids);
}

size_t whole_characters(const std::string& text) {
  size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = uint8_t(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte
    const size_t length = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    if (length > back) n -= back;
    break;
  }
  constexpr std::string_view kReplacement = "\uFFFD";
  while (n >= kReplacement.size() && std::string_view(text).substr(0, n).ends_with(kReplacement)) n -= kReplacement.size();
  return n;
}

std::vector<std::string> token_texts(const Tokenizer& tokenizer, std::span<const int32_t> context,
                                     std::span<const int32_t> ids) {
  std::vector<std::string> texts;
  texts.reserve(ids.size());
  size_t given = 0;  // bytes of the text handed to earlier tokens
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string text = decode_continuation(tokenizer, context, ids.first(i + 1));
    const size_t upto = i + 1 == ids.size() ? text.size() : whole_characters(text);
    texts.push_back(upto > given ? text.substr(given, upto - given) : std::string());
    given = std::max(given, upto);
  }
  return texts;
}

std::unique_ptr<Tokenizer> make_tokenizer(std::string_view name, const TokenizerFiles& files) {
  if (name == "byte") return std::make_unique<ByteTokenizer>();
  if (name == "gpt2") return std::make_unique<Gpt2Tokenizer>(files.vocab_file, files.merges_file);
  if (name == "huggingface") {
    require(!files.tokenizer_file.empty(),
            "the huggingface tokenizer needs its tokenizer.json: give data.tokenizer_file "
            "(megahost_prepare: --tokenizer_file)");
    return std::make_unique<HfTokenizer>(files.tokenizer_file);
  }
  if (name == "sentencepiece") {
    require(!files.tokenizer_file.empty(),
            "the sentencepiece tokenizer needs its tokenizer.model: give data.tokenizer_file "
            "(megahost_prepare: --tokenizer_file)");
    return load_sentencepiece_model(files.tokenizer_file);
  }
  throw Error(MH_INVALID_ARGUMENT, "unknown tokenizer '" + std::string(name) +
                                       "'; choose \"byte\", \"gpt2\", \"huggingface\" or \"sentencepiece\"");
}

}  // namespace mh::data
