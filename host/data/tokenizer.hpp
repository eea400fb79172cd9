// The tokenizer interface the data layer and the engine share: text to token
// ids and back, plus the two numbers a model needs from it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mh::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Throws mh::Error for an id outside [0, vocab_size()).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // Ids are 0 .. vocab_size() - 1; the model may pad its embedding beyond it.
  virtual int32_t vocab_size() const = 0;
  // End of document: appended after every document so that the concatenated
  // token stream still shows where one text ends and the next begins.
  virtual int32_t eod_id() const = 0;
  // The token a model made with this tokenizer begins with (a checkpoint's
  // bos_token_id): the model's own where it has one (SentencePiece's <s>),
  // else the end of document, which also separates documents.
  virtual int32_t bos_id() const { return eod_id(); }
};

// The text `ids` add after `context` (a prompt): decoded after the context's
// last tokens, less the text of those. A SentencePiece "▁" is a space only
// after other text, so a completion decoded alone would lose its first
// space; byte-level tokenizers give their plain decode.
std::string decode_continuation(const Tokenizer& tokenizer, std::span<const int32_t> context,
                                std::span<const int32_t> ids);

// The length of text without a trailing incomplete UTF-8 character and
// without the U+FFFD characters that end it: the part of a decoded prefix of
// ids that later ids cannot change (a byte-level token may end inside a
// character; SentencePiece's byte fallback decodes the bytes of a character
// not yet complete as U+FFFD).
size_t whole_characters(const std::string& text);

// Each token's text in a completion that continues `context`: the text
// decoding through it adds to decoding up to it (incremental detokenization,
// as vLLM and llama.cpp show logprobs' tokens), so a SentencePiece "▁the" is
// " the", and the texts join to decode_continuation(context, ids): a
// logprob's text_offset then points into the completion text. A token that
// ends inside a character (a byte fallback or byte-level token) has "" and
// the character goes to the token that completes it; the last token takes
// whatever is left.
std::vector<std::string> token_texts(const Tokenizer& tokenizer, std::span<const int32_t> context,
                                     std::span<const int32_t> ids);

// The files a tokenizer is loaded from; empty where not given.
struct TokenizerFiles {
  std::string vocab_file;      // gpt2: vocab.json (empty: the shipped GPT-2 one)
  std::string merges_file;     // gpt2: merges.txt (empty: the shipped GPT-2 one)
  std::string tokenizer_file;  // huggingface: tokenizer.json; sentencepiece: tokenizer.model (required)
};

// name is "byte" (no files), "gpt2", "huggingface" or "sentencepiece".
std::unique_ptr<Tokenizer> make_tokenizer(std::string_view name, const TokenizerFiles& files);

}  // namespace mh::data
