#include "serve/engine_loop.hpp"

#include <chrono>

namespace mh::serve {
namespace {

using namespace std::chrono_literals;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

int64_t Lead::running() const {
  int64_t n = 0;
  for (const auto& s : slots_) n += s.has_value();
  return n;
}

void Lead::admit(StepPlan& plan) {
  int64_t free = 0;
  for (const auto& s : slots_) free += !s.has_value();
  while (free > 0) {
    std::shared_ptr<Request> r = queue_.pop(free);
    if (r == nullptr) break;
    if (r->cancelled()) continue;
    if (seconds(Clock::now() - r->arrival()) > settings_.timeout_s) {
      r->fail("the request waited longer than serve.timeout_s for a free slot; retry later");
      continue;
    }
    const Ask& ask = r->ask();
    r->update([&](std::vector<ChoiceOut>& choices) {
      for (size_t c = 0; c < choices.size(); ++c)
        if (ask.echo && ask.logprobs >= 0) choices[c].prompt = {TokenOut{ask.prompts[c / size_t(ask.n)][0], {}}};
    });
    for (size_t c = 0, k = 0; c < size_t(ask.choices()); ++c, ++k) {
      while (slots_[k].has_value()) ++k;
      generate::Sequence q{ask.prompts[c / size_t(ask.n)], ask.sampling, c, ask.logprobs, ask.echo && ask.logprobs >= 0};
      plan.admit.emplace_back(int64_t(k), std::move(q));
      slots_[k] = Running{r, c, TextStream(tokenizer_, ask.stop, ask.prompts[c / size_t(ask.n)])};
      --free;
    }
  }
}

StepPlan Lead::plan(bool draining) {
  StepPlan plan;
  for (size_t k = 0; k < slots_.size(); ++k) {
    if (!slots_[k] || !slots_[k]->request->cancelled()) continue;
    if (slots_[k]->choice == 0) metrics_.cancelled();
    finish(int64_t(k), "stop", false);
  }
  plan.release = std::exchange(finished_, {});
  if (running() == 0 && queue_.size() == 0) {
    if (draining) {
      plan.stop = true;
      return plan;
    }
    queue_.wait(200ms);
  }
  admit(plan);
  metrics_.queue(queue_.size(), running());
  return plan;
}

void Lead::finish(int64_t slot, const char* reason, bool whole_text) {
  Running& r = *slots_[size_t(slot)];
  if (whole_text) r.text.finish();
  r.request->update([&](std::vector<ChoiceOut>& choices) {
    choices[r.choice].text = r.text.shown();
    choices[r.choice].finish = reason;
  });
  metrics_.tokens(int64_t(r.request->ask().prompts[r.choice / size_t(r.request->ask().n)].size()), r.generated);
  if (r.generated > 1) metrics_.per_output_token(seconds(r.last - r.first) / double(r.generated - 1));
  slots_[size_t(slot)].reset();
  finished_.push_back(slot);
}

void Lead::record(const std::vector<generate::SlotStep>& steps, const generate::StepBatch& batch) {
  const Clock::time_point now = Clock::now();
  for (const generate::SlotStep& st : steps) {
    if (!slots_[size_t(st.slot)]) continue;
    Running& r = *slots_[size_t(st.slot)];
    const Ask& ask = r.request->ask();
    if (!st.prompt.empty() || !st.prefilling)
      r.request->update([&](std::vector<ChoiceOut>& choices) {
        for (const generate::Scored& s : st.prompt) choices[r.choice].prompt.push_back(TokenOut{s.token, s});
      });
    if (st.prefilling) continue;
    if (r.generated == 0) {
      r.first = now;
      metrics_.first_token(seconds(now - r.request->arrival()));
    }
    r.last = now;
    if (ask.max_tokens == 0) {
      finish(st.slot, "length", true);
      continue;
    }
    if (st.token == settings_.eod && !ask.ignore_eos) {
      finish(st.slot, "stop", true);
      continue;
    }
    ++r.generated;
    const bool stopped = r.text.add(st.token);
    r.request->update([&](std::vector<ChoiceOut>& choices) {
      choices[r.choice].tokens.push_back(TokenOut{st.token, st.scored});
      choices[r.choice].text = r.text.shown();
    });
    if (stopped) finish(st.slot, "stop", false);
    else if (r.generated == ask.max_tokens || batch.full(st.slot)) finish(st.slot, "length", true);
  }
  metrics_.queue(queue_.size(), running());
}

void Lead::fail_all(const std::string& error) {
  queue_.close();
  for (auto& s : slots_)
    if (s) s->request->fail(error);
  for (const auto& r : queue_.take_all()) r->fail(error);
}

void serve_rank(generate::StepBatch& batch, Lead* lead, const std::function<bool()>& draining) {
  for (;;) {
    const std::vector<uint8_t> bytes = lead != nullptr ? encode(lead->plan(draining())) : std::vector<uint8_t>{};
    const StepPlan plan = decode_plan(batch.from_lead(bytes));
    if (plan.stop) return;
    apply(plan, batch);
    const std::vector<generate::SlotStep> steps = batch.step();
    if (lead != nullptr) lead->record(steps, batch);
  }
}

}  // namespace mh::serve
