// Collectives of one group, through the comm component's table.
#pragma once

#include <megahost/abi.h>

#include <cstdint>
#include <string>

#include "engine/device.hpp"

namespace mh {

class Collectives {
 public:
  Collectives() = default;
  Collectives(const MH_CommApi* api, MH_Group* group, std::string name, bool owned);
  // In a dry run buffers are fake addresses: data calls become no-ops while
  // groups are still built for real. Groups split from this one inherit it.
  void set_dry(bool dry) { dry_ = dry; }
  // The kernels' stream, which a device communicator orders its work after
  // (MH_CollectiveArgs.stream); NULL on the CPU. Split groups inherit it.
  void set_stream(void* stream) { stream_ = stream; }
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
  // An all-gather of host memory for the run's bookkeeping (memory peaks),
  // done even in a dry run; valid on communicators that reach host memory.
  void all_gather_host(const float* send, float* recv, int64_t n_per_rank);
  // Splits this group like MPI_Comm_split.
  Collectives split(int32_t color, int32_t key, std::string name);

 private:
  void call(MH_Error* (*const MH_CommApi::*fn)(MH_Group*, const MH_CollectiveArgs*), TypedPtr send, int64_t send_n,
            TypedPtr recv, int64_t recv_n, int32_t op, int32_t peer, const char* what);

  const MH_CommApi* api_ = nullptr;
  MH_Group* group_ = nullptr;
  std::string name_;
  bool owned_ = false;
  bool dry_ = false;
  void* stream_ = nullptr;
};

}  // namespace mh
