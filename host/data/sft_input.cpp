#include "data/sft_input.hpp"

#include <megahost/error.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace mh::data {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& what) { throw Error(MH_INVALID_ARGUMENT, what); }

const std::string& text_field(const json& line, const char* key, const char* pair) {
  if (!line.contains(key)) bad(std::string("key '") + key + "' is missing; a line with '" + pair + "' needs it too");
  const json& value = line[key];
  if (!value.is_string())
    bad(std::string("key '") + key + "' is " + value.type_name() + ", not a string; give the text as a JSON string");
  return value.get_ref<const std::string&>();
}

void check_messages(const json& messages) {
  if (!messages.is_array() || messages.empty())
    bad("key 'messages' must be a non-empty list of {\"role\", \"content\"} objects");
  bool assistant = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string at = "key 'messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(at + "' is " + m.type_name() + ", not a {\"role\", \"content\"} object");
    if (!m.contains("role") || !m["role"].is_string()) bad(at + ".role' must be a string (user, assistant, ...)");
    if (!m.contains("content") || !m["content"].is_string())
      bad(at + ".content' must be a string (content parts and tool calls are not read)");
    assistant = assistant || m["role"] == "assistant";
  }
  if (!assistant) bad("key 'messages' holds no assistant message, so nothing would be trained on; add its reply");
}

std::string render(const ChatTemplate& chat, const json& messages, size_t count, bool generation_prompt) {
  const json some(messages.begin(), messages.begin() + std::ptrdiff_t(count));
  try {
    return chat.render({{"messages", some}, {"add_generation_prompt", generation_prompt}});
  } catch (const ChatTemplateError& e) {
    bad(std::string("the chat template fails on key 'messages': ") + e.what());
  }
}

// Each assistant message i adds render(messages[..i]) minus the rendering
// of the messages before it with the generation prompt: its reply, and the
// template's end of turn. That holds when every rendering extends the
// previous one, which is checked.
std::vector<SftSegment> chat_segments(const json& messages, const ChatTemplate& chat) {
  check_messages(messages);
  const std::string whole = render(chat, messages, messages.size(), false);
  std::vector<SftSegment> segments;
  size_t done = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i]["role"] != "assistant") continue;
    const std::string before = render(chat, messages, i, true), upto = render(chat, messages, i + 1, false);
    if (before.size() < done || !upto.starts_with(before) || !whole.starts_with(upto))
      bad("key 'messages[" + std::to_string(i) + "]': the chat template renders the conversation up to this "
          "assistant message differently once later messages follow (e.g. it drops reasoning of past turns), so "
          "its turns cannot be masked one by one; end the conversation at this message or use another template");
    segments.push_back({before.substr(done), false});
    segments.push_back({upto.substr(before.size()), true});
    done = upto.size();
  }
  segments.push_back({whole.substr(done), false});
  return segments;
}

}  // namespace

std::vector<SftSegment> read_sft_line(std::string_view line, const ChatTemplate* chat) {
  json object;
  try {
    object = json::parse(line);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number past double
    bad(std::string("not a JSON object (") + e.what() + "); a .jsonl file holds one object per line");
  }
  if (!object.is_object()) bad(std::string("a ") + object.type_name() + ", not a JSON object");
  std::vector<SftSegment> segments;
  if (object.contains("messages")) {
    if (chat == nullptr)
      bad("key 'messages' needs the model's chat template: give --chat_template (a tokenizer_config.json), or "
          "a --tokenizer_file with a tokenizer_config.json beside it");
    segments = chat_segments(object["messages"], *chat);
  } else if (object.contains("prompt") || object.contains("completion")) {
    segments = {{text_field(object, "prompt", "completion"), false}, {text_field(object, "completion", "prompt"), true}};
  } else if (object.contains("input") || object.contains("output")) {
    segments = {{text_field(object, "input", "output"), false}, {text_field(object, "output", "input"), true}};
  } else {
    bad("the object has none of the keys 'messages', 'prompt' and 'completion', 'input' and 'output'; an SFT line "
        "holds a chat or a prompt with its completion");
  }
  std::erase_if(segments, [](const SftSegment& s) { return s.text.empty(); });
  return segments;
}

SftTokens tokenize_segments(const std::vector<SftSegment>& segments, const Tokenizer& tokenizer) {
  std::string text;
  for (const SftSegment& s : segments) text += s.text;
  SftTokens t{tokenizer.encode(text), {}};
  const std::span<const int32_t> ids(t.ids);
  t.mask.assign(ids.size(), 0);
  const std::string decoded = tokenizer.decode(ids);
  const bool same = decoded == text;
  // Where the text up to byte b ends in the decoded text.
  const auto position = [&](size_t b) {
    if (b == text.size()) return decoded.size();
    if (same) return b;
    return tokenizer.decode(tokenizer.encode(std::string_view(text).substr(0, b))).size();
  };
  // Where token j begins: the decoded text of the ids before it, less a
  // character they leave unfinished. Never decreasing in j.
  const auto start = [&](size_t j) { return whole_characters(tokenizer.decode(ids.first(j))); };
  // The first token whose start is >= p (binary search on start).
  const auto first_from = [&](size_t p) {
    size_t lo = 0, hi = ids.size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (start(mid) >= p) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  };
  size_t at = 0;  // bytes of text before the segment
  for (const SftSegment& s : segments) {
    const size_t a = at;
    at += s.text.size();
    if (!s.trained || ids.empty()) continue;
    const size_t begin = position(a), end = position(at);
    if (end <= begin) continue;  // the tokenizer's normalizer removed the segment's text
    // The token holding the segment's first byte: the last one starting at
    // or before it, taken with the tokens before it that start where it does
    // (they end inside the character it completes).
    const size_t holder = first_from(begin + 1) - 1;
    const size_t first = first_from(start(holder)), last = first_from(end);
    std::fill(t.mask.begin() + std::ptrdiff_t(first), t.mask.begin() + std::ptrdiff_t(std::max(first, last)), 1);
  }
  return t;
}

}  // namespace mh::data
