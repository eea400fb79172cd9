#include "report/training_log.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

namespace mh {

TrainingLog::TrainingLog(int64_t total_steps, int64_t log_interval, int64_t global_batch,
                         std::unique_ptr<tensorboard::EventFile> events)
    : total_(total_steps), interval_(log_interval), global_batch_(global_batch), events_(std::move(events)) {}

void TrainingLog::config(const std::string& toml) {
  if (!events_) return;
  // Indented four spaces: Markdown shows it as code, line for line.
  std::string block = "    ";
  for (char c : toml) block += c == '\n' ? std::string("\n    ") : std::string(1, c);
  events_->text("config", 0, block);
  events_->flush();
}

void TrainingLog::step(const StepRecord& r) {
  ++steps_;
  skipped_ += r.skipped ? 1 : 0;
  nonfinite_ += r.nonfinite ? 1 : 0;
  seconds_ += r.seconds;
  if (!r.nonfinite) loss_ += r.loss;
  tokens_ += r.tokens_per_s * r.seconds;
  flops_ += r.tflops_per_device * r.seconds;
  if (events_) {
    events_->scalar("train/loss", r.step, r.loss);
    events_->scalar("train/lr", r.step, r.lr);
    events_->scalar("train/grad_norm", r.step, r.grad_norm);
    events_->scalar("throughput/tokens_per_s", r.step, r.tokens_per_s);
    events_->scalar("throughput/tflops_per_device", r.step, r.tflops_per_device);
    events_->scalar("memory/peak_mib", r.step, double(r.memory_bytes) / double(1 << 20));
    if (r.moe_aux_loss) events_->scalar("train/moe_aux_loss", r.step, *r.moe_aux_loss);
  }
  if (r.step % interval_ != 0 && r.step != total_) return;
  log_line(r);
  if (events_) events_->flush();
  steps_ = skipped_ = nonfinite_ = 0;
  seconds_ = loss_ = tokens_ = flops_ = 0;
}

void TrainingLog::validation(int64_t step, double loss) {
  LOG(INFO) << "validation loss at iteration " << step << " | lm loss: " << loss
            << " | lm loss PPL: " << std::exp(std::min(loss, 700.0));
  if (!events_) return;
  events_->scalar("validation/loss", step, loss);
  events_->flush();
}

void TrainingLog::test(int64_t step, double loss) {
  LOG(INFO) << "validation loss at iteration " << step << " on test set | lm loss: " << loss
            << " | lm loss PPL: " << std::exp(std::min(loss, 700.0));
  if (!events_) return;
  events_->scalar("test/loss", step, loss);
  events_->flush();
}

// Megatron-LM's training_log line; rates are averaged over the interval
// (total work over total time), the loss over its finite steps.
void TrainingLog::log_line(const StepRecord& last) {
  const int64_t counted = steps_ - nonfinite_;
  char line[512];
  std::snprintf(line, sizeof line,
                " iteration %8lld/%8lld | consumed samples: %12lld | elapsed time per iteration (ms): %.1f | "
                "learning rate: %.6E | global batch size: %5lld | lm loss: %.6E | grad norm: %.3f | "
                "tokens/s: %.0f | TFLOP/s per device: %.3g | skipped iterations: %lld | nan iterations: %lld | "
                "mem: %.1f MiB",
                (long long)last.step, (long long)total_, (long long)last.consumed_samples,
                steps_ > 0 ? 1e3 * seconds_ / double(steps_) : 0.0, last.lr, (long long)global_batch_,
                counted > 0 ? loss_ / double(counted) : NAN, last.grad_norm, seconds_ > 0 ? tokens_ / seconds_ : 0.0,
                seconds_ > 0 ? flops_ / seconds_ : 0.0, (long long)skipped_, (long long)nonfinite_,
                double(last.memory_bytes) / double(1 << 20));
  // The last step's, as Megatron logs its load_balancing_loss.
  if (last.moe_aux_loss)
    std::snprintf(line + std::strlen(line), sizeof line - std::strlen(line), " | moe aux loss: %.6E", *last.moe_aux_loss);
  LOG(INFO) << line;
}

}  // namespace mh
