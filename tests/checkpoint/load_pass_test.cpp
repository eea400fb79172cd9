// Loading in one pass (checkpoint/load_pass.hpp): every rectangle a layout
// can ask for reads as the random-access reader reads it, across windows
// and files; a byte damaged anywhere — mid-window, the last one, the
// header — fails the file's checksum; a missing or truncated file fails the
// load before anything is copied.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include <megahost/error.hpp>

#include "checkpoint/load_pass.hpp"
#include "checkpoint/safetensors.hpp"
#include "checkpoint/tensor_reader.hpp"

namespace mh::ckpt {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Tensor "w" [1536, 1024] split by rows over two files (3 MiB each), "big"
// [2048, 1024] (8 MiB) and "v" [1, 1000] in the first: the first file spans
// three of the reader's 4 MiB windows, and slices straddle their edges.
// Every element is distinct.
class LoadPassTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("megahost_load_pass_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    add("v", {1, 1000}, {{"rank_00000.safetensors", {0, 0, 1, 1000}}});
    add("w", {1536, 1024}, {{"rank_00000.safetensors", {0, 0, 768, 1024}}, {"rank_00001.safetensors", {768, 0, 768, 1024}}});
    add("big", {2048, 1024}, {{"rank_00000.safetensors", {0, 0, 2048, 1024}}});
    for (const auto& [file, keys] : by_file_) {
      std::vector<safetensors::Entry> entries;
      std::vector<std::vector<float>> data;
      for (const auto& [key, tensor, rect] : keys) {
        entries.push_back({key, "F32", {rect.rows, rect.cols}});
        data.push_back(slice_values(tensor, rect));
      }
      const auto w = safetensors::write_file((dir_ / file).string(), entries, {}, [&](size_t i) {
        return std::as_bytes(std::span<const float>(data[i]));
      });
      meta_.files[file] = {w.bytes, safetensors::hex(w.xxh3)};
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  void add(const std::string& name, std::array<int64_t, 2> shape, std::vector<std::pair<std::string, Rect>> slices) {
    TensorEntry& t = meta_.tensors[name];
    t.shape = shape;
    base_[name] = next_;
    next_ += shape[0] * shape[1];
    for (const auto& [file, rect] : slices) {
      const std::string key = name + ":" + std::to_string(rect.row) + "," + std::to_string(rect.col);
      t.slices.push_back({file, key, rect});
      by_file_[file].push_back({key, name, rect});
    }
  }
  // Element (r, c) of tensor `name`: its index among all tensors' elements (below 2^24, exact in f32).
  float value(const std::string& name, int64_t r, int64_t c) const {
    return float(base_.at(name) + r * meta_.tensors.at(name).shape[1] + c);
  }
  std::vector<float> slice_values(const std::string& name, const Rect& rect) const {
    std::vector<float> out;
    for (int64_t r = rect.row; r < rect.row + rect.rows; ++r)
      for (int64_t c = rect.col; c < rect.col + rect.cols; ++c) out.push_back(value(name, r, c));
    return out;
  }
  // Loads each of `wants` in one pass; each comes back in a buffer
  // pre-filled with -1 (nothing copied).
  std::vector<std::vector<float>> load(const std::vector<std::pair<std::string, Rect>>& wants) {
    LoadPass pass(dir_.string(), meta_);
    std::vector<std::vector<float>> out;
    for (const auto& [name, rect] : wants) out.emplace_back(size_t(rect.numel()), -1.f);
    for (size_t i = 0; i < wants.size(); ++i)
      EXPECT_EQ(pass.add(wants[i].first, meta_.tensors.at(wants[i].first), wants[i].second, out[i].data()),
                wants[i].second.numel());
    pass.run();
    return out;
  }
  void corrupt(const std::string& file, int64_t at, char mask = 0x10) {
    std::fstream f(dir_ / file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at, at < 0 ? std::ios::end : std::ios::beg);
    const char c = char(f.get());
    f.seekp(at, at < 0 ? std::ios::end : std::ios::beg);
    f.put(char(c ^ mask));
  }
  std::string path(const std::string& file) const { return (dir_ / file).string(); }
  // Drops the files from the page cache, so they are read from the disk
  // (directly, where the file system allows it) rather than the cache.
  void evict() const {
    for (const auto& [file, keys] : by_file_) {
      const int fd = ::open(path(file).c_str(), O_RDONLY);
      ASSERT_GE(fd, 0);
      ::fdatasync(fd);
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
  }

  fs::path dir_;
  Metadata meta_;
  std::map<std::string, int64_t> base_;
  int64_t next_ = 0;
  std::map<std::string, std::vector<std::tuple<std::string, std::string, Rect>>> by_file_;
  const std::vector<std::pair<std::string, Rect>> everything_ = {
      {"v", {0, 0, 1, 1000}}, {"w", {0, 0, 1536, 1024}}, {"big", {0, 0, 2048, 1024}}};
};

// The rectangles layouts ask for: whole tensors (a resume on its own
// layout), a column half (tensor parallelism), rows straddling two files
// and window edges (pipeline stages, distributed-optimizer pieces), a
// partial rectangle, a single element.
TEST_F(LoadPassTest, ReadsEveryRectangleAsTheRandomAccessReaderDoes) {
  const std::vector<std::pair<std::string, Rect>> wants = {
      {"v", {0, 0, 1, 1000}},      {"w", {0, 0, 1536, 1024}},  {"w", {0, 512, 1536, 512}}, {"w", {700, 0, 100, 1024}},
      {"big", {3, 7, 2000, 300}},  {"big", {1023, 0, 2, 1024}}, {"big", {2047, 1023, 1, 1}}, {"v", {0, 999, 1, 1}}};
  const auto got = load(wants);
  TensorReader reader(dir_.string(), meta_);
  for (size_t i = 0; i < wants.size(); ++i) {
    const auto& [name, rect] = wants[i];
    std::vector<float> old(size_t(rect.numel()), -2.f);
    EXPECT_EQ(reader.read(name, meta_.tensors.at(name), rect, old.data()), rect.numel());
    EXPECT_EQ(got[i], old) << name << " want " << i;
    EXPECT_EQ(got[i], slice_values(name, rect)) << name << " want " << i;
  }
}

// Windows the page cache does not hold are read past it: the same values.
TEST_F(LoadPassTest, FilesNotInThePageCacheLoadTheSame) {
  const std::vector<std::pair<std::string, Rect>> wants = {{"w", {0, 512, 1536, 512}}, {"big", {3, 7, 2000, 300}}};
  evict();
  const auto got = load(wants);
  for (size_t i = 0; i < wants.size(); ++i) EXPECT_EQ(got[i], slice_values(wants[i].first, wants[i].second));
}

TEST_F(LoadPassTest, CorruptByteInTheMiddleOfAWindowFailsTheChecksum) {
  corrupt("rank_00000.safetensors", (6 << 20) + 123);
  evict();
  EXPECT_THAT([&] { load(everything_); }, ThrowsMessage<Error>(HasSubstr(path("rank_00000.safetensors") + ": checksum")));
}

TEST_F(LoadPassTest, CorruptLastByteOfAFileFailsTheChecksum) {
  corrupt("rank_00001.safetensors", -1);
  EXPECT_THAT([&] { load(everything_); }, ThrowsMessage<Error>(HasSubstr(path("rank_00001.safetensors") + ": checksum")));
}

// A digit of a shape changed (768 to 668): the header is still JSON but its
// byte ranges no longer match its shapes. The cause is named, not the symptom.
TEST_F(LoadPassTest, CorruptHeaderIsReportedAsAChecksumMismatch) {
  std::string text(64, '\0');
  std::ifstream(dir_ / "rank_00001.safetensors", std::ios::binary).read(text.data(), 64);
  corrupt("rank_00001.safetensors", int64_t(text.find("[768")) + 1, 0x01);
  EXPECT_THAT([&] { load(everything_); }, ThrowsMessage<Error>(HasSubstr(path("rank_00001.safetensors") + ": checksum")));
}

// The second file's size is wrong: nothing of the first is copied either.
TEST_F(LoadPassTest, TruncatedFileFailsTheLoadBeforeAnythingIsCopied) {
  fs::resize_file(dir_ / "rank_00001.safetensors", 1000);
  LoadPass pass(dir_.string(), meta_);
  std::vector<float> w(1536 * 1024, -1.f);
  pass.add("w", meta_.tensors.at("w"), {0, 0, 1536, 1024}, w.data());
  EXPECT_THAT([&] { pass.run(); }, ThrowsMessage<Error>(HasSubstr(path("rank_00001.safetensors") + ": 1000 bytes, the index says")));
  EXPECT_TRUE(std::all_of(w.begin(), w.end(), [](float x) { return x == -1.f; }));
}

TEST_F(LoadPassTest, OnlyTheFilesHoldingWhatIsWantedAreRead) {
  fs::remove(dir_ / "rank_00001.safetensors");
  EXPECT_EQ(load({{"w", {0, 0, 768, 1024}}})[0], slice_values("w", {0, 0, 768, 1024}));
}

}  // namespace
}  // namespace mh::ckpt
