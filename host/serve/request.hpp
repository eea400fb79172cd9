// A request between the HTTP thread that received it and the engine loop
// that serves it: what was asked (parsed and checked), and what the engine
// has produced so far, which the HTTP thread waits on and sends back.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "generate/step_batch.hpp"

namespace mh::serve {

using Clock = std::chrono::steady_clock;

// What a completion or chat request asks of the engine.
struct Ask {
  bool chat = false;
  std::vector<std::vector<int32_t>> prompts;  // token ids; each gets n choices
  int64_t n = 1;
  int64_t max_tokens = 16;
  generate::Sampling sampling;
  std::vector<std::string> stop;
  bool echo = false;             // completions: the prompt's text (and scores) before the completion
  int32_t logprobs = -1;         // -1: none; else each token's log-probability and this many alternatives
  bool ignore_eos = false;       // vLLM's extension: the end-of-document token does not end a choice
  bool stream = false;
  bool include_usage = false;    // stream_options.include_usage: a last chunk with the token counts
  int64_t choices() const { return int64_t(prompts.size()) * n; }
};

// One generated (or echoed prompt) token as the response shows it.
struct TokenOut {
  int32_t id = 0;
  std::optional<generate::Scored> scored;  // none for the first prompt token, or without logprobs
};

struct ChoiceOut {
  std::string text;              // the completion so far, after stop sequences
  std::vector<TokenOut> prompt;  // echo with logprobs: the prompt's tokens
  std::vector<TokenOut> tokens;  // generated, as far as text shows them
  std::string finish;            // "stop" or "length" once done
  bool prompt_scored = false;    // every prompt token's score is in
};

class Request {
 public:
  explicit Request(Ask ask);

  const Ask& ask() const { return ask_; }
  Clock::time_point arrival() const { return arrival_; }
  // The HTTP side: the client is gone (or the server drains); the engine frees its slots.
  void cancel();
  bool cancelled() const;
  // The engine side: changes the choices under the lock and wakes the waiters.
  template <typename F>
  void update(F&& change) {
    {
      std::lock_guard lock(mu_);
      change(choices_);
      ++version_;
    }
    changed_.notify_all();
  }
  // Ends the request without an answer (the server stops): the HTTP side sends `error`.
  void fail(std::string error);
  // Waits until the version passes `seen` or `wait` elapses; returns a copy
  // of the choices, the new version and any failure.
  struct View {
    std::vector<ChoiceOut> choices;
    uint64_t version = 0;
    std::string error;
    bool done() const;
  };
  View wait(uint64_t seen, std::chrono::milliseconds wait) const;

 private:
  Ask ask_;
  Clock::time_point arrival_;
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::vector<ChoiceOut> choices_;
  uint64_t version_ = 0;
  std::string error_;
  bool cancelled_ = false;
};

}  // namespace mh::serve
