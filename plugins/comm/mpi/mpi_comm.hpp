// The "mpi" communicator: one process per rank under mpirun. Every
// collective is a non-blocking MPI call completed by polling against the
// deadline, so a peer that never arrives gives DEADLINE_EXCEEDED naming the
// collective instead of a hang. abort() ends every rank through MPI_Abort.
// docs/comm.md describes timeouts and failures.
#pragma once

#include "census.hpp"
#include "collective.hpp"
#include "group_id.hpp"
#include "timeout.hpp"

#include <megahost/plugin.hpp>

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace mh::comm::mpi {

// MPI_Init_thread when nobody initialised MPI yet, and then MPI_Finalize at
// the end.
class Runtime {
 public:
  Runtime();
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

 private:
  bool owns_ = false;
};

class MpiComm {
 public:
  static constexpr MH_Kind kind = MH_KIND_COMM;

  // A communicator of its own (errors returned, not fatal). Split groups
  // must be destroyed before the instance.
  class Group {
   public:
    // A started all_reduce, reduce_scatter or all_gather; wait() completes it against
    // the deadline its start set.
    class Request {
     public:
      // `then` runs once the collective completed (may be empty).
      Request(Group& group, Collective what, MPI_Request request, Clock::time_point deadline, int64_t op,
              std::function<void()> then = {})
          : group_(group), what_(what), request_(request), deadline_(deadline), op_(op), then_(std::move(then)) {}
      ~Request();
      Request(const Request&) = delete;
      Request& operator=(const Request&) = delete;
      void wait();

     private:
      Group& group_;
      Collective what_;
      MPI_Request request_;
      Clock::time_point deadline_;
      int64_t op_;
      std::function<void()> then_;
      bool waited_ = false;
    };

    // Owns comm. `key` names the group alike on every member, for the census.
    Group(MPI_Comm comm, GroupId id, Clock::duration timeout, Census& census, uint64_t key);
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
    void all_to_all(const MH_AllToAllArgs& args);
    // Copies the message and returns at once, like the threads communicator,
    // so that two stages sending to each other cannot deadlock.
    void send(const MH_CollectiveArgs& args);
    void recv(const MH_CollectiveArgs& args);
    void barrier();

   private:
    struct PendingSend {
      int32_t peer;
      Clock::time_point posted;
      std::unique_ptr<std::byte[]> data;
      MPI_Request request = MPI_REQUEST_NULL;
    };

    void enter(Collective what);
    Call enter(Collective what, const MH_CollectiveArgs& args);
    template <class Start>
    MPI_Request post(Collective what, Start start);
    template <class Start>
    std::unique_ptr<Request> start(Collective what, Start start);
    // `op`: the collective's number on this group (arrivals_ as it entered).
    MPI_Status complete(Collective what, int32_t peer, MPI_Request& request, Clock::time_point deadline, int64_t op);
    template <class Start>
    MPI_Status run(Collective what, int32_t peer, Start start);
    bool complete_collective(MPI_Request& request, Clock::time_point deadline, int64_t op, MPI_Status& status,
                             std::string& missing);
    std::string not_arrived(const std::vector<std::optional<int64_t>>& counts, int64_t op,
                            Clock::duration window) const;
    [[noreturn]] void time_out(Collective what, MPI_Request& request, const std::string& missing);
    void reap_sends();
    void flush_sends() noexcept;

    MPI_Comm comm_;
    GroupId id_;
    int32_t rank_ = 0;
    Clock::duration timeout_;
    std::string broken_;  // why the group is unusable: the first timeout
    std::deque<PendingSend> sends_;
    Census& census_;
    uint64_t key_;
    std::atomic<int64_t> arrivals_{0};  // collectives entered (not sends or recvs); the census reads it
    int64_t splits_ = 0;
  };

  static std::span<const MH_OptionSpec> options();

  explicit MpiComm(const CreateContext& ctx);

  void info(MH_CommInfo& out) const;
  Group* world(int32_t local);
  void abort(int32_t rank, const char* reason) noexcept;

 private:
  Runtime runtime_;  // first in, last out: the world group needs MPI
  Census census_;    // before the groups, which register with it
  std::unique_ptr<Group> world_;
  int32_t ranks_on_node_;
};

// The "mpi" component of kind MH_KIND_COMM.
MH_ComponentDesc mpi_component();

}  // namespace mh::comm::mpi
