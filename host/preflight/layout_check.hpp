// The parallel layout checked as part of validation: heads that hidden does
// not divide, a tensor size that does not divide the heads, a world that is
// not t * p * d, a micro-batch that does not divide the batch, data-parallel
// options that do not go together -- every such
// problem in the one report, located, with exit status 2, as for any other
// bad input. The run plans the same layout again to execute it.
#pragma once

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "config/diagnostics.hpp"

namespace mh {

// Plans the layout with the config's tensor and pipeline components, as the
// run will, and reports each problem at its section. The world size is the
// comm's world_size option, or the MPI launcher's; when neither is known
// (one process, a multi-process comm) only what does not need it is checked.
void check_layout(const Config& config, const Assembly& assembly, Diagnostics& diag);

}  // namespace mh
