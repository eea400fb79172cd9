// The timeout every communicator honours: one option, one clock.
#pragma once

#include <megahost/options.hpp>

#include <chrono>
#include <sstream>
#include <string>

namespace mh::comm {

using Clock = std::chrono::steady_clock;

inline constexpr MH_OptionSpec kTimeoutOption =
    opt("timeout_s", MH_VALUE_DOUBLE, "60",
        "seconds a collective or recv waits for its peers before it fails with DEADLINE_EXCEEDED",
        MH_OPTION_HAS_MIN, 0.1);

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
