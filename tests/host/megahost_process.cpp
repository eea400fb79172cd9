#include "megahost_process.hpp"

#include <megahost/abi.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace mh::host::testing {
namespace {

// An unlinked temporary file that collects one output stream.
class Capture {
 public:
  Capture() : file_(std::tmpfile()) {
    if (file_ == nullptr) throw std::runtime_error("tmpfile: " + std::string(std::strerror(errno)));
  }
  ~Capture() { std::fclose(file_); }
  int fd() const { return fileno(file_); }
  std::string text() const {
    std::string out;
    std::rewind(file_);
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof buffer, file_)) out.append(buffer, n);
    return out;
  }

 private:
  std::FILE* file_;
};

std::vector<char*> environment_without_plugin_path() {
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "MEGAHOST_PLUGIN_PATH=", 21) != 0) env.push_back(*e);
  env.push_back(nullptr);
  return env;
}

}  // namespace

Outcome run_megahost(const std::vector<std::string>& args) {
  std::vector<std::string> argv_text{MEGAHOST_TEST_BINARY};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  Capture out, err;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out.fd(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.fd(), STDERR_FILENO);
  pid_t pid = 0;
  std::vector<char*> env = environment_without_plugin_path();
  int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw std::runtime_error("cannot run " + argv_text[0] + ": " + std::strerror(spawned));
  int wait_status = 0;
  waitpid(pid, &wait_status, 0);
  return Outcome{WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1, out.text(), err.text()};
}

std::vector<std::string> listed(const std::string& listing, const std::string& kind, const std::string& name) {
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> columns;
    for (std::string w; words >> w;) columns.push_back(w);
    if (columns.size() == 5 && columns[0] == kind && columns[1] == name) return columns;
  }
  return {};
}

std::string abi_version() { return std::to_string(MH_ABI_MAJOR) + "." + std::to_string(MH_ABI_MINOR); }

std::string fixture(const std::string& folder) { return std::string(MEGAHOST_TEST_FIXTURES) + "/" + folder; }

std::vector<std::string> tiny_run() {
  return {"model.layers=2",        "model.hidden=64",      "model.heads=2",
          "model.seq_len=32",      "train.global_batch=2", "train.micro_batch=2",
          "train.eval_interval=0", std::string("data.path=") + MEGAHOST_TEST_DATA};
}

}  // namespace mh::host::testing
