// The registry of a run's inputs: a folder that checkpoint.load names (a
// checkpoint, a folder of them, a Hugging Face folder) is registered with
// every file in it, so an output over any of them is found.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/temp_dir.hpp"
#include "preflight/run_inputs.hpp"

namespace mh {
namespace {

namespace fs = std::filesystem;

TEST(RunInputs, EveryFileOfAHuggingFaceFolderIsAnInputUnderTheKeyThatNamedIt) {
  data::testing::TempDir dir;
  fs::create_directories(dir.file("hf"));
  for (const char* name : {"hf/config.json", "hf/model.safetensors", "hf/tokenizer.json"}) dir.write(name, "x");
  RunInputs inputs;
  inputs.add_folder(dir.file("hf"), "checkpoint.load", 2);
  for (const char* name : {"hf/config.json", "hf/model.safetensors", "hf/tokenizer.json"}) {
    const RunInput* input = inputs.same_as(dir.file(name));
    ASSERT_NE(input, nullptr) << name;
    EXPECT_EQ(input->source, "checkpoint.load");
  }
  EXPECT_EQ(inputs.same_as(dir.file("hf/new_output.jsonl")), nullptr);
}

TEST(RunInputs, FilesOfAFolderOfCheckpointsAreFoundTwoLevelsDownAndNoDeeper) {
  data::testing::TempDir dir;
  fs::create_directories(dir.file("c/step_000000001/deeper"));
  dir.write("c/step_000000001/rank_00000.safetensors", "x");
  dir.write("c/step_000000001/deeper/other", "x");
  RunInputs inputs;
  inputs.add_folder(dir.file("c"), "checkpoint.dir", 2);
  EXPECT_NE(inputs.same_as(dir.file("c/step_000000001/rank_00000.safetensors")), nullptr);
  EXPECT_EQ(inputs.same_as(dir.file("c/step_000000001/deeper/other")), nullptr);
}

TEST(RunInputs, AHardLinkToAnInputIsTheSameFile) {
  data::testing::TempDir dir;
  dir.write("corpus.bin", "x");
  fs::create_hard_link(dir.file("corpus.bin"), dir.file("alias.bin"));
  RunInputs inputs;
  inputs.add(dir.file("corpus.bin"), "data.path");
  ASSERT_NE(inputs.same_as(dir.file("alias.bin")), nullptr);
}

}  // namespace
}  // namespace mh
