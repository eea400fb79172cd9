#include "serve/server_metrics.hpp"

#include <algorithm>
#include <sstream>

namespace mh::serve {

void Histogram::observe(double v) {
  ++counts_[size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin())];
  sum_ += v;
}

std::string Histogram::text(const std::string& name) const {
  std::ostringstream out;
  out << "# TYPE " << name << " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out << name << "_bucket{le=\"" << bounds_[i] << "\"} " << cumulative << "\n";
  }
  cumulative += counts_.back();
  out << name << "_bucket{le=\"+Inf\"} " << cumulative << "\n"
      << name << "_sum " << sum_ << "\n"
      << name << "_count " << cumulative << "\n";
  return out.str();
}

void ServerMetrics::request(int status) {
  std::lock_guard lock(mu_);
  ++requests_[status];
}

void ServerMetrics::cancelled() {
  std::lock_guard lock(mu_);
  ++cancelled_;
}

void ServerMetrics::tokens(int64_t prompt, int64_t generated) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += uint64_t(prompt);
  generated_tokens_ += uint64_t(generated);
}

void ServerMetrics::first_token(double seconds) {
  std::lock_guard lock(mu_);
  ttft_.observe(seconds);
}

void ServerMetrics::per_output_token(double seconds) {
  std::lock_guard lock(mu_);
  tpot_.observe(seconds);
}

void ServerMetrics::queue(int64_t depth, int64_t running) {
  std::lock_guard lock(mu_);
  queue_ = depth;
  running_ = running;
}

std::string ServerMetrics::text() const {
  std::lock_guard lock(mu_);
  std::ostringstream out;
  out << "# TYPE megahost_requests_total counter\n";
  for (const auto& [status, n] : requests_) out << "megahost_requests_total{code=\"" << status << "\"} " << n << "\n";
  out << "# TYPE megahost_requests_cancelled_total counter\nmegahost_requests_cancelled_total " << cancelled_ << "\n";
  out << "# TYPE megahost_prompt_tokens_total counter\nmegahost_prompt_tokens_total " << prompt_tokens_ << "\n"
      << "# TYPE megahost_generation_tokens_total counter\nmegahost_generation_tokens_total " << generated_tokens_
      << "\n"
      << "# TYPE megahost_queue_depth gauge\nmegahost_queue_depth " << queue_ << "\n"
      << "# TYPE megahost_running_sequences gauge\nmegahost_running_sequences " << running_ << "\n"
      << ttft_.text("megahost_time_to_first_token_seconds") << tpot_.text("megahost_time_per_output_token_seconds");
  return out.str();
}

}  // namespace mh::serve
