#include "data/tokenizer.hpp"

#include "data/byte_tokenizer.hpp"
#include "data/gpt2_tokenizer.hpp"
#include "data/hf_tokenizer.hpp"
#include "data/sentencepiece_tokenizer.hpp"

#include <megahost/error.hpp>

#include <algorithm>

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
