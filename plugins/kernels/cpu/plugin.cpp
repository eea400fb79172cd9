// The kernels_cpu plugin: one component, kernels "cpu".
#include "cpu_kernels.hpp"
#include "openblas_core.hpp"

// As the host loads the plugin, before any rank exists to call BLAS or read
// the environment (openblas_core.hpp).
[[maybe_unused]] static const bool kBestOpenblasCore = (mh::kernels::cpu::use_best_openblas_core(), true);

MH_PLUGIN("kernels_cpu", "0.1.0",
          mh::component<mh::kernels::CpuKernels>("cpu", "0.1.0", mh::kernels::cpu::plugin_description(),
                                                 mh::kernels::CpuKernels::options))
