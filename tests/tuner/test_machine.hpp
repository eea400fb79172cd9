// A synthetic hardware profile with round numbers, so a test can state a
// cost by hand: every GEMM at 1e12 FLOP/s unless a test lists its own rates, every memory-bound op at one
// bandwidth with one byte per element, every collective at one latency and
// bus bandwidth inside a node and another between nodes.
#pragma once

#include <megahost/abi.h>

#include <algorithm>
#include <string>
#include <vector>

namespace mh::tuner::testing {

struct TestMachine {
  double bytes_per_s = 1e11, latency = 1e-5, bus = 1e10, inter_bus = 1e9;
  int32_t devices_per_node = 8;
  int32_t vector_ranks = 1;  // ranks sharing the device when the op rates were measured
  bool shared = false;
  uint64_t memory = uint64_t(16) << 30;
  std::vector<MH_GemmRate> gemm{{1, 0, 1, 1024, 1024, 1024, 1e12}};
  std::vector<MH_VectorRate> vector;
  std::vector<MH_VectorRate> measured;  // rows a test adds (calibrated sizes, "call")
  std::vector<std::string> without;     // ops whose any-size row a test leaves out
  std::vector<MH_CollectiveRate> collectives;
  MH_Hardware hw{};

  const MH_Hardware& view() {
    vector.clear();
    for (const char* op : {"layernorm", "layernorm_bwd", "bias_add", "bias_bwd", "gelu", "gelu_bwd", "softmax",
                           "softmax_bwd", "dropout", "dropout_bwd", "embedding", "embedding_bwd", "xent", "adamw",
                           "sum_squares", "elementwise"})
      if (std::find(without.begin(), without.end(), op) == without.end())
        vector.push_back(MH_VectorRate{op, vector_ranks, 0, 0, 1.0, bytes_per_s});
    vector.insert(vector.end(), measured.begin(), measured.end());
    collectives = {{MH_LINK_INTRA_NODE, 0, "any", latency, bus}, {MH_LINK_INTER_NODE, 0, "any", latency, inter_bus}};
    hw = MH_Hardware{sizeof(MH_Hardware), "test",           "test device",        MH_BF16,      devices_per_node,
                     shared ? 1 : 0,      0,                1e12,                 memory,       gemm.data(),
                     gemm.size(),         vector.data(),    vector.size(),        collectives.data(),
                     collectives.size()};
    return hw;
  }
};

}  // namespace mh::tuner::testing
