// The checkpoint format: safetensors files, metadata.json and the
// rectangles a flat range of a shard covers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <filesystem>
#include <fstream>

#include <megahost/error.hpp>

#include "checkpoint/json_limits.hpp"
#include "checkpoint/metadata.hpp"
#include "checkpoint/rank_state.hpp"
#include "checkpoint/safetensors.hpp"
#include "checkpoint/store.hpp"

namespace mh::ckpt {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("megahost_ckpt_format_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(p);
  return p;
}

Metadata two_slice_metadata() {
  Metadata m;
  m.step = 7;
  m.consumed_samples = 56;
  m.global_batch = 8;
  m.micro_batch = 2;
  m.seed = 1234;
  m.model = {2, 8, 2, 32, 16, 128};
  m.layout = {2, 1, 1, 1, 2, true, false};
  m.schedule = {{"lr", 1e-3}};
  m.tokenizer = {{"name", "byte"}};
  m.dtype = "fp32";
  m.files["rank_00000.safetensors"] = {100, "0123456789abcdef"};
  m.files["rank_00001.safetensors"] = {100, "fedcba9876543210"};
  m.tensors["w"] = TensorEntry{{4, 3}, "F32", {{"rank_00000.safetensors", "w:0,0", {0, 0, 2, 3}},
                                               {"rank_00001.safetensors", "w:2,0", {2, 0, 2, 3}}}};
  return m;
}

TEST(CheckpointMetadata, RoundTripsThroughJson) {
  const Metadata m = two_slice_metadata();
  const Metadata back = parse_metadata(to_json(m).dump(), "metadata.json");
  EXPECT_EQ(back.step, 7);
  EXPECT_EQ(back.consumed_samples, 56);
  EXPECT_EQ(back.layout.tensor, 2);
  EXPECT_TRUE(back.layout.sequence_parallel);
  ASSERT_EQ(back.tensors.at("w").slices.size(), 2u);
  EXPECT_EQ(back.tensors.at("w").slices[1].rect.row, 2);
  EXPECT_EQ(back.files.at("rank_00001.safetensors").xxh3, "fedcba9876543210");
}

// The tests below edit a field to reach the check after the checksum's; a
// metadata.json without one (written before it existed) is read unverified.
nlohmann::json unsealed(const Metadata& m) {
  nlohmann::json j = to_json(m);
  j.erase("checksum");
  return j;
}

TEST(CheckpointMetadata, AnEditedFieldFailsTheMetadatasOwnChecksum) {
  nlohmann::json j = to_json(two_slice_metadata());
  j["consumed_samples"] = 57;
  EXPECT_THAT([&] { parse_metadata(j.dump(1), "ck/metadata.json"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("ck/metadata.json: its checksum")));
}

// A version of 2^70 is read by nlohmann as a double; get<int64_t> made it
// -9223372036854775808 in the message. A string schedule threw
// nlohmann's type_error.306 when a resume compared it.
TEST(CheckpointMetadata, IntegersOutOfRangeAndAScheduleThatIsNoObjectAreNamedAsSuch) {
  const auto error_of = [](const std::string& key, const nlohmann::json& value) {
    nlohmann::json j = unsealed(two_slice_metadata());
    j[key] = value;
    try {
      parse_metadata(j.dump(), "ck/metadata.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(error_of("version", nlohmann::json::parse("1180591620717411303424")),
              HasSubstr("ck/metadata.json: 'version' must be an integer from -9223372036854775808 to "
                        "9223372036854775807, got 1.1805916207174113e+21"));
  EXPECT_THAT(error_of("seed", -1), HasSubstr("'seed' must be an integer from 0 to 18446744073709551615, got -1"));
  EXPECT_THAT(error_of("step", 1.5), HasSubstr("'step' must be an integer"));
  EXPECT_THAT(error_of("schedule", "cosine"),
              HasSubstr("ck/metadata.json: 'schedule' must be a JSON object, got string"));
}

// A full disk first shortens a write (errno untouched) and fails the next;
// a file-size limit does the same with EFBIG. The message said "Success".
TEST(WriteSynced, AShortWriteOnAFullDiskNamesTheSystemsReason) {
  const fs::path dir = scratch("full_disk");
  fs::create_directories(dir);
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 100;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message = "written";
  try {
    write_synced((dir / "metadata.json").string(), std::string(1000, 'x'));
  } catch (const Error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_THAT(message, HasSubstr("metadata.json: " + std::string(std::strerror(EFBIG))));
  fs::remove_all(dir);
}

TEST(CheckpointMetadata, ItsChecksumIgnoresWhitespaceAndKeyOrder) {
  const nlohmann::json j = to_json(two_slice_metadata());
  EXPECT_EQ(parse_metadata(j.dump(4), "m.json").step, 7);
}

TEST(CheckpointMetadata, NewerFormatVersionIsRefusedNamingBoth) {
  nlohmann::json j = unsealed(two_slice_metadata());
  j["version"] = kFormatVersion + 1;
  try {
    parse_metadata(j.dump(), "ck/metadata.json");
    FAIL() << "a newer version was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("ck/metadata.json: checkpoint format version 2"));
    EXPECT_THAT(e.what(), HasSubstr("upgrade"));
  }
}

TEST(CheckpointMetadata, TensorWhoseSlicesDoNotCoverItIsRefused) {
  nlohmann::json j = unsealed(two_slice_metadata());
  j["tensors"]["w"]["slices"].erase(1);
  EXPECT_THAT([&] { parse_metadata(j.dump(), "m.json"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("tensor 'w': its slices do not cover it exactly once: element (2, 0) is in no slice")));
}

// Rows 1 and 3 of the second slice: as many elements as the gap it leaves,
// so counting them could not tell (the gap loaded as zeros).
TEST(CheckpointMetadata, OverlappingSlicesWithAGapOfTheSameSizeAreRefusedNamingBoth) {
  nlohmann::json j = unsealed(two_slice_metadata());
  j["tensors"]["w"]["slices"][1]["offset"] = {1, 0};
  EXPECT_THAT([&] { parse_metadata(j.dump(), "m.json"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("element (1, 0) is in two slices, 'w:0,0' (file rank_00000.safetensors) and 'w:2,0'")));
}

TEST(CheckpointMetadata, SliceWithATransposedShapeIsRefused) {
  nlohmann::json j = unsealed(two_slice_metadata());
  j["tensors"]["w"] = {{"shape", {3, 4}}, {"dtype", "F32"}, {"slices", j["tensors"]["w"]["slices"]}};
  EXPECT_THAT([&] { parse_metadata(j.dump(), "m.json"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("lies outside the tensor's shape")));
}

TEST(CheckpointMetadata, SliceOffsetNearInt64MaxIsOutsideNotAnOverflow) {
  nlohmann::json j = unsealed(two_slice_metadata());
  j["tensors"]["w"]["slices"][1]["offset"] = {INT64_MAX, 0};
  EXPECT_THAT([&] { parse_metadata(j.dump(), "m.json"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("lies outside the tensor's shape")));
}

TEST(CheckpointMetadata, SliceInAFileTheIndexDoesNotListIsRefused) {
  nlohmann::json j = unsealed(two_slice_metadata());
  j["files"].erase("rank_00001.safetensors");
  EXPECT_THAT([&] { parse_metadata(j.dump(), "m.json"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("which the index does not list")));
}

TEST(CheckpointMetadata, FileNamesOutsideTheFolderAreRefused) {
  nlohmann::json j = unsealed(two_slice_metadata());
  j["files"]["../etc/passwd"] = {{"bytes", 1}, {"xxh3", "0"}};
  EXPECT_THAT([&] { parse_metadata(j.dump(), "m.json"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("plain names inside the checkpoint folder")));
}

TEST(CheckpointMetadata, DeeplyNestedJsonIsRefusedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(json_nesting_depth(deep), 100000);
  EXPECT_THAT([&] { parse_metadata(deep, "m.json"); }, ::testing::ThrowsMessage<Error>(HasSubstr("nested 100000 levels")));
}

TEST(CheckpointMetadata, ModelDifferencesNameEachKeyAndBothValues) {
  const auto diff = shape_differences({2, 8, 2, 32, 16, 128}, {2, 16, 2, 32, 16, 128});
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(diff[0], "model.hidden: checkpoint 8, this run 16");
  ModelShape qwen3{2, 8, 2, 32, 16, 128}, other{2, 8, 2, 32, 16, 128};
  qwen3.head_size = 6;
  other.head_size = 10;
  EXPECT_EQ(shape_differences(qwen3, other), std::vector<std::string>{"model.head_dim: checkpoint 6, this run 10"});
  EXPECT_EQ(shape_differences(qwen3, {2, 8, 2, 32, 16, 128}),
            std::vector<std::string>{"model.head_dim: checkpoint 6, this run 4"});
}

TEST(Safetensors, WrittenFileParsesBackWithItsBytes) {
  const fs::path p = scratch("rt.safetensors");
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7};
  std::vector<safetensors::Entry> entries = {{"a", "F32", {2, 3}}, {"b", "F32", {1, 1}}};
  const auto w = safetensors::write_file(p, entries, {{"format", "x"}}, [&](size_t i) {
    return std::as_bytes(i == 0 ? std::span<const float>(a) : std::span<const float>(b));
  });
  EXPECT_EQ(w.bytes, fs::file_size(p));
  safetensors::File f(p);
  EXPECT_EQ(safetensors::checksum(f.bytes()), w.xxh3);
  EXPECT_EQ(f.header().metadata.at("format"), "x");
  EXPECT_EQ(f.header().data_start % 8, 0u);
  auto bytes = f.data("b");
  ASSERT_EQ(bytes.size(), 4u);
  EXPECT_EQ(*reinterpret_cast<const float*>(bytes.data()), 7.f);
  fs::remove(p);
}

TEST(Safetensors, AnExistingFileIsNeverReplaced) {
  const fs::path p = scratch("exists.safetensors");
  std::ofstream(p) << "mine";
  EXPECT_THROW(safetensors::write_file(p, {}, {}, [](size_t) { return std::span<const std::byte>(); }), Error);
  std::ifstream in(p);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "mine");
  fs::remove(p);
}

std::vector<std::byte> file_with_header(const std::string& header, size_t data_bytes) {
  std::vector<std::byte> out(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i) out[size_t(i)] = std::byte((header.size() >> (8 * i)) & 0xFF);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

TEST(Safetensors, TruncatedDataIsRefused) {
  auto file = file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4);
  EXPECT_THAT([&] { safetensors::parse_header(file, "f"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("data_offsets outside the file")));
}

TEST(Safetensors, OverlappingTensorsAreRefused) {
  auto file = file_with_header(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  EXPECT_THAT([&] { safetensors::parse_header(file, "f"); }, ::testing::ThrowsMessage<Error>(HasSubstr("overlap")));
}

TEST(Safetensors, HeaderLongerThanTheFileIsRefused) {
  auto file = file_with_header("{}", 0);
  file[0] = std::byte(0xFF);
  EXPECT_THAT([&] { safetensors::parse_header(file, "f"); }, ::testing::ThrowsMessage<Error>(HasSubstr("exceeds the file")));
}

TEST(RankState, FlatRangeSplitsIntoPartialRowWholeRowsAndPartialRow) {
  // A 4x5 shard at (10, 20); elements [3, 17): row 0 cols 3-4, rows 1-2, row 3 cols 0-1.
  const auto rects = rects_of_range(Rect{10, 20, 4, 5}, 3, 17);
  ASSERT_EQ(rects.size(), 3u);
  EXPECT_EQ(rects[0].first.row, 10);
  EXPECT_EQ(rects[0].first.col, 23);
  EXPECT_EQ(rects[0].first.cols, 2);
  EXPECT_EQ(rects[0].second, 3);
  EXPECT_EQ(rects[1].first.row, 11);
  EXPECT_EQ(rects[1].first.rows, 2);
  EXPECT_EQ(rects[1].second, 5);
  EXPECT_EQ(rects[2].first.row, 13);
  EXPECT_EQ(rects[2].first.cols, 2);
  EXPECT_EQ(rects[2].second, 15);
}

TEST(RankState, RangeInsideOneRowIsOneRect) {
  const auto rects = rects_of_range(Rect{0, 0, 4, 5}, 6, 8);
  ASSERT_EQ(rects.size(), 1u);
  EXPECT_EQ(rects[0].first.row, 1);
  EXPECT_EQ(rects[0].first.col, 1);
  EXPECT_EQ(rects[0].first.cols, 2);
}

}  // namespace
}  // namespace mh::ckpt
