#include "tuner/probe.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

namespace mh {
namespace fs = std::filesystem;
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Runs argv with stdout and stderr to `log`; the exit status, or -1.
int run_process(const std::vector<std::string>& argv, const fs::path& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The run's reason for failing: its last error line, else its last line.
std::string failure_of(const fs::path& log, int status) {
  std::ifstream in(log);
  std::string last, error;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    last = line;
    if (line[0] == 'E' || line.find("error") != std::string::npos) error = line;
  }
  std::string why = !error.empty() ? error : last;
  if (const size_t cut = why.find("] "); why.size() > 1 && why[0] == 'E' && cut != std::string::npos) why = why.substr(cut + 2);
  return (why.empty() ? "exit status " + std::to_string(status) : why) + " (log: " + log.string() + ")";
}

std::vector<std::string> command(const ProbeSettings& s, const fs::path& config, const fs::path& metrics) {
  std::vector<std::string> argv{s.binary.string(), "--config", config.string(), "--metrics_out", metrics.string()};
  if (!s.plugin_path.empty()) argv.push_back("--plugin_path=" + s.plugin_path);
  return argv;
}

std::vector<nlohmann::json> records(const fs::path& metrics) {
  std::vector<nlohmann::json> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The rank's categories as the run named them (training's grads and
// optimizer, generation's kv_cache).
std::string breakdown_of(const nlohmann::json& rank) {
  std::string out;
  for (const auto& [category, bytes] : rank.items()) {
    if (category == "rank" || category == "total" || !bytes.is_number()) continue;
    if (!out.empty()) out += ' ';
    out.append(category).append("=").append(std::to_string(int64_t(bytes.get<double>() / kMiB))).append("MiB");
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

DryRunMemory dry_run_memory(const ProbeSettings& s, const fs::path& config, const std::string& name) {
  const fs::path metrics = s.work_dir / (name + ".dry.jsonl"), log = s.work_dir / (name + ".dry.log");
  fs::remove(metrics);
  std::vector<std::string> argv = command(s, config, metrics);
  argv.push_back("--dry_run");
  DryRunMemory out;
  if (int status = run_process(argv, log); status != 0) {
    out.error = failure_of(log, status);
    return out;
  }
  for (const auto& r : records(metrics)) {
    if (!r.contains("final")) continue;
    for (const auto& rank : r["memory"]) {
      const uint64_t total = rank["total"].get<uint64_t>();
      if (total < out.peak_bytes) continue;
      out.peak_bytes = total;
      out.peak_rank = rank["rank"].get<int64_t>();
      out.breakdown = breakdown_of(rank);
    }
  }
  if (out.peak_bytes == 0) out.error = "the dry run wrote no memory record to " + metrics.string();
  return out;
}

MeasuredRun measure_steps(const ProbeSettings& s, const fs::path& config, const std::string& name, int32_t steps) {
  const fs::path metrics = s.work_dir / (name + ".run.jsonl"), log = s.work_dir / (name + ".run.log");
  fs::remove(metrics);
  std::vector<std::string> argv = command(s, config, metrics);
  for (std::string o : {"train.steps=" + std::to_string(steps), std::string("train.eval_interval=0")}) argv.push_back(o);
  MeasuredRun out;
  if (int status = run_process(argv, log); status != 0) {
    out.error = failure_of(log, status);
    return out;
  }
  for (const auto& r : records(metrics))
    if (r.contains("step_s") && r["step"].get<int64_t>() > 1) out.step_seconds.push_back(r["step_s"].get<double>());
  if (out.step_seconds.empty()) {
    out.error = "the run wrote no timed steps to " + metrics.string();
    return out;
  }
  out.best_step_seconds = *std::min_element(out.step_seconds.begin(), out.step_seconds.end());
  return out;
}

MeasuredGeneration measure_generation(const ProbeSettings& s, const fs::path& config, const std::string& name) {
  const fs::path metrics = s.work_dir / (name + ".run.jsonl"), log = s.work_dir / (name + ".run.log");
  fs::remove(metrics);
  MeasuredGeneration out;
  if (int status = run_process(command(s, config, metrics), log); status != 0) {
    out.error = failure_of(log, status);
    return out;
  }
  std::vector<double> ttft, tpot;
  for (const auto& r : records(metrics))
    if (r.contains("ttft_s") && r.contains("tpot_s")) {
      ttft.push_back(r["ttft_s"].get<double>());
      tpot.push_back(r["tpot_s"].get<double>());
    }
  if (ttft.empty()) {
    out.error = "the run wrote no request records to " + metrics.string();
    return out;
  }
  out.ttft_seconds = median(ttft);
  out.tpot_seconds = median(tpot);
  return out;
}

}  // namespace mh
