#include "tuner/probe.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
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

// The q-quantile of sorted values, linearly between neighbours.
double quantile(const std::vector<double>& sorted, double q) {
  const double at = q * double(sorted.size() - 1);
  const size_t lo = size_t(at), hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (at - double(lo)) * (sorted[hi] - sorted[lo]);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return quantile(v, 0.5);
}

}  // namespace

Spread spread_of(std::vector<double> values) {
  Spread s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.median = quantile(values, 0.5);
  s.low = quantile(values, 0.25);
  s.high = quantile(values, 0.75);
  s.count = int(values.size());
  return s;
}

bool separated(const Spread& a, const Spread& b) {
  return std::abs(a.median - b.median) > ((a.high - a.low) + (b.high - b.low)) / 2;
}

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
  out.step = spread_of(out.step_seconds);
  return out;
}

int64_t warm_up_batches(double predicted_batch_seconds) {
  if (!(predicted_batch_seconds > 0)) return 1;
  return std::clamp<int64_t>(int64_t(std::ceil(kWarmUpSeconds / predicted_batch_seconds)), 1, kMostWarmUpBatches);
}

MeasuredGeneration measure_generation(const ProbeSettings& s, const fs::path& config, const std::string& name,
                                      int64_t batch, int64_t output_tokens, int64_t warm_up) {
  const fs::path metrics = s.work_dir / (name + ".run.jsonl"), log = s.work_dir / (name + ".run.log");
  fs::remove(metrics);
  MeasuredGeneration out;
  if (int status = run_process(command(s, config, metrics), log); status != 0) {
    out.error = failure_of(log, status);
    return out;
  }
  // Requests are admitted in order, a batch at a time: request i is of batch i / batch.
  std::vector<std::vector<double>> ttft, tpot;
  int64_t index = 0;
  for (const auto& r : records(metrics))
    if (r.contains("ttft_s") && r.contains("tpot_s")) {
      const size_t wave = size_t(index++ / std::max<int64_t>(1, batch));
      ttft.resize(std::max(ttft.size(), wave + 1));
      tpot.resize(ttft.size());
      ttft[wave].push_back(r["ttft_s"].get<double>());
      tpot[wave].push_back(r["tpot_s"].get<double>());
    }
  if (ttft.size() <= size_t(warm_up)) {
    out.error = "the run wrote " + std::to_string(index) + " request record(s) to " + metrics.string() +
                ", no batch after its " + std::to_string(warm_up) + " warm-up batch(es)";
    return out;
  }
  std::vector<double> wave_ttft, wave_tpot, latency;
  for (size_t w = size_t(warm_up); w < ttft.size(); ++w) {
    wave_ttft.push_back(median(ttft[w]));
    wave_tpot.push_back(median(tpot[w]));
    latency.push_back(wave_ttft.back() + double(output_tokens) * wave_tpot.back());
  }
  out.ttft_seconds = median(wave_ttft);
  out.tpot_seconds = median(wave_tpot);
  out.latency = spread_of(latency);
  return out;
}

}  // namespace mh
