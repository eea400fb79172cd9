// Generation fuzzing: a .jsonl prompts file, read line by line as JSON.
#include <megahost/error.hpp>

#include <string_view>

#include "generate/prompts.hpp"
#include "targets.hpp"

namespace mh::fuzz {

void prompts_jsonl(Input input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  try {
    generate::parse_jsonl_prompts(text, "prompts.jsonl");
  } catch (const Error&) {
  }
}

}  // namespace mh::fuzz
