#include "generate/step_batch.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "checkpoint/model_weights.hpp"
#include "checkpoint/store.hpp"
#include "engine/collectives.hpp"
#include "engine/decoder.hpp"
#include "engine/kv_cache.hpp"
#include "engine/params.hpp"
#include "engine/rank_context.hpp"
#include "plugins/plugin_loader.hpp"

namespace mh::generate {
namespace {

// A busy slot: its sequence, the positions cached, the prompt tokens fed
// so far and the tokens generated.
struct Slot {
  std::optional<Sequence> seq;
  int64_t past = 0, fed = 0, generated = 0;
  int32_t last = -1;  // the token the next decode step feeds
  bool prefilling() const { return fed < int64_t(seq->prompt.size()); }
};

// Log-probabilities of a row of logits in double (the softmax sums many
// small terms), and the k likeliest tokens (ties by id).
class RowScores {
 public:
  explicit RowScores(std::span<const float> row) : row_(row) {
    const double top = double(*std::max_element(row.begin(), row.end()));
    double sum = 0;
    for (float v : row) sum += std::exp(double(v) - top);
    log_z_ = top + std::log(sum);
  }
  float logprob(int32_t id) const { return float(double(row_[size_t(id)]) - log_z_); }
  Scored score(int32_t id, int32_t k) const {
    Scored s{id, logprob(id), {}};
    std::vector<int32_t> ids(row_.size());
    std::iota(ids.begin(), ids.end(), 0);
    const size_t keep = std::min(size_t(k), ids.size());
    std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(keep), ids.end(), [&](int32_t a, int32_t b) {
      return row_[size_t(a)] > row_[size_t(b)] || (row_[size_t(a)] == row_[size_t(b)] && a < b);
    });
    for (size_t i = 0; i < keep; ++i) s.top.emplace_back(ids[i], logprob(ids[i]));
    return s;
  }

 private:
  std::span<const float> row_;
  double log_z_ = 0;
};

// A step's results flattened to floats for the pipeline broadcast (ids
// below 2^24 are exact in f32); the reader walks the same layout, known
// to every rank from the slots.
void put(std::vector<float>& out, const Scored& s) {
  out.push_back(float(s.token));
  out.push_back(s.logprob);
  for (const auto& [id, lp] : s.top) {
    out.push_back(float(id));
    out.push_back(lp);
  }
}

Scored take(const float*& in, int32_t k) {
  Scored s{int32_t(in[0]), in[1], {}};
  in += 2;
  for (int32_t i = 0; i < k; ++i, in += 2) s.top.emplace_back(int32_t(in[0]), in[1]);
  return s;
}

}  // namespace

class StepBatch::Impl {
 public:
  Impl(const RunSetup& s, const BatchShape& shape, int32_t local)
      : s_(s),
        shape_(shape),
        rc_(s, local),
        dev_(rc_.dev),
        stage_(rc_.coords.pp),
        owned_(owned_parts(stage_chunks(s, stage_))),
        params_(dev_, rc_.dims, s.tensor_plan, uint64_t(s.assembly->train.options().get_int("seed")), owned_,
                ParamStorage{1, false, false, !loads_weights()}),
        cache_(dev_, rc_.dims, owned_.layers, shape.slots, shape.capacity),
        decoder_(dev_, params_, rc_.groups.tensor, s.tensor_plan, rc_.dims, cache_),
        slots_(size_t(shape.slots)) {
    if (loads_weights()) load_weights();
  }

  int32_t rank() const { return rc_.rank; }
  const BatchShape& shape() const { return shape_; }
  Slot& slot(int64_t k) { return slots_.at(size_t(k)); }
  const Slot& slot(int64_t k) const { return slots_.at(size_t(k)); }
  std::vector<SlotStep> step();
  std::vector<uint8_t> from_lead(std::vector<uint8_t> bytes);
  std::vector<RankMemory> memory() {
    const std::vector<uint64_t> all = all_gather_counts(rc_.groups.world, to_counts(dev_.memory()));
    return rc_.rank == 0 ? from_counts(all) : std::vector<RankMemory>{};
  }

 private:
  bool loads_weights() const { return !s_.resume_from.empty() && !s_.dry_run; }
  // With [peft], checkpoint.load holds LoRA adapters and peft.base (or the
  // base they name) the weights they adapt.
  void load_weights() {
    const ckpt::Metadata saved = ckpt::read_metadata(s_.resume_from);
    ckpt::check_model(s_.resume_from, saved, rc_.dims);
    const bool lora = rc_.dims.lora.on();
    require(lora == !saved.peft.is_null(),
            s_.resume_from + (lora ? " holds a whole model, not LoRA adapters: remove [peft] to generate from it"
                                   : " holds LoRA adapters: add their [peft] section (method = \"lora\", rank, "
                                     "alpha, targets) to generate with them, or export the merged model"));
    if (!lora) return ckpt::load_weights(s_.resume_from, saved, params_, rc_.coords.tp);
    const std::string base = s_.peft_base.empty() ? saved.peft.value("base", std::string()) : s_.peft_base;
    require(!base.empty(), s_.resume_from + " holds LoRA adapters of the seed's initial model, which no "
                                            "checkpoint holds: set peft.base");
    const ckpt::Metadata base_saved = ckpt::read_metadata(base);
    ckpt::check_model(base, base_saved, rc_.dims);
    ckpt::load_weights(base, base_saved, params_, rc_.coords.tp);
    ckpt::load_weights(s_.resume_from, saved, params_, rc_.coords.tp, ckpt::WeightsOf::kAdapters);
  }
  DecodeInput step_input() const;
  // The rows whose logits the step needs, in order: every prefilled row of a
  // sequence scoring its prompt, else the sequence's last row when it
  // predicts a token.
  std::vector<int64_t> scored_rows(const DecodeInput& in) const;
  Buffer forward(const DecodeInput& in);
  std::vector<float> results(const std::vector<float>& logits, const DecodeInput& in) const;
  std::vector<float> from_last_stage(std::vector<float> values, int64_t n);
  size_t result_size(const DecodeInput& in) const;
  std::vector<SlotStep> read_results(const std::vector<float>& values, const DecodeInput& in);
  bool predicts(const SequenceRows& r) const {
    const Slot& s = slots_[size_t(r.slot)];
    return !s.prefilling() || s.fed + r.count == int64_t(s.seq->prompt.size());
  }

  const RunSetup& s_;
  BatchShape shape_;
  RankContext rc_;
  Device& dev_;
  int32_t stage_;
  OwnedParts owned_;
  ParamSet params_;
  KvCache cache_;
  Decoder decoder_;
  std::vector<Slot> slots_;
};

// Decode rows first, then prompt chunks within the step's prefill budget,
// so that a long prompt never stalls the sequences already decoding.
DecodeInput StepBatch::Impl::step_input() const {
  std::vector<std::pair<int64_t, int64_t>> feed;  // slot, rows
  int64_t budget = std::max<int64_t>(shape_.prefill_chunk, 1);
  for (size_t k = 0; k < slots_.size(); ++k)
    if (slots_[k].seq && !slots_[k].prefilling()) feed.emplace_back(int64_t(k), 1);
  for (size_t k = 0; k < slots_.size() && budget > 0; ++k) {
    const Slot& s = slots_[k];
    if (!s.seq || !s.prefilling()) continue;
    const int64_t rows = std::min(budget, int64_t(s.seq->prompt.size()) - s.fed);
    feed.emplace_back(int64_t(k), rows);
    budget -= rows;
  }
  std::sort(feed.begin(), feed.end());
  DecodeInput in;
  for (const auto& [k, count] : feed) {
    const Slot& s = slots_[size_t(k)];
    in.seqs.push_back(SequenceRows{k, in.rows(), count, s.past});
    for (int64_t i = 0; i < count; ++i) {
      in.ids.push_back(s.prefilling() ? s.seq->prompt[size_t(s.fed + i)] : s.last);
      in.positions.push_back(int32_t(s.past + i));
    }
  }
  return in;
}

std::vector<int64_t> StepBatch::Impl::scored_rows(const DecodeInput& in) const {
  std::vector<int64_t> rows;
  for (const SequenceRows& r : in.seqs) {
    const Slot& s = slots_[size_t(r.slot)];
    if (s.prefilling() && s.seq->prompt_logprobs)
      for (int64_t i = 0; i < r.count; ++i) rows.push_back(r.row + i);
    else if (predicts(r))
      rows.push_back(r.row + r.count - 1);
  }
  return rows;
}

// The step's forward through this rank's chunks of layers; the last stage
// returns the output of the last layer.
Buffer StepBatch::Impl::forward(const DecodeInput& in) {
  const auto& chunks = s_.stage_layers;
  const int64_t width = in.rows() * rc_.dims.hidden;
  Buffer x;
  for (size_t k = 0; k < chunks.size(); ++k) {
    const MH_StageLayers& e = chunks[k];
    if (e.stage != stage_) continue;
    if (k == 0) {
      x = decoder_.embed(in);
    } else if (chunks[k - 1].stage != stage_) {
      x = Buffer(dev_, MemCategory::kActivations, width, dev_.info().compute_dtype);
      rc_.groups.pipeline.recv(x.ptr(), width, chunks[k - 1].stage);
    }
    x = decoder_.layers(std::move(x), e.first, e.count, in);
    if (k + 1 < chunks.size() && chunks[k + 1].stage != stage_) rc_.groups.pipeline.send(x.ptr(), width, chunks[k + 1].stage);
  }
  return x;
}

// On the last stage: each sequence's new token (or -1 while prefilling),
// then its scored prompt tokens and its new token's score, flattened.
std::vector<float> StepBatch::Impl::results(const std::vector<float>& logits, const DecodeInput& in) const {
  const size_t vocab = size_t(rc_.dims.real_vocab()), sampled = std::min(vocab, size_t(shape_.vocab));
  std::vector<float> out;
  size_t row = 0;
  const auto next_row = [&] { return std::span<const float>(logits.data() + row++ * vocab, sampled); };
  for (const SequenceRows& r : in.seqs) {
    const Slot& s = slots_[size_t(r.slot)];
    const Sequence& q = *s.seq;
    const int32_t k = std::max(q.top_logprobs, 0);
    const bool all_rows = s.prefilling() && q.prompt_logprobs;
    const int64_t prompt_rows = all_rows ? r.count - (predicts(r) ? 1 : 0) : 0;
    std::vector<float> scores;
    for (int64_t i = 0; i < prompt_rows; ++i)
      put(scores, RowScores(next_row()).score(q.prompt[size_t(s.fed + i + 1)], k));
    if (!predicts(r)) {
      out.push_back(-1.f);
    } else {
      const std::span<const float> last = next_row();
      const int32_t token = sample(last, q.sampling, q.stream, uint64_t(s.generated));
      out.push_back(float(token));
      if (q.top_logprobs >= 0) put(scores, RowScores(last).score(token, k));
    }
    out.insert(out.end(), scores.begin(), scores.end());
  }
  return out;
}

size_t StepBatch::Impl::result_size(const DecodeInput& in) const {
  size_t n = 0;
  for (const SequenceRows& r : in.seqs) {
    const Slot& s = slots_[size_t(r.slot)];
    const size_t scored = 2 + 2 * size_t(std::max(s.seq->top_logprobs, 0));
    const int64_t prompt_rows = s.prefilling() && s.seq->prompt_logprobs ? r.count - (predicts(r) ? 1 : 0) : 0;
    n += 1 + size_t(prompt_rows) * scored + (predicts(r) && s.seq->top_logprobs >= 0 ? scored : 0);
  }
  return n;
}

// The last stage's results to every stage.
std::vector<float> StepBatch::Impl::from_last_stage(std::vector<float> values, int64_t n) {
  if (s_.pp == 1) return values;
  values.resize(size_t(n), 0.f);
  Buffer shared(dev_, MemCategory::kComm, n);
  dev_.to_device(shared.data(), values.data(), values.size() * sizeof(float));
  rc_.groups.pipeline.broadcast(shared.ptr(), n, s_.pp - 1);
  dev_.to_host(values.data(), shared.data(), values.size() * sizeof(float));
  return values;
}

// Reads the results and moves every slot on by the rows it fed.
std::vector<SlotStep> StepBatch::Impl::read_results(const std::vector<float>& values, const DecodeInput& in) {
  std::vector<SlotStep> out;
  const float* at = values.data();
  for (const SequenceRows& r : in.seqs) {
    Slot& s = slots_[size_t(r.slot)];
    const Sequence& q = *s.seq;
    const int32_t k = std::max(q.top_logprobs, 0);
    SlotStep step{r.slot, !predicts(r), int32_t(*at++), {}, std::nullopt};
    const int64_t prompt_rows = s.prefilling() && q.prompt_logprobs ? r.count - (predicts(r) ? 1 : 0) : 0;
    for (int64_t i = 0; i < prompt_rows; ++i) step.prompt.push_back(take(at, k));
    if (predicts(r) && q.top_logprobs >= 0) step.scored = take(at, k);
    s.past += r.count;
    if (s.prefilling()) s.fed += r.count;
    if (!step.prefilling) {
      s.last = step.token;
      ++s.generated;
    }
    out.push_back(std::move(step));
  }
  return out;
}

std::vector<SlotStep> StepBatch::Impl::step() {
  const DecodeInput in = step_input();
  if (in.seqs.empty()) return {};
  const Buffer x = forward(in);
  std::vector<float> values;
  if (stage_ == s_.pp - 1) values = results(decoder_.logits(x, scored_rows(in)), in);
  values = from_last_stage(std::move(values), int64_t(result_size(in)));
  dev_.synchronize();
  return read_results(values, in);
}

// A size, then the bytes, one per float (exact), over the world group.
// The first broadcast carries the size and up to kInlineBytes of the bytes:
// a step's decisions are a few bytes, and every broadcast costs each
// decode step a collective's latency on every rank; a longer message sends
// the rest in a second one.
std::vector<uint8_t> StepBatch::Impl::from_lead(std::vector<uint8_t> bytes) {
  // A dry run moves no data (its device holds none): each rank keeps its own.
  if (s_.comm_info.world_size == 1 || s_.dry_run) return bytes;
  const auto broadcast = [&](std::vector<float>& values) {
    Buffer shared(dev_, MemCategory::kComm, int64_t(values.size()));
    dev_.to_device(shared.data(), values.data(), values.size() * sizeof(float));
    rc_.groups.world.broadcast(shared.ptr(), int64_t(values.size()), 0);
    dev_.to_host(values.data(), shared.data(), values.size() * sizeof(float));
  };
  constexpr size_t kSizeFloats = 3, kInlineBytes = 61;
  const uint64_t n = bytes.size();
  std::vector<float> head(kSizeFloats + kInlineBytes, 0.f);
  head[0] = float(n & 0xFFFF);
  head[1] = float((n >> 16) & 0xFFFF);
  head[2] = float(n >> 32);
  for (size_t i = 0; i < std::min(bytes.size(), kInlineBytes); ++i) head[kSizeFloats + i] = float(bytes[i]);
  broadcast(head);
  const uint64_t count = uint64_t(head[0]) | uint64_t(head[1]) << 16 | uint64_t(head[2]) << 32;
  bytes.resize(count);
  std::vector<float> rest(count > kInlineBytes ? count - kInlineBytes : 0);
  for (size_t i = 0; i < rest.size(); ++i) rest[i] = float(bytes[kInlineBytes + i]);
  if (!rest.empty()) broadcast(rest);
  for (size_t i = 0; i < count; ++i)
    bytes[i] = uint8_t(i < kInlineBytes ? head[kSizeFloats + i] : rest[i - kInlineBytes]);
  return bytes;
}

StepBatch::StepBatch(const RunSetup& s, const BatchShape& shape, int32_t local)
    : impl_(std::make_unique<Impl>(s, shape, local)) {}
StepBatch::~StepBatch() = default;

int32_t StepBatch::rank() const { return impl_->rank(); }
int64_t StepBatch::slots() const { return impl_->shape().slots; }
int64_t StepBatch::capacity() const { return impl_->shape().capacity; }
bool StepBatch::busy(int64_t slot) const { return impl_->slot(slot).seq.has_value(); }
bool StepBatch::full(int64_t slot) const { return impl_->slot(slot).past >= capacity(); }

void StepBatch::admit(int64_t slot, Sequence seq) {
  require(!busy(slot), "slot " + std::to_string(slot) + " is busy");
  require(!seq.prompt.empty() && int64_t(seq.prompt.size()) <= capacity(),
          "a prompt of " + std::to_string(seq.prompt.size()) + " tokens does not fit a slot of " +
              std::to_string(capacity()) + " positions");
  impl_->slot(slot) = Slot{std::move(seq)};
}

void StepBatch::release(int64_t slot) { impl_->slot(slot) = Slot{}; }
std::vector<SlotStep> StepBatch::step() { return impl_->step(); }
std::vector<uint8_t> StepBatch::from_lead(std::vector<uint8_t> bytes) { return impl_->from_lead(std::move(bytes)); }
std::vector<RankMemory> StepBatch::memory() { return impl_->memory(); }

}  // namespace mh::generate
