#include "threads_comm.hpp"

#include "timeout.hpp"

#include <megahost/error.hpp>

#include <string>

namespace mh::comm::threads {

namespace {

constexpr MH_OptionSpec kOptions[] = {
    opt_int("world_size", "1", 1, kMaxWorldSize, "ranks, each a thread of this process"),
    kTimeoutOption,
};

}  // namespace

ThreadsComm::Group* ThreadsComm::Group::split(int32_t color, int32_t key) {
  progress_.drain();
  auto [state, rank] = state_->split(rank_, SplitEntry{color, key});
  return new Group(std::move(state), rank);
}

void ThreadsComm::Group::send(const MH_CollectiveArgs& args) {
  progress_.drain();
  state_->send(rank_, with_context(state_->id(), Collective::kSend,
                                   [&] { return validate(Collective::kSend, args, rank_, size(), kHostMemory); }));
}

void ThreadsComm::Group::recv(const MH_CollectiveArgs& args) {
  progress_.drain();
  state_->recv(rank_, with_context(state_->id(), Collective::kRecv,
                                   [&] { return validate(Collective::kRecv, args, rank_, size(), kHostMemory); }));
}

void ThreadsComm::Group::barrier() {
  progress_.drain();
  Post post;
  post.call.kind = Collective::kBarrier;
  state_->collective(rank_, post);
}

void ThreadsComm::Group::blocking(Collective kind, const MH_CollectiveArgs& args) {
  progress_.drain();
  collective(kind, args);
}

std::unique_ptr<ThreadsComm::Group::Request> ThreadsComm::Group::start(Collective kind, const MH_CollectiveArgs& args) {
  return progress_.start([this, kind, args] { collective(kind, args); });
}

void ThreadsComm::Group::all_to_all(const MH_AllToAllArgs& args) {
  progress_.drain();
  rendezvous(Collective::kAllToAll, [&] { return validate(args, size(), kHostMemory); });
}

void ThreadsComm::Group::collective(Collective kind, const MH_CollectiveArgs& args) {
  rendezvous(kind, [&] { return validate(kind, args, rank_, size(), kHostMemory); });
}

template <class Validate>
void ThreadsComm::Group::rendezvous(Collective kind, Validate validated) {
  Post post;
  post.call.kind = kind;
  try {
    post.call = validated();
  } catch (const Error& e) {
    post.error = e.code();
    post.message = e.what();
  }
  state_->collective(rank_, post);
}

std::span<const MH_OptionSpec> ThreadsComm::options() { return kOptions; }

ThreadsComm::ThreadsComm(const CreateContext& ctx)
    : world_(std::make_shared<World>(to_duration(ctx.options.get_double("timeout_s")))) {
  const int64_t size = ctx.options.get_int("world_size");
  require(size >= 1 && size <= kMaxWorldSize, ctx.options.key("world_size") + " = " + std::to_string(size) +
                                                  ": must be 1.." + std::to_string(kMaxWorldSize));
  auto state = std::make_shared<GroupState>(world_, GroupId::world(static_cast<int32_t>(size)));
  world_->track(state);
  for (int32_t r = 0; r < size; ++r) world_groups_.push_back(std::make_unique<Group>(state, r));
}

void ThreadsComm::info(MH_CommInfo& out) const {
  out.world_size = static_cast<int32_t>(world_groups_.size());
  out.ranks_in_process = out.world_size;
  out.first_rank = 0;
  out.ranks_on_node = out.world_size;
}

ThreadsComm::Group* ThreadsComm::world(int32_t local) {
  require(local >= 0 && local < static_cast<int32_t>(world_groups_.size()),
          "world: local rank " + std::to_string(local) + " is outside 0.." +
              std::to_string(world_groups_.size() - 1));
  return world_groups_[local].get();
}

MH_ComponentDesc threads_component() {
  return component<ThreadsComm>("threads", "0.1.0",
                                "ranks as threads of one process; deterministic rank-order reductions",
                                ThreadsComm::options());
}

}  // namespace mh::comm::threads
