// The kernels_dry plugin: one component, kernels "dry".
#include "dry_kernels.hpp"

MH_PLUGIN("kernels_dry", "0.1.0",
          mh::component<mh::kernels::DryKernels>("dry", "0.1.0",
                                                 "allocates and computes nothing: exact memory of a run, no run",
                                                 mh::kernels::DryKernels::options))
