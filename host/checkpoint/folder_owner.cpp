#include "checkpoint/folder_owner.hpp"

#include <megahost/error.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "checkpoint/json_limits.hpp"
#include "checkpoint/store.hpp"

namespace mh::ckpt {
namespace fs = std::filesystem;
namespace {

std::string read_small(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str().substr(0, 4096);
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

std::string new_run_id() {
  std::random_device device;
  const uint64_t value = (uint64_t(device()) << 32) ^ device() ^
                         uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

void record_owner(const std::string& dir, const std::string& run) {
  const nlohmann::json j = {{"run", run},
                            {"started_unix_s", std::chrono::duration_cast<std::chrono::seconds>(
                                                   std::chrono::system_clock::now().time_since_epoch())
                                                   .count()},
                            {"host", host_name()},
                            {"pid", int64_t(::getpid())}};
  const std::string temp = dir + "/.tmp_" + run + "_" + kOwnerFile;
  write_synced(temp, j.dump(1) + "\n");
  fs::rename(temp, dir + "/" + kOwnerFile);
  sync_dir(dir);
}

// Whether `checkpoint` lies in `dir` (a step folder of it).
bool inside(const std::string& checkpoint, const std::string& dir) {
  std::error_code ec;
  return !checkpoint.empty() && fs::equivalent(fs::path(checkpoint).parent_path(), dir, ec);
}

std::string describe_owner(const std::string& dir) {
  const std::string path = dir + "/" + kOwnerFile;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return "a run from before run identities";
  try {
    const nlohmann::json j = parse_json_limited(read_small(path), path);
    return "run " + j.at("run").get<std::string>() + ", started by pid " + std::to_string(j.at("pid").get<int64_t>()) +
           " on " + j.at("host").get<std::string>();
  } catch (const std::exception&) {
    return "a run whose " + std::string(kOwnerFile) + " is damaged";
  }
}

}  // namespace

std::optional<std::string> folder_run(const std::string& dir) {
  const std::string path = dir + "/" + kOwnerFile;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  try {
    const nlohmann::json j = parse_json_limited(read_small(path), path);
    const std::string run = j.at("run").get<std::string>();
    require(run.size() == 16 && run.find_first_not_of("0123456789abcdef") == std::string::npos, "bad run");
    return run;
  } catch (const std::exception&) {
    throw Error(MH_INVALID_ARGUMENT, path + ": not a run identity Megahost wrote (damaged or edited); move it away "
                                            "if the folder's checkpoints are yours");
  }
}

FolderLock::FolderLock(const std::string& dir) {
  const std::string path = dir + "/" + kLockFile;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  require(fd_ >= 0, "checkpoint.dir = \"" + dir + "\": cannot open its lock file " + path + ": " + std::strerror(errno),
          MH_UNAVAILABLE);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    fd_ = -1;
    throw Error(MH_UNAVAILABLE, "checkpoint.dir = \"" + dir + "\" is in use by another run (" + describe_owner(dir) +
                                    " holds " + path + "): two runs saving into one folder would interleave their "
                                    "checkpoints; wait for it to end or choose another checkpoint.dir");
  }
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::string claim_folder(const std::string& dir, const std::string& resume_from, bool auto_load, bool overwrite) {
  const std::optional<std::string> recorded = folder_run(dir);
  const std::vector<std::string> checkpoints = complete_checkpoints(dir);
  const bool resuming = !resume_from.empty() && (auto_load || inside(resume_from, dir));
  if (resuming || (auto_load && checkpoints.empty() && recorded)) {
    if (recorded) return *recorded;
    const std::string run = new_run_id();  // a folder from before identities: its run goes on under one
    record_owner(dir, run);
    return run;
  }
  if (!checkpoints.empty()) {
    require(overwrite, "checkpoint.dir = \"" + dir + "\" holds the checkpoints of another run (" + describe_owner(dir) +
                           ", newest " + fs::path(checkpoints.back()).filename().string() +
                           "); this run starts " + (resume_from.empty() ? "fresh" : "from " + resume_from) +
                           " and would replace its step folders and `latest`. Resume it with checkpoint.load = "
                           "\"auto\", choose another checkpoint.dir, or set checkpoint.overwrite = true to delete "
                           "its checkpoints and take the folder",
            MH_INVALID_ARGUMENT);
    for (const std::string& c : checkpoints) remove_checkpoint(c, recorded.value_or("old"));
    fs::remove(dir + "/" + kLatestFile);
  }
  const std::string run = new_run_id();
  record_owner(dir, run);
  return run;
}

}  // namespace mh::ckpt
