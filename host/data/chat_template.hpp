// A model's chat template (tokenizer_config.json's "chat_template"),
// rendered as transformers' apply_chat_template renders it, by an
// interpreter of the subset of Jinja that chat templates use (no C++
// Jinja library is packaged): text, {{ expressions }}, {% if/elif/else %},
// {% for x in xs %} with loop.index, index0, first, last, length and
// revindex, {% set %}, {# comments #}, whitespace control ({%- -%},
// {{- -}}); expressions with literals, lists and dicts, attribute and item
// access, slices, `~` and `+`, arithmetic, comparisons, `in`, `not in`,
// `and`/`or`/`not`, `is defined`/`none`/`string`/..., inline if/else,
// filters (trim, length, upper, lower, tojson, first, last, default,
// string, join, capitalize, title, replace), the methods strip, split,
// startswith, endswith, upper, lower, items, keys, values, get, and
// raise_exception(); case changes touch ASCII letters only. docs/serve.md
// lists it. The parser reads outside
// input (a model's files): any malformed template throws
// ChatTemplateError naming the position, never crashes.
#pragma once

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace mh::data {

struct ChatTemplateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ChatTemplate {
 public:
  // Parses `source`; bos_token and eos_token are defined for it.
  ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;

  // The template of a tokenizer_config.json ("chat_template": a string, or
  // a list of {name, template} whose "default" is taken), or of any other
  // file read whole as the template.
  static ChatTemplate from_file(const std::filesystem::path& file);

  // Renders with `context`'s keys as variables (messages,
  // add_generation_prompt, ...) beside bos_token and eos_token.
  std::string render(const nlohmann::json& context) const;

 private:
  struct Program;
  std::unique_ptr<Program> program_;
  nlohmann::json tokens_;
};

}  // namespace mh::data
