// metadata.json's model fields (the variant keys) and [model] taking a Hugging
// Face folder's config.json for a run that loads it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/metadata.hpp"
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
  const std::optional<Config> c = load({"model.layers=2", "model.seq_len=8"});  // the embedded config sets others
  ASSERT_TRUE(c.has_value());
  EXPECT_THAT(diag_.report(), HasSubstr("model.hidden = 256 but " + hf_.string() + "/config.json has n_embd = 8"));
  EXPECT_THAT(diag_.report(), HasSubstr("model.heads = 4 but"));
  EXPECT_THAT(diag_.report(), ::testing::Not(HasSubstr("model.layers")));   // agrees
  EXPECT_THAT(diag_.report(), ::testing::Not(HasSubstr("model.seq_len")));  // 8 of 16 positions
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

TEST_F(MergeTest, MorePositionsThanTheModelHasIsRefused) {
  load({"model.layers=2", "model.hidden=8", "model.heads=2", "model.seq_len=64"});
  EXPECT_THAT(diag_.report(), HasSubstr("model.seq_len = 64 but " + hf_.string() +
                                        "/config.json has n_positions = 16 (at most that)"));
}

}  // namespace
}  // namespace mh::convert
