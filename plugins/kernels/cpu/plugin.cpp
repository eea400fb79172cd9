// The kernels_cpu plugin: one component, kernels "cpu".
#include "cpu_kernels.hpp"

MH_PLUGIN("kernels_cpu", "0.1.0",
          mh::component<mh::kernels::CpuKernels>("cpu", "0.1.0", mh::kernels::cpu::plugin_description(),
                                                 mh::kernels::CpuKernels::options))
