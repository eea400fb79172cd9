// The server's counters for GET /metrics, in Prometheus' text format:
// requests by status code, requests cancelled by their client, prompt and generated tokens, queue depth,
// sequences running, and histograms of the time to first token and the
// time per output token. Every thread may record; one lock guards all.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace mh::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double v);
  // The metric's lines: cumulative buckets, +Inf, sum and count.
  std::string text(const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
};

class ServerMetrics {
 public:
  void request(int status);
  void cancelled();  // a client left before its answer was whole
  void tokens(int64_t prompt, int64_t generated);
  void first_token(double seconds);
  void per_output_token(double seconds);
  void queue(int64_t depth, int64_t running);
  std::string text() const;

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0, cancelled_ = 0;
  int64_t queue_ = 0, running_ = 0;
  Histogram ttft_{{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
  Histogram tpot_{{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};
};

}  // namespace mh::serve
