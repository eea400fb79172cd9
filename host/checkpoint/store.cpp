#include "checkpoint/store.hpp"

#include <megahost/error.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/failpoint.hpp"
#include "checkpoint/json_limits.hpp"
#include "checkpoint/safetensors.hpp"

namespace mh::ckpt {
namespace fs = std::filesystem;
namespace {

constexpr const char* kStepPrefix = "step_";
constexpr const char* kTempPrefix = ".tmp_";
constexpr const char* kTrashPrefix = ".trash_";

}  // namespace

namespace {

// Writes until all is written or write fails: a full disk first shortens a
// write (errno untouched: "Success"), then fails the next with ENOSPC.
bool write_fully(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(size_t(n));
  }
  return true;
}

}  // namespace

void write_synced(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  require(fd >= 0, "cannot create " + path + ": " + std::strerror(errno), MH_UNAVAILABLE);
  const bool ok = write_fully(fd, text) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  require(ok, "cannot write " + path + ": " + std::strerror(err), MH_UNAVAILABLE);
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), "cannot read " + path, MH_NOT_FOUND);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Adds one rank's index (its file and slices) to the metadata.
void merge_rank_index(Metadata& meta, const std::string& temp, int32_t rank) {
  const std::string path = temp + "/" + rank_index(rank);
  const nlohmann::json j = parse_json_limited(read_text(path), path);
  const std::string file = j.at("file").get<std::string>();
  if (file.empty()) return;  // the rank holds nothing another rank does not write
  meta.files[file] = FileEntry{j.at("bytes").get<uint64_t>(), j.at("xxh3").get<std::string>()};
  for (const auto& s : j.at("slices")) {
    TensorEntry& t = meta.tensors[s.at("tensor").get<std::string>()];
    t.shape = s.at("global_shape").get<std::array<int64_t, 2>>();
    auto offset = s.at("offset").get<std::array<int64_t, 2>>();
    auto shape = s.at("shape").get<std::array<int64_t, 2>>();
    t.slices.push_back(SliceRef{file, s.at("key").get<std::string>(), Rect{offset[0], offset[1], shape[0], shape[1]}});
  }
}

int64_t step_of(const std::string& name) {
  if (name.rfind(kStepPrefix, 0) != 0) return -1;
  const std::string digits = name.substr(std::strlen(kStepPrefix));
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit) || digits.size() > 15) return -1;
  return std::stoll(digits);
}

// Temporary names of run `run`: its own, and the names every run used
// before temporary names carried the run (leftovers of an interrupted save:
// ".tmp_step_<digits>", ".tmp_latest", ".trash_step_<digits>").
bool own_temporary(const std::string& name, const std::string& run) {
  for (const char* prefix : {kTempPrefix, kTrashPrefix}) {
    if (name.rfind(std::string(prefix) + run + "_", 0) == 0) return true;
    if (name.rfind(prefix, 0) == 0 && step_of(name.substr(std::strlen(prefix))) >= 0) return true;
  }
  return name == std::string(kTempPrefix) + kLatestFile;
}

}  // namespace

void remove_checkpoint(const std::string& path, const std::string& run) {
  const fs::path p(path);
  const fs::path trash = p.parent_path() / (std::string(kTrashPrefix) + run + "_" + p.filename().string());
  fs::rename(p, trash);
  fs::remove_all(trash);
}

std::string step_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "%s%09lld", kStepPrefix, static_cast<long long>(step));
  return name;
}

std::string temp_dir(const std::string& dir, int64_t step, const std::string& run) {
  return dir + "/" + kTempPrefix + run + "_" + step_name(step);
}

std::string rank_file(int32_t rank) {
  char name[40];
  std::snprintf(name, sizeof name, "rank_%05d.safetensors", rank);
  return name;
}

std::string rank_index(int32_t rank) {
  char name[40];
  std::snprintf(name, sizeof name, "rank_%05d.json", rank);
  return name;
}

void check_file_size(const std::string& path, uint64_t bytes, const FileEntry& expect) {
  require(bytes == expect.bytes, path + ": " + std::to_string(bytes) + " bytes, the index says " +
                                     std::to_string(expect.bytes) + " (truncated or replaced); load an earlier checkpoint");
}

void check_file_sum(const std::string& path, uint64_t xxh3, const FileEntry& expect) {
  const std::string sum = safetensors::hex(xxh3);
  require(sum == expect.xxh3, path + ": checksum " + sum + " does not match the index's " + expect.xxh3 +
                                  " (the file is corrupt); load an earlier checkpoint");
}

void verify_file(const data::MappedFile& file, const FileEntry& expect) {
  check_file_size(file.path(), file.bytes().size(), expect);
  check_file_sum(file.path(), safetensors::checksum(file), expect);
}

void sync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  require(synced, "cannot sync the folder " + dir + ": " + std::strerror(err), MH_UNAVAILABLE);
}

void check_writable(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  require(!ec, "checkpoint.dir = \"" + dir + "\": cannot create the folder: " + ec.message(), MH_UNAVAILABLE);
  require(::access(dir.c_str(), W_OK | X_OK) == 0,
          "checkpoint.dir = \"" + dir + "\": cannot write into the folder: " + std::strerror(errno), MH_UNAVAILABLE);
}

void prepare_temp(const std::string& dir, int64_t step, const std::string& run) {
  check_writable(dir);
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (own_temporary(name, run)) fs::remove_all(e.path());
  }
  fs::create_directory(temp_dir(dir, step, run));
}

Metadata commit(const std::string& dir, Metadata meta, int32_t world, int64_t keep, const std::string& run) {
  const std::string temp = temp_dir(dir, meta.step, run), final_dir = dir + "/" + step_name(meta.step);
  for (int32_t r = 0; r < world; ++r) merge_rank_index(meta, temp, r);
  // The merged index is checked as a loader will read it before it is committed.
  const std::string text = to_json(meta).dump(1);
  parse_metadata(text, temp + "/" + kMetadataFile);
  write_synced(temp + "/" + kMetadataFile, text);
  for (int32_t r = 0; r < world; ++r) fs::remove(temp + "/" + rank_index(r));
  sync_dir(temp);
  if (fs::exists(final_dir)) remove_checkpoint(final_dir, run);  // a rerun from an earlier step saves this step again
  failpoint("checkpoint.before_rename");
  fs::rename(temp, final_dir);
  sync_dir(dir);
  failpoint("checkpoint.before_latest");
  const std::string latest_temp = dir + "/" + kTempPrefix + run + "_" + kLatestFile;
  write_synced(latest_temp, step_name(meta.step) + "\n");
  fs::rename(latest_temp, dir + "/" + kLatestFile);
  sync_dir(dir);
  std::vector<std::string> all = complete_checkpoints(dir);
  for (size_t i = 0; keep > 0 && i + size_t(keep) < all.size(); ++i) remove_checkpoint(all[i], run);
  return meta;
}

std::vector<std::string> complete_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int64_t step = step_of(e.path().filename().string());
    if (step >= 0 && fs::exists(e.path() / kMetadataFile)) found.emplace_back(step, e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::string resolve_load(const std::string& load, const std::string& dir) {
  if (load.empty()) return "";
  if (load == "auto") {
    if (dir.empty()) return "";
    std::vector<std::string> all = complete_checkpoints(dir);
    return all.empty() ? "" : all.back();
  }
  if (fs::exists(fs::path(load) / kMetadataFile)) return load;
  std::vector<std::string> all = complete_checkpoints(load);
  require(!all.empty(), "checkpoint.load = \"" + load + "\": " +
                            (fs::exists(load) ? "holds no complete checkpoint (no metadata.json in it or in a step_* folder)"
                                              : std::string("no such file or folder")) +
                            "; give a checkpoint folder, a folder of them, or \"auto\"",
          MH_NOT_FOUND);
  return all.back();
}

}  // namespace mh::ckpt
