// The tuner against the paper: Korthikanti et al. 2022 ([K22], Tables 3 and
// 5; the results table is in docs/tuner.md) trained GPT 22B, 175B, 530B and 1T on
// 8, 64, 280 and 512 A100-80GB. Tuned over t, p, v, sequence parallelism
// and recompute on the shipped dgx_a100_80gb profile, the grid tuner must
// pick the paper's (t, p) with SP + selective recompute -- or one it
// predicts faster, with the paper's within 5% of it -- predict the MFU of
// the paper's layout within 15% and the ~30% gain of SP + selective over
// full recompute within 5 points.
//
// Memory: a dry run at these shapes takes 0.1 s (22B) to 2 s (1T) per
// candidate, too slow to answer the hundreds of candidates here, so each is
// answered with paper_memory.hpp's reproduction of the engine's accounting
// (bf16 mixed precision, as the paper trained), which PaperMemory checks
// against real dry runs of the paper's four layouts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>

#include "component_harness.hpp"
#include "data/temp_dir.hpp"
#include "grid_tuner.hpp"
#include "keep_tables.hpp"
#include "megahost_process.hpp"
#include "paper_memory.hpp"
#include "training_cost.hpp"
#include "tuner/hardware_profile.hpp"

namespace mh::tuner {
namespace {

using mh::testing::Instance;

struct PaperRun {
  const char* name;
  Model model;     // [K22] Table 3: layers, hidden, heads, ffn = 4h, s, V, global batch
  int32_t gpus, t, p, v, b;
  double mfu;      // Table 5, SP + selective ("present work")
  double full_s;   // Table 5 iteration time, full recompute without SP
  double present_s;
  int32_t pick_t, pick_p;  // the tuner's pick
};

// v: 3 interleaving stages for 175B and 530B ([K22] section 6); the paper
// does not say for 1T, taken as 1. The 175B pick is not the paper's: t = 4,
// p = 16 moves half the tensor-parallel traffic per FLOP of t = 8 for a
// larger bubble, predicted 3.9% faster (docs/tuner.md).
const PaperRun kRuns[] = {
    {"22B", {48, 6144, 64, 4 * 6144, 2048, 51200, 4}, 8, 8, 1, 1, 4, 0.415, 1.42, 1.10, 8, 1},
    {"175B", {96, 12288, 96, 4 * 12288, 2048, 51200, 64}, 64, 8, 8, 3, 1, 0.514, 18.13, 13.75, 4, 16},
    {"530B", {105, 20480, 128, 4 * 20480, 2048, 51200, 280}, 280, 8, 35, 3, 1, 0.560, 49.05, 37.83, 8, 35},
    {"1T", {128, 25600, 160, 4 * 25600, 2048, 51200, 512}, 512, 8, 64, 1, 1, 0.563, 94.42, 71.49, 8, 64},
};

// gtest names a parameter by printing it.
void PrintTo(const PaperRun& r, std::ostream* out) { *out << r.name; }

const HardwareProfile& a100() {
  static const HardwareProfile profile = [] {
    Diagnostics diag;
    std::optional<HardwareProfile> p = load_hardware_profile("dgx_a100_80gb", {MEGAHOST_HARDWARE_DIR}, diag);
    if (!p) throw std::runtime_error(diag.report());
    return *p;
  }();
  return profile;
}

const MH_ComponentDesc& grid() {
  static const MH_ComponentDesc desc = mh::component<GridTuner>(
      "grid", "0.1.0", "test", std::span<const MH_OptionSpec>(GridTuner::kOptions, GridTuner::kNumOptions));
  return desc;
}

// The paper's setup: no data parallelism, its micro-batch, Megatron's
// scatter/gather of pipeline messages; t, p, v, SP and recompute searched.
class PaperSearch {
 public:
  explicit PaperSearch(const PaperRun& run)
      : run_(run),
        tuner_(grid(), "tuner",
               {{"cluster", std::string("dgx_a100_80gb")},
                {"nodes", int64_t{run.gpus / 8}},
                {"data", std::string("1")},
                {"virtual_stages", std::string("auto")},
                {"micro_batch", std::to_string(run.b)},
                {"recompute_layers", std::string("1")},
                {"pipeline_scatter_gather", true}}) {
    const Model& m = run.model;
    shape_ = MH_ModelShape{sizeof(MH_ModelShape), m.layers, m.hidden, m.heads, m.ffn, m.seq, m.vocab,
                           run.b, m.global_batch, run.gpus};
    const std::vector<const char*>& policies = testing::builtin_policies();
    mh::check(api().recompute_policies(tuner_.self(), policies.data(), policies.size()), "recompute_policies");
    mh::check(api().begin(tuner_.self(), &shape_, &a100().view()), "begin");
    for (MH_Candidate c; next(c);) report(c);
  }

  std::span<const MH_TunerResult> results() const {
    const MH_TunerResult* rows = nullptr;
    size_t count = 0;
    mh::check(api().results(tuner_.self(), &rows, &count), "results");
    return {rows, count};
  }

 private:
  const MH_TunerApi& api() const { return tuner_.api(); }
  bool next(MH_Candidate& c) {
    c = MH_Candidate{};
    c.struct_size = sizeof(c);
    int32_t done = 0;
    mh::check(api().next(tuner_.self(), &shape_, &c, &done), "next");
    return done == 0;
  }
  void report(const MH_Candidate& c) {
    MH_Estimate e{};
    e.struct_size = sizeof(e);
    e.capacity_bytes = a100().memory_bytes;
    e.memory_bytes = testing::engine_memory(run_.model, c);
    e.fits = e.memory_bytes <= e.capacity_bytes;
    const std::vector<int32_t> keep = testing::candidate_keep(run_.model, c);
    e.keep = keep.data();
    e.keep_layers = run_.model.layers;
    e.activations = kActivationNames.data();
    e.num_activations = kActCount;
    mh::check(api().report(tuner_.self(), &c, &e), "report");
  }

  const PaperRun& run_;
  Instance<MH_TunerApi> tuner_;
  MH_ModelShape shape_{};
};

Layout paper_layout(const PaperRun& r, bool present) {
  Layout l;
  l.t = r.t, l.p = r.p, l.v = r.v, l.b = r.b;
  l.sp = present;
  l.recompute = present ? "selective" : "full";
  l.recompute_layers = present ? 0 : 1;
  return l;
}

double predicted_step(const PaperRun& r, bool present) {
  const Layout l = paper_layout(r, present);
  Placement w = Placement::of(l, 8, false);
  w.scatter_gather = true;
  const KeepTable keep = testing::builtin_keep(l.recompute, r.model.layers, l.layers_per_chunk(r.model), 1);
  return training_step(Machine(a100().view()), r.model, l, w, keep).step_seconds;
}

double mfu(const PaperRun& r, double seconds) { return model_flops(r.model) / (seconds * r.gpus * 312e12); }

class Paper : public ::testing::TestWithParam<PaperRun> {};

bool papers(const PaperRun& r, const MH_Candidate& c) {
  return c.tensor == r.t && c.pipeline == r.p && c.sequence_parallel == 1 && std::string(c.recompute) == "selective";
}

// The pick is the paper's (t, p) or one the model predicts faster; either
// way the paper's layout fits and is predicted within 5% of the pick: where
// the model and the paper disagree, they disagree by little.
TEST_P(Paper, TheTunerPicksThePapersLayoutOrOneItPredictsFasterByLittle) {
  const PaperRun& r = GetParam();
  PaperSearch search(r);
  const MH_TunerResult& best = search.results()[0];
  ASSERT_EQ(best.verdict, MH_VERDICT_RANKED);
  const MH_Candidate& c = *best.candidate;
  std::printf("%s: picked t=%d p=%d v=%d sp=%d %s, %.2f s, MFU %.1f%%\n", r.name, c.tensor, c.pipeline,
              c.virtual_stages, c.sequence_parallel, c.recompute, best.step_seconds, 100 * best.mfu);
  EXPECT_EQ(c.tensor, r.pick_t);
  EXPECT_EQ(c.pipeline, r.pick_p);
  EXPECT_EQ(c.sequence_parallel, 1);
  EXPECT_STREQ(c.recompute, "selective");
  int checked = 0;
  for (const MH_TunerResult& row : search.results()) {
    if (!papers(r, *row.candidate) || row.verdict != MH_VERDICT_RANKED) continue;
    const double behind = row.step_seconds / best.step_seconds - 1;
    std::printf("%s: paper's t=%d p=%d with v=%d: %.2f s, %.1f%% behind the pick\n", r.name, r.t, r.p,
                row.candidate->virtual_stages, row.step_seconds, 100 * behind);
    if (row.candidate->virtual_stages != r.v) continue;
    EXPECT_LT(behind, 0.05);
    ++checked;
  }
  EXPECT_EQ(checked, 1) << "the paper's layout fits";
}

TEST_P(Paper, PredictsThePapersMfuWithin15Percent) {
  const PaperRun& r = GetParam();
  const double predicted = mfu(r, predicted_step(r, true));
  std::printf("%s: MFU paper %.1f%%, predicted %.1f%% (%.2f s vs %.2f s)\n", r.name, 100 * r.mfu, 100 * predicted,
              predicted_step(r, true), r.present_s);
  EXPECT_NEAR(predicted / r.mfu, 1.0, 0.15);
}

TEST_P(Paper, ReproducesTheGainOfSequenceParallelismAndSelectiveOverFullRecomputeWithin5Points) {
  const PaperRun& r = GetParam();
  const double paper = r.full_s / r.present_s - 1, predicted = predicted_step(r, false) / predicted_step(r, true) - 1;
  std::printf("%s: gain paper %.1f%%, predicted %.1f%%\n", r.name, 100 * paper, 100 * predicted);
  EXPECT_NEAR(predicted, paper, 0.05);
}

// The peak per-rank bytes of megahost's dry run of the paper's layout with
// SP + selective recompute, over the batch the tuner dry-runs (3p micro-
// batches at most).
uint64_t dry_run_peak(const PaperRun& r, const MH_Candidate& c) {
  data::testing::TempDir dir;
  const std::string metrics = dir.file("metrics.jsonl");
  const int64_t microbatches = std::min<int64_t>(r.model.global_batch / r.b, 3 * int64_t(r.p));
  const auto o = [](const char* key, int64_t v) { return std::string(key) + "=" + std::to_string(v); };
  const auto outcome = mh::host::testing::run_megahost(
      {"--dry_run", "--metrics_out", metrics, o("model.layers", r.model.layers), o("model.hidden", r.model.hidden),
       o("model.heads", r.model.heads), o("model.seq_len", r.model.seq), o("model.vocab", r.model.vocab),
       o("train.global_batch", microbatches * r.b), o("train.micro_batch", r.b), o("comm.world_size", r.t * r.p),
       o("parallel.tensor.size", r.t), "parallel.tensor.sequence_parallel=true", o("parallel.pipeline.size", r.p),
       o("parallel.pipeline.virtual_stages", c.virtual_stages),
       std::string("parallel.pipeline.schedule=") + (c.virtual_stages > 1 ? "interleaved" : "1f1b"),
       "recompute.plugin=selective", "kernels.dtype=bf16"});
  if (outcome.status != 0) throw std::runtime_error("dry run failed: " + outcome.err);
  uint64_t peak = 0;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.contains("final"))
      for (const auto& rank : record["memory"]) peak = std::max(peak, rank["total"].get<uint64_t>());
  }
  return peak;
}

class PaperMemory : public ::testing::TestWithParam<PaperRun> {};

TEST_P(PaperMemory, TheAnswerGivenForEachCandidateIsWithin5PercentOfTheEnginesDryRun) {
  const PaperRun& r = GetParam();
  MH_Candidate c{};
  c.tensor = r.t, c.pipeline = r.p, c.virtual_stages = r.v, c.data = 1, c.micro_batch = r.b;
  c.sequence_parallel = 1;
  c.recompute = "selective";
  const double dry = double(dry_run_peak(r, c)), model = double(testing::engine_memory(r.model, c));
  std::printf("%s: dry run %.2f GiB, answered %.2f GiB\n", r.name, dry / (1 << 30), model / (1 << 30));
  EXPECT_NEAR(model / dry, 1.0, 0.05);
}

INSTANTIATE_TEST_SUITE_P(K22, PaperMemory, ::testing::ValuesIn(kRuns),
                         [](const auto& info) { return std::string("gpt_") + info.param.name; });

INSTANTIATE_TEST_SUITE_P(K22, Paper, ::testing::ValuesIn(kRuns),
                         [](const auto& info) { return std::string("gpt_") + info.param.name; });

}  // namespace
}  // namespace mh::tuner
