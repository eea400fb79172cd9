#include "generate/rank_generator.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <chrono>

#include "checkpoint/store.hpp"
#include "checkpoint/model_weights.hpp"
#include "engine/collectives.hpp"
#include "engine/decoder.hpp"
#include "engine/kv_cache.hpp"
#include "engine/params.hpp"
#include "engine/rank_context.hpp"
#include "plugins/plugin_loader.hpp"

namespace mh::generate {
namespace {

using Clock = std::chrono::steady_clock;

// A KV cache slot: the request it serves (-1: free), the positions cached
// and the tokens the next step feeds (the prompt, then the last token).
struct Slot {
  int64_t request = -1, past = 0;
  std::vector<int32_t> feed;
};

class RankGenerator {
 public:
  RankGenerator(const RunSetup& s, const Job& job, int32_t local)
      : s_(s),
        job_(job),
        rc_(s, local),
        owned_(owned_parts(stage_chunks(s, rc_.coords.pp))),
        params_(rc_.dev, rc_.dims, s.tensor_plan, uint64_t(s.assembly->train.options().get_int("seed")), owned_,
                ParamStorage{1, false, false, !loads_weights()}),
        cache_(rc_.dev, rc_.dims, owned_.layers, job.batch, job.capacity),
        decoder_(rc_.dev, params_, rc_.groups.tensor, s.tensor_plan, rc_.dims, cache_) {
    if (loads_weights()) load_weights();
  }

  std::vector<Outcome> serve();
  // Every rank's peaks on world rank 0, empty elsewhere; every rank calls it.
  std::vector<RankMemory> memory();

 private:
  bool loads_weights() const { return !s_.resume_from.empty() && !s_.dry_run; }
  void load_weights();
  void admit(std::vector<Slot>& slots, size_t& next, std::vector<Outcome>& out, double now) const;
  DecodeInput step_input(const std::vector<Slot>& slots) const;
  // The step's forward through every stage; each rank returns the tokens
  // sampled for the input's sequences, in order.
  std::vector<int32_t> step(const DecodeInput& in, const std::vector<Slot>& slots, const std::vector<Outcome>& out);
  std::vector<int32_t> sample_all(const std::vector<float>& logits, const DecodeInput& in,
                                  const std::vector<Slot>& slots, const std::vector<Outcome>& out) const;
  std::vector<int32_t> from_last_stage(std::vector<int32_t> tokens, int64_t n);
  bool finished(const Outcome& o, const Slot& slot, int32_t token) const;

  const RunSetup& s_;
  const Job& job_;
  RankContext rc_;
  OwnedParts owned_;
  ParamSet params_;
  KvCache cache_;
  Decoder decoder_;
};

void RankGenerator::load_weights() {
  const ckpt::Metadata saved = ckpt::read_metadata(s_.resume_from);
  ckpt::check_model(s_.resume_from, saved, rc_.dims);
  ckpt::load_weights(s_.resume_from, saved, params_, rc_.coords.tp);
}

void RankGenerator::admit(std::vector<Slot>& slots, size_t& next, std::vector<Outcome>& out, double now) const {
  for (Slot& slot : slots) {
    if (slot.request >= 0 || next == job_.prompts.size()) continue;
    slot = Slot{int64_t(next), 0, job_.prompts[next]};
    out[next++].admitted = now;
  }
}

DecodeInput RankGenerator::step_input(const std::vector<Slot>& slots) const {
  DecodeInput in;
  for (size_t k = 0; k < slots.size(); ++k) {
    const Slot& slot = slots[k];
    if (slot.request < 0) continue;
    const int64_t count = int64_t(slot.feed.size());
    in.seqs.push_back(SequenceRows{int64_t(k), in.rows(), count, slot.past});
    for (int64_t i = 0; i < count; ++i) {
      in.ids.push_back(slot.feed[size_t(i)]);
      in.positions.push_back(int32_t(slot.past + i));
    }
  }
  return in;
}

std::vector<int32_t> RankGenerator::step(const DecodeInput& in, const std::vector<Slot>& slots,
                                         const std::vector<Outcome>& out) {
  const auto& chunks = s_.stage_layers;
  const int64_t width = in.rows() * rc_.dims.hidden;
  Buffer x;
  std::vector<int32_t> tokens;
  for (size_t k = 0; k < chunks.size(); ++k) {
    const MH_StageLayers& e = chunks[k];
    if (e.stage != rc_.coords.pp) continue;
    if (k == 0) {
      x = decoder_.embed(in);
    } else if (chunks[k - 1].stage != rc_.coords.pp) {
      x = Buffer(rc_.dev, MemCategory::kActivations, width, rc_.dev.info().compute_dtype);
      rc_.groups.pipeline.recv(x.ptr(), width, chunks[k - 1].stage);
    }
    x = decoder_.layers(std::move(x), e.first, e.count, in);
    if (k + 1 == chunks.size()) tokens = sample_all(decoder_.logits(x, in), in, slots, out);
    else if (chunks[k + 1].stage != rc_.coords.pp) rc_.groups.pipeline.send(x.ptr(), width, chunks[k + 1].stage);
  }
  return from_last_stage(std::move(tokens), int64_t(in.seqs.size()));
}

std::vector<int32_t> RankGenerator::sample_all(const std::vector<float>& logits, const DecodeInput& in,
                                               const std::vector<Slot>& slots,
                                               const std::vector<Outcome>& out) const {
  // The whole vocabulary: generation refuses a tokenizer that could not decode it.
  const size_t vocab = size_t(rc_.dims.real_vocab());
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < in.seqs.size(); ++i) {
    const int64_t request = slots[size_t(in.seqs[i].slot)].request;
    const std::span<const float> row(logits.data() + i * vocab, vocab);
    tokens.push_back(sample(row, job_.sampling, uint64_t(request), out[size_t(request)].tokens.size()));
  }
  return tokens;
}

// The last stage's tokens to every stage (exact in f32: ids below 2^24).
std::vector<int32_t> RankGenerator::from_last_stage(std::vector<int32_t> tokens, int64_t n) {
  if (s_.pp == 1) return tokens;
  std::vector<float> values(size_t(n), 0.f);
  for (size_t i = 0; i < tokens.size(); ++i) values[i] = float(tokens[i]);
  Buffer shared(rc_.dev, MemCategory::kComm, n);
  rc_.dev.to_device(shared.data(), values.data(), values.size() * sizeof(float));
  rc_.groups.pipeline.broadcast(shared.ptr(), n, s_.pp - 1);
  rc_.dev.to_host(values.data(), shared.data(), values.size() * sizeof(float));
  std::vector<int32_t> shared_tokens(static_cast<size_t>(n));
  for (size_t i = 0; i < shared_tokens.size(); ++i) shared_tokens[i] = int32_t(values[i]);
  return shared_tokens;
}

bool RankGenerator::finished(const Outcome& o, const Slot& slot, int32_t token) const {
  return (job_.stop_at_eod && token == job_.eod) || int64_t(o.tokens.size()) == job_.max_new_tokens ||
         slot.past >= job_.capacity;
}

std::vector<Outcome> RankGenerator::serve() {
  std::vector<Outcome> out(job_.prompts.size());
  std::vector<Slot> slots(size_t(job_.batch));
  size_t next = 0;
  const Clock::time_point start = Clock::now();
  const auto now = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  for (;;) {
    admit(slots, next, out, now());
    const DecodeInput in = step_input(slots);
    if (in.seqs.empty()) break;
    const std::vector<int32_t> tokens = step(in, slots, out);
    rc_.dev.synchronize();
    const double t = now();
    for (size_t i = 0; i < in.seqs.size(); ++i) {
      Slot& slot = slots[size_t(in.seqs[i].slot)];
      Outcome& o = out[size_t(slot.request)];
      if (o.tokens.empty()) o.first_token = t;
      o.last_token = t;
      o.tokens.push_back(tokens[i]);
      slot.past += in.seqs[i].count;
      slot.feed = {tokens[i]};
      if (finished(o, slot, tokens[i])) slot.request = -1;
    }
  }
  if (rc_.rank != 0) out.clear();
  return out;
}

std::vector<RankMemory> RankGenerator::memory() {
  const std::vector<uint64_t> all = all_gather_counts(rc_.groups.world, to_counts(rc_.dev.memory()));
  return rc_.rank == 0 ? from_counts(all) : std::vector<RankMemory>{};
}

}  // namespace

RankResult generate_rank(const RunSetup& setup, const Job& job, int32_t local) {
  RankGenerator generator(setup, job, local);
  std::vector<Outcome> outcomes = generator.serve();
  return RankResult{std::move(outcomes), generator.memory()};
}

}  // namespace mh::generate
