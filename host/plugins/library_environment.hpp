// The environment that libraries plugins link read once, as they load: set
// before the host loads the first plugin, since a library's own start-up
// runs before any plugin code could set it. A user's own setting is kept.
#pragma once

#include <cstdint>

namespace mh {

void prepare_library_environment();

// The pause instructions that span `microseconds` where one takes
// `pause_nanoseconds`: OpenMP's spin count (GOMP_SPINCOUNT), 100 to 100,000.
int64_t pauses_spanning(double microseconds, double pause_nanoseconds);

}  // namespace mh
