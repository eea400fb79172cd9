#include "metrics.hpp"

#include <megahost/error.hpp>

#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mh {

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  if (path.empty()) return;
  out_.open(path, std::ios::out | std::ios::trunc);
  require(out_.good(), "cannot open metrics file '" + path + "': " + std::strerror(errno) +
                           "; check --metrics_out / output.metrics");
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (path_.empty()) return;
  out_ << record.dump() << '\n';
  out_.flush();
  require(out_.good(), "writing metrics to '" + path_ + "' failed: " + std::strerror(errno) +
                           " (disk full?); records up to the previous step are intact", MH_RESOURCE_EXHAUSTED);
}

Progress::Progress(int64_t total_steps)
    : total_(total_steps), tty_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}

void Progress::update(int64_t step, double loss, double tokens_per_s, bool log_line) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double eta = step > 0 ? elapsed / double(step) * double(total_ - step) : 0;
  char line[256];
  if (tty_) {
    const int width = 24;
    int filled = total_ > 0 ? int(width * step / total_) : width;
    std::string bar = std::string(size_t(filled), '#') + std::string(size_t(width - filled), '.');
    std::snprintf(line, sizeof line, "\rstep %lld/%lld [%s] loss %.4f | %.0f tok/s | ETA %dm%02ds ",
                  (long long)step, (long long)total_, bar.c_str(), loss, tokens_per_s, int(eta) / 60, int(eta) % 60);
    std::fputs(line, stderr);
    std::fflush(stderr);
  } else if (log_line) {
    std::snprintf(line, sizeof line, "step %lld/%lld loss %.4f | %.0f tok/s | ETA %dm%02ds", (long long)step,
                  (long long)total_, loss, tokens_per_s, int(eta) / 60, int(eta) % 60);
    LOG(INFO) << line;
  }
}

void Progress::finish() {
  if (tty_) std::fputs("\n", stderr);
}

}  // namespace mh
