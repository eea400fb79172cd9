// A bad checkpoint is refused with an error naming the file and the
// tensor, exit status 1 (2 for a [model] key that contradicts it), and
// nothing in the checkpoint folder is changed:
// another model's shape, a missing, truncated or corrupt file, a newer
// format version, a tensor missing from the index, a path with nothing in it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "megahost_run.hpp"
#include "support/files.hpp"
#include "support/process.hpp"

namespace mh::ckpt::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class BadCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    Outcome r = run_megahost({"train.steps=2", "checkpoint.dir=" + dir_});
    ASSERT_EQ(r.status, 0) << r.log;
    step_ = dir_ + "/step_000000002";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Loads the (damaged) checkpoint, saving into the same folder, and
  // checks the run fails saying `message` and leaves every file as it was.
  void expect_refused(const std::string& message, const std::vector<std::string>& extra = {}, int status = 1) {
    const auto before = mh::test::folder_bytes(dir_);
    std::vector<std::string> args = {"train.steps=4", "checkpoint.dir=" + dir_, "checkpoint.load=" + step_};
    args.insert(args.end(), extra.begin(), extra.end());
    Outcome r = run_megahost(args);
    EXPECT_EQ(r.status, status) << r.log;
    EXPECT_THAT(r.log, HasSubstr(message));
    EXPECT_TRUE(r.losses.empty()) << "it trained";
    EXPECT_TRUE(mh::test::folder_bytes(dir_) == before) << "the checkpoint folder changed";
  }

  // Without its checksum, so the check after it is reached.
  nlohmann::json metadata() {
    std::ifstream in(step_ + "/metadata.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j.erase("checksum");
    return j;
  }
  void write_metadata(const nlohmann::json& j) { std::ofstream(step_ + "/metadata.json") << j.dump(); }
  std::string rank0() const { return step_ + "/rank_00000.safetensors"; }

  std::string dir_, step_;
};

// The checkpoint's metadata.json fills [model]: a key set otherwise is bad input.
TEST_F(BadCheckpoint, OfAnotherModelShapeNamesEachKeyAndBothValues) {
  expect_refused("model.hidden = 128 but " + step_ + "/metadata.json has model.hidden = 64", {"model.hidden=128"}, 2);
}

// A key outside the model's shape changes its function just the same.
TEST_F(BadCheckpoint, OfAnotherRopeThetaOrEpsilonIsRefusedNamingBothValues) {
  expect_refused("model.layernorm_eps = 1e-06 but " + step_ + "/metadata.json has model.norm_eps = 1e-05",
                 {"model.layernorm_eps=1e-6"}, 2);
  expect_refused("model.rope_theta = 500000 but " + step_ + "/metadata.json has model.rope_theta = 10000.0",
                 {"model.rope_theta=500000"}, 2);
}

TEST_F(BadCheckpoint, MissingFileIsNamed) {
  fs::remove(rank0());
  expect_refused("cannot open " + rank0());
}

TEST_F(BadCheckpoint, TruncatedFileIsNamedWithBothSizes) {
  fs::resize_file(rank0(), fs::file_size(rank0()) / 2);
  expect_refused(rank0() + ": " + std::to_string(fs::file_size(rank0())) + " bytes, the index says");
}

TEST_F(BadCheckpoint, CorruptByteFailsTheChecksum) {
  {
    std::fstream f(rank0(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    f.put('\x7f');
  }
  expect_refused(rank0() + ": checksum");
}

// The load copies each window as it hashes it: a byte damaged mid-file is
// caught when the file ends, and the run stops before using what it copied.
TEST_F(BadCheckpoint, CorruptByteInTheMiddleFailsTheChecksumBeforeAnyStep) {
  {
    std::fstream f(rank0(), std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = std::streamoff(fs::file_size(rank0()) / 2);
    f.seekg(middle);
    const char c = char(f.get());
    f.seekp(middle);
    f.put(char(~c));
  }
  expect_refused(rank0() + ": checksum");
}

TEST_F(BadCheckpoint, NewerFormatVersionSaysToUpgrade) {
  nlohmann::json j = metadata();
  j["version"] = 99;
  write_metadata(j);
  expect_refused("checkpoint format version 99; this Megahost reads versions 1 to 1");
}

// Near INT64_MAX the data order's sample indices overflowed (signed
// overflow in the blend) as the run went on.
TEST_F(BadCheckpoint, ConsumedSamplesNearTheLimitIsRefusedNotOverflowed) {
  nlohmann::json j = metadata();
  j["consumed_samples"] = INT64_MAX - 3;
  write_metadata(j);
  expect_refused("consumed_samples = 9223372036854775804 at step 2: training on to step 4 would read past sample "
                 "2^53, the data order's limit");
}

TEST_F(BadCheckpoint, TensorMissingFromTheIndexIsNamed) {
  nlohmann::json j = metadata();
  j["tensors"].erase("layers.1.fc1_w");
  write_metadata(j);
  expect_refused("tensor 'layers.1.fc1_w' is missing from the index");
}

TEST_F(BadCheckpoint, EditedMetadataFailsItsOwnChecksumBeforeAnyFileIsRead) {
  std::ifstream in(step_ + "/metadata.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["consumed_samples"] = j["consumed_samples"].get<int64_t>() + 1;
  write_metadata(j);
  expect_refused(step_ + "/metadata.json: its checksum");
}

// One rank's slice of a tensor moved onto another's rows: the moved-from
// rows would have loaded as zeros.
TEST_F(BadCheckpoint, OverlappingSlicesAreRefusedBeforeAnyFileIsRead) {
  nlohmann::json j = metadata();
  nlohmann::json& slices = j["tensors"]["wte"]["slices"];
  ASSERT_EQ(slices.size(), 1u);
  const int64_t rows = slices[0]["shape"][0].get<int64_t>();
  nlohmann::json half = slices[0];
  half["shape"][0] = rows / 2;
  nlohmann::json other = half;
  other["offset"][0] = rows / 4;
  slices = {half, other};
  write_metadata(j);
  expect_refused("tensor 'wte': its slices do not cover it exactly once");
}

// They hung the reader.
TEST_F(BadCheckpoint, MetadataThatIsAFifoIsRefusedByItsTypeInsteadOfHanging) {
  fs::remove(step_ + "/metadata.json");
  ASSERT_EQ(::mkfifo((step_ + "/metadata.json").c_str(), 0600), 0);
  expect_refused(step_ + "/metadata.json is a FIFO, not a regular file");
}

TEST_F(BadCheckpoint, RankFileThatIsALinkToDevZeroIsRefusedAsADevice) {
  fs::remove(rank0());
  fs::create_symlink("/dev/zero", rank0());
  expect_refused(rank0() + " is a device, not a regular file");
}

TEST_F(BadCheckpoint, PathWithNothingInItIsRefused) {
  step_ = dir_ + "/no_such_checkpoint";
  expect_refused("no such file or folder");
}

}  // namespace
}  // namespace mh::ckpt::test

namespace mh::ckpt::test {
namespace {

TEST(CheckpointDir, ThatCannotBeCreatedIsRefusedBeforeStepOne) {
  Outcome r = run_megahost({"train.steps=2", "checkpoint.dir=/dev/null/checkpoints"});
  EXPECT_EQ(r.status, 1) << r.log;
  EXPECT_THAT(r.log, ::testing::HasSubstr("checkpoint.dir = \"/dev/null/checkpoints\": cannot create the folder: Not a directory"));
  EXPECT_TRUE(r.losses.empty());
}

}  // namespace
}  // namespace mh::ckpt::test

namespace mh::ckpt::test {
namespace {

// megahost_ckpt info on `path`, its output in one stream.
mh::test::ProcessExit ckpt_info(const std::string& path) {
  mh::test::ProcessSpec spec;
  spec.argv = {MEGAHOST_CKPT_BINARY, "info", path};
  spec.stderr_to_stdout = true;
  return mh::test::run_process(spec);
}

TEST_F(BadCheckpoint, InfoListsTheCheckpointAndVerifiesEveryFile) {
  const mh::test::ProcessExit ok = ckpt_info(dir_);
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_THAT(ok.out, HasSubstr("step 2, 16 samples consumed"));
  EXPECT_THAT(ok.out, HasSubstr("optimizer.exp_avg_sq.layers.3.qkv_w"));
  EXPECT_THAT(ok.out, HasSubstr("every checksum verified"));
  fs::resize_file(rank0(), 100);
  const mh::test::ProcessExit bad = ckpt_info(step_);
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("FAILED: " + rank0() + ": 100 bytes, the index says"));
}

// It said "every checksum verified" of an index whose slices overlapped.
TEST_F(BadCheckpoint, InfoRefusesAnIndexThatDoesNotCoverATensorExactlyOnceAndAnEditedMetadata) {
  const nlohmann::json original = [&] {
    std::ifstream in(step_ + "/metadata.json");
    return nlohmann::json::parse(in);
  }();
  nlohmann::json j = metadata();
  nlohmann::json& slice = j["tensors"]["wpe"]["slices"][0];
  slice["shape"][0] = slice["shape"][0].get<int64_t>() - 1;
  write_metadata(j);
  const mh::test::ProcessExit gap = ckpt_info(step_);
  EXPECT_EQ(gap.status, 1) << gap.out;
  EXPECT_THAT(gap.out, HasSubstr("tensor 'wpe': its slices do not cover it exactly once"));
  EXPECT_THAT(gap.out, ::testing::Not(HasSubstr("verified")));
  nlohmann::json edited = original;
  edited["step"] = 3;
  write_metadata(edited);
  const mh::test::ProcessExit bad = ckpt_info(step_);
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("metadata.json: its checksum"));
}

}  // namespace
}  // namespace mh::ckpt::test
