// The hardware profile as the cost model reads it: how long one GEMM, one
// memory-bound op and one collective take on the target, seen by one rank
// while `ranks` ranks share its device (1 on a GPU; every rank of the node
// on a CPU), `busy` of them computing. The profile's rates are measured
// (megahost --calibrate) or taken from published measurements
// (configs/hardware/*.toml).
#pragma once

#include <megahost/abi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mh::tuner {

struct Sharing {
  int32_t ranks = 1, busy = 1;
};

enum class Coll { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv };

// The ring factor of nccl-tests' busbw convention: the bytes each rank moves
// per byte of the collective's (gathered or reduced) size.
double ring_factor(Coll op, int ranks);

class Machine {
 public:
  explicit Machine(const MH_Hardware& hw);

  // batch products of (m x k) @ (k x n): the slower of the calibrated GEMM
  // rate for the nearest measured shapes and streaming the operands
  // (bandwidth_seconds).
  double gemm_seconds(int64_t batch, int64_t m, int64_t n, int64_t k, Sharing sharing) const;
  // A memory-bound kernels op over `elements` elements.
  double vector_seconds(std::string_view op, double elements, Sharing sharing) const;
  // Moving `bytes` through memory at the rate of the plain "elementwise" op:
  // the price of ops a profile has no rate of their own for.
  double stream_seconds(double bytes, Sharing sharing) const;
  // Moving `bytes` at memory's rate: the fastest streaming op (sum_squares
  // reads, elementwise writes, bias_add does both) measured on calls at
  // least that large, else the largest measured -- in a smaller call more
  // of the time is the call's own (a team started and joined), which a
  // product's own rate already holds.
  double bandwidth_seconds(double bytes, Sharing sharing) const;
  // Reading `bytes` of a working set of `working_set` bytes that a rank
  // reads anew each step (a decode step's weights and KV cache): 0 while
  // the set is no larger than the largest read ("sum_squares") call
  // measured below the largest one -- --calibrate measures that largest
  // beyond the last-level cache, the rest in it, where a product's own
  // rate holds its reads; beyond, at the read rates interpolated in log
  // size up to DRAM's.
  double working_set_seconds(double bytes, double working_set, Sharing sharing) const;
  // The fixed cost of one kernels call as the engine makes them (the
  // pseudo-op "call" that --calibrate measures); 0 on a profile without it,
  // as the published GPU profiles are.
  double call_seconds(Sharing sharing) const;
  // A collective of `bytes` (the full gathered or reduced size; a rank's
  // whole send buffer for an all-to-all) over `ranks`.
  double collective_seconds(Coll op, double bytes, int ranks, int level) const;

  const std::string& name() const { return name_; }
  double peak_flops() const { return peak_flops_; }
  uint64_t memory_bytes() const { return memory_bytes_; }
  double element_bytes() const { return element_bytes_; }
  bool shared_device() const { return shared_; }

 private:
  // A sharing the profile has rates for.
  struct Level {
    int32_t ranks, busy;
    auto operator<=>(const Level&) const = default;
  };
  struct Gemm {
    Level level;
    double coords[4];  // log2 of batch, m, n, k
    double log_rate;
  };
  struct Vector {
    std::string op;
    Level level;
    double log_elements;  // of the measured call; < 0: any size
    double bytes_per_element, seconds_per_element;
  };
  struct Collective {
    int32_t level, ranks;
    std::string op;
    double latency, bus_bandwidth;
  };

  // Seconds of a call under `sharing`, from its seconds at the measured
  // levels: the most ranks measured up to sharing.ranks; there, the busy
  // counts measured either side interpolated linearly; past the most busy
  // ranks measured, time slicing on a shared device.
  double at_sharing(const std::vector<Level>& measured, Sharing sharing,
                    const std::function<double(Level)>& seconds) const;
  // Seconds per element of `op` on calls of `elements` elements: the rates
  // of the measured sizes either side interpolated in log scale, the
  // nearest one outside them.
  double seconds_per_element(std::string_view op, Level level, double elements) const;
  double gemm_rate(const double coords[4], Level level) const;
  // The row for `op` (or "any") at `level`, the group size nearest `ranks`;
  // nullptr when the profile has none.
  const Collective* collective_rate(Coll op, int ranks, int level) const;

  std::string name_;
  double peak_flops_;
  uint64_t memory_bytes_;
  double element_bytes_;
  bool shared_;
  std::vector<Gemm> gemm_;
  std::vector<Level> gemm_levels_, vector_levels_;
  std::vector<Vector> vector_;
  std::vector<Collective> collectives_;
  bool has_call_ = false;
};

}  // namespace mh::tuner
