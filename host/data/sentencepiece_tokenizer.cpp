#include "data/sentencepiece_tokenizer.hpp"

#include <megahost/error.hpp>
#include <sentencepiece_processor.h>

#include <exception>

#include "data/regular_file.hpp"

namespace mh::data {

SentencePieceTokenizer::SentencePieceTokenizer(std::string source, std::string_view model)
    : source_(std::move(source)), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  sentencepiece::util::Status status;
  // The library checks a model's framing, not every piece: its trie builder
  // throws on pieces it cannot index (an empty one), a throw no caller of
  // ours expects.
  try {
    status = processor_->LoadFromSerializedProto(model);
  } catch (const std::exception& e) {
    status = sentencepiece::util::Status(sentencepiece::util::StatusCode::kInvalidArgument, e.what());
  }
  require(status.ok(), "tokenizer file " + source_ + ": not a SentencePiece model (" + status.ToString() +
                           "); data.tokenizer = \"sentencepiece\" reads a tokenizer.model");
  require(processor_->GetPieceSize() > 0, "tokenizer file " + source_ + ": the SentencePiece model has no pieces");
  bos_ = processor_->bos_id();
  eos_ = processor_->eos_id();
  unk_ = processor_->unk_id();
  pad_ = processor_->pad_id();
  require(eos_ >= 0 && eos_ < vocab_size(),
          "tokenizer file " + source_ + ": the SentencePiece model has no end-of-sentence piece (eos_id " +
              std::to_string(eos_) + ") to end a document; train it with an eos_id");
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

int32_t SentencePieceTokenizer::vocab_size() const { return processor_->GetPieceSize(); }

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  require(status.ok(), "tokenizer file " + source_ + ": cannot encode the text: " + status.ToString());
  return {ids.begin(), ids.end()};
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids) const {
  for (int32_t id : ids) {
    require(id >= 0 && id < vocab_size(), "cannot decode token id " + std::to_string(id) + ": the vocabulary of " +
                                              source_ + " has ids 0.." + std::to_string(vocab_size() - 1));
  }
  std::string text;
  const auto status = processor_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  require(status.ok(), "tokenizer file " + source_ + ": cannot decode: " + status.ToString());
  return text;
}

const std::string& SentencePieceTokenizer::piece(int32_t id) const {
  require(id >= 0 && id < vocab_size(), "token id " + std::to_string(id) + " is outside the vocabulary of " + source_);
  return processor_->IdToPiece(id);
}

std::unique_ptr<SentencePieceTokenizer> load_sentencepiece_model(const std::string& model_file) {
  return std::make_unique<SentencePieceTokenizer>(
      model_file, read_regular_file(model_file, "the sentencepiece tokenizer reads a tokenizer.model; pass its path "
                                                "with --tokenizer_file or data.tokenizer_file"));
}

}  // namespace mh::data
