// The calls of MH_CommApi and the checks of their MH_CollectiveArgs, shared
// by every communicator so each one accepts and refuses exactly the same
// calls. abi.h ("Communicators") defines the buffer semantics checked here.
#pragma once

#include <megahost/abi.h>
#include <megahost/dtype.hpp>
#include <megahost/placement.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mh::comm {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSend, kRecv, kBarrier, kSplit, kAllToAll };

// Where the host communicators (threads, mpi) move memory from and to.
inline constexpr Placement kHostMemory{MH_DEVICE_CPU, 0};

// The call's name in MH_CommApi: "all_reduce", "send", ...
const char* name(Collective c);

bool reduces(Collective c);

// Reductions run on these dtypes; others give MH_UNIMPLEMENTED.
bool reducible(int32_t dtype);

// A call whose arguments passed validate(). Buffers the call does not use
// are NULL.
struct Call {
  Collective kind = Collective::kBarrier;
  const void* send = nullptr;
  void* recv = nullptr;
  // n in abi.h: all_gather sends n and receives size * n elements,
  // reduce_scatter sends size * n and receives n, the others move n.
  int64_t count = 0;
  int32_t dtype = MH_F32;
  size_t element_size = 4;
  int32_t op = MH_REDUCE_SUM;
  int32_t peer = 0;  // the root of a broadcast, the peer of send and recv
  // all_to_all: elements to and from each group rank; count is their recv sum.
  std::vector<int64_t> send_counts, recv_counts;

  size_t bytes() const { return static_cast<size_t>(count) * element_size; }
};

// Checks `args` for collective `kind` called by group rank `rank` of a group
// of `size`: contiguous buffers, element counts that fit the collective,
// equal dtypes, a reduction op and dtype the communicators implement, a
// root or peer inside the group, host memory (stream NULL), and buffers on
// `device`, the communicator's (MH_Tensor.device, device_id). Throws
// mh::Error (INVALID_ARGUMENT, or UNIMPLEMENTED for an unsupported reduction
// dtype) whose message names the buffer and the numbers, without context.
Call validate(Collective kind, const MH_CollectiveArgs& args, int32_t rank, int32_t size, Placement device);

// The checks of validate() for all_to_all: both count arrays present with
// non-negative entries, buffers that hold their sums, equal dtypes, host
// memory, buffers on `device`. That the counts match pairwise only the peers
// can tell.
Call validate(const MH_AllToAllArgs& args, int32_t size, Placement device);

// An all_to_all block's offset: the sum of counts[0, peer).
int64_t offset_of(const std::vector<int64_t>& counts, int32_t peer);

}  // namespace mh::comm
