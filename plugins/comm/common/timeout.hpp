// The timeout every communicator honours: one option, one clock.
#pragma once

#include <megahost/options.hpp>

#include <chrono>
#include <sstream>
#include <string>

namespace mh::comm {

using Clock = std::chrono::steady_clock;

// A week bounds the wait: a deadline must fit the clock's 64-bit nanoseconds
// (1e10 s does not, and wrapped to a timeout already passed).
inline constexpr double kMaxTimeoutS = 7 * 24 * 3600;

inline constexpr MH_OptionSpec kTimeoutOption =
    opt("timeout_s", MH_VALUE_DOUBLE, "30",
        "seconds a collective or recv waits for its peers before it fails with DEADLINE_EXCEEDED",
        MH_OPTION_HAS_MIN | MH_OPTION_HAS_MAX, 0.1, kMaxTimeoutS);

inline Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// "timed out after 0.5 s", the start of every timeout message.
inline std::string timed_out(Clock::duration timeout) {
  std::ostringstream out;
  out << "timed out after " << std::chrono::duration<double>(timeout).count() << " s";
  return out.str();
}

}  // namespace mh::comm
