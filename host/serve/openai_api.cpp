#include "serve/openai_api.hpp"

#include <algorithm>
#include <random>

namespace mh::serve {
namespace {

using nlohmann::json;

std::string type_of(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// A field of the wrong type is refused naming it; null is absent, as OpenAI's clients send it.
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param);
}

bool get_bool(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) bad(name, std::string("'") + name + "' must be true or false");
  return v->get<bool>();
}

int64_t get_int(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) bad(name, std::string("'") + name + "' must be an integer");
  const auto x = v->get<int64_t>();
  if (x < lo || x > hi)
    bad(name, std::string("'") + name + "' is " + std::to_string(x) + "; it must be in [" + std::to_string(lo) +
                  ", " + std::to_string(hi) + "]");
  return x;
}

double get_number(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number()) bad(name, std::string("'") + name + "' must be a number");
  const auto x = v->get<double>();
  if (!(x >= lo && x <= hi))
    bad(name, std::string("'") + name + "' is " + v->dump() + "; it must be in [" + json(lo).dump() + ", " +
                  json(hi).dump() + "]");
  return x;
}

std::vector<std::string> get_stop(const json& body) {
  const json* v = field(body, "stop");
  std::vector<std::string> out;
  if (v == nullptr) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string()) bad("stop", "'stop' must be a string or a list of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    bad("stop", "'stop' must be a string or a list of strings");
  }
  std::erase(out, std::string());
  return out;
}

bool token_ids(const json& v) {
  return v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number_integer(); });
}

std::vector<int32_t> checked_ids(const json& v, int32_t vocab, const char* param = "prompt") {
  std::vector<int32_t> ids;
  for (const json& x : v) {
    const auto id = x.get<int64_t>();
    if (id < 0 || id >= vocab)
      bad(param, "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    ids.push_back(int32_t(id));
  }
  return ids;
}

// A string, a list of strings, a list of token ids or a list of such lists.
std::vector<std::vector<int32_t>> read_prompts(const json& body, const data::Tokenizer& tokenizer) {
  const json* v = field(body, "prompt");
  if (v == nullptr) bad("prompt", "'prompt' is required");
  std::vector<std::vector<int32_t>> out;
  if (v->is_string()) {
    out.push_back(tokenizer.encode(v->get<std::string>()));
  } else if (token_ids(*v)) {
    out.push_back(checked_ids(*v, tokenizer.vocab_size()));
  } else if (v->is_array() && !v->empty()) {
    for (const json& p : *v) {
      if (p.is_string()) out.push_back(tokenizer.encode(p.get<std::string>()));
      else if (token_ids(p)) out.push_back(checked_ids(p, tokenizer.vocab_size()));
      else bad("prompt", "'prompt' must be a string, a list of strings, a list of token ids or a list of such lists");
    }
  } else {
    bad("prompt", "'prompt' must be a string, a list of strings, a list of token ids or a list of such lists");
  }
  for (const auto& p : out)
    if (p.empty()) bad("prompt", "a prompt is empty: give it at least one token");
  return out;
}

std::string content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (!content.is_array()) bad("messages", "a message's 'content' must be a string or a list of text parts");
  for (const json& part : content) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      bad("messages", "a content part must be {\"type\": \"text\", \"text\": \"...\"}; only text is served");
    text += part["text"].get<std::string>();
  }
  return text;
}

json read_messages(const json& body) {
  const json* v = field(body, "messages");
  if (v == nullptr || !v->is_array() || v->empty()) bad("messages", "'messages' must be a non-empty list of messages");
  json out = json::array();
  for (const json& m : *v) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      bad("messages", "each message must be an object with a string 'role'");
    json message = {{"role", m["role"]}, {"content", m.contains("content") && !m["content"].is_null()
                                                         ? content_text(m["content"])
                                                         : std::string()}};
    out.push_back(std::move(message));
  }
  return out;
}

// The checks and defaults both endpoints share; prompts are set.
void read_common(const json& body, Ask& ask, const ApiLimits& limits) {
  ask.n = get_int(body, "n", 1, 1, limits.max_batch);
  if (ask.choices() > limits.max_batch)
    bad("n", std::to_string(ask.prompts.size()) + " prompt(s) x n = " + std::to_string(ask.n) + " choices exceed " +
                 "serve.max_batch = " + std::to_string(limits.max_batch) + ", the sequences served at once");
  size_t longest = 0;
  for (const auto& p : ask.prompts) longest = std::max(longest, p.size());
  if (int64_t(longest) > limits.context)
    bad("prompt", "the prompt is " + std::to_string(longest) + " tokens, longer than the model's context of " +
                      std::to_string(limits.context) + " tokens; shorten it");
  const int64_t room = limits.context - int64_t(longest);
  const char* name = body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  ask.max_tokens = get_int(body, name, std::min(limits.max_new_tokens, room), 0, limits.max_new_tokens);
  if (ask.max_tokens > room)
    bad(name, "the prompt's " + std::to_string(longest) + " tokens plus " + name + " = " +
                  std::to_string(ask.max_tokens) + " exceed the model's context of " + std::to_string(limits.context) +
                  " tokens; lower " + name);
  ask.sampling.temperature = get_number(body, "temperature", 1.0, 0, 2);
  ask.sampling.top_p = get_number(body, "top_p", 1.0, 1e-9, 1);
  const int64_t top_k = get_int(body, "top_k", 0, -1, int64_t(1) << 31);
  ask.sampling.top_k = top_k < 0 ? 0 : top_k;
  const json* seed = field(body, "seed");
  ask.sampling.seed = seed != nullptr ? uint64_t(get_int(body, "seed", 0, INT64_MIN, INT64_MAX))
                                      : (uint64_t(std::random_device{}()) << 32 | std::random_device{}());
  ask.stop = get_stop(body);
  ask.ignore_eos = get_bool(body, "ignore_eos", false);
  ask.stream = get_bool(body, "stream", false);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) bad("stream_options", "'stream_options' must be an object");
    ask.include_usage = get_bool(*options, "include_usage", false);
  }
}

}  // namespace

json error_body(int status, const std::string& message, const std::string& param) {
  return {{"error",
           {{"message", message},
            {"type", type_of(status)},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", status}}}};
}

Ask read_completion(const json& body, const ModelText& model, const ApiLimits& limits) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  Ask ask;
  ask.prompts = read_prompts(body, *model.tokenizer);
  ask.echo = get_bool(body, "echo", false);
  ask.logprobs = int32_t(get_int(body, "logprobs", -1, 0, 20));
  read_common(body, ask, limits);
  if (ask.max_tokens == 0 && !ask.echo)
    bad("max_tokens", "'max_tokens' = 0 asks for nothing; it is only meaningful with 'echo' (the prompt's log-probabilities)");
  return ask;
}

Ask read_chat(const json& body, const ModelText& model, const ApiLimits& limits) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  if (model.chat == nullptr)
    bad("messages", "this model has no chat template (serve.chat_template, or a tokenizer_config.json with "
                    "'chat_template' beside data.tokenizer_file); use /v1/completions");
  Ask ask;
  ask.chat = true;
  const json context = {{"messages", read_messages(body)}, {"add_generation_prompt", true}};
  std::string text;
  try {
    text = model.chat->render(context);
  } catch (const data::ChatTemplateError& e) {
    bad("messages", std::string("the chat template refused the messages: ") + e.what());
  }
  ask.prompts = {model.tokenizer->encode(text)};
  if (get_bool(body, "logprobs", false)) ask.logprobs = int32_t(get_int(body, "top_logprobs", 0, 0, 20));
  read_common(body, ask, limits);
  if (ask.max_tokens == 0) bad("max_tokens", "'max_tokens' must be at least 1 for a chat completion");
  return ask;
}

json tokenize(const json& body, const ModelText& model, const ApiLimits& limits) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  const json* prompt = field(body, "prompt");
  if (prompt == nullptr || !prompt->is_string()) bad("prompt", "'prompt' must be a string");
  get_bool(body, "add_special_tokens", true);  // checked only: our tokenizers add no special tokens
  const std::vector<int32_t> ids = model.tokenizer->encode(prompt->get<std::string>());
  return {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", limits.context}};
}

json detokenize(const json& body, const ModelText& model) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  const json* tokens = field(body, "tokens");
  if (tokens == nullptr || !tokens->is_array() ||
      !std::all_of(tokens->begin(), tokens->end(), [](const json& x) { return x.is_number_integer(); }))
    bad("tokens", "'tokens' must be a list of token ids");
  return {{"prompt", model.tokenizer->decode(checked_ids(*tokens, model.tokenizer->vocab_size(), "tokens"))}};
}

json tokenizer_info(const ModelText& model, const ApiLimits& limits) {
  const int32_t eod[] = {model.eod};
  const std::string eos = model.tokenizer->decode(eod);
  const bool whole = model.tokenizer->encode(eos) == std::vector<int32_t>{model.eod};
  return {{"eos_token", whole ? json(eos) : json(nullptr)},
          {"eos_token_id", model.eod},
          {"bos_token", nullptr},
          {"pad_token", nullptr},
          {"vocab_size", model.tokenizer->vocab_size()},
          {"model_max_length", limits.context}};
}

namespace {

// The ids of `tokens` after `context`, and what each token's text follows:
// token k's text is decoded after context + the tokens before it
// (data::token_texts), and so are the texts of its top alternatives.
struct InContext {
  std::vector<int32_t> all;  // context, then the tokens' ids
  size_t first = 0;          // where the tokens begin in all

  InContext(std::span<const int32_t> context, std::span<const TokenOut> tokens)
      : all(context.begin(), context.end()), first(context.size()) {
    for (const TokenOut& t : tokens) all.push_back(t.id);
  }
  std::span<const int32_t> before(size_t k) const { return std::span(all).first(first + k); }
  std::span<const int32_t> ids() const { return std::span(all).subspan(first); }
};

std::string alternative(const data::Tokenizer& tokenizer, const InContext& in, size_t k, int32_t id) {
  const int32_t one[] = {id};
  return data::decode_continuation(tokenizer, in.before(k), one);
}

json top_map(const generate::Scored& s, const data::Tokenizer& tokenizer, const InContext& in, size_t k) {
  json top = json::object();
  for (const auto& [id, lp] : s.top) top[alternative(tokenizer, in, k, id)] = lp;
  return top;
}

// Completions' logprobs: tokens, token_logprobs, top_logprobs, text_offset;
// `tokens` follow `context` and their text begins at `offset` of the choice's text.
void add_logprobs(json& lp, std::span<const TokenOut> tokens, std::span<const int32_t> context, size_t offset,
                  const data::Tokenizer& tokenizer) {
  const InContext in(context, tokens);
  const std::vector<std::string> texts = data::token_texts(tokenizer, context, in.ids());
  for (size_t k = 0; k < tokens.size(); ++k) {
    const TokenOut& t = tokens[k];
    lp["tokens"].push_back(texts[k]);
    lp["token_logprobs"].push_back(t.scored ? json(t.scored->logprob) : json(nullptr));
    lp["top_logprobs"].push_back(t.scored ? top_map(*t.scored, tokenizer, in, k) : json(nullptr));
    lp["text_offset"].push_back(offset);
    offset += texts[k].size();
  }
}

json chat_logprobs(std::span<const TokenOut> tokens, std::span<const int32_t> context,
                   const data::Tokenizer& tokenizer) {
  const InContext in(context, tokens);
  const std::vector<std::string> texts = data::token_texts(tokenizer, context, in.ids());
  const auto entry = [](const std::string& text, float logprob) {
    return json{{"token", text}, {"logprob", logprob}, {"bytes", std::vector<uint8_t>(text.begin(), text.end())}};
  };
  json content = json::array();
  for (size_t k = 0; k < tokens.size(); ++k) {
    const TokenOut& t = tokens[k];
    if (!t.scored) continue;
    json e = entry(texts[k], t.scored->logprob);
    e["top_logprobs"] = json::array();
    for (const auto& [id, lp] : t.scored->top)
      e["top_logprobs"].push_back(entry(alternative(tokenizer, in, k, id), lp));
    content.push_back(std::move(e));
  }
  return {{"content", content}};
}

json empty_logprobs() {
  return {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
          {"text_offset", json::array()}};
}

json usage(const Ask& ask, const std::vector<ChoiceOut>& choices) {
  int64_t prompt = 0, completion = 0;
  for (const auto& p : ask.prompts) prompt += int64_t(p.size());
  for (const ChoiceOut& c : choices) completion += int64_t(c.tokens.size());
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

json finish_reason(const ChoiceOut& c) { return c.finish.empty() ? json(nullptr) : json(c.finish); }

std::span<const int32_t> prompt_ids(const Ask& ask, size_t choice) { return ask.prompts[choice / size_t(ask.n)]; }

std::string prompt_text(const Ask& ask, size_t choice, const data::Tokenizer& tokenizer) {
  return tokenizer.decode(prompt_ids(ask, choice));
}

}  // namespace

json response(const Ask& ask, const std::vector<ChoiceOut>& choices, const ResponseIds& ids,
              const data::Tokenizer& tokenizer) {
  json out = {{"id", ids.id},
              {"object", ask.chat ? "chat.completion" : "text_completion"},
              {"created", ids.created},
              {"model", ids.model},
              {"choices", json::array()},
              {"usage", usage(ask, choices)}};
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOut& c = choices[i];
    json choice = {{"index", i}, {"finish_reason", finish_reason(c)}, {"logprobs", nullptr}};
    if (ask.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      if (ask.logprobs >= 0) choice["logprobs"] = chat_logprobs(c.tokens, prompt_ids(ask, i), tokenizer);
    } else {
      const std::string echoed = ask.echo ? prompt_text(ask, i, tokenizer) : std::string();
      choice["text"] = echoed + c.text;
      if (ask.logprobs >= 0) {
        json lp = empty_logprobs();
        add_logprobs(lp, c.prompt, {}, 0, tokenizer);
        add_logprobs(lp, c.tokens, prompt_ids(ask, i), echoed.size(), tokenizer);
        choice["logprobs"] = std::move(lp);
      }
    }
    out["choices"].push_back(std::move(choice));
  }
  return out;
}

std::vector<json> stream_chunks(const Ask& ask, const std::vector<ChoiceOut>& choices, StreamCursor& cursor,
                                const ResponseIds& ids, const data::Tokenizer& tokenizer) {
  const size_t n = choices.size();
  if (cursor.text.size() != n) cursor = StreamCursor{std::vector<size_t>(n), std::vector<size_t>(n),
                                                     std::vector<bool>(n), std::vector<bool>(n)};
  std::vector<json> out;
  for (size_t i = 0; i < n; ++i) {
    const ChoiceOut& c = choices[i];
    const bool starting = !cursor.started[i] && (ask.echo || c.text.size() > 0 || !c.finish.empty());
    const bool grew = c.text.size() > cursor.text[i];
    const bool ends = !c.finish.empty() && !cursor.finished[i];
    if (!starting && !grew && !ends) continue;
    const std::string delta = c.text.substr(cursor.text[i]);
    json choice = {{"index", i}, {"finish_reason", ends ? json(c.finish) : json(nullptr)}, {"logprobs", nullptr}};
    const std::span<const TokenOut> tokens(c.tokens), earlier = tokens.first(std::min(cursor.tokens[i], tokens.size())),
                                    fresh = tokens.subspan(earlier.size());
    // The fresh tokens follow the prompt and the earlier tokens.
    const InContext context(prompt_ids(ask, i), earlier);
    if (ask.chat) {
      choice["delta"] = starting ? json{{"role", "assistant"}, {"content", delta}} : json{{"content", delta}};
      if (ask.logprobs >= 0) choice["logprobs"] = chat_logprobs(fresh, context.all, tokenizer);
    } else {
      const std::string echoed = starting && ask.echo ? prompt_text(ask, i, tokenizer) : std::string();
      choice["text"] = echoed + delta;
      if (ask.logprobs >= 0) {
        json lp = empty_logprobs();
        if (starting) add_logprobs(lp, c.prompt, {}, 0, tokenizer);
        const size_t before = data::decode_continuation(tokenizer, prompt_ids(ask, i), context.ids()).size();
        add_logprobs(lp, fresh, context.all, before + (ask.echo ? prompt_text(ask, i, tokenizer).size() : 0),
                     tokenizer);
        choice["logprobs"] = std::move(lp);
      }
    }
    cursor.started[i] = true;
    cursor.text[i] = c.text.size();
    cursor.tokens[i] = c.tokens.size();
    cursor.finished[i] = cursor.finished[i] || ends;
    out.push_back({{"id", ids.id},
                   {"object", ask.chat ? "chat.completion.chunk" : "text_completion"},
                   {"created", ids.created},
                   {"model", ids.model},
                   {"choices", json::array({std::move(choice)})}});
  }
  return out;
}

json usage_chunk(const Ask& ask, const std::vector<ChoiceOut>& choices, const ResponseIds& ids) {
  return {{"id", ids.id},
          {"object", ask.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array()},
          {"usage", usage(ask, choices)}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace mh::serve
