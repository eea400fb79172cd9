// A SentencePiece model (tokenizer.model, as Llama 2, Mistral and T5 ship
// it), run by the SentencePiece library itself, so that ids and text are
// the library's by construction: its normalizer, its dummy-prefix "▁", its
// BPE or unigram model, byte fallback (<0xNN> pieces for a character outside
// the vocabulary) and its decoder. encode() adds no BOS or EOS, as the other
// tokenizers add none; the end of document is the model's </s>.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace mh::data {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // The model serialized in `model` (a tokenizer.model's bytes); `source`
  // names it in messages. Throws mh::Error naming source when the bytes are
  // not a SentencePiece model or it has no end-of-sentence piece.
  SentencePieceTokenizer(std::string source, std::string_view model);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  // The library's text: byte pieces that are not valid UTF-8 (an incomplete
  // character at the end) decode as U+FFFD, control pieces (<s>, </s>) as
  // nothing.
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override;
  int32_t eod_id() const override { return eos_; }
  int32_t bos_id() const override { return bos_ < 0 ? eos_ : bos_; }

  // The piece of an id as the model lists it ("▁the", "<0x0A>", "<s>").
  const std::string& piece(int32_t id) const;
  // The model's unk and pad ids; -1 where it has none.
  int32_t unk_id() const { return unk_; }
  int32_t pad_id() const { return pad_; }

 private:
  std::string source_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  int32_t bos_, eos_, unk_, pad_;
};

// The model in the file `model_file`; throws mh::Error naming the file when
// it cannot be read or is no SentencePiece model.
std::unique_ptr<SentencePieceTokenizer> load_sentencepiece_model(const std::string& model_file);

}  // namespace mh::data
