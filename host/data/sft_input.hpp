// The lines of a supervised fine-tuning .jsonl file, as megahost_prepare
// --format=sft reads them: each line one JSON object, either
//   {"prompt": "...", "completion": "..."}   (or "input" and "output")
//       the prompt is context, the completion is trained on; the two texts
//       follow each other as they are, so a separator belongs at the end of
//       the prompt
//   {"messages": [{"role": "user", "content": "..."}, ...]}
//       rendered with the model's chat template (chat_template.hpp, the
//       renderer the server uses); the text each assistant message adds is
//       trained on, the rest is context
// A line becomes segments of text, each trained on or not; prepare
// tokenizes their whole text at once (tokenize_segments).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "data/chat_template.hpp"
#include "data/tokenizer.hpp"

namespace mh::data {

struct SftSegment {
  std::string text;
  bool trained = false;
};

// The segments of one line, in order, empty ones left out. Throws mh::Error
// naming the key and the fix when the line is not such an object (malformed
// JSON, a missing field, a wrong type, messages without a chat template or
// without an assistant message, a template whose renders do not extend one
// another turn by turn); the caller adds the file and line.
std::vector<SftSegment> read_sft_line(std::string_view line, const ChatTemplate* chat);

struct SftTokens {
  std::vector<int32_t> ids;
  std::vector<int32_t> mask;  // one per id, 1: trained on (the loss mask dataset's values)
};

// The segments' whole text tokenized at once, so the ids are what
// transformers gives for it (tokenizer(prompt + completion),
// apply_chat_template(tokenize=True)): tokenized one by one, each
// SentencePiece segment would begin with its own "▁" and byte-level BPE
// would split words and spaces at the boundaries. A token is trained on when
// any of its text lies in a trained segment, as transformers' assistant
// masks take the tokens holding a turn's first and last characters: a token
// straddling a boundary ("A: " + "4" gives "▁4") is what the model must emit
// to write the trained text, so it is trained on. Token spans are measured
// on the decoded text (each token from where decoding the ids before it
// ends; one that ends inside a character spans the character it helps to
// build), boundaries as far as their prefix decodes, so normalizers that
// change the text (NFKC, whitespace) keep them in step.
SftTokens tokenize_segments(const std::vector<SftSegment>& segments, const Tokenizer& tokenizer);

}  // namespace mh::data
