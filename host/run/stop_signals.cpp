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

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1};

}  // namespace

StopSignals::StopSignals() {
  g_received.store(0);
  for (int s : kStopSignals) std::signal(s, on_stop_signal);
}

StopSignals::~StopSignals() {
  for (int s : kStopSignals) std::signal(s, SIG_DFL);
}

int stop_signal() { return g_received.load(); }

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "a stop signal";
  }
}

Interrupted::Interrupted(int signal, const std::string& what)
    : Error(MH_ABORTED, what), signal_(signal) {}

void stop_if_signalled(const std::string& doing) {
  if (const int signal = stop_signal(); signal != 0)
    throw Interrupted(signal, std::string("received ") + stop_signal_name(signal) + " while " + doing);
}

}  // namespace mh
