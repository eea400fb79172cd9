// The generation cost model on a machine with round numbers: a decode step
// streams every weight and the cached keys and values of its context, the
// collectives generation runs per token, and pipeline stages in turn.
#include "inference_cost.hpp"

#include <gtest/gtest.h>

#include "test_machine.hpp"

namespace mh::tuner {
namespace {

using testing::TestMachine;

// A small GPT: 8 layers, h = 1024, 16 heads, s = 4096, V = 32768.
Model small() { return Model{8, 1024, 16, 4096, 4096, 32768, 1}; }

InferenceCost generate(const Layout& l, const InferenceRequest& r, TestMachine t = {}) {
  return inference(Machine(t.view()), small(), l, Placement::of(l, 8, false), r);
}

// The test machine streams 1e11 bytes per second; its tensors are bf16.
constexpr double kSecondsPerByte = 1e-11;

TEST(Decode, StreamsEveryWeightOncePerToken) {
  const Model m = small();
  // QKV, projection, FC1, FC2 per layer, and the output layer.
  const double weights = double(m.layers) * (4.0 * m.hidden * m.hidden + 2.0 * m.hidden * m.ffn) +
                         double(m.vocab) * m.hidden;
  const double streaming = 2 * weights * kSecondsPerByte;
  const InferenceCost c = generate(Layout{}, InferenceRequest{16, 16});
  EXPECT_GE(c.tpot_seconds, streaming);
  EXPECT_LE(c.tpot_seconds, 1.05 * streaming);  // the rest: norms, the short cache, sampling
}

// On a CPU a decode step reads its stage's weights and KV cache anew each
// token: beyond the last-level cache that is DRAM's rate, however small each
// product's own operands are; each op also costs the calibrated call.
TEST(Decode, OnASharedDeviceReadsAWorkingSetBeyondTheCacheAtDramsRateAndPaysEachCall) {
  TestMachine cpu;
  cpu.shared = true;
  cpu.without = {"sum_squares", "elementwise", "bias_add"};
  for (const std::string& op : cpu.without) {
    cpu.measured.push_back({op.c_str(), 1, 0, 1 << 20, 4.0, 1e11});
    cpu.measured.push_back({op.c_str(), 1, 0, 1 << 28, 4.0, 1e10});
  }
  const Model m = small();
  const double weights = double(m.layers) * (4.0 * m.hidden * m.hidden + 2.0 * m.hidden * m.ffn);
  const Machine machine(cpu.view());
  Layout l;
  const InferenceCost dram = inference(machine, m, l, Placement::of(l, 8, true), InferenceRequest{16, 16});
  EXPECT_GE(dram.tpot_seconds, 2 * weights / 1e10);  // bf16 weights at DRAM's 1e10 B/s
  cpu.measured.push_back({"call", 1, 0, 1, 1.0, 1.0});  // a second per call: the time counts them
  const InferenceCost calls =
      inference(Machine(cpu.view()), m, l, Placement::of(l, 8, true), InferenceRequest{16, 16});
  EXPECT_GT(calls.tpot_seconds - dram.tpot_seconds, 8 * 10.0);  // at least ten ops per layer
}

// A mixture of the same active width adds its router's [rows, h] x [h, E]
// product to every layer, and nothing else.
TEST(Decode, AMixtureAddsItsRoutersProductToEachLayer) {
  const Model dense = small();
  Model moe = dense;
  moe.experts = 8;
  moe.router_topk = 2;
  moe.moe_ffn = dense.ffn / 2;
  TestMachine t;
  const Machine m(t.view());
  const Layout l;
  const Placement w = Placement::of(l, 8, false);
  const InferenceRequest r{16, 16};
  const double router = m.gemm_seconds(1, 1, moe.experts, dense.hidden, Sharing{});
  EXPECT_NEAR(inference(m, moe, l, w, r).tpot_seconds - inference(m, dense, l, w, r).tpot_seconds,
              double(dense.layers) * router, 1e-12);
}

TEST(Decode, ReadsTheCachedKeysAndValuesOfItsWholeContext) {
  const Model m = small();
  const InferenceCost short_context = generate(Layout{}, InferenceRequest{128, 128});
  const InferenceCost long_context = generate(Layout{}, InferenceRequest{2048, 128});
  // Each layer reads K and V (h wide each) of 1920 more positions.
  const double cache = double(m.layers) * 2 * 1920 * m.hidden * 2 * kSecondsPerByte;
  const double grown = long_context.tpot_seconds - short_context.tpot_seconds;
  EXPECT_GE(grown, cache);
  EXPECT_LE(grown, 1.1 * cache);  // the scores' softmax and writes
}

TEST(Decode, ATokenCrossesTwoAllReducesPerLayerTheEmbeddingsTheLogitsGatherAndTheLeadsWord) {
  TestMachine slow_links;
  slow_links.latency = 1.0;  // a second per collective: the time counts them
  Layout l;
  l.t = 2;
  const InferenceCost c = generate(l, InferenceRequest{16, 16}, slow_links);
  EXPECT_EQ(int(c.tpot_seconds), 2 * 8 + 2 + 1);
}

TEST(Decode, OneRankWaitsForNoWord) {
  TestMachine slow_links;
  slow_links.latency = 1.0;
  EXPECT_LT(generate(Layout{}, InferenceRequest{16, 16}, slow_links).tpot_seconds, 1.0);
}

TEST(Decode, PipelineStagesHandOnTheirRowsThenTheLastSendsTheTokensToEveryRank) {
  TestMachine slow_links;
  slow_links.latency = 1.0;
  Layout l;
  l.p = 4;
  const InferenceCost c = generate(l, InferenceRequest{16, 16}, slow_links);
  EXPECT_EQ(int(c.tpot_seconds), 1 + 3 + 1);  // the lead's word, the hand-ons, the tokens
}

TEST(Prefill, StagesRunInTurnSoSplittingAddsOnlyTheirMessagesAndTheLeadsWord) {
  TestMachine t;
  const InferenceRequest r{512, 16};
  Layout one, two;
  one.b = two.b = 4;
  two.p = 2;
  const Machine m(t.view());
  const double hand_on = m.collective_seconds(Coll::kSendRecv, 4.0 * 512 * 1024 * 2, 2, MH_LINK_INTRA_NODE);
  const double tokens = m.collective_seconds(Coll::kAllGather, 4.0 * 4 * 2, 2, MH_LINK_INTRA_NODE);
  const double word = m.collective_seconds(Coll::kAllGather, 4.0 * 64 * 2, 2, MH_LINK_INTRA_NODE);
  EXPECT_NEAR(generate(two, r).ttft_seconds, generate(one, r).ttft_seconds + hand_on + tokens + word, 1e-12);
}

TEST(Prefill, AttendsWithinEachSequenceNotAcrossThePackedBatch) {
  // Four prompts packed: the GEMMs of every row, but attention four times
  // one prompt's, not the square of the packed rows.
  TestMachine t;
  Layout one, four;
  four.b = 4;
  const Machine m(t.view());
  const Placement w = Placement::of(one, 8, false);
  const double single = stage_forward_seconds(m, small(), one, w, 1024, 1024, false, false);
  const double packed = stage_forward_seconds(m, small(), four, w, 1024, 1024, false, false);
  EXPECT_NEAR(packed / single, 4.0, 1e-9);
}

TEST(Throughput, IsTheBatchsTokensOverTheLatency) {
  Layout l;
  l.b = 4;
  const InferenceCost c = generate(l, InferenceRequest{64, 32});
  EXPECT_DOUBLE_EQ(c.latency_seconds, c.ttft_seconds + 32 * c.tpot_seconds);
  EXPECT_DOUBLE_EQ(c.tokens_per_s, 4 * 32 / c.latency_seconds);
}

}  // namespace
}  // namespace mh::tuner
