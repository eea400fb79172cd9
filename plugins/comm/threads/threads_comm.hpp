// The "threads" communicator: world_size ranks as threads of one process,
// the embedded default. Collectives read and write the peers' buffers
// directly; reductions run in rank order, so they are bit-reproducible and
// equal on every rank. docs/comm.md describes timeouts and failures.
#pragma once

#include "collective.hpp"
#include "group_state.hpp"
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

  // One rank's handle on a group; used only by that rank's thread.
  class Group {
   public:
    Group(std::shared_ptr<GroupState> state, int32_t rank) : state_(std::move(state)), rank_(rank) {}

    Group* split(int32_t color, int32_t key);
    int32_t rank() const { return rank_; }
    int32_t size() const { return state_->size(); }
    void all_reduce(const MH_CollectiveArgs& args) { collective(Collective::kAllReduce, args); }
    void all_gather(const MH_CollectiveArgs& args) { collective(Collective::kAllGather, args); }
    void reduce_scatter(const MH_CollectiveArgs& args) { collective(Collective::kReduceScatter, args); }
    void broadcast(const MH_CollectiveArgs& args) { collective(Collective::kBroadcast, args); }
    void send(const MH_CollectiveArgs& args);
    void recv(const MH_CollectiveArgs& args);
    void barrier();

   private:
    // Invalid arguments still go to the rendezvous, so that every rank fails
    // the call together and the group stays in step.
    void collective(Collective kind, const MH_CollectiveArgs& args);

    std::shared_ptr<GroupState> state_;
    int32_t rank_;
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
