// A checkpoint saved under any layout loads under any other and the run
// goes on computing what one rank computes: 3 steps saved under layout A,
// steps 4-6 run under layout B from that checkpoint, against 6 steps on one
// rank — losses within 1e-5 relative and the last step's gradients within
// 1e-4, as the layout-equivalence tests hold layouts to. Dropout is on; the
// optimizer state and the data position are resharded with the weights.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <string>

#include "layout_run.hpp"

namespace mh::test {
namespace {

namespace fs = std::filesystem;

struct Side {
  const char* overrides;
  bool mpi = false;
  int ranks = 0;
};

struct Pair {
  const char* name;
  Side save, load;
  bool compare_grads = true;  // off when B shards gradients (distributed optimizer)
};

void PrintTo(const Pair& p, std::ostream* os) { *os << p.name; }

// decay_steps pins the schedule so the 3-step run decays as the 6-step one.
constexpr const char* kSchedule = " train.decay_steps=6";

const LayoutResult& six_steps_on_one_rank() {
  static const LayoutResult r = run_layout(std::string("comm.world_size=1 train.steps=6") + kSchedule);
  return r;
}

std::string overrides(const Side& side, const char* steps, const std::string& checkpoint) {
  return std::string(side.overrides) + (side.mpi ? " comm.plugin=mpi" : "") + " train.steps=" + steps + kSchedule +
         " " + checkpoint;
}

// The resumed run's three steps are steps 4 to 6 of the uninterrupted `ref`.
void expect_continues(const LayoutResult& ref, const LayoutResult& resumed, bool compare_grads = true) {
  ASSERT_EQ(resumed.exit_code, 0) << resumed.log;
  ASSERT_EQ(resumed.losses.size(), 3u) << resumed.log;
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(resumed.losses[i], ref.losses[i + 3], 1e-5 * std::fabs(ref.losses[i + 3])) << "step " << i + 4;
  if (!compare_grads) return;
  ASSERT_EQ(resumed.grads.size(), ref.grads.size());
  for (const auto& [name, g] : ref.grads) EXPECT_LE(relative_difference(resumed.grads.at(name), g), 1e-4) << name;
}

struct Reshard {
  std::string save, load;
  bool compare_grads;
};

// Each case saves 3 steps of `model` on one layout and resumes them to 6 on
// another, which must continue `ref`.
void expect_resumes_across(const LayoutResult& ref, const std::string& model, std::initializer_list<Reshard> cases) {
  for (const Reshard& c : cases) {
    const fs::path dir = fs::temp_directory_path() / ("megahost_reshard_" + std::to_string(getpid()));
    fs::remove_all(dir);
    const LayoutResult saved = run_layout(c.save + " train.steps=3 checkpoint.dir=" + dir.string() + model);
    ASSERT_EQ(saved.exit_code, 0) << saved.log;
    const LayoutResult resumed = run_layout(c.load + " train.steps=6 checkpoint.load=" + dir.string() + model);
    fs::remove_all(dir);
    SCOPED_TRACE(c.save + " -> " + c.load);
    expect_continues(ref, resumed, c.compare_grads);
  }
}

class CheckpointReshard : public ::testing::TestWithParam<Pair> {};

TEST_P(CheckpointReshard, ContinuesAsOneRankWould) {
  const Pair& p = GetParam();
  const LayoutResult& ref = six_steps_on_one_rank();
  ASSERT_EQ(ref.exit_code, 0) << ref.log;
  ASSERT_EQ(ref.losses.size(), 6u);
  const fs::path dir = fs::temp_directory_path() / ("megahost_reshard_" + std::to_string(getpid()) + "_" + p.name);
  fs::remove_all(dir);

  const LayoutResult saved = run_layout(overrides(p.save, "3", "checkpoint.dir=" + dir.string()), p.save.mpi, p.save.ranks);
  ASSERT_EQ(saved.exit_code, 0) << saved.log;
  const LayoutResult resumed =
      run_layout(overrides(p.load, "6", "checkpoint.load=" + dir.string()), p.load.mpi, p.load.ranks);
  fs::remove_all(dir);
  EXPECT_NE(resumed.log.find("resumed from"), std::string::npos) << resumed.log;
  expect_continues(ref, resumed, p.compare_grads);
}

const char* const kTp2 = "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true";
const char* const kDp2Dist = "comm.world_size=2 parallel.data.distributed_optimizer=true";
const char* const kDp4 = "comm.world_size=4";
const char* const kPp2 = "comm.world_size=2 parallel.pipeline.size=2";
const char* const kPp2Interleaved =
    "comm.world_size=2 parallel.pipeline.size=2 parallel.pipeline.schedule=interleaved parallel.pipeline.virtual_stages=2";
const char* const kTp2Pp2 = "comm.world_size=4 parallel.tensor.size=2 parallel.pipeline.size=2";
const char* const kPp2Dp2Dist =
    "comm.world_size=4 parallel.pipeline.size=2 parallel.pipeline.schedule=interleaved parallel.pipeline.virtual_stages=2 "
    "parallel.data.distributed_optimizer=true";
const char* const kAll8 =
    "comm.world_size=8 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true parallel.pipeline.size=2 "
    "parallel.data.distributed_optimizer=true";
const char* const kOne = "comm.world_size=1";
// The distributed optimizer shards over the data group with its context ranks.
const char* const kCp2Dp2Dist = "comm.world_size=4 parallel.context.size=2 parallel.data.distributed_optimizer=true";
// Under mpiexec the world is the process count.
const char* const kMpiTp2 = "parallel.tensor.size=2 parallel.tensor.sequence_parallel=true";
const char* const kMpiPp2 = "parallel.pipeline.size=2";
const char* const kTp2Dp2Dist =
    "comm.world_size=4 parallel.tensor.size=2 parallel.data.distributed_optimizer=true";

INSTANTIATE_TEST_SUITE_P(
    Layouts, CheckpointReshard,
    ::testing::Values(Pair{"one_to_tp2_sp", {kOne}, {kTp2}},
                      Pair{"tp2_sp_to_one", {kTp2}, {kOne}},
                      Pair{"dp2_distributed_to_dp4", {kDp2Dist}, {kDp4}},
                      Pair{"dp4_to_dp2_distributed", {kDp4}, {kDp2Dist}, false},
                      Pair{"pp2_to_pp2_interleaved", {kPp2}, {kPp2Interleaved}},
                      Pair{"pp2_interleaved_dp2_distributed_to_tp2_pp2", {kPp2Dp2Dist}, {kTp2Pp2}},
                      Pair{"tp2_pp2_dp2_distributed_to_one", {kAll8}, {kOne}},
                      Pair{"cp2_dp2_distributed_to_tp2_sp", {kCp2Dp2Dist}, {kTp2}},
                      Pair{"mpi_tp2_to_threads_pp2_dp2_distributed", {kMpiTp2, true, 2}, {kPp2Dp2Dist}, false},
                      Pair{"threads_tp2_dp2_distributed_to_mpi_pp2", {kTp2Dp2Dist}, {kMpiPp2, true, 2}}),
    [](const ::testing::TestParamInfo<Pair>& info) { return std::string(info.param.name); });

// Expert weights are stored by their global expert index: a checkpoint whose
// experts were split over an expert group loads where one rank holds them all,
// and the other way round; so does one whose expert groups took context ranks,
// with the experts' optimizer state sharded over their expert-data group.
TEST(CheckpointReshardExperts, ExpertParallelTwoAndOneRankLoadEachOthersCheckpoints) {
  const std::string moe =
      std::string(" model.arch=llama model.experts=4 model.router_topk=2 model.moe_ffn_hidden=48") + kSchedule;
  const LayoutResult ref = run_layout("comm.world_size=1 train.steps=6" + moe);
  ASSERT_EQ(ref.exit_code, 0) << ref.log;
  ASSERT_EQ(ref.losses.size(), 6u);
  const std::string ep2 = "comm.world_size=2 parallel.expert.size=2", one = "comm.world_size=1";
  const std::string ep2_cp2_dp2 =
      "comm.world_size=4 parallel.context.size=2 parallel.expert.size=2 parallel.data.distributed_optimizer=true";
  // The distributed optimizer's gradients are per-rank shards: its losses are compared.
  expect_resumes_across(ref, moe, {{ep2, one, true}, {one, ep2, true}, {ep2_cp2_dp2, one, true}, {one, ep2_cp2_dp2, false}});
}

// With tensor and sequence parallelism the expert groups take tensor ranks:
// of the tensor ranks holding the same experts one writes them, and the
// checkpoint loads on layouts with other tensor and expert sizes.
TEST(CheckpointReshardExperts, TensorParallelExpertLayoutsLoadEachOthersCheckpoints) {
  const std::string moe =
      std::string(" model.arch=llama model.experts=4 model.router_topk=2 model.moe_ffn_hidden=48") + kSchedule;
  const LayoutResult ref = run_layout("comm.world_size=1 train.steps=6" + moe);
  ASSERT_EQ(ref.exit_code, 0) << ref.log;
  ASSERT_EQ(ref.losses.size(), 6u);
  const std::string sp = " parallel.tensor.size=2 parallel.tensor.sequence_parallel=true";
  const std::string tp2_ep1 = "comm.world_size=2" + sp, tp2_ep2 = "comm.world_size=2 parallel.expert.size=2" + sp;
  const std::string tp2_dp2_ep4 = "comm.world_size=4 parallel.expert.size=4" + sp;
  const std::string tp2_dp2_ep2_distributed =
      "comm.world_size=4 parallel.expert.size=2 parallel.data.distributed_optimizer=true" + sp;
  const std::string ep2 = "comm.world_size=2 parallel.expert.size=2";
  // The distributed optimizer's gradients are per-rank shards: its losses are compared.
  expect_resumes_across(ref, moe,
                        {{tp2_ep1, tp2_dp2_ep4, true}, {tp2_dp2_ep4, tp2_ep2, true},
                         {tp2_dp2_ep2_distributed, ep2, true}, {ep2, tp2_dp2_ep2_distributed, false}});
}

// A head size other than hidden / heads, with QK-norm: the QKV rows and the
// projection's columns are stored by their global index like any other.
TEST(CheckpointReshardHeadDim, TensorParallelTwoAndOneRankLoadEachOthersCheckpoints) {
  const std::string qwen3 =
      std::string(" model.arch=llama model.kv_heads=2 model.qk_norm=true model.head_dim=24") + kSchedule;
  const LayoutResult ref = run_layout("comm.world_size=1 train.steps=6" + qwen3);
  ASSERT_EQ(ref.exit_code, 0) << ref.log;
  ASSERT_EQ(ref.losses.size(), 6u);
  for (const auto& [save, load] : {std::pair{std::string(kTp2), std::string(kOne)}, std::pair{std::string(kOne), std::string(kTp2)}}) {
    const fs::path dir = fs::temp_directory_path() / ("megahost_reshard_head_dim_" + std::to_string(getpid()));
    fs::remove_all(dir);
    const LayoutResult saved = run_layout(save + " train.steps=3 checkpoint.dir=" + dir.string() + qwen3);
    ASSERT_EQ(saved.exit_code, 0) << saved.log;
    const LayoutResult resumed = run_layout(load + " train.steps=6 checkpoint.load=" + dir.string() + qwen3);
    // Another head size is another model: the checkpoint names the key.
    const LayoutResult other = run_layout(load + " train.steps=6 checkpoint.load=" + dir.string() +
                                          " model.arch=llama model.kv_heads=2 model.qk_norm=true model.head_dim=32");
    fs::remove_all(dir);
    EXPECT_NE(other.exit_code, 0) << other.log;
    EXPECT_NE(other.log.find("head_dim"), std::string::npos) << other.log;
    SCOPED_TRACE(save + " -> " + load);
    expect_continues(ref, resumed);
  }
}

}  // namespace
}  // namespace mh::test
