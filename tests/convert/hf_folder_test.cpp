// Hugging Face folders: shards and their index, bf16, prefixes, buffers,
// and damaged folders refused naming the file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <megahost/error.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "convert/hf_folder.hpp"
#include "convert/hf_to_megahost.hpp"
#include "hf_fixture.hpp"

namespace mh::convert {
namespace {

namespace fs = std::filesystem;
using testing::message;
using testing::scratch;
using ::testing::HasSubstr;

std::map<std::string, HfTensor> small_tensors() {
  return {{"transformer.a.weight", {{3, 2}, {1, 2, 3, 4, 5, 6}}},
          {"transformer.b.bias", {{4}, {-1, 0.5f, 1e-3f, 7}}},
          {"lm_head.weight", {{2, 2}, {9, 8, 7, 6}}}};
}

void write(const fs::path& dir, const std::map<std::string, HfTensor>& tensors, const ShardOptions& o = {}) {
  testing::write_folder(dir, testing::tiny_gpt2(), tensors, o);
}

// A missing TMPDIR was temp_directory_path's bare "No such file or
// directory": the import names TMPDIR and the fix.
TEST(HfFolder, AnImportIntoAMissingTmpdirNamesTmpdir) {
  const fs::path dir = scratch("import_tmpdir");
  write(dir, small_tensors());
  const char* saved = std::getenv("TMPDIR");
  const std::string old = saved != nullptr ? saved : "";
  ::setenv("TMPDIR", "/nonexistent/megahost_tmp", 1);
  std::string error;
  try {
    TemporaryImport import(dir.string(), {});
  } catch (const Error& e) {
    error = e.what();
  }
  if (saved != nullptr) ::setenv("TMPDIR", old.c_str(), 1);
  else ::unsetenv("TMPDIR");
  EXPECT_THAT(error, HasSubstr("TMPDIR=/nonexistent/megahost_tmp is not a folder; importing " + dir.string() +
                               " writes its weights there in f32: set TMPDIR to a folder with room"));
  fs::remove_all(dir);
}

TEST(HfFolder, ReadsBackWhatItWroteWithoutPrefixes) {
  const fs::path dir = scratch("plain");
  write(dir, small_tensors());
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  const HfFolder folder(dir.string());
  EXPECT_THAT(folder.names(), ::testing::ElementsAre("a.weight", "b.bias", "lm_head.weight"));
  EXPECT_EQ(folder.get("b.bias").data, small_tensors().at("transformer.b.bias").data);
  EXPECT_EQ(folder.get("a.weight").shape, (std::vector<int64_t>{3, 2}));
  fs::remove_all(dir);
}

TEST(HfFolder, ShardsAboveTheLimitWithAnIndex) {
  const fs::path dir = scratch("sharded");
  write(dir, small_tensors(), {"F32", 24});  // 24 bytes: one tensor per shard
  EXPECT_TRUE(fs::exists(dir / "model-00001-of-00003.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "model-00003-of-00003.safetensors"));
  std::ifstream in(dir / "model.safetensors.index.json");
  const auto index = nlohmann::json::parse(in);
  EXPECT_EQ(index["metadata"]["total_size"], 4 * (6 + 4 + 4));
  // In name order: lm_head.weight, transformer.a.weight, transformer.b.bias.
  EXPECT_EQ(index["weight_map"]["transformer.a.weight"], "model-00002-of-00003.safetensors");
  const HfFolder folder(dir.string());
  for (const auto& [name, t] : small_tensors())
    EXPECT_EQ(folder.get(name.starts_with("transformer.") ? name.substr(12) : name).data, t.data) << name;
  fs::remove_all(dir);
}

TEST(HfFolder, Bf16IsRoundedToNearestEvenAndReadBack) {
  const fs::path dir = scratch("bf16");
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: to even, 1.
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to even, 1 + 2^-6.
  const std::vector<float> values = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f, 0.0f};
  write(dir, {{"transformer.x.bias", {{4}, values}}}, {"BF16", 1 << 20});
  const HfTensor t = HfFolder(dir.string()).get("x.bias");
  EXPECT_EQ(t.data, (std::vector<float>{1.0f, 1.0f + 0x1p-6f, -2.5f, 0.0f}));
  std::ifstream config(dir / "config.json");
  EXPECT_EQ(nlohmann::json::parse(config)["torch_dtype"], "bfloat16");
  fs::remove_all(dir);
}

TEST(HfFolder, BuffersAreSkipped) {
  const fs::path dir = scratch("buffers");
  write(dir, {{"transformer.h.0.attn.bias", {{1, 1, 2, 2}, {1, 0, 1, 1}}},
              {"transformer.h.0.attn.masked_bias", {{1}, {-1e4f}}},
              {"transformer.wpe.weight", {{1, 2}, {3, 4}}}});
  EXPECT_THAT(HfFolder(dir.string()).names(), ::testing::ElementsAre("wpe.weight"));
  fs::remove_all(dir);
}

TEST(HfFolder, ATensorWithAndWithoutItsPrefixIsRefused) {
  const fs::path dir = scratch("twice");
  write(dir, {{"transformer.wpe.weight", {{1, 2}, {3, 4}}}, {"wpe.weight", {{1, 2}, {3, 4}}}});
  EXPECT_THAT(message([&] { HfFolder f(dir.string()); }), HasSubstr("appears twice"));
  fs::remove_all(dir);
}

TEST(HfFolder, ATruncatedFileIsRefusedNamingIt) {
  const fs::path dir = scratch("truncated");
  write(dir, small_tensors());
  fs::resize_file(dir / "model.safetensors", fs::file_size(dir / "model.safetensors") - 4);
  EXPECT_THAT(message([&] { HfFolder f(dir.string()); }), HasSubstr((dir / "model.safetensors").string()));
  fs::remove_all(dir);
}

TEST(HfFolder, AMissingShardIsRefusedNamingIt) {
  const fs::path dir = scratch("missing_shard");
  write(dir, small_tensors(), {"F32", 24});
  fs::remove(dir / "model-00002-of-00003.safetensors");
  EXPECT_THAT(message([&] { HfFolder f(dir.string()); }), HasSubstr("model-00002-of-00003.safetensors"));
  fs::remove_all(dir);
}

TEST(HfFolder, AnIndexThatMisplacesATensorIsRefused) {
  const fs::path dir = scratch("misplaced");
  write(dir, small_tensors(), {"F32", 24});
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map": {"transformer.a.weight": "model-00003-of-00003.safetensors",
            "transformer.b.bias": "model-00003-of-00003.safetensors", "lm_head.weight": "model-00001-of-00003.safetensors"}})";
  EXPECT_THAT(message([&] { HfFolder f(dir.string()); }), HasSubstr("'transformer.a.weight' is not in"));
  fs::remove_all(dir);
}

TEST(HfFolder, IndexShardNamesMustStayInTheFolder) {
  EXPECT_THAT(message([] { parse_shard_index(R"({"weight_map": {"a": "../x.safetensors"}})", "i.json"); }),
              HasSubstr("not a plain file name"));
  EXPECT_THAT(message([] { parse_shard_index(R"({"weight_map": {"a": 3}})", "i.json"); }), HasSubstr("i.json"));
  EXPECT_THAT(message([] { parse_shard_index(R"([])", "i.json"); }), HasSubstr("weight_map"));
}

TEST(HfFolder, AnotherDtypeIsRefusedNamingIt) {
  const fs::path dir = scratch("f16");
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << "{}";
  const std::vector<std::byte> zeros(4);
  safetensors::write_file((dir / "model.safetensors").string(), {{"model.x", "F16", {2}}}, {},
                          [&](size_t) { return std::span<const std::byte>(zeros); });
  EXPECT_THAT(message([&] { HfFolder(dir.string()).get("x"); }), HasSubstr("is F16"));
  fs::remove_all(dir);
}

TEST(HfFolder, NeverWritesOverAnExistingFolder) {
  const fs::path dir = scratch("exists");
  fs::create_directories(dir);
  EXPECT_THAT(message([&] { write(dir, small_tensors()); }), HasSubstr("exists"));
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

// It hung the reader.
TEST(HfFolder, AnIndexThatIsAFifoIsRefusedByItsType) {
  const fs::path dir = scratch("fifo_index");
  write(dir, small_tensors(), {"F32", 40});
  const fs::path index = dir / "model.safetensors.index.json";
  ASSERT_TRUE(fs::exists(index));
  fs::remove(index);
  ASSERT_EQ(::mkfifo(index.c_str(), 0600), 0);
  EXPECT_THAT(message([&] { HfFolder folder(dir.string()); }), HasSubstr(index.string() + " is a FIFO, not a regular file"));
  fs::remove_all(dir);
}

// It staged the folder as .tmp_NAME beside it, removing whatever had that name.
TEST(HfFolder, StagingLeavesAnEntryOfTheUsersNamedLikeItsTemporaryFolderAlone) {
  const fs::path dir = scratch("staged");
  const fs::path users = dir.parent_path() / (".tmp_" + dir.filename().string());
  fs::remove_all(users);
  fs::create_directories(users);
  std::ofstream(users / "notes.txt") << "mine";
  write(dir, small_tensors());
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  std::ifstream notes(users / "notes.txt");
  std::string text;
  notes >> text;
  EXPECT_EQ(text, "mine");
  fs::remove_all(users);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mh::convert
