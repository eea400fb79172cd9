// Generation on the real binary, from a checkpoint of the layout-equivalence
// model trained once for the suite: the KV cache against recomputing the
// whole prefix, every layout against one rank, seeded sampling, the dry
// run's memory, and bad requests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "megahost_run.hpp"
#include "support/process.hpp"

namespace mh::ckpt::test {
namespace {

using Tokens = std::vector<std::vector<int32_t>>;

const std::vector<std::string> kPrompts = {"The ", "Once upon a time, ", "and then she said", "x"};

std::string write_prompts(const std::string& name, const std::vector<std::string>& prompts) {
  const std::string path = scratch_dir("prompts_" + name) + "/prompts.jsonl";
  std::ofstream out(path);
  for (const std::string& p : prompts) out << nlohmann::json{{"prompt", p}}.dump() << "\n";
  return path;
}

class Generate : public testing::Test {
 protected:
  static void SetUpTestSuite() { train({}); }
  // Trains the suite's model, [model] as small.toml's with `model`.
  static void train(const std::vector<std::string>& model) {
    model_ = new std::vector<std::string>(model);
    checkpoint_ = new std::string(scratch_dir("generate_model"));
    std::vector<std::string> args{"train.steps=100", "train.lr=3e-3", "model.dropout=0", "model.attention_dropout=0",
                                  "checkpoint.dir=" + *checkpoint_};
    args.insert(args.end(), model.begin(), model.end());
    const Outcome trained = run_megahost(args);
    ASSERT_EQ(trained.status, 0) << trained.log;
    prompts_ = new std::string(write_prompts("suite", kPrompts));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*checkpoint_);
    delete checkpoint_;
    delete prompts_;
    delete model_;
  }

  // megahost on the trained model with a [generate] section from `args`,
  // under mpiexec with `mpi_ranks` processes when given.
  static Outcome generate(std::vector<std::string> args, int mpi_ranks = 0) {
    args.insert(args.begin(), {"checkpoint.load=auto", "checkpoint.dir=" + *checkpoint_});
    args.insert(args.begin(), model_->begin(), model_->end());
    if (mpi_ranks == 0) return run_megahost(args);
    args.push_back("comm.plugin=mpi");
    return run_megahost(args, {}, mh::test::mpi_launcher(mpi_ranks));
  }
  static std::vector<std::string> with_prompts(std::vector<std::string> args) {
    args.push_back("generate.prompts_file=" + *prompts_);
    return args;
  }
  // Each request's generated token ids, in request order.
  static Tokens tokens(const Outcome& o) {
    Tokens out;
    for (const std::string& line : o.records) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("request")) out.push_back(j["tokens"].get<std::vector<int32_t>>());
    }
    return out;
  }
  static Tokens generated(const std::vector<std::string>& args, int mpi_ranks = 0) {
    const Outcome o = generate(args, mpi_ranks);
    EXPECT_EQ(o.status, 0) << o.log;
    return tokens(o);
  }

  static std::vector<std::string>* model_;
  static std::string* checkpoint_;
  static std::string* prompts_;
};
std::vector<std::string>* Generate::model_ = nullptr;
std::string* Generate::checkpoint_ = nullptr;
std::string* Generate::prompts_ = nullptr;

const std::vector<std::string> kGreedy = {"generate.max_new_tokens=12", "generate.stop_at_eod=false",
                                          "generate.batch=3"};
const std::vector<std::string> kSampled = {"generate.max_new_tokens=12", "generate.stop_at_eod=false",
                                           "generate.batch=3", "generate.temperature=0.9", "generate.top_k=40",
                                           "generate.top_p=0.95", "generate.seed=77"};

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Byte tokenizer: ids below 256 are the bytes themselves.
std::string text_of(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += char(id);
  return s;
}

// Greedy decoding with the cache against a full forward over every prefix:
// each prefix (prompt and the tokens generated so far) served as a prompt
// of its own, one new token each, with no cache carried between tokens.
void expect_cached_equals_recomputed(const Tokens& cached, const std::function<Tokens(const std::string&)>& one_token) {
  ASSERT_EQ(cached.size(), kPrompts.size());
  std::vector<std::string> prefixes;
  for (size_t r = 0; r < cached.size(); ++r)
    for (size_t k = 0; k < cached[r].size(); ++k)
      prefixes.push_back(kPrompts[r] + text_of({cached[r].begin(), cached[r].begin() + std::ptrdiff_t(k)}));
  const Tokens recomputed = one_token(write_prompts("prefixes", prefixes));
  ASSERT_EQ(recomputed.size(), prefixes.size());
  size_t i = 0;
  for (size_t r = 0; r < cached.size(); ++r)
    for (size_t k = 0; k < cached[r].size(); ++k, ++i)
      EXPECT_EQ(recomputed[i], std::vector<int32_t>{cached[r][k]}) << "request " << r << ", token " << k;
}

const std::vector<std::string> kOneToken = {"generate.max_new_tokens=1", "generate.stop_at_eod=false",
                                            "generate.batch=8"};

bool empty_folder(const std::string& dir) {
  return std::filesystem::is_empty(dir);
}

// megahost on `hf` (a Hugging Face folder) with TMPDIR = `tmp`, sent
// `signal` once its metrics file exists: the import is done and the
// handlers are in place, so the stop lands in the work itself.
mh::test::ProcessExit interrupted(const std::string& hf, const std::string& tmp, int signal,
                                  const std::vector<std::string>& args) {
  const std::string metrics = scratch_dir("signal_metrics") + "/metrics.jsonl";
  mh::test::ProcessSpec spec{{MEGAHOST_TEST_BINARY, "--config", MEGAHOST_TEST_CONFIG, "--metrics_out", metrics,
                              "checkpoint.load=" + hf}};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.set_env = {"TMPDIR=" + tmp, "OPENBLAS_NUM_THREADS=1"};
  spec.unset_prefix = {"MEGAHOST_"};
  spec.stderr_to_stdout = true;
  spec.interrupt = {signal, [&] { return std::filesystem::exists(metrics); }};
  return mh::test::run_process(spec);
}

// Generation and --evaluate from a Hugging Face folder left its whole f32
// import in $TMPDIR on SIGINT or SIGTERM and printed nothing: now each
// stops between two steps, reports what is done, removes the import and
// exits with the shell's 128 + N.
TEST_F(Generate, AStopSignalRemovesTheImportReportsWhatIsDoneAndExitsWithTheShellsStatus) {
  const std::string hf = scratch_dir("signal_hf") + "/hf";
  const mh::test::ProcessExit converted =
      mh::test::run_process({{MEGAHOST_TEST_CONVERT, "--input=" + *checkpoint_, "--output=" + hf}});
  ASSERT_EQ(converted.status, 0) << converted.err;
  std::vector<std::string> many;
  for (int i = 0; i < 50; ++i) many.insert(many.end(), kPrompts.begin(), kPrompts.end());
  const std::vector<std::string> generating = {"generate.prompts_file=" + write_prompts("many", many),
                                               "generate.max_new_tokens=16", "generate.batch=1",
                                               "generate.stop_at_eod=false"};
  for (const int signal : {SIGINT, SIGTERM}) {
    const std::string tmp = scratch_dir("signal_tmp");
    const mh::test::ProcessExit g = interrupted(hf, tmp, signal, generating);
    EXPECT_EQ(g.status, 128 + signal) << g.out;
    EXPECT_THAT(g.out, testing::HasSubstr("stopped generating; "));
    EXPECT_THAT(g.out, testing::HasSubstr(" of 200 completion(s) were done (printed), the rest abandoned"));
    EXPECT_TRUE(empty_folder(tmp)) << "the import was left in TMPDIR";
    const mh::test::ProcessExit e = interrupted(hf, tmp, signal, {"--evaluate"});
    EXPECT_EQ(e.status, 128 + signal) << e.out;
    EXPECT_THAT(e.out, testing::HasSubstr("stopped evaluating; the splits printed above are whole"));
    EXPECT_TRUE(empty_folder(tmp)) << "the import was left in TMPDIR";
  }
}

TEST_F(Generate, CachedGreedyDecodingEqualsRecomputingTheWholePrefixForEveryToken) {
  expect_cached_equals_recomputed(generated(with_prompts(kGreedy)), [](const std::string& file) {
    return generated(plus(kOneToken, {"generate.prompts_file=" + file}));
  });
}

TEST_F(Generate, BatchingDoesNotChangeWhatARequestGets) {
  const Tokens one = generated(with_prompts(plus(kSampled, {"generate.batch=1"})));
  EXPECT_EQ(generated(with_prompts(kSampled)), one);
  EXPECT_EQ(generated(with_prompts(plus(kSampled, {"generate.batch=4"}))), one);
}

TEST_F(Generate, SeededSamplingIsReproducibleAndTheSeedMatters) {
  const Tokens a = generated(with_prompts(kSampled));
  EXPECT_EQ(generated(with_prompts(kSampled)), a);
  EXPECT_NE(generated(with_prompts(plus(kSampled, {"generate.seed=78"}))), a);
  EXPECT_NE(generated(with_prompts(kGreedy)), a);
}

struct Layout {
  std::string name;
  std::vector<std::string> overrides;
};

class GenerateLayouts : public Generate, public testing::WithParamInterface<Layout> {};

TEST_P(GenerateLayouts, GeneratesWhatOneRankGeneratesGreedyAndSampled) {
  static const Tokens greedy = generated(with_prompts(kGreedy)), sampled = generated(with_prompts(kSampled));
  EXPECT_EQ(generated(with_prompts(plus(kGreedy, GetParam().overrides))), greedy);
  EXPECT_EQ(generated(with_prompts(plus(kSampled, GetParam().overrides))), sampled);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GenerateLayouts,
    testing::Values(Layout{"tp2", {"comm.world_size=2", "parallel.tensor.size=2"}},
                    Layout{"tp4_sp", {"comm.world_size=4", "parallel.tensor.size=4",
                                      "parallel.tensor.sequence_parallel=true"}},
                    Layout{"pp2", {"comm.world_size=2", "parallel.pipeline.size=2"}},
                    Layout{"pp2_interleaved", {"comm.world_size=2", "parallel.pipeline.size=2",
                                               "parallel.pipeline.schedule=interleaved",
                                               "parallel.pipeline.virtual_stages=2"}},
                    Layout{"tp2_pp2", {"comm.world_size=4", "parallel.tensor.size=2", "parallel.pipeline.size=2"}}),
    [](const auto& info) { return info.param.name; });

TEST_F(Generate, MpiProcessesGenerateWhatOneRankGenerates) {
  const Tokens sampled = generated(with_prompts(kSampled));
  EXPECT_EQ(generated(with_prompts(plus(kSampled, {"parallel.tensor.size=2"})), 2), sampled);
  EXPECT_EQ(generated(with_prompts(plus(kSampled, {"parallel.pipeline.size=2"})), 2), sampled);
}

TEST_F(Generate, Bf16GeneratesOnEveryLayoutWhatOneRankGenerates) {
  const std::vector<std::string> bf16 = plus(kSampled, {"kernels.dtype=bf16"});
  const Tokens one = generated(with_prompts(bf16));
  ASSERT_EQ(one.size(), kPrompts.size());
  EXPECT_EQ(generated(with_prompts(plus(bf16, {"comm.world_size=2", "parallel.tensor.size=2"}))), one);
  EXPECT_EQ(generated(with_prompts(plus(bf16, {"comm.world_size=2", "parallel.pipeline.size=2"}))), one);
}

TEST_F(Generate, DryRunCountsTheKvCacheExactly) {
  const Outcome o = generate(with_prompts(plus(kGreedy, {"--dry_run", "comm.world_size=2", "parallel.tensor.size=2"})));
  ASSERT_EQ(o.status, 0) << o.log;
  EXPECT_THAT(o.log, testing::HasSubstr("kv_cache"));
  // 2 (K and V) x 4 layers x 3 slots x 2 of 4 heads x (18 + 12) positions x 16 x 4 bytes.
  const uint64_t expected = 2ull * 4 * 3 * 2 * 30 * 16 * 4;
  for (const std::string& line : o.records) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("final")) continue;
    ASSERT_EQ(j["memory"].size(), 2u);
    for (const auto& rank : j["memory"]) EXPECT_EQ(rank["kv_cache"].get<uint64_t>(), expected);
    return;
  }
  FAIL() << "no final record:\n" << o.log;
}

// A model whose vocabulary exceeds its tokenizer's could sample ids that
// decode to nothing: refused with the reason, not silently cut.
TEST_F(Generate, AModelVocabularyLargerThanItsTokenizersIsRefusedWithTheReason) {
  const Outcome o = run_megahost(with_prompts(plus(kSampled, {"model.vocab=1000"})));
  EXPECT_EQ(o.status, 2) << o.log;
  EXPECT_THAT(o.log, testing::HasSubstr("the model's vocabulary has 1000 ids (model.vocab), the byte tokenizer 257: "
                                        "the model could generate ids the tokenizer cannot decode"));
}

TEST_F(Generate, PromptIdsOutsideTheModelVocabularyAreRefusedNamingTokenizerAndVocabulary) {
  const Outcome o = run_megahost({"model.vocab=1000", "data.tokenizer=gpt2", "generate.prompt=Once upon a time"});
  EXPECT_EQ(o.status, 2) << o.log;
  EXPECT_THAT(o.log, testing::HasSubstr("prompt 1 holds token id 7454 of the gpt2 tokenizer, outside the model's "
                                        "vocabulary of 1000 ids (model.vocab)"));
}

TEST_F(Generate, BadRequestsAreRefusedBeforeAnythingRuns) {
  Outcome o = generate({"generate.prompt=hi", "generate.prompts_file=" + *prompts_});
  EXPECT_EQ(o.status, 2) << o.log;
  EXPECT_THAT(o.log, testing::HasSubstr("exactly one of prompt and prompts_file; both are set"));
  o = generate({"generate.prompt=" + std::string(40, 'a')});
  EXPECT_EQ(o.status, 2) << o.log;
  EXPECT_THAT(o.log, testing::HasSubstr("prompt 1 is 40 tokens, longer than model.seq_len = 32"));
  o = generate({"generate.prompt=hi", "comm.world_size=2"});
  EXPECT_EQ(o.status, 1) << o.log;
  EXPECT_THAT(o.log, testing::HasSubstr("launch 1 ranks"));
}

// As in Megatron, decoding does not split the sequence over a context group.
TEST_F(Generate, AContextParallelLayoutIsRefusedNamingTheKeyAndTheFix) {
  const Outcome o = generate({"generate.prompt=hi", "comm.world_size=2", "parallel.context.size=2"});
  EXPECT_EQ(o.status, 1) << o.log;
  EXPECT_THAT(o.log, testing::HasSubstr("generation decodes one position at a time, which parallel.context.size = 2 "
                                        "cannot split; set parallel.context.size = 1"));
}

// Llama's parts: RMSNorm, RoPE at each sequence's own positions, SwiGLU and
// grouped-query attention (2 query heads per cached key/value head).
class GenerateLlama : public Generate {
 protected:
  static void SetUpTestSuite() { train({"model.arch=llama", "model.kv_heads=2"}); }
};

TEST_F(GenerateLlama, CachedGreedyDecodingEqualsRecomputing) {
  expect_cached_equals_recomputed(generated(with_prompts(kGreedy)), [](const std::string& file) {
    return generated(plus(kOneToken, {"generate.prompts_file=" + file}));
  });
}

TEST_F(GenerateLlama, LayoutsGenerateWhatOneRankGenerates) {
  const Tokens greedy = generated(with_prompts(kGreedy)), sampled = generated(with_prompts(kSampled));
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{"comm.world_size=2", "parallel.tensor.size=2"},
        std::vector<std::string>{"comm.world_size=4", "parallel.tensor.size=2", "parallel.pipeline.size=2"}}) {
    EXPECT_EQ(generated(with_prompts(plus(kGreedy, layout))), greedy);
    EXPECT_EQ(generated(with_prompts(plus(kSampled, layout))), sampled);
  }
}

// Qwen3's attention: QK-norm over heads of 24 (a D = 96 against h = 64):
// the KV cache holds heads of head_dim, tensor ranks normalise their own heads.
class GenerateQwen3 : public Generate {
 protected:
  static void SetUpTestSuite() {
    train({"model.arch=llama", "model.kv_heads=2", "model.qk_norm=true", "model.head_dim=24"});
  }
};

TEST_F(GenerateQwen3, CachedGreedyDecodingEqualsRecomputing) {
  expect_cached_equals_recomputed(generated(with_prompts(kGreedy)), [](const std::string& file) {
    return generated(plus(kOneToken, {"generate.prompts_file=" + file}));
  });
}

TEST_F(GenerateQwen3, TensorParallelRanksGenerateWhatOneRankGenerates) {
  EXPECT_EQ(generated(with_prompts(plus(kGreedy, {"comm.world_size=2", "parallel.tensor.size=2"}))),
            generated(with_prompts(kGreedy)));
}

// A mixture of experts under tensor parallelism: decoding holds every row
// on each tensor rank (no sequence parallelism), which runs the whole
// mixture on them with its whole experts.
class GenerateMoe : public Generate {
 protected:
  static void SetUpTestSuite() {
    train({"model.arch=llama", "model.kv_heads=2", "model.experts=4", "model.router_topk=2",
           "model.moe_ffn_hidden=48"});
  }
};

TEST_F(GenerateMoe, TensorParallelRanksGenerateWhatOneRankGenerates) {
  EXPECT_EQ(generated(with_prompts(plus(kGreedy, {"comm.world_size=2", "parallel.tensor.size=2"}))),
            generated(with_prompts(kGreedy)));
}

}  // namespace
}  // namespace mh::ckpt::test
