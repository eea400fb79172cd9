// Prints what the cuda kernels report about the device as one JSON line, the
// GEMM peak measured in the given dtype (bench/gpu_check.sh reads it):
//   gpu_device_info [bf16|fp32]
#include "gpu_harness.hpp"

#include <cstdio>

int main(int argc, char** argv) {
  const std::string dtype = argc > 1 ? argv[1] : "bf16";
  try {
    mh::gpu_test::CudaOrReason cuda = mh::gpu_test::open_cuda({{"dtype", "\"" + dtype + "\""}});
    if (!cuda.kernels) {
      std::fprintf(stderr, "%s\n", cuda.reason.c_str());
      return 1;
    }
    const MH_DeviceInfo info = cuda.kernels->device_info();
    std::printf("{\"name\": \"%s\", \"dtype\": \"%s\", \"peak_flops\": %.6e, \"memory_bytes\": %llu}\n", info.name,
                dtype.c_str(), info.peak_flops, static_cast<unsigned long long>(info.memory_bytes));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
