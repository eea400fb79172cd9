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

// Repeated measurements of one quantity: their median and quartiles.
struct Spread {
  double median = 0, low = 0, high = 0;  // low, high: the first and third quartiles
  int count = 0;
  // Half the interquartile range over the median: the table's "±".
  double relative() const { return median > 0 ? (high - low) / 2 / median : 0; }
};
Spread spread_of(std::vector<double> values);
// Whether two medians differ by more than their spreads: the mean of the
// two interquartile ranges. Closer, repeated measurements could order
// them either way.
bool separated(const Spread& a, const Spread& b);

struct MeasuredRun {
  std::string error;
  // The steps after the first (its plans and first touches are not a
  // step's cost): their median and spread.
  Spread step;
  std::vector<double> step_seconds;
};

// Batches served one after the other in one run: the first is a warm-up
// (the run's first kernels calls), each of the rest one measurement.
inline constexpr int64_t kMeasuredBatches = 5;

struct MeasuredGeneration {
  std::string error;
  // Over the batches after the first, each batch's median over its
  // requests: the median time to first token and per output token, and the
  // latency (ttft + output_tokens * tpot) with its spread.
  double ttft_seconds = 0, tpot_seconds = 0;
  Spread latency;
};

// `config` is a candidate's TOML; `name` names its files in work_dir.
DryRunMemory dry_run_memory(const ProbeSettings& settings, const std::filesystem::path& config, const std::string& name);
MeasuredRun measure_steps(const ProbeSettings& settings, const std::filesystem::path& config, const std::string& name,
                          int32_t steps);
// Runs a generate config serving 1 + kMeasuredBatches batches of `batch`
// requests of `output_tokens` tokens and reads their ttft_s and tpot_s.
MeasuredGeneration measure_generation(const ProbeSettings& settings, const std::filesystem::path& config,
                                      const std::string& name, int64_t batch, int64_t output_tokens);

}  // namespace mh
