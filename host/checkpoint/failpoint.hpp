// Named points where a test kills the process (SIGKILL, as kill -9 would)
// to prove a save interrupted there loses nothing. MEGAHOST_FAILPOINT is
// "name" (the first time the point is reached) or "name:N" (the N-th).
// Unset, a failpoint is one getenv.
#pragma once

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <string>

namespace mh::ckpt {

inline void failpoint(const char* name) {
  const char* chosen = std::getenv("MEGAHOST_FAILPOINT");
  if (chosen == nullptr) return;
  const std::string spec(chosen), point = spec.substr(0, spec.find(':'));
  if (point != name) return;
  static std::atomic<int> hits{0};
  const int nth = spec.find(':') == std::string::npos ? 1 : std::atoi(spec.c_str() + spec.find(':') + 1);
  if (++hits == nth) std::raise(SIGKILL);
}

}  // namespace mh::ckpt
