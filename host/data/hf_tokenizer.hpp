// A Hugging Face tokenizer.json holding a byte-level BPE model, as GPT-2,
// Llama 3, Qwen 2 and most current models ship: the model's vocabulary and
// merges, the pre-tokenizer (ByteLevel, or a Split by a regex followed by
// ByteLevel without its own regex), and the added tokens, which are cut out
// of the text as themselves before pre-tokenisation, as `tokenizers` does.
// The end of document is the first of <|endoftext|>, <|end_of_text|>, </s>,
// <eos> that the file has.
//
// A BPE model with byte_fallback is SentencePiece's layout (Llama 2,
// Mistral; bpe_tokenizer.hpp): Llama 2's normalizer (Prepend "▁", Replace
// " " by "▁") without a pre-tokenizer, or a Metaspace pre-tokenizer
// (prepend_scheme first, always or never; split or not), and Llama 2's
// decoder (Replace "▁" by " ", ByteFallback, Fuse, Strip).
//
// Other normalizers, other models (WordPiece, Unigram) and the
// post-processor's template (e.g. a BOS) are not applied: a file whose
// normalizer or model would change the ids is refused, naming the key.
#pragma once

#include <string>

#include "data/bpe_tokenizer.hpp"

namespace mh::data {

class HfTokenizer final : public BpeTokenizer {
 public:
  // Throws mh::Error naming the file, the key and the value it cannot use.
  explicit HfTokenizer(const std::string& tokenizer_file);
};

// The parts of a tokenizer.json given as text; `path` is for messages.
BpeParts parse_tokenizer_json(const std::string& path, std::string_view json_text);

}  // namespace mh::data
