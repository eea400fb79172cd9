// metadata.json's model fields (the variant keys) and [model] taking a Hugging
// Face folder's config.json for a run that loads it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/metadata.hpp"
#include "checkpoint/model_keys.hpp"
#include "config/config.hpp"
#include "hf_fixture.hpp"

namespace mh::convert {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

ckpt::Metadata minimal() {
  ckpt::Metadata m;
  m.model = testing::tiny_llama();
  m.schedule = nlohmann::json::object();
  m.tokenizer = nlohmann::json::object();
  m.files["rank_00000.safetensors"] = {8, "0000000000000000"};
  m.tensors["lnf_w"] = {{1, 2}, "F32", {{"rank_00000.safetensors", "lnf_w:0,0", {0, 0, 1, 2}}}};
  return m;
}

TEST(ModelFields, VariantKeysRoundTripThroughMetadataJson) {
  const ckpt::Metadata m = minimal();
  const ckpt::ModelShape back = ckpt::parse_metadata(ckpt::to_json(m).dump(), "metadata.json").model;
  EXPECT_EQ(back.arch, "llama");
  EXPECT_EQ(back.normalization, "rmsnorm");
  EXPECT_EQ(back.position, "rope");
  EXPECT_EQ(back.activation, "swiglu");
  EXPECT_EQ(back.kv_heads, 2);
  EXPECT_EQ(back.vocab_size, 130);
  EXPECT_FALSE(back.tie_embeddings);
  EXPECT_FALSE(back.bias);
  EXPECT_DOUBLE_EQ(back.norm_eps, 1e-6);
  EXPECT_TRUE(ckpt::shape_differences(back, m.model).empty());
}

TEST(ModelFields, ACheckpointWithoutThemReadsAsGpt2) {
  nlohmann::json j = ckpt::to_json(minimal());
  j.erase("checksum");  // edited below, as a checkpoint written before the checksum
  j["model"] = {{"layers", 2}, {"hidden", 8}, {"heads", 2}, {"ffn_hidden", 32}, {"seq_len", 16}, {"vocab", 256}};
  const ckpt::ModelShape m = ckpt::parse_metadata(j.dump(), "metadata.json").model;
  EXPECT_EQ(m.normalization, "layernorm");
  EXPECT_EQ(m.position, "learned");
  EXPECT_EQ(m.activation, "gelu");
  EXPECT_EQ(m.kv(), 2);
  EXPECT_EQ(m.vocab_size, 0);
  EXPECT_TRUE(m.tie_embeddings);
  EXPECT_TRUE(m.bias);
}

TEST(ModelFields, AnUnknownVariantIsRefusedNamingIt) {
  nlohmann::json j = ckpt::to_json(minimal());
  j.erase("checksum");  // edited below, as a checkpoint written before the checksum
  j["model"]["position"] = "alibi";
  try {
    ckpt::parse_metadata(j.dump(), "metadata.json");
    FAIL() << "position \"alibi\" was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("metadata.json: model: 'position' is \"alibi\""));
  }
}

TEST(ModelFields, ShapeDifferencesNameEachVariantKey) {
  const ckpt::ModelShape llama = testing::tiny_llama();
  ckpt::ModelShape other = llama;
  other.kv_heads = 4;
  other.tie_embeddings = true;
  other.activation = "gelu";
  EXPECT_THAT(ckpt::shape_differences(llama, other),
              ::testing::ElementsAre("model.kv_heads: checkpoint 2, this run 4",
                                     "model.activation: checkpoint \"swiglu\", this run \"gelu\"",
                                     "model.tie_embeddings: checkpoint \"false\", this run \"true\""));
}

// A config whose checkpoint.load is a Hugging Face GPT-2 folder.
class MergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hf_ = testing::scratch("merge_hf");
    const ckpt::ModelShape m = testing::tiny_gpt2();
    testing::write_folder(hf_, m, testing::random_tensors(m, 1));
  }
  void TearDown() override { fs::remove_all(hf_); }

  std::optional<Config> load(const std::vector<std::string>& overrides) {
    std::vector<std::string> all = {"checkpoint.load=" + hf_.string()};
    all.insert(all.end(), overrides.begin(), overrides.end());
    return Config::load("", all, diag_);
  }
  const toml::node* model_key(const Config& c, const std::string& key) {
    return c.root().at_path("model." + key).node();
  }

  fs::path hf_;
  Diagnostics diag_;
};

TEST_F(MergeTest, TheModelKeysComeFromConfigJson) {
  // The embedded config's own [model] (hidden 256, heads 4) is no choice of the user's.
  const std::optional<Config> c = load({"model.layers=2", "model.seq_len=8"});
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(diag_.has_errors()) << diag_.report();
  EXPECT_EQ(model_key(*c, "hidden")->value<int64_t>(), 8);
  EXPECT_EQ(model_key(*c, "seq_len")->value<int64_t>(), 8);  // 8 of 16 positions: the user's
  EXPECT_EQ(model_key(*c, "vocab")->value<int64_t>(), 200);
  EXPECT_EQ(model_key(*c, "ffn_hidden")->value<int64_t>(), 32);
  EXPECT_EQ(model_key(*c, "normalization")->value<std::string>(), "layernorm");
  EXPECT_EQ(model_key(*c, "tie_embeddings")->value<bool>(), true);
}

TEST_F(MergeTest, AgreeingKeysAndZeroForDerivedSizesAreAccepted) {
  const std::optional<Config> c =
      load({"model.layers=2", "model.seq_len=16", "model.hidden=8", "model.heads=2", "model.ffn_hidden=0", "model.kv_heads=0", "model.dropout=0.3"});
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(diag_.has_errors()) << diag_.report();
  EXPECT_DOUBLE_EQ(*model_key(*c, "dropout")->value<double>(), 0.3);  // a training setting: the user's wins
}

TEST_F(MergeTest, AKeyTheUserSetThatContradictsConfigJsonIsRefusedNamingBothValues) {
  load({"model.layers=2", "model.hidden=16"});
  EXPECT_THAT(diag_.report(), HasSubstr("model.hidden = 16 but " + hf_.string() + "/config.json has n_embd = 8"));
  EXPECT_THAT(diag_.report(), ::testing::Not(HasSubstr("model.layers")));  // agrees
}

TEST_F(MergeTest, AFolderWithATokenizerModelSetsTheSentencePieceTokenizer) {
  std::ofstream(hf_ / "tokenizer.model") << "serialized model";
  const std::optional<Config> c = load({"model.layers=2"});
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(diag_.has_errors()) << diag_.report();
  EXPECT_EQ(c->root().at_path("data.tokenizer").value<std::string>(), "sentencepiece");
  EXPECT_EQ(c->root().at_path("data.tokenizer_file").value<std::string>(), (hf_ / "tokenizer.model").string());
}

TEST_F(MergeTest, ATokenizerJsonWithByteFallbackIsTakenBeforeTheModel) {
  std::ofstream(hf_ / "tokenizer.model") << "serialized model";
  std::ofstream(hf_ / "tokenizer.json") << R"({"model": {"type": "BPE", "byte_fallback": true}})";
  const std::optional<Config> c = load({"model.layers=2"});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->root().at_path("data.tokenizer").value<std::string>(), "huggingface");
  EXPECT_EQ(c->root().at_path("data.tokenizer_file").value<std::string>(), (hf_ / "tokenizer.json").string());
}

TEST_F(MergeTest, AByteLevelTokenizerJsonOrTheUsersTokenizerIsLeftAlone) {
  std::ofstream(hf_ / "tokenizer.model") << "serialized model";
  const std::optional<Config> mine = load({"model.layers=2", "data.tokenizer=byte"});
  ASSERT_TRUE(mine.has_value());
  EXPECT_EQ(mine->root().at_path("data.tokenizer").value<std::string>(), "byte");
  EXPECT_EQ(mine->root().at_path("data.tokenizer_file").value_or(std::string()), "");
  std::ofstream(hf_ / "tokenizer.json") << R"({"model": {"type": "BPE", "byte_fallback": false}})";
  const std::optional<Config> c = load({"model.layers=2"});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->root().at_path("data.tokenizer").value<std::string>(), "byte");
}

TEST_F(MergeTest, MorePositionsThanTheModelHasIsRefused) {
  load({"model.layers=2", "model.hidden=8", "model.heads=2", "model.seq_len=64"});
  EXPECT_THAT(diag_.report(), HasSubstr("model.seq_len = 64 but " + hf_.string() +
                                        "/config.json has n_positions = 16 (at most that)"));
}

// A config whose checkpoint.load is a Megahost checkpoint (or "auto" in
// checkpoint.dir): only its metadata.json is read.
class CheckpointMergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::scratch("merge_ckpt");
    ckpt::Metadata m = minimal();
    m.model.rope_theta = 500000;
    m.model.norm_eps = 9.999999747378752e-06;  // 1e-5 as a float, as older checkpoints record it
    m.model.max_positions = 64;
    m.tokenizer = {{"name", "gpt2"}, {"vocab_file", "/models/v.json"}, {"vocab_padded", 256}};
    fs::create_directories(dir_ / "step_000000003");
    std::ofstream(dir_ / "step_000000003" / ckpt::kMetadataFile) << ckpt::to_json(m).dump();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::optional<Config> load(const std::vector<std::string>& overrides) {
    std::vector<std::string> all = {"checkpoint.dir=" + dir_.string(), "checkpoint.load=auto"};
    all.insert(all.end(), overrides.begin(), overrides.end());
    return Config::load("", all, diag_);
  }
  template <class T>
  T key(const Config& c, const std::string& path) {
    return *c.root().at_path(path).value<T>();
  }

  fs::path dir_;
  Diagnostics diag_;
};

TEST_F(CheckpointMergeTest, EveryModelKeyAndTheTokenizerComeFromMetadataJson) {
  const std::optional<Config> c = load({});
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(diag_.has_errors()) << diag_.report();
  EXPECT_EQ(key<std::string>(*c, "model.arch"), "llama");
  EXPECT_EQ(key<int64_t>(*c, "model.hidden"), 8);  // not the embedded config's 256
  EXPECT_EQ(key<int64_t>(*c, "model.kv_heads"), 2);
  EXPECT_EQ(key<int64_t>(*c, "model.max_positions"), 64);
  EXPECT_EQ(key<int64_t>(*c, "model.vocab"), 130);
  EXPECT_EQ(key<std::string>(*c, "model.position"), "rope");
  EXPECT_EQ(key<bool>(*c, "model.tie_embeddings"), false);
  EXPECT_DOUBLE_EQ(key<double>(*c, "model.rope_theta"), 500000);
  EXPECT_EQ(key<std::string>(*c, "data.tokenizer"), "gpt2");
  EXPECT_EQ(key<std::string>(*c, "data.vocab_file"), "/models/v.json");
}

TEST_F(CheckpointMergeTest, AContradictingKeyIsRefusedNamingBothValues) {
  load({"model.rope_theta=10000", "model.bias=true", "model.activation=\"gelu\"", "data.tokenizer=byte"});
  const std::string file = dir_.string() + "/step_000000003/metadata.json";
  EXPECT_THAT(diag_.report(), HasSubstr("model.rope_theta = 10000 but " + file + " has model.rope_theta = 500000.0"));
  EXPECT_THAT(diag_.report(), HasSubstr("model.bias = true but " + file + " has model.bias = false"));
  EXPECT_THAT(diag_.report(), HasSubstr("model.activation = \"gelu\" but " + file + " has model.activation = \"swiglu\""));
  EXPECT_THAT(diag_.report(), HasSubstr("data.tokenizer = \"byte\" but " + file + " has tokenizer.name = \"gpt2\""));
}

TEST_F(CheckpointMergeTest, AnEpsilonAgreesAsTheFloatTheEngineComputesWith) {
  load({"model.layernorm_eps=1e-5"});
  EXPECT_THAT(diag_.report(), ::testing::Not(HasSubstr("layernorm_eps")));
  Diagnostics other;
  Config::load("", {"checkpoint.dir=" + dir_.string(), "checkpoint.load=auto", "model.layernorm_eps=1e-6"}, other);
  EXPECT_THAT(other.report(), HasSubstr("model.layernorm_eps = 1e-06 but"));
}

TEST_F(CheckpointMergeTest, AutoInAFolderWithNoCheckpointYetTakesNothing) {
  fs::remove_all(dir_ / "step_000000003");
  const std::optional<Config> c = load({});
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(diag_.has_errors()) << diag_.report();
  EXPECT_EQ(key<int64_t>(*c, "model.hidden"), 256);  // the embedded config's
}

TEST(ShortestDouble, AFloatIsRecordedAsTheDecimalTheUserWrote) {
  EXPECT_EQ(ckpt::shortest_double(1e-5f), 1e-5);
  EXPECT_EQ(ckpt::shortest_double(1e-6f), 1e-6);
  EXPECT_EQ(ckpt::shortest_double(500000.f), 500000.0);
  EXPECT_EQ(nlohmann::json(ckpt::shortest_double(1e-5f)).dump(), "1e-05");
}

}  // namespace
}  // namespace mh::convert
