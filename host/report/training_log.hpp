// What a user watches during training: every log_interval steps, the line a
// Megatron-LM user reads (figures averaged over the interval), and, with
// output.tensorboard_dir, TensorBoard scalars of every step.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "report/tensorboard/event_file.hpp"

namespace mh {

// What one optimizer step did. Throughput is per device, never summed over
// ranks, as Megatron reports it.
struct StepRecord {
  int64_t step = 0, consumed_samples = 0;
  double loss = 0, lr = 0, grad_norm = 0, seconds = 0;
  double tokens_per_s = 0, tflops_per_device = 0;
  bool skipped = false, nonfinite = false;  // the update was skipped; the loss or norm was NaN or infinite
  uint64_t memory_bytes = 0;                // this rank's peak so far, every category
  std::optional<double> moe_aux_loss;       // a mixture of experts' load-balancing loss
};

class TrainingLog {
 public:
  // `events` may be null (no TensorBoard).
  TrainingLog(int64_t total_steps, int64_t log_interval, int64_t global_batch,
              std::unique_ptr<tensorboard::EventFile> events);
  // The run's resolved configuration, once, as TensorBoard text.
  void config(const std::string& toml);
  void step(const StepRecord& r);
  void validation(int64_t step, double loss);
  // The test split's loss, once, at the end of training.
  void test(int64_t step, double loss);

 private:
  void log_line(const StepRecord& last);

  int64_t total_, interval_, global_batch_;
  std::unique_ptr<tensorboard::EventFile> events_;
  // Since the last log line.
  int64_t steps_ = 0, skipped_ = 0, nonfinite_ = 0;
  double seconds_ = 0, loss_ = 0, tokens_ = 0, flops_ = 0;
};

}  // namespace mh
