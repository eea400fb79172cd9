// The config a candidate runs with: the tuned config with the candidate's
// layout written over it and [tuner] dropped; a dry run's is one
// data-parallel replica on its share of the batch.
#include "tuner/candidate_config.hpp"

#include <gtest/gtest.h>

#include "support/engine_env.hpp"

namespace mh {
namespace {

using test::EngineEnv;

const char* kTuned = R"(
[model]
layers = 8
[train]
global_batch = 64
[data]
path = "../data/corpus_byte"
[parallel.pipeline]
schedule = "gpipe"
layers_per_stage = "4,4"
[tuner]
plugin = "grid"
cluster = "dgx_h100"
)";

HardwareProfile cpu() {
  HardwareProfile p;
  p.shared_device = true;
  return p;
}

HardwareProfile gpus() {
  HardwareProfile p;
  p.dtype = MH_BF16;
  p.devices_per_node = 8;
  return p;
}

MH_Candidate candidate(int32_t t, int32_t p, int32_t v, int32_t d, int32_t b, const char* recompute) {
  MH_Candidate c{};
  c.struct_size = sizeof(c);
  c.tensor = t, c.pipeline = p, c.virtual_stages = v, c.data = d, c.sequence_parallel = t > 1, c.micro_batch = b;
  c.recompute = recompute;
  c.recompute_layers = 2;
  return c;
}

TEST(CandidateConfig, WritesTheLayoutOverTheTunedConfigAndDropsTheTuner) {
  EngineEnv env(kTuned);
  const toml::table t = candidate_config(env.config(), env.assembly(), candidate(2, 2, 2, 2, 2, "full"), CandidateRun::kFull, cpu());
  EXPECT_FALSE(t.contains("tuner"));
  EXPECT_EQ(t["parallel"]["tensor"]["size"].value<int64_t>(), 2);
  EXPECT_EQ(t["parallel"]["tensor"]["sequence_parallel"].value<bool>(), true);
  EXPECT_EQ(t["parallel"]["pipeline"]["size"].value<int64_t>(), 2);
  EXPECT_EQ(t["parallel"]["pipeline"]["virtual_stages"].value<int64_t>(), 2);
  EXPECT_EQ(t["parallel"]["pipeline"]["schedule"].value<std::string>(), "interleaved");
  EXPECT_FALSE(t["parallel"]["pipeline"]["layers_per_stage"]);
  EXPECT_EQ(t["train"]["micro_batch"].value<int64_t>(), 2);
  EXPECT_EQ(t["train"]["global_batch"].value<int64_t>(), 64);
  EXPECT_EQ(t["recompute"]["plugin"].value<std::string>(), "full");
  EXPECT_EQ(t["recompute"]["method"].value<std::string>(), "uniform");
  EXPECT_EQ(t["recompute"]["num_layers"].value<int64_t>(), 2);
  EXPECT_EQ(t["comm"]["world_size"].value<int64_t>(), 8);
  EXPECT_EQ(t["data"]["path"].value<std::string>(), env.config().resolve("../data/corpus_byte").string());
}

// A candidate's config lives in the tuner's folder: every data input the
// tuned config names relatively is written resolved against the tuned
// config's folder, a blend's weights kept.
TEST(CandidateConfig, ResolvesEveryDataPathAgainstTheTunedConfig) {
  std::string tuned = kTuned;
  const std::string path = "path = \"../data/corpus_byte\"";
  tuned.replace(tuned.find(path), path.size(),
                "paths = \"0.4 ../data/corpus_byte 0.6 /abs/b\"\ntest_paths = \"../data/corpus_byte\"");
  EngineEnv env(tuned);
  const toml::table t = candidate_config(env.config(), env.assembly(), candidate(1, 1, 1, 1, 1, "none"), CandidateRun::kFull, cpu());
  const std::string corpus = env.config().resolve("../data/corpus_byte").string();
  EXPECT_EQ(t["data"]["paths"].value<std::string>(), "0.4 " + corpus + " 0.6 /abs/b");
  EXPECT_EQ(t["data"]["test_paths"].value<std::string>(), corpus);
}

TEST(CandidateConfig, WritesTheDistributedOptimizerAndItsOverlapAsTheCandidateChose) {
  EngineEnv env(kTuned);
  MH_Candidate c = candidate(1, 1, 1, 8, 1, "none");
  c.distributed_optimizer = 1, c.overlap_param_gather = 1;
  const toml::table t = candidate_config(env.config(), env.assembly(), c, CandidateRun::kFull, cpu());
  EXPECT_EQ(t["parallel"]["data"]["distributed_optimizer"].value<bool>(), true);
  EXPECT_EQ(t["parallel"]["data"]["overlap_param_gather"].value<bool>(), true);
  EXPECT_EQ(t["parallel"]["data"]["overlap_grad_reduce"].value<bool>(), true);
  EXPECT_TRUE(shards_optimizer(env.assembly(), c));
  c.distributed_optimizer = 0, c.overlap_param_gather = 0;
  const toml::table plain = candidate_config(env.config(), env.assembly(), c, CandidateRun::kDry, cpu());
  EXPECT_EQ(plain["parallel"]["data"]["distributed_optimizer"].value<bool>(), false);
  EXPECT_EQ(plain["parallel"]["data"]["overlap_param_gather"].value<bool>(), false);
  EXPECT_FALSE(shards_optimizer(env.assembly(), c));
}

// A tuner of ABI 1.3 names no data choices: the config's stand.
TEST(CandidateConfig, ACandidateOfAnOlderTunerLeavesTheConfigsDataParallelOptions) {
  EngineEnv env(kTuned);
  MH_Candidate c = candidate(1, 1, 1, 8, 1, "none");
  c.struct_size = MH_STRUCT_SIZE(MH_Candidate, workload);
  EXPECT_FALSE(names_data_choices(c));
  const toml::table t = candidate_config(env.config(), env.assembly(), c, CandidateRun::kDry, cpu());
  EXPECT_FALSE(t["parallel"]["data"]["distributed_optimizer"]);
}

TEST(CandidateConfig, ADryRunIsOneReplicaOnItsShareOfTheBatchStoppedAtThreePMicroBatches) {
  EngineEnv env(kTuned);
  // 64 sequences over d = 2 replicas of micro-batches of 1: m = 32, cut to 3p = 6.
  const toml::table t = candidate_config(env.config(), env.assembly(), candidate(2, 2, 2, 2, 1, "selective"), CandidateRun::kDry, cpu());
  EXPECT_EQ(t["comm"]["world_size"].value<int64_t>(), 4);
  EXPECT_EQ(t["train"]["global_batch"].value<int64_t>(), 6);
  EXPECT_EQ(t["recompute"]["plugin"].value<std::string>(), "selective");
  EXPECT_FALSE(t["recompute"]["num_layers"]);
}

MH_Candidate context_expert(int32_t cp, const char* comm, int32_t ep) {
  MH_Candidate c = candidate(1, 2, 1, 4, 1, "none");
  c.context = cp, c.context_comm = comm, c.expert = ep;
  return c;
}

TEST(CandidateConfig, WritesTheContextAndExpertParallelismTheCandidateNames) {
  EngineEnv env(kTuned);
  const toml::table t = candidate_config(env.config(), env.assembly(), context_expert(2, "a2a", 2), CandidateRun::kFull, cpu());
  EXPECT_EQ(t["parallel"]["context"]["size"].value<int64_t>(), 2);
  EXPECT_EQ(t["parallel"]["context"]["comm_type"].value<std::string>(), "a2a");
  EXPECT_EQ(t["parallel"]["expert"]["size"].value<int64_t>(), 2);
  EXPECT_EQ(t["comm"]["world_size"].value<int64_t>(), 1 * 2 * 2 * 4);  // t cp p d
}

// The ep replicas trade tokens, so the dry run holds them all, each on its
// share of the batch: 64 / d = 16 sequences, cut to 3p = 6, times ep.
TEST(CandidateConfig, ADryRunOfExpertParallelismIsTheEpReplicasThatTradeTokens) {
  EngineEnv env(kTuned);
  MH_Candidate c = context_expert(2, nullptr, 2);
  c.virtual_stages = 2;  // interleaved: stopped at 3p micro-batches
  const toml::table t = candidate_config(env.config(), env.assembly(), c, CandidateRun::kDry, cpu());
  EXPECT_EQ(t["comm"]["world_size"].value<int64_t>(), 1 * 2 * 2 * 2);  // t cp p ep
  EXPECT_EQ(t["train"]["global_batch"].value<int64_t>(), 2 * 6);
  EXPECT_FALSE(t["parallel"]["context"]["comm_type"]) << "NULL keeps the config's";
}

// A 2.0 tuner's candidate ends before the 2.1 fields: the config's context
// and expert parallelism stand, and its world is t p d.
TEST(CandidateConfig, ACandidateOfA20TunerLeavesTheConfigsContextAndExpertParallelism) {
  EngineEnv env(kTuned);
  MH_Candidate c = context_expert(2, "a2a", 2);
  c.struct_size = MH_STRUCT_SIZE(MH_Candidate, overlap_param_gather);
  const toml::table t = candidate_config(env.config(), env.assembly(), c, CandidateRun::kFull, cpu());
  EXPECT_FALSE(t["parallel"]["context"]);
  EXPECT_FALSE(t["parallel"]["expert"]);
  EXPECT_EQ(t["comm"]["world_size"].value<int64_t>(), 1 * 2 * 4);
}

TEST(CandidateConfig, ADryRunOfGPipeKeepsEveryMicroBatchSinceAllAreInFlight) {
  EngineEnv env(kTuned);
  const toml::table t = candidate_config(env.config(), env.assembly(), candidate(1, 2, 1, 2, 1, "none"), CandidateRun::kDry, cpu());
  EXPECT_EQ(t["parallel"]["pipeline"]["schedule"].value<std::string>(), "gpipe");
  EXPECT_EQ(t["train"]["global_batch"].value<int64_t>(), 32);
}

TEST(CandidateConfig, OnADeviceClusterItIsTheLaunchedRunCudaAndNcclWithTheWorldMpirunStarts) {
  EngineEnv env(kTuned);
  const toml::table t = candidate_config(env.config(), env.assembly(), candidate(2, 2, 1, 4, 1, "none"), CandidateRun::kFull, gpus());
  EXPECT_EQ(t["kernels"]["plugin"].value<std::string>(), "cuda");
  EXPECT_EQ(t["kernels"]["dtype"].value<std::string>(), "bf16");
  EXPECT_EQ(t["comm"]["plugin"].value<std::string>(), "nccl");
  EXPECT_EQ(t["comm"]["world_size"].value<int64_t>(), 16);
}

TEST(CandidateConfig, OnADeviceClusterADryRunIsOneReplicaOfNcclRanks) {
  EngineEnv env(kTuned);
  const toml::table t = candidate_config(env.config(), env.assembly(), candidate(2, 2, 1, 4, 1, "none"), CandidateRun::kDry, gpus());
  EXPECT_EQ(t["comm"]["plugin"].value<std::string>(), "nccl");
  EXPECT_EQ(t["comm"]["world_size"].value<int64_t>(), 4);
}

MH_Candidate generation(int32_t t, int32_t p, int32_t batch) {
  MH_Candidate c = candidate(t, p, 1, 1, batch, "none");
  c.sequence_parallel = 0;
  c.workload = MH_WORKLOAD_INFERENCE;
  return c;
}

TEST(GenerateConfig, ServesTheTunersPromptsWithTheCandidatesBatchOnTTimesPRanks) {
  EngineEnv env(kTuned);
  const GenerateRequest request{"/tmp/out/prompts_b4.txt", 32};
  const toml::table t = generate_config(env.config(), env.assembly(), generation(2, 2, 4), cpu(), request);
  EXPECT_FALSE(t.contains("tuner"));
  EXPECT_EQ(t["parallel"]["tensor"]["size"].value<int64_t>(), 2);
  EXPECT_EQ(t["parallel"]["tensor"]["sequence_parallel"].value<bool>(), false);
  EXPECT_EQ(t["parallel"]["pipeline"]["size"].value<int64_t>(), 2);
  EXPECT_EQ(t["parallel"]["pipeline"]["virtual_stages"].value<int64_t>(), 1);
  EXPECT_FALSE(t["parallel"]["pipeline"]["layers_per_stage"]);
  EXPECT_EQ(t["comm"]["world_size"].value<int64_t>(), 4);
  EXPECT_EQ(t["generate"]["batch"].value<int64_t>(), 4);
  EXPECT_EQ(t["generate"]["prompts_file"].value<std::string>(), "/tmp/out/prompts_b4.txt");
  EXPECT_EQ(t["generate"]["max_new_tokens"].value<int64_t>(), 32);
  EXPECT_EQ(t["generate"]["stop_at_eod"].value<bool>(), false);
  EXPECT_EQ(t["data"]["path"].value<std::string>(), env.config().resolve("../data/corpus_byte").string());
}

TEST(GenerateConfig, OnADeviceClusterIsTheLaunchedRunOfTTimesPNcclRanks) {
  EngineEnv env(kTuned);
  const toml::table t = generate_config(env.config(), env.assembly(), generation(8, 2, 1), gpus(),
                                        GenerateRequest{"/tmp/out/prompts_b1.txt", 8});
  EXPECT_EQ(t["kernels"]["plugin"].value<std::string>(), "cuda");
  EXPECT_EQ(t["comm"]["plugin"].value<std::string>(), "nccl");
  EXPECT_EQ(t["comm"]["world_size"].value<int64_t>(), 16);
}

}  // namespace
}  // namespace mh
