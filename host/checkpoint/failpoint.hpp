// Named points where a test kills the process (SIGKILL, as kill -9 would)
// to prove a save interrupted there loses nothing: MEGAHOST_FAILPOINT names
// the point. Unset, a failpoint is one getenv.
#pragma once

#include <csignal>
#include <cstdlib>
#include <cstring>

namespace mh::ckpt {

inline void failpoint(const char* name) {
  const char* chosen = std::getenv("MEGAHOST_FAILPOINT");
  if (chosen != nullptr && std::strcmp(chosen, name) == 0) std::raise(SIGKILL);
}

}  // namespace mh::ckpt
