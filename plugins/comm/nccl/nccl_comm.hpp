// The "nccl" communicator: one rank per CUDA device, collectives run by NCCL
// on the kernels' stream (MH_CollectiveArgs.stream; the legacy default
// stream when it is NULL). Ranks are threads of one process (world_size, one
// device each) or, under mpirun, one process each. Every communicator is
// nonblocking and every call waits for NCCL against the timeout, aborting
// the communicator when it passes. docs/gpu.md describes it.
#pragma once

#include "collective.hpp"
#include "group_id.hpp"
#include "health.hpp"
#include "mpi_bootstrap.hpp"
#include "split.hpp"
#include "timeout.hpp"

#include <megahost/plugin.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mh::comm::nccl {

class NcclComm {
 public:
  static constexpr MH_Kind kind = MH_KIND_COMM;

  // One rank's communicator. Each call returns once NCCL has finished it on
  // the device, so recv is ready and no NCCL work of ours is left pending.
  // A failure (timeout, abort, NCCL error) aborts the communicator and makes
  // the group unusable; bad arguments do not.
  class Group {
   public:
    // A started all_reduce, reduce_scatter or all_gather: its NCCL work is enqueued on
    // the stream, and wait() polls the event recorded after it against the
    // deadline its start set.
    class Request {
     public:
      Request(Group& group, Collective what, cudaEvent_t event, Clock::time_point deadline)
          : group_(group), what_(what), event_(event), deadline_(deadline) {}
      ~Request();
      Request(const Request&) = delete;
      Request& operator=(const Request&) = delete;
      void wait();

     private:
      Group& group_;
      Collective what_;
      cudaEvent_t event_;
      Clock::time_point deadline_;
      bool waited_ = false;
    };

    // Takes an initialised `comm` of CUDA device `device`.
    Group(ncclComm_t comm, GroupId id, int device, std::shared_ptr<const Health> health, Clock::duration timeout);
    ~Group();
    Group(const Group&) = delete;
    Group& operator=(const Group&) = delete;

    Group* split(int32_t color, int32_t key);
    int32_t rank() const { return rank_; }
    int32_t size() const { return id_.size(); }
    void all_reduce(const MH_CollectiveArgs& args);
    void all_gather(const MH_CollectiveArgs& args);
    void reduce_scatter(const MH_CollectiveArgs& args);
    std::unique_ptr<Request> all_reduce_start(const MH_CollectiveArgs& args);
    std::unique_ptr<Request> reduce_scatter_start(const MH_CollectiveArgs& args);
    std::unique_ptr<Request> all_gather_start(const MH_CollectiveArgs& args);
    void broadcast(const MH_CollectiveArgs& args);
    // NCCL's point-to-point is a rendezvous: a send returns once its peer
    // received it (unlike the threads and mpi communicators).
    void send(const MH_CollectiveArgs& args);
    void recv(const MH_CollectiveArgs& args);
    void barrier();
    // One NCCL group of a send and a recv per peer with a non-empty block.
    void all_to_all(const MH_AllToAllArgs& args);

    // Starts ncclCommFinalize, which completes only once every rank of the
    // group started it; the destructor waits for it.
    void start_finalize() noexcept;

   private:
    void enter(Collective what);
    Call enter(Collective what, const MH_CollectiveArgs& args);
    // The buffers of a validated call, on this group's device.
    void require_on_device(const Call& call) const;
    // Enqueues NCCL work (enqueue() returns NCCL's result) on `stream` and
    // waits until the device has done it.
    template <class Enqueue>
    void run(Collective what, cudaStream_t stream, Enqueue enqueue);
    // Enqueues like run() and records `event` after the work, without waiting.
    template <class Enqueue>
    void enqueue(Collective what, cudaStream_t stream, cudaEvent_t event, Clock::time_point deadline, Enqueue work);
    template <class Enqueue>
    std::unique_ptr<Request> start(Collective what, cudaStream_t stream, Enqueue work);
    void complete(Collective what, cudaEvent_t event, Clock::time_point deadline);
    void settle(Collective what, ncclResult_t result, Clock::time_point deadline);
    bool finished(Collective what, cudaEvent_t event);
    void check_health(Collective what);
    std::vector<SplitEntry> gather(SplitEntry mine);
    [[noreturn]] void time_out(Collective what);
    [[noreturn]] void fail(Collective what, MH_ErrorCode code, const std::string& why);

    ncclComm_t comm_;
    GroupId id_;
    int device_;
    int32_t rank_ = 0;
    std::shared_ptr<const Health> health_;
    Clock::duration timeout_;
    cudaEvent_t done_ = nullptr;  // recorded after each call's NCCL work
    void* scratch_ = nullptr;     // device memory for barrier and split: size x SplitEntry
    bool finalizing_ = false;
    MH_ErrorCode broken_code_ = MH_OK;
    std::string broken_;  // why the group is unusable: its first failure
  };

  static std::span<const MH_OptionSpec> options();

  explicit NcclComm(const CreateContext& ctx);
  ~NcclComm();

  void info(MH_CommInfo& out) const;
  Group* world(int32_t local);
  void abort(int32_t rank, const char* reason) noexcept;

 private:
  void start_local_world(int32_t size, Clock::duration timeout);
  void join_mpi_world(int devices, Clock::duration timeout);

  std::unique_ptr<MpiBootstrap> mpi_;  // under mpirun; first in, last out
  std::shared_ptr<Health> health_;
  std::vector<std::unique_ptr<Group>> world_;  // one per local rank
  int32_t world_size_ = 0, first_rank_ = 0;
};

// The "nccl" component of kind MH_KIND_COMM.
MH_ComponentDesc nccl_component();

}  // namespace mh::comm::nccl
