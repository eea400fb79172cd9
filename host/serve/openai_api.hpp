// OpenAI's HTTP API as JSON: requests of /v1/completions and
// /v1/chat/completions read and checked into an Ask (a bad one throws an
// ApiError with its status), and responses, stream chunks and errors
// written as OpenAI's clients read them. Unknown fields are ignored, as
// clients send more than a server uses; known ones of the wrong type or
// out of range are refused.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/tokenizer.hpp"
#include "data/chat_template.hpp"
#include "serve/request.hpp"

namespace mh::serve {

struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, std::string param = "")
      : std::runtime_error(message), status(status), param(std::move(param)) {}
  int status;
  std::string param;
};

// OpenAI's error object: {"error": {"message", "type", "param", "code"}}.
nlohmann::json error_body(int status, const std::string& message, const std::string& param = "");

struct ApiLimits {
  int64_t context = 0;         // model.seq_len: prompt plus max_tokens
  int64_t max_new_tokens = 0;  // max_tokens' default and cap
  int64_t max_batch = 1;       // choices of one request at most (prompts x n)
};

// The parts of a request that only the model knows.
struct ModelText {
  const data::Tokenizer* tokenizer = nullptr;
  const data::ChatTemplate* chat = nullptr;  // null: the model has none (chat gets 400)
  int32_t eod = -1;
};

Ask read_completion(const nlohmann::json& body, const ModelText& model, const ApiLimits& limits);
Ask read_chat(const nlohmann::json& body, const ModelText& model, const ApiLimits& limits);

// vLLM's tokenizer routes, which lm-evaluation-harness's "remote" tokenizer
// asks for: the server's own tokenizer, so a client scores exactly the
// tokens the model sees. POST /tokenize {"prompt"} -> {"tokens", "count",
// "max_model_len"}; POST /detokenize {"tokens"} -> {"prompt"}.
nlohmann::json tokenize(const nlohmann::json& body, const ModelText& model, const ApiLimits& limits);
nlohmann::json detokenize(const nlohmann::json& body, const ModelText& model);
// GET /tokenizer_info: the end-of-document token's text where it is one
// (its text encodes back to it alone), else null; the context length.
nlohmann::json tokenizer_info(const ModelText& model, const ApiLimits& limits);

// Names of one response: its id, creation time and model.
struct ResponseIds {
  std::string id;
  int64_t created = 0;
  std::string model;
};

// The whole response of a finished request.
nlohmann::json response(const Ask& ask, const std::vector<ChoiceOut>& choices, const ResponseIds& ids,
                        const data::Tokenizer& tokenizer);

// What a stream has sent of each choice.
struct StreamCursor {
  std::vector<size_t> text, tokens;
  std::vector<bool> started, finished;
};
// The chunks that bring a stream up to `choices` (none when nothing changed).
std::vector<nlohmann::json> stream_chunks(const Ask& ask, const std::vector<ChoiceOut>& choices, StreamCursor& cursor,
                                          const ResponseIds& ids, const data::Tokenizer& tokenizer);
// The last chunk of a stream that asked for usage.
nlohmann::json usage_chunk(const Ask& ask, const std::vector<ChoiceOut>& choices, const ResponseIds& ids);

// JSON text of a response: invalid UTF-8 (a token's bytes may be half a
// character) replaced, never thrown on.
std::string dump(const nlohmann::json& j);

}  // namespace mh::serve
