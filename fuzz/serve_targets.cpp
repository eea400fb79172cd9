// Serving fuzzing: a chat template (a model's tokenizer_config.json is
// outside input) parsed and rendered, and a request body as the HTTP
// server reads it into a completion or a chat request, and into the
// tokenizer routes' answers.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "data/tokenizer.hpp"
#include "data/chat_template.hpp"
#include "serve/openai_api.hpp"
#include "targets.hpp"

namespace mh::fuzz {
namespace {

const nlohmann::json& messages() {
  static const nlohmann::json m = nlohmann::json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": " Hi! "},
    {"role": "user", "content": "Again?"}])");
  return m;
}

}  // namespace

void chat_template(Input input) {
  const std::string source(reinterpret_cast<const char*>(input.data()), input.size());
  try {
    const data::ChatTemplate t(source, "<s>", "</s>");
    t.render({{"messages", messages()}, {"add_generation_prompt", true}});
  } catch (const data::ChatTemplateError&) {
  }
}

void openai_request(Input input) {
  static const auto tokenizer = data::make_tokenizer("byte", {});
  static const data::ChatTemplate chat(
      "{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] | trim }}{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}",
      "", "");
  const serve::ModelText model{tokenizer.get(), &chat, tokenizer->eod_id()};
  const serve::ApiLimits limits{64, 16, 4};
  const nlohmann::json body =
      nlohmann::json::parse(std::string_view(reinterpret_cast<const char*>(input.data()), input.size()), nullptr,
                            false);
  if (body.is_discarded()) return;
  for (const bool is_chat : {false, true}) {
    try {
      const serve::Ask ask = is_chat ? serve::read_chat(body, model, limits) : serve::read_completion(body, model, limits);
      if (ask.choices() > limits.max_batch || ask.max_tokens > limits.max_new_tokens) __builtin_trap();
    } catch (const serve::ApiError&) {
    }
  }
  try {
    serve::tokenize(body, model, limits);
  } catch (const serve::ApiError&) {
  }
  try {
    serve::dump(serve::detokenize(body, model));
  } catch (const serve::ApiError&) {
  }
}

}  // namespace mh::fuzz
