#include "megahost_run.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

extern char** environ;

namespace mh::ckpt::test {
namespace fs = std::filesystem;
namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int64_t last_step(const fs::path& metrics) {
  int64_t step = 0;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("loss")) step = j["step"].get<int64_t>();
  }
  return step;
}

std::vector<char*> environment(std::vector<std::string>& extra) {
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "MEGAHOST_", 9) != 0) env.push_back(*e);
  for (auto& e : extra) env.push_back(e.data());
  env.push_back(nullptr);
  return env;
}

// Waits for the child, sending the interrupt's signal once its metrics
// record the step.
int wait_for(pid_t pid, const Interrupt& interrupt, const fs::path& metrics) {
  int status = 0;
  bool sent = interrupt.signal == 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (!sent && last_step(metrics) >= interrupt.after_step) {
      ::kill(pid, interrupt.signal);
      sent = true;
    }
    if (std::chrono::steady_clock::now() > deadline) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status;
}

}  // namespace

std::string scratch_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("megahost_ckpt_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

Outcome run_megahost(const std::vector<std::string>& args, const Interrupt& interrupt,
                     const std::vector<std::string>& launcher) {
  static int counter = 0;
  const fs::path work = scratch_dir("run" + std::to_string(counter++));
  const fs::path metrics = work / "metrics.jsonl", log = work / "log.txt";
  std::vector<std::string> argv_text = launcher;
  for (const std::string& a : {std::string(MEGAHOST_TEST_BINARY), std::string("--config"),
                               std::string(MEGAHOST_TEST_CONFIG), std::string("--metrics_out"), metrics.string()})
    argv_text.push_back(a);
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> extra = {"OPENBLAS_NUM_THREADS=1", "OMPI_ALLOW_RUN_AS_ROOT=1",
                                    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_rmaps_base_oversubscribe=1"};
  if (!interrupt.failpoint.empty()) extra.push_back("MEGAHOST_FAILPOINT=" + interrupt.failpoint);
  std::vector<char*> env = environment(extra);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn: " + std::string(std::strerror(rc)));
  const int status = wait_for(pid, interrupt, metrics);

  Outcome r;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r.log = read_all(log);
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    r.records.push_back(line);
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("loss")) r.losses[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  fs::remove_all(work);
  return r;
}

std::map<std::string, std::string> rank_files(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") files[e.path().filename().string()] = read_all(e.path());
  return files;
}

}  // namespace mh::ckpt::test
