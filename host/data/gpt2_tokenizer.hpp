// GPT-2's byte-level BPE, loaded from the usual vocab.json (symbol -> id) and
// merges.txt (one merge "a b" per line, best first), with GPT-2's
// pre-tokenizer pattern. "<|endoftext|>" must be in the vocabulary: it is the
// end of document. As in GPT-2's own encoder it is not recognised inside
// text: encode treats it as ordinary characters.
#pragma once

#include <string>

#include "data/bpe_tokenizer.hpp"

namespace mh::data {

class Gpt2Tokenizer final : public BpeTokenizer {
 public:
  // Empty paths take GPT-2's own files, shipped with megahost (data/gpt2/).
  Gpt2Tokenizer(const std::string& vocab_file, const std::string& merges_file);
};

// The folder of the shipped vocab.json and merges.txt: share_dir()/data/gpt2.
std::string shipped_gpt2_folder();

}  // namespace mh::data
