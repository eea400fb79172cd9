// Every tensor/sequence/context/data/pipeline-parallel layout computes the same function as
// one rank: 5 steps of losses within 1e-5 relative and every gathered
// gradient of the last step within 1e-4, with dropout on.
#include <gtest/gtest.h>

#include <cmath>

#include "layout_run.hpp"

namespace mh::test {
namespace {

struct Layout {
  const char* name;
  const char* overrides;
  bool mpi;
  int ranks;
  // The distributed optimizer reduces gradients into per-rank shards, so
  // only its losses are comparable.
  bool compare_grads = true;
};

const LayoutResult& single_rank() {
  static const LayoutResult r = run_layout("comm.world_size=1");
  return r;
}

class SameFunctionAsOneRank : public ::testing::TestWithParam<Layout> {};

TEST_P(SameFunctionAsOneRank, LossesAndGradientsMatch) {
  const LayoutResult& ref = single_rank();
  ASSERT_EQ(ref.exit_code, 0) << ref.log;
  ASSERT_EQ(ref.losses.size(), 5u) << ref.log;
  const Layout& layout = GetParam();
  expect_same_function(ref, run_layout(layout.overrides, layout.mpi, layout.ranks), layout.compare_grads);
}

const Layout kLayouts[] = {
    {"tp2", "comm.world_size=2 parallel.tensor.size=2", false, 0},
    {"tp2_sp", "comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true", false, 0},
    {"tp4", "comm.world_size=4 parallel.tensor.size=4", false, 0},
    {"tp4_sp", "comm.world_size=4 parallel.tensor.size=4 parallel.tensor.sequence_parallel=true", false, 0},
    {"dp2", "comm.world_size=2", false, 0},
    {"tp2_sp_dp2", "comm.world_size=4 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true", false, 0},
    {"pp2_1f1b", "comm.world_size=2 parallel.pipeline.size=2", false, 0},
    {"pp4_1f1b", "comm.world_size=4 parallel.pipeline.size=4", false, 0},
    {"pp2_gpipe", "comm.world_size=2 parallel.pipeline.size=2 parallel.pipeline.schedule=gpipe", false, 0},
    {"pp2_interleaved", "comm.world_size=2 parallel.pipeline.size=2 parallel.pipeline.schedule=interleaved "
                        "parallel.pipeline.virtual_stages=2", false, 0},
    {"pp2_uneven", "comm.world_size=2 parallel.pipeline.size=2 parallel.pipeline.layers_per_stage=1,3", false, 0},
    {"tp2_pp2", "comm.world_size=4 parallel.tensor.size=2 parallel.pipeline.size=2", false, 0},
    {"dp4", "comm.world_size=4", false, 0},
    {"pp2_dp2_interleaved", "comm.world_size=4 parallel.pipeline.size=2 parallel.pipeline.schedule=interleaved "
                            "parallel.pipeline.virtual_stages=2", false, 0},
    {"tp2_sp_pp2_dp2", "comm.world_size=8 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true "
                       "parallel.pipeline.size=2", false, 0},
    {"mpi4_pp2_tp2_sp", "comm.plugin=mpi parallel.tensor.size=2 parallel.tensor.sequence_parallel=true "
                        "parallel.pipeline.size=2", true, 4},
    {"dp2_distributed_optimizer", "comm.world_size=2 parallel.data.distributed_optimizer=true", false, 0, false},
    {"tp2_pp2_dp2_distributed_optimizer", "comm.world_size=8 parallel.tensor.size=2 parallel.pipeline.size=2 "
                                          "parallel.data.distributed_optimizer=true", false, 0, false},
    {"pp2_dp2_interleaved_sp_distributed_optimizer",
     "comm.world_size=8 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true parallel.pipeline.size=2 "
     "parallel.pipeline.schedule=interleaved parallel.pipeline.virtual_stages=2 parallel.data.distributed_optimizer=true",
     false, 0, false},
    {"mpi2_tp2_sp", "comm.plugin=mpi parallel.tensor.size=2 parallel.tensor.sequence_parallel=true", true, 2},
    {"mpi4_tp4", "comm.plugin=mpi parallel.tensor.size=4", true, 4},
    {"mpi4_tp2_sp_dp2", "comm.plugin=mpi parallel.tensor.size=2 parallel.tensor.sequence_parallel=true", true, 4},
    // Overlapped bucketed reduction: 0.05 MiB buckets hold about a quarter
    // of a layer, so every step reduces many buckets while backward runs.
    {"dp2_overlap", "comm.world_size=2 parallel.data.bucket_mb=0.05", false, 0},
    {"dp2_no_overlap", "comm.world_size=2 parallel.data.overlap_grad_reduce=false", false, 0},
    {"dp4_overlap_distributed_optimizer",
     "comm.world_size=4 parallel.data.bucket_mb=0.05 parallel.data.distributed_optimizer=true", false, 0, false},
    {"tp2_sp_dp2_overlap", "comm.world_size=4 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true "
                           "parallel.data.bucket_mb=0.05", false, 0},
    {"pp2_dp2_overlap", "comm.world_size=4 parallel.pipeline.size=2 parallel.data.bucket_mb=0.05", false, 0},
    {"tp2_sp_pp2_dp2_interleaved_overlap_distributed_optimizer",
     "comm.world_size=8 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true parallel.pipeline.size=2 "
     "parallel.pipeline.schedule=interleaved parallel.pipeline.virtual_stages=2 parallel.data.bucket_mb=0.05 "
     "parallel.data.distributed_optimizer=true", false, 0, false},
    {"mpi4_tp2_dp2_overlap", "comm.plugin=mpi parallel.tensor.size=2 parallel.data.bucket_mb=0.05", true, 4},
    // The parameter gather overlapped with the next forward, bucket by bucket.
    {"dp2_overlap_param_gather",
     "comm.world_size=2 parallel.data.bucket_mb=0.05 parallel.data.distributed_optimizer=true "
     "parallel.data.overlap_param_gather=true", false, 0, false},
    {"tp2_pp2_dp2_overlap_param_gather",
     "comm.world_size=8 parallel.tensor.size=2 parallel.pipeline.size=2 parallel.data.bucket_mb=0.05 "
     "parallel.data.distributed_optimizer=true parallel.data.overlap_param_gather=true", false, 0, false},
    {"mpi4_tp2_dp2_overlap_param_gather",
     "comm.plugin=mpi parallel.tensor.size=2 parallel.data.bucket_mb=0.05 parallel.data.distributed_optimizer=true "
     "parallel.data.overlap_param_gather=true", true, 4, false},
    // Context parallelism: each rank holds 2 of 2 cp chunks of every
    // sequence (load-balanced) and attends to all-gathered keys and values.
    {"cp2", "comm.world_size=2 parallel.context.size=2", false, 0},
    {"cp4", "comm.world_size=4 parallel.context.size=4", false, 0},
    {"cp2_unbalanced", "comm.world_size=2 parallel.context.size=2 parallel.context.load_balance=false", false, 0},
    {"cp2_tp2_sp", "comm.world_size=4 parallel.context.size=2 parallel.tensor.size=2 "
                   "parallel.tensor.sequence_parallel=true", false, 0},
    {"cp2_pp2", "comm.world_size=4 parallel.context.size=2 parallel.pipeline.size=2", false, 0},
    {"cp2_dp2", "comm.world_size=4 parallel.context.size=2", false, 0},
    {"cp2_dp2_distributed_optimizer",
     "comm.world_size=4 parallel.context.size=2 parallel.data.distributed_optimizer=true", false, 0, false},
    {"mpi2_cp2", "comm.plugin=mpi parallel.context.size=2", true, 2},
    // Ulysses (comm_type a2a): all-to-alls to whole sequences of 1/cp of the
    // heads and back, the chunks put in global order so the causal mask holds.
    {"cp2_a2a", "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=a2a", false, 0},
    {"cp4_a2a", "comm.world_size=4 parallel.context.size=4 parallel.context.comm_type=a2a", false, 0},
    {"cp2_a2a_unbalanced", "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=a2a "
                           "parallel.context.load_balance=false", false, 0},
    {"cp2_a2a_tp2_sp", "comm.world_size=4 parallel.context.size=2 parallel.context.comm_type=a2a "
                       "parallel.tensor.size=2 parallel.tensor.sequence_parallel=true", false, 0},
    {"cp2_a2a_pp2", "comm.world_size=4 parallel.context.size=2 parallel.context.comm_type=a2a "
                    "parallel.pipeline.size=2", false, 0},
    {"cp2_a2a_dp2", "comm.world_size=4 parallel.context.size=2 parallel.context.comm_type=a2a", false, 0},
    {"mpi2_cp2_a2a", "comm.plugin=mpi parallel.context.size=2 parallel.context.comm_type=a2a", true, 2},
    {"cp2_a2a_selective_recompute", "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=a2a "
                                    "recompute.plugin=selective", false, 0},
    {"cp2_a2a_full_recompute", "comm.world_size=2 parallel.context.size=2 parallel.context.comm_type=a2a "
                               "recompute.plugin=full", false, 0},
    // Recomputation replays the core, gathering the keys and values again.
    {"cp2_selective_recompute", "comm.world_size=2 parallel.context.size=2 recompute.plugin=selective", false, 0},
    {"cp2_full_recompute", "comm.world_size=2 parallel.context.size=2 recompute.plugin=full", false, 0},
};

INSTANTIATE_TEST_SUITE_P(Layouts, SameFunctionAsOneRank, ::testing::ValuesIn(kLayouts),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(SingleRank, DropoutIsOnAndLossesAreFinite) {
  const LayoutResult& ref = single_rank();
  ASSERT_EQ(ref.exit_code, 0) << ref.log;
  for (double l : ref.losses) EXPECT_TRUE(std::isfinite(l));
  // Dropout on: an evaluation-free run with dropout 0 must differ.
  LayoutResult no_dropout = run_layout("comm.world_size=1 model.dropout=0 model.attention_dropout=0");
  ASSERT_EQ(no_dropout.exit_code, 0) << no_dropout.log;
  EXPECT_NE(no_dropout.losses.back(), ref.losses.back());
}

}  // namespace
}  // namespace mh::test
