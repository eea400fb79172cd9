#include "run/stop_signals.hpp"

#include <atomic>
#include <csignal>

namespace mh {
namespace {

std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler must only touch lock-free state");

extern "C" void on_stop_signal(int signal) {
  g_received.store(signal);
  std::signal(signal, SIG_DFL);  // the next one stops the process
}

}  // namespace

StopSignals::StopSignals() {
  g_received.store(0);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

StopSignals::~StopSignals() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

int stop_signal() { return g_received.load(); }

}  // namespace mh
