// Runs candidates with the real engine, each in its own megahost process
// (a crash, an OOM or a hang of one candidate cannot take the search
// down): a dry run for the exact memory of every rank, or a short real run
// for the step time (training) or the time to first token and per output
// token (generation).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mh {

struct ProbeSettings {
  std::filesystem::path binary;      // this megahost
  std::string plugin_path;           // forwarded --plugin_path
  std::filesystem::path work_dir;    // candidate configs, metrics and logs
};

struct DryRunMemory {
  std::string error;                 // empty when the dry run succeeded
  uint64_t peak_bytes = 0;           // the largest total peak over ranks
  int64_t peak_rank = 0;
  std::string breakdown;             // that rank's peaks by category
};

struct MeasuredRun {
  std::string error;
  // The fastest step after the first: other work on a shared machine
  // only ever slows a step down.
  double best_step_seconds = 0;
  std::vector<double> step_seconds;
};

struct MeasuredGeneration {
  std::string error;
  // The medians over the run's requests.
  double ttft_seconds = 0, tpot_seconds = 0;
};

// `config` is a candidate's TOML; `name` names its files in work_dir.
DryRunMemory dry_run_memory(const ProbeSettings& settings, const std::filesystem::path& config, const std::string& name);
MeasuredRun measure_steps(const ProbeSettings& settings, const std::filesystem::path& config, const std::string& name,
                          int32_t steps);
// Runs a generate config and reads its requests' ttft_s and tpot_s.
MeasuredGeneration measure_generation(const ProbeSettings& settings, const std::filesystem::path& config,
                                      const std::string& name);

}  // namespace mh
