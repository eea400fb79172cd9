#include "grid_tuner.hpp"

#include <megahost/struct_size.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "training_cost.hpp"

namespace mh::tuner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kSecondsPerDay = 86400;

Goal parse_goal(const std::string& g) {
  if (g == "inference_latency") return Goal::kInferenceLatency;
  if (g == "inference_throughput") return Goal::kInferenceThroughput;
  return Goal::kTrainThroughput;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "; ") + l;
  return out;
}

// The candidate points into `l`, which must stay where it is.
MH_Candidate candidate_of(const Layout& l, int32_t workload) {
  MH_Candidate c{};
  c.struct_size = sizeof(MH_Candidate);
  c.tensor = l.t;
  c.pipeline = l.p;
  c.virtual_stages = l.v;
  c.data = l.d;
  c.sequence_parallel = l.sp ? 1 : 0;
  c.micro_batch = l.b;
  c.recompute = l.recompute.c_str();
  c.recompute_layers = l.recompute_layers;
  c.workload = workload;
  c.distributed_optimizer = l.distributed_optimizer ? 1 : 0;
  c.overlap_param_gather = l.overlap_param_gather ? 1 : 0;
  c.context_comm = l.cp_comm.empty() ? nullptr : l.cp_comm.c_str();
  c.context = l.cp;
  c.expert = l.ep;
  return c;
}

// Where each activation the cost model prices sits among the keep table's
// columns (MH_Estimate.activations), or -1 where the host lists no such
// column.
std::array<int64_t, kActCount> keep_columns(const MH_Estimate& e) {
  require(e.activations != nullptr && e.num_activations > 0,
          "report: the keep table names no columns (MH_Estimate.activations is NULL)");
  std::array<int64_t, kActCount> out;
  out.fill(-1);
  for (int64_t c = 0; c < e.num_activations; ++c)
    for (int a = 0; a < kActCount; ++a)
      if (std::string_view(e.activations[c]) == kActivationNames[size_t(a)]) out[size_t(a)] = c;
  return out;
}

// The host's keep table of a report, as rows per layer of the activations
// the cost model prices. One the host does not list is one its model does
// not have: nothing recomputes it, so it counts as kept. A column the cost
// model does not know is left unpriced.
std::optional<KeepTable> reported_keep(const MH_Estimate& e, int64_t layers) {
  if (e.struct_size < MH_STRUCT_SIZE(MH_Estimate, num_activations) || e.keep == nullptr) return std::nullopt;
  require(e.keep_layers == layers, "report: the keep table has " + std::to_string(e.keep_layers) +
                                       " layers; the model has " + std::to_string(layers));
  const std::array<int64_t, kActCount> column = keep_columns(e);
  KeepTable out(static_cast<size_t>(layers));
  for (int64_t l = 0; l < layers; ++l)
    for (size_t a = 0; a < kActCount; ++a)
      out[size_t(l)][a] = column[a] < 0 || e.keep[l * e.num_activations + column[a]] == MH_KEEP;
  return out;
}

// The context and expert fields of a candidate, as a 2.0 host (whose
// struct_size does not reach them) has them: 1, 1 and the config's comm.
struct ContextExpert {
  int32_t context = 1, expert = 1;
  std::string comm;
  bool operator==(const ContextExpert&) const = default;
};
ContextExpert context_expert(const MH_Candidate& c) {
  if (!reaches(c, &MH_Candidate::expert)) return {};
  return {std::max(1, c.context), std::max(1, c.expert), c.context_comm != nullptr ? c.context_comm : ""};
}

bool same(const MH_Candidate& a, const MH_Candidate& b) {
  return a.tensor == b.tensor && a.pipeline == b.pipeline && a.virtual_stages == b.virtual_stages &&
         a.data == b.data && a.sequence_parallel == b.sequence_parallel && a.micro_batch == b.micro_batch &&
         std::string(a.recompute) == b.recompute && a.recompute_layers == b.recompute_layers &&
         a.distributed_optimizer == b.distributed_optimizer && a.overlap_param_gather == b.overlap_param_gather &&
         context_expert(a) == context_expert(b);
}

}  // namespace

const MH_OptionSpec GridTuner::kOptions[] = {
    opt_choice("goal", "\"train_throughput\"", "train_throughput|inference_latency|inference_throughput",
               "what to optimise"),
    opt("cluster", MH_VALUE_STRING, "\"local_cpu\"",
        "hardware profile: a name in configs/hardware (dgx_a100_80gb, dgx_h100, dgx_h200, local_cpu) or a TOML file"),
    opt_int("nodes", "1", 1, 1e6, "nodes of the cluster"),
    opt_int("gpus_per_node", "0", 0, 4096, "devices (ranks) per node; 0 takes the profile's"),
    opt_double("tokens", "3e11", 0, 1e18, "tokens to train on (or generate), for the days column"),
    opt("tensor", MH_VALUE_STRING, "\"auto\"", "tensor-parallel sizes t: a comma list, or auto (all that divide)"),
    opt("pipeline", MH_VALUE_STRING, "\"auto\"", "pipeline stages p: a comma list, or auto"),
    opt("virtual_stages", MH_VALUE_STRING, "\"1\"", "model chunks per stage v (interleaved 1F1B when > 1), or auto"),
    opt("data", MH_VALUE_STRING, "\"auto\"", "data-parallel sizes d, or auto (the devices left by t*cp*p)"),
    opt("context", MH_VALUE_STRING, "\"1\"",
        "context-parallel sizes cp (the sequence split over cp ranks), or auto (all whose 2*cp divides seq_len)"),
    opt("context_comm", MH_VALUE_STRING, "\"auto\"",
        "with cp > 1, parallel.context.comm_type to try: a comma list of all_gather, p2p, a2a, or auto (all three; "
        "p2p only with the flash attention core)"),
    opt("expert", MH_VALUE_STRING, "\"1\"",
        "expert-parallel sizes ep (a mixture of experts' experts over ep data ranks), or auto (all that divide the "
        "experts and d*cp)"),
    opt("sequence_parallel", MH_VALUE_STRING, "\"auto\"", "true, false, or auto (both; only with t > 1)"),
    opt("micro_batch", MH_VALUE_STRING, "\"auto\"", "micro-batch sizes b, or auto (all that divide the batch)"),
    opt("recompute", MH_VALUE_STRING, "\"auto\"",
        "recompute policies by component name (none, selective, full, a third party's), or auto: every one the "
        "host registers"),
    opt("recompute_layers", MH_VALUE_STRING, "\"1\"", "full recompute: layers per checkpointed group, or auto"),
    opt("distributed_optimizer", MH_VALUE_STRING, "\"false\"",
        "Megatron's distributed optimizer: true, false, or auto (both, only where d > 1)"),
    opt("overlap_param_gather", MH_VALUE_STRING, "\"false\"",
        "with the distributed optimizer, its parameter gather overlapped with the next forward: true, false, or auto"),
    opt_int("top_k", "0", 0, 1000, "best fitting candidates to run for real and rank by measured step time"),
    opt_int("measure_steps", "6", 2, 1e6, "optimizer steps of each measured run (the first is not timed)"),
    opt_bool("pipeline_scatter_gather", "false",
             "price pipeline messages as Megatron's scatter/gather sends them (1/t per rank) instead of as "
             "megahost's engine does (whole activations without sequence parallelism): to compare with the papers"),
    opt("inference_batch", MH_VALUE_STRING, "\"1,4,16\"", "inference: batch sizes to try"),
    opt_int("prompt_len", "128", 1, 1e7, "inference: prompt tokens per sequence"),
    opt_int("output_len", "128", 1, 1e7, "inference: generated tokens per sequence"),
};
const size_t GridTuner::kNumOptions = std::size(GridTuner::kOptions);

GridTuner::GridTuner(const CreateContext& ctx)
    : goal_(parse_goal(ctx.options.get_string("goal"))),
      cluster_(ctx.options.get_string("cluster")),
      inference_batches_(ctx.options.get_string("inference_batch")),
      nodes_(int32_t(ctx.options.get_int("nodes"))),
      gpus_per_node_(int32_t(ctx.options.get_int("gpus_per_node"))),
      top_k_(int32_t(ctx.options.get_int("top_k"))),
      measure_steps_(int32_t(ctx.options.get_int("measure_steps"))),
      tokens_(ctx.options.get_double("tokens")),
      scatter_gather_(ctx.options.get_bool("pipeline_scatter_gather")),
      lists_(SearchLists::from(ctx.options)),
      request_{ctx.options.get_int("prompt_len"), ctx.options.get_int("output_len")} {}

void GridTuner::needs(MH_TunerNeeds& out) const {
  out.hardware = cluster_.c_str();
  out.nodes = nodes_;
  out.devices_per_node = gpus_per_node_;
  out.measure_top_k = top_k_;
  out.measure_steps = measure_steps_;
  out.prompt_tokens = request_.prompt;
  out.output_tokens = request_.output;
}

void GridTuner::recompute_policies(std::span<const char* const> names) {
  policies_.assign(names.begin(), names.end());
}

void GridTuner::begin(const MH_ModelShape& shape, const MH_Hardware& hardware) {
  // A host older than 2.1 reads no candidate's cp or ep (the shape it hands
  // over is as old): it would run every candidate at 1 and 1.
  require(reaches(shape, &MH_ModelShape::flash_attention) || (lists_.context == "1" && lists_.expert == "1"),
          "tuner.context = \"" + lists_.context + "\", tuner.expert = \"" + lists_.expert +
              "\": this host (ABI < 2.1) does not run a candidate's context or expert parallelism; set both to \"1\" "
              "or update megahost");
  machine_.emplace(hardware);
  model_ = Model::from(shape);
  per_node_ = gpus_per_node_ > 0 ? gpus_per_node_ : hardware.devices_per_node;
  devices_ = nodes_ * per_node_;
  std::vector<Proposal> proposals = training() ? training_proposals(lists_, model_, devices_, policies_)
                                               : inference_proposals(lists_, inference_batches_, model_, devices_);
  const int32_t workload = training() ? MH_WORKLOAD_TRAIN : MH_WORKLOAD_INFERENCE;
  entries_.clear();
  entries_.reserve(proposals.size());
  for (auto& p : proposals) {
    Entry& e = entries_.emplace_back();
    e.layout = std::move(p.layout);
    e.candidate = candidate_of(e.layout, workload);
    e.problems = std::move(p.problems);
    if (e.problems.empty() && !training()) predict(e);
  }
  cursor_ = 0;
}

void GridTuner::predict(Entry& e, const KeepTable& keep) const {
  Placement where = Placement::of(e.layout, per_node_, machine_->shared_device());
  where.scatter_gather = scatter_gather_;
  if (training()) {
    e.predicted = training_step(*machine_, model_, e.layout, where, keep).step_seconds;
    e.tokens_per_s = double(model_.global_batch * model_.seq) / e.predicted;
    return;
  }
  const InferenceCost c = inference(*machine_, model_, e.layout, where, request_);
  e.predicted = c.latency_seconds;
  e.tokens_per_s = c.tokens_per_s;
  e.ttft = c.ttft_seconds;
  e.tpot = c.tpot_seconds;
}

bool GridTuner::next(const MH_ModelShape&, MH_Candidate& out) {
  while (cursor_ < entries_.size() && !entries_[cursor_].problems.empty()) ++cursor_;
  if (cursor_ == entries_.size()) return false;
  current_ = &entries_[cursor_++];
  out = current_->candidate;
  return true;
}

GridTuner::Entry* GridTuner::find(const MH_Candidate& c) {
  for (auto& e : entries_)
    if (same(e.candidate, c)) return &e;
  return nullptr;
}

void GridTuner::report(const MH_Candidate& candidate, const MH_Estimate& estimate) {
  Entry* e = estimate.measured ? find(candidate) : current_;
  require(e != nullptr, "report: the tuner never proposed this candidate", MH_INVALID_ARGUMENT);
  if (estimate.measured) {
    record_measurement(*e, estimate);
    return;
  }
  e->estimated = true;
  e->capacity = estimate.capacity_bytes;
  e->failure = estimate.failure != nullptr ? estimate.failure : "";
  e->memory = estimate.memory_bytes;
  e->memory_measured = true;
  if (training()) {
    std::optional<KeepTable> keep = reported_keep(estimate, model_.layers);
    require(keep.has_value() || !e->failure.empty(),
            "report: no keep table for recompute '" + e->layout.recompute +
                "'; the cost model prices a policy from the keep table the host reports",
            MH_INVALID_ARGUMENT);
    if (keep) predict(*e, *keep);
  }
  e->fits = e->failure.empty() && e->memory <= e->capacity;
}

// A training run measures the step; a generate run the time to the first
// token and per output token (a host older than 1.4 measures no inference).
void GridTuner::record_measurement(Entry& e, const MH_Estimate& estimate) const {
  if (training()) {
    e.measured = estimate.step_seconds;
    return;
  }
  require(reaches(estimate, &MH_Estimate::tpot_seconds) && estimate.ttft_seconds > 0,
          "report: a measured inference estimate needs ttft_seconds and tpot_seconds (ABI 1.4)", MH_INVALID_ARGUMENT);
  e.measured_ttft = estimate.ttft_seconds;
  e.measured_tpot = estimate.tpot_seconds;
  e.measured = estimate.ttft_seconds + double(request_.output) * estimate.tpot_seconds;
  e.measured_tokens_per_s = double(e.layout.b * request_.output) / e.measured;
}

double GridTuner::seconds(const Entry& e) const {
  if (goal_ == Goal::kInferenceThroughput) return 1 / (e.measured > 0 ? e.measured_tokens_per_s : e.tokens_per_s);
  return e.measured > 0 ? e.measured : e.predicted;
}

// Measured candidates first, each group by its time.
bool GridTuner::better(const Entry& a, const Entry& b) const {
  if ((a.measured > 0) != (b.measured > 0)) return a.measured > 0;
  return seconds(a) < seconds(b);
}

std::string GridTuner::rejection(const Entry& e) const {
  if (!e.problems.empty()) return "does not divide: " + join(e.problems);
  if (!e.failure.empty()) return "dry run failed: " + e.failure;
  if (!e.estimated) return "not estimated";
  const double need = double(e.memory) / kGiB, have = double(e.capacity) / kGiB;
  return "OOM by " + fixed(need - have, 2) + " GiB: needs " + fixed(need, 2) + " GiB per rank, " + fixed(have, 2) +
         " GiB available";
}

std::string GridTuner::behind(const Entry& e, const Entry& best) const {
  const bool measured = e.measured > 0 && best.measured > 0;
  // Both measured: their runs; otherwise both as predicted.
  auto value = [&](const Entry& x) {
    if (measured) return seconds(x);
    return goal_ == Goal::kInferenceThroughput ? 1 / x.tokens_per_s : x.predicted;
  };
  const double percent = 100 * (value(e) / value(best) - 1);
  return "slower than the best by " + fixed(percent, 1) + "% (" + (measured ? "measured" : "predicted") + ")";
}

MH_TunerResult GridTuner::row(const Entry& e, int32_t verdict, int32_t rank, const std::string& reason) {
  reasons_.push_back(reason);
  MH_TunerResult r{};
  r.struct_size = sizeof(MH_TunerResult);
  r.candidate = &e.candidate;
  r.verdict = verdict;
  r.rank = rank;
  r.step_seconds = e.predicted;
  r.measured_seconds = e.measured;
  r.memory_bytes = e.memory;
  r.memory_measured = e.memory_measured ? 1 : 0;
  if (!e.problems.empty()) return r;
  const double time = e.measured > 0 ? e.measured : e.predicted;
  const double peak_devices = machine_->shared_device() ? double(nodes_) : double(devices_);
  if (training()) {
    r.tokens_per_s = double(model_.global_batch * model_.seq) / time;
    r.mfu = model_flops(model_) / (time * peak_devices * machine_->peak_flops());
  } else {
    r.tokens_per_s = e.measured > 0 ? e.measured_tokens_per_s : e.tokens_per_s;
    r.latency_seconds = time;
    r.ttft_seconds = e.ttft;
    r.tpot_seconds = e.tpot;
    r.measured_ttft_seconds = e.measured_ttft;
    r.measured_tpot_seconds = e.measured_tpot;
    // 2 FLOPs per parameter per token, prompt and output.
    const double tokens = double(e.layout.b) * double(request_.prompt + request_.output);
    r.mfu = 2 * double(params_per_rank(model_, Layout{}, 0)) * tokens / (time * peak_devices * machine_->peak_flops());
  }
  r.days = tokens_ / r.tokens_per_s / kSecondsPerDay;
  return r;
}

std::span<const MH_TunerResult> GridTuner::results() {
  std::vector<const Entry*> ranked, rejected;
  for (const auto& e : entries_) (e.fits ? ranked : rejected).push_back(&e);
  std::stable_sort(ranked.begin(), ranked.end(), [&](const Entry* a, const Entry* b) { return better(*a, *b); });
  rows_.clear();
  reasons_.clear();
  reasons_.reserve(entries_.size());
  for (size_t i = 0; i < ranked.size(); ++i)
    rows_.push_back(row(*ranked[i], MH_VERDICT_RANKED, int32_t(i + 1), i == 0 ? "best" : behind(*ranked[i], *ranked[0])));
  for (const Entry* e : rejected) rows_.push_back(row(*e, MH_VERDICT_REJECTED, 0, rejection(*e)));
  for (size_t i = 0; i < rows_.size(); ++i) rows_[i].reason = reasons_[i].c_str();
  return rows_;
}

}  // namespace mh::tuner
