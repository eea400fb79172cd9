// The requests of a [generate] section: `prompt`, or the prompts of
// `prompts_file`: one per non-empty line of a text file, or, in a .jsonl
// file, one JSON object per line whose "prompt" is a string (for prompts
// that span lines). Errors name the file, the line and the fix.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mh::generate {

// Exactly one of prompt and file is non-empty (check_generate says so
// otherwise); throws mh::Error for an unreadable or malformed file.
std::vector<std::string> read_prompts(const std::string& prompt, const std::string& file);
// The prompts of JSON-lines `text` read from `path`.
std::vector<std::string> parse_jsonl_prompts(std::string_view text, const std::string& path);

}  // namespace mh::generate
