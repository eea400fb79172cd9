// The "threads" communicator: world_size ranks as threads of one process,
// the embedded default. Collectives read and write the peers' buffers
// directly; reductions run in rank order, so they are bit-reproducible and
// equal on every rank. docs/comm.md describes timeouts and failures.
#pragma once

#include "collective.hpp"
#include "group_state.hpp"
#include "progress.hpp"
#include "world.hpp"

#include <megahost/plugin.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace mh::comm::threads {

inline constexpr int64_t kMaxWorldSize = 1024;

class ThreadsComm {
 public:
  static constexpr MH_Kind kind = MH_KIND_COMM;

  // One rank's handle on a group; called only by that rank's thread. The
  // collectives it starts run on its progress thread; every blocking call
  // first waits for them, so the group sees this rank's calls in order.
  class Group {
   public:
    using Request = Progress::Request;

    Group(std::shared_ptr<GroupState> state, int32_t rank) : state_(std::move(state)), rank_(rank) {}

    Group* split(int32_t color, int32_t key);
    int32_t rank() const { return rank_; }
    int32_t size() const { return state_->size(); }
    void all_reduce(const MH_CollectiveArgs& args) { blocking(Collective::kAllReduce, args); }
    void all_gather(const MH_CollectiveArgs& args) { blocking(Collective::kAllGather, args); }
    void reduce_scatter(const MH_CollectiveArgs& args) { blocking(Collective::kReduceScatter, args); }
    void broadcast(const MH_CollectiveArgs& args) { blocking(Collective::kBroadcast, args); }
    std::unique_ptr<Request> all_reduce_start(const MH_CollectiveArgs& args) {
      return start(Collective::kAllReduce, args);
    }
    std::unique_ptr<Request> reduce_scatter_start(const MH_CollectiveArgs& args) {
      return start(Collective::kReduceScatter, args);
    }
    std::unique_ptr<Request> all_gather_start(const MH_CollectiveArgs& args) {
      return start(Collective::kAllGather, args);
    }
    void all_to_all(const MH_AllToAllArgs& args);
    void send(const MH_CollectiveArgs& args);
    void recv(const MH_CollectiveArgs& args);
    void barrier();

   private:
    void blocking(Collective kind, const MH_CollectiveArgs& args);
    std::unique_ptr<Request> start(Collective kind, const MH_CollectiveArgs& args);
    // Invalid arguments still go to the rendezvous, so that every rank fails
    // the call together and the group stays in step.
    void collective(Collective kind, const MH_CollectiveArgs& args);
    template <class Validate>
    void rendezvous(Collective kind, Validate validated);

    std::shared_ptr<GroupState> state_;
    int32_t rank_;
    Progress progress_;  // last: stops before the state it uses goes
  };

  static std::span<const MH_OptionSpec> options();

  explicit ThreadsComm(const CreateContext& ctx);

  void info(MH_CommInfo& out) const;
  Group* world(int32_t local);
  void abort(int32_t rank, const char* reason) noexcept { world_->fail(rank, reason); }

 private:
  std::shared_ptr<World> world_;
  std::vector<std::unique_ptr<Group>> world_groups_;
};

// The "threads" component of kind MH_KIND_COMM.
MH_ComponentDesc threads_component();

}  // namespace mh::comm::threads
