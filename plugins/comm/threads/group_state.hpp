// The state the ranks (threads) of one group share.
//
// Collectives meet at a rendezvous: each rank posts its call, the last to
// arrive checks that the calls agree (and, for split, builds the new
// groups), then every rank moves its share of the data directly between the
// posted buffers and waits at departure until all are done with them.
// Point-to-point messages go through one mailbox per receiving rank.
//
// Every wait honours the world's timeout and failure. A timeout breaks the
// group: its state no longer matches between ranks, so every later call on
// it fails with DEADLINE_EXCEEDED too.
#pragma once

#include "agreement.hpp"
#include "group_id.hpp"
#include "world.hpp"

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mh::comm::threads {

class GroupState {
 public:
  GroupState(std::shared_ptr<World> world, GroupId id);

  const GroupId& id() const { return id_; }
  int32_t size() const { return id_.size(); }

  // Runs the collective `post` describes as group rank `rank`; returns when
  // no peer touches this rank's buffers any more.
  void collective(int32_t rank, const Post& post);

  // The group `rank` lands in and its rank there.
  std::pair<std::shared_ptr<GroupState>, int32_t> split(int32_t rank, SplitEntry entry);

  // Never waits: copies straight into the receiver's buffer when it is
  // already waiting for this message, otherwise leaves a copy in its mailbox.
  void send(int32_t rank, const Call& call);
  void recv(int32_t rank, const Call& call);

  // Wakes every waiter so that it sees the world's failure.
  void wake();

 private:
  using Lock = std::unique_lock<std::mutex>;

  struct Message {
    int32_t src;
    Call call;
    std::unique_ptr<std::byte[]> data;
  };

  // A recv waiting in its mailbox. A sender claims it before copying into
  // its buffer outside the lock; the receiver does not leave before filled.
  struct WaitingRecv {
    WaitingRecv(int32_t from, const Call& posted) : src(from), call(posted) {}
    int32_t src;
    const Call& call;
    bool claimed = false;
    bool filled = false;
    std::string error;
  };

  struct Mailbox {
    std::deque<Message> queued;
    WaitingRecv* waiting = nullptr;
  };

  struct SplitResult {
    std::shared_ptr<GroupState> group;
    int32_t rank = 0;
  };

  Clock::time_point deadline() const { return Clock::now() + world_->timeout(); }
  void throw_if_unusable(Collective what) const;
  void wait(Lock& lock, Clock::time_point deadline, Collective what, const std::function<bool()>& done,
            const std::function<std::string()>& missing);

  void arrive(Lock& lock, int32_t rank, const Post& post, Clock::time_point deadline);
  void settle();
  void make_children();
  std::string not_arrived(uint64_t generation) const;
  void depart(Lock& lock);

  void deliver(Lock& lock, WaitingRecv& to, int32_t rank, const Call& call);
  void await_message(Lock& lock, Mailbox& box, WaitingRecv& waiting, Clock::time_point deadline);
  void unpack(const Message& message, int32_t rank, const Call& call) const;
  std::string mismatch(int32_t src, const Call& sent, int32_t dst, const Call& posted) const;

  const std::shared_ptr<World> world_;
  const GroupId id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string broken_;  // why the group is unusable: the first timeout

  // Rendezvous. arrived_in_[r] is 1 + the generation rank r last arrived in.
  std::vector<Post> posts_;
  std::vector<uint64_t> arrived_in_;
  int32_t arrived_ = 0;
  uint64_t generation_ = 0;
  int32_t departed_ = 0;
  uint64_t departures_ = 0;
  // The verdict of the last settled rendezvous, and for split each rank's
  // new group. They stay valid until every rank arrives again.
  std::optional<Error> outcome_;
  std::vector<SplitResult> split_results_;

  std::vector<Mailbox> mailboxes_;  // by receiving group rank
};

}  // namespace mh::comm::threads
