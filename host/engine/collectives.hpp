// Collectives of one group, through the comm component's table.
#pragma once

#include <megahost/abi.h>

#include <cstdint>
#include <string>
#include <vector>
#include <utility>

#include "engine/device.hpp"

namespace mh {

// A started collective; wait() completes it and throws its error. Its
// buffers stay borrowed until then (or until it is destroyed, which waits).
class PendingCollective {
 public:
  PendingCollective() = default;  // already complete
  PendingCollective(const MH_CommApi* api, MH_Request* request, std::string what)
      : api_(api), request_(request), what_(std::move(what)) {}
  PendingCollective(PendingCollective&& other) noexcept { *this = std::move(other); }
  PendingCollective& operator=(PendingCollective&& other) noexcept;
  ~PendingCollective();
  void wait();

 private:
  const MH_CommApi* api_ = nullptr;
  MH_Request* request_ = nullptr;
  std::string what_;
};

class Collectives {
 public:
  Collectives() = default;
  Collectives(const MH_CommApi* api, MH_Group* group, std::string name, bool owned);
  // In a dry run buffers are fake addresses: data calls become no-ops while
  // groups are still built for real. Groups split from this one inherit it.
  void set_dry(bool dry) { dry_ = dry; }
  // The kernels' device: the stream a device communicator orders its work
  // after (MH_CollectiveArgs.stream; NULL on the CPU) and where the buffers
  // lie (MH_Tensor.device). Split groups inherit both.
  void set_device(void* stream, Placement where) {
    stream_ = stream;
    placement_ = where;
  }
  Collectives(Collectives&& other) noexcept;
  Collectives& operator=(Collectives&& other) noexcept;
  ~Collectives();

  int32_t rank() const { return api_->group_rank(group_); }
  int32_t size() const { return api_->group_size(group_); }
  const std::string& name() const { return name_; }

  // Buffers are on the kernels' device, in the dtype they carry (reductions
  // take f32); n counts elements.
  void all_reduce(TypedPtr data, int64_t n, MH_ReduceOp op = MH_REDUCE_SUM);
  void all_gather(TypedPtr send, TypedPtr recv, int64_t n_per_rank);
  void reduce_scatter(TypedPtr send, TypedPtr recv, int64_t n_per_rank);
  void broadcast(TypedPtr data, int64_t n, int32_t root);
  void send(TypedPtr data, int64_t n, int32_t peer);
  void recv(TypedPtr data, int64_t n, int32_t peer);
  void barrier();
  // All-to-all with per-peer counts (ABI 1.7; abi.h, MH_AllToAllArgs): the
  // counts have one entry per group rank and must match the peers'
  // pairwise. Throws naming the call for an older communicator.
  void all_to_all(TypedPtr send, const std::vector<int64_t>& send_counts, TypedPtr recv,
                  const std::vector<int64_t>& recv_counts);
  // Non-blocking all_reduce and reduce_scatter (ABI 1.1). A 1.0
  // communicator runs them at once, blocking, and returns them complete.
  PendingCollective all_reduce_start(float* data, int64_t n);
  PendingCollective reduce_scatter_start(const float* send, float* recv, int64_t n_per_rank);
  // Non-blocking all_gather (ABI 1.4); a communicator older than 1.4 runs it
  // at once, blocking, and returns it complete.
  PendingCollective all_gather_start(TypedPtr send, TypedPtr recv, int64_t n_per_rank);
  // An all-gather of host memory for the run's bookkeeping (memory peaks),
  // done even in a dry run; valid on communicators that reach host memory.
  void all_gather_host(const float* send, float* recv, int64_t n_per_rank);
  // Splits this group like MPI_Comm_split.
  Collectives split(int32_t color, int32_t key, std::string name);

 private:
  using Blocking = MH_Error* (*const MH_CommApi::*)(MH_Group*, const MH_CollectiveArgs*);
  using Start = MH_Error* (*const MH_CommApi::*)(MH_Group*, const MH_CollectiveArgs*, MH_Request**);
  MH_CollectiveArgs args(TypedPtr send, int64_t send_n, TypedPtr recv, int64_t recv_n, int32_t op,
                         int32_t peer) const;
  void call(Blocking fn, TypedPtr send, int64_t send_n, TypedPtr recv, int64_t recv_n, int32_t op, int32_t peer,
            const char* what);
  PendingCollective start(Start fn, Blocking fallback, TypedPtr send, int64_t send_n, TypedPtr recv, int64_t recv_n,
                          const char* what);
  // Whether the table has `fn` (a start call of 1.1 or 1.4).
  bool has(Start fn) const;
  std::string context(const char* what) const { return std::string(what) + " on the " + name_ + " group"; }

  const MH_CommApi* api_ = nullptr;
  MH_Group* group_ = nullptr;
  std::string name_;
  bool owned_ = false;
  bool dry_ = false;
  void* stream_ = nullptr;
  Placement placement_;
};

// Every rank's `mine` (the same length on each), rank after rank: exact
// 64-bit counts (memory peaks) through the host gather's f32 values, as
// 16-bit pieces.
std::vector<uint64_t> all_gather_counts(Collectives& group, const std::vector<uint64_t>& mine);

}  // namespace mh
