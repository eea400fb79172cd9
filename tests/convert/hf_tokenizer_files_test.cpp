// The tokenizer files of an export.
#include "convert/hf_tokenizer_files.hpp"

#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "hf_fixture.hpp"

namespace mh::convert {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(TokenizerFiles, ASentencePieceModelIsExportedAsALlamaTokenizerAddingNoSpecialTokens) {
  const fs::path dir = testing::scratch("export_sentencepiece");
  fs::create_directories(dir);
  std::ofstream(dir / "lines.txt") << "the quick brown fox jumps over the lazy dog\nthe lazy dog sleeps\n";
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + (dir / "lines.txt").string() + " --model_prefix=" + (dir / "tokenizer").string() +
      " --vocab_size=300 --model_type=bpe --byte_fallback=true --minloglevel=2");
  ASSERT_TRUE(status.ok()) << status.ToString();
  const fs::path model = dir / "tokenizer.model";
  const nlohmann::json record = {
      {"name", "sentencepiece"}, {"tokenizer_file", model.string()}, {"bos_token_id", 1}, {"eos_token_id", 2}};
  std::map<std::string, std::string> files;
  for (auto& [name, text] : tokenizer_files(record, testing::tiny_llama())) files[name] = text;
  EXPECT_EQ(files["tokenizer.model"], read(model));
  EXPECT_FALSE(files.contains("tokenizer.json"));
  const nlohmann::json config = nlohmann::json::parse(files["tokenizer_config.json"]);
  EXPECT_EQ(config["tokenizer_class"], "LlamaTokenizer");
  EXPECT_EQ(config["bos_token"], "<s>");
  EXPECT_EQ(config["eos_token"], "</s>");
  EXPECT_EQ(config["unk_token"], "<unk>");
  EXPECT_EQ(config["add_bos_token"], false);
  EXPECT_EQ(nlohmann::json::parse(files["generation_config.json"])["bos_token_id"], 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mh::convert
