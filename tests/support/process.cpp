#include "support/process.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace mh::test {
namespace {

// An unlinked temporary file that collects one output stream.
class Capture {
 public:
  Capture() : file_(std::tmpfile()) {
    if (file_ == nullptr) throw std::runtime_error("tmpfile: " + std::string(std::strerror(errno)));
  }
  ~Capture() { std::fclose(file_); }
  Capture(const Capture&) = delete;
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

std::vector<char*> environment(const ProcessSpec& spec, std::vector<std::string>& added) {
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    bool keep = true;
    for (const std::string& prefix : spec.unset_prefix) keep = keep && std::strncmp(*e, prefix.c_str(), prefix.size()) != 0;
    if (keep) env.push_back(*e);
  }
  for (std::string& e : added) env.push_back(e.data());
  env.push_back(nullptr);
  return env;
}

// Waits for the child, sending the interrupt once its condition holds and
// SIGKILL past the deadline.
int wait_for(pid_t pid, const ProcessSpec& spec) {
  int status = 0;
  bool sent = spec.interrupt.signal == 0;
  const auto deadline = std::chrono::steady_clock::now() + spec.deadline;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (!sent && (!spec.interrupt.when || spec.interrupt.when())) {
      ::kill(pid, spec.interrupt.signal);
      sent = true;
    }
    if (std::chrono::steady_clock::now() > deadline) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status;
}

}  // namespace

ProcessExit run_process(const ProcessSpec& spec) {
  std::vector<std::string> text = spec.argv, added = spec.set_env;
  std::vector<char*> argv;
  for (std::string& a : text) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> env = environment(spec, added);
  Capture out, err;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out.fd(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, spec.stderr_to_stdout ? out.fd() : err.fd(), STDERR_FILENO);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw std::runtime_error("cannot run " + text[0] + ": " + std::strerror(spawned));
  const int status = wait_for(pid, spec);
  ProcessExit r;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r.out = out.text();
  r.err = err.text();
  return r;
}

ProcessSpec shell(const std::string& command) {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", command};
  return spec;
}

std::vector<std::string> mpi_launcher(int ranks) {
#ifdef MEGAHOST_TEST_MPIEXEC
  return {MEGAHOST_TEST_MPIEXEC, "-n", std::to_string(ranks), "--oversubscribe"};
#else
  throw std::runtime_error("this build found no mpiexec");
#endif
}

std::vector<std::string> mpi_environment() {
  return {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_rmaps_base_oversubscribe=1"};
}

}  // namespace mh::test
