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

// Batches served one after the other in one run: the first few are a
// warm-up (warm_up_batches), each of the last kMeasuredBatches one
// measurement.
inline constexpr int64_t kMeasuredBatches = 5;

// The batches of a measured generate run's warm-up: those its first
// kWarmUpSeconds serve, as the cost model predicts a batch's seconds, and
// at least one (the run's first kernels calls). A fresh process's OpenMP
// team began with its threads on one core until the scheduler moved one
// away, 10-200 ms later; a 64-token prefill took three times as long
// meanwhile, and one warm-up batch of 11 ms left it in the measurements.
inline constexpr double kWarmUpSeconds = 0.25;
inline constexpr int64_t kMostWarmUpBatches = 64;
int64_t warm_up_batches(double predicted_batch_seconds);

struct MeasuredGeneration {
  std::string error;
  // Over the batches after the warm-up, each batch's median over its
  // requests: the median time to first token and per output token, and the
  // latency (ttft + output_tokens * tpot) with its spread.
  double ttft_seconds = 0, tpot_seconds = 0;
  Spread latency;
};

// `config` is a candidate's TOML; `name` names its files in work_dir.
DryRunMemory dry_run_memory(const ProbeSettings& settings, const std::filesystem::path& config, const std::string& name);
MeasuredRun measure_steps(const ProbeSettings& settings, const std::filesystem::path& config, const std::string& name,
                          int32_t steps);
// Runs a generate config serving warm_up + kMeasuredBatches batches of
// `batch` requests of `output_tokens` tokens and reads the ttft_s and tpot_s
// of the measured ones.
MeasuredGeneration measure_generation(const ProbeSettings& settings, const std::filesystem::path& config,
                                      const std::string& name, int64_t batch, int64_t output_tokens,
                                      int64_t warm_up);

}  // namespace mh
