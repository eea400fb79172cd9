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
// A line becomes segments of text, each trained on or not, which prepare
// tokenizes one by one so the mask falls exactly on their boundaries.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "data/chat_template.hpp"

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

}  // namespace mh::data
