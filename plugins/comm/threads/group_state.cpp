#include "group_state.hpp"

#include "data_movement.hpp"

#include <megahost/error.hpp>

namespace mh::comm::threads {

namespace {

bool moves_data(Collective c) { return c != Collective::kBarrier && c != Collective::kSplit; }

}  // namespace

GroupState::GroupState(std::shared_ptr<World> world, GroupId id)
    : world_(std::move(world)),
      id_(std::move(id)),
      posts_(size()),
      arrived_in_(size(), 0),
      split_results_(size()),
      mailboxes_(size()) {}

void GroupState::collective(int32_t rank, const Post& post) {
  const Clock::time_point until = deadline();
  Lock lock(mu_);
  arrive(lock, rank, post, until);
  if (!moves_data(post.call.kind)) return;
  lock.unlock();
  move_data(posts_, rank);
  lock.lock();
  depart(lock);
}

std::pair<std::shared_ptr<GroupState>, int32_t> GroupState::split(int32_t rank, SplitEntry entry) {
  const Clock::time_point until = deadline();
  Post post;
  post.call.kind = Collective::kSplit;
  post.split = entry;
  Lock lock(mu_);
  arrive(lock, rank, post, until);
  SplitResult result = std::move(split_results_[rank]);
  return {std::move(result.group), result.rank};
}

void GroupState::wake() {
  { std::lock_guard<std::mutex> lock(mu_); }  // a waiter between its check and its sleep hears this
  cv_.notify_all();
}

void GroupState::throw_if_unusable(Collective what) const {
  if (const std::string* failure = world_->failure()) throw Error(MH_ABORTED, id_.context(what) + ": " + *failure);
  if (!broken_.empty())
    throw Error(MH_DEADLINE_EXCEEDED, id_.context(what) + ": the group is unusable after a timeout (" + broken_ + ")");
}

void GroupState::wait(Lock& lock, Clock::time_point deadline, Collective what,
                      const std::function<bool()>& done, const std::function<std::string()>& missing) {
  while (!done()) {
    throw_if_unusable(what);
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !done()) {
      broken_ = id_.context(what) + ": " + timed_out(world_->timeout()) + "; " + missing();
      cv_.notify_all();
      throw Error(MH_DEADLINE_EXCEEDED, broken_);
    }
  }
}

// After it returns every rank has posted and outcome_ holds the verdict.
void GroupState::arrive(Lock& lock, int32_t rank, const Post& post, Clock::time_point deadline) {
  const Collective what = post.call.kind;
  throw_if_unusable(what);
  posts_[rank] = post;
  const uint64_t generation = generation_;
  arrived_in_[rank] = generation + 1;
  if (++arrived_ == size()) {
    arrived_ = 0;
    settle();
    ++generation_;
    cv_.notify_all();
  } else {
    wait(lock, deadline, what, [&] { return generation_ != generation; },
         [&] { return not_arrived(generation); });
  }
  if (outcome_) throw Error(outcome_->code(), id_.context(what) + ": " + outcome_->what());
}

// Run by the last rank to arrive, under the lock, before it releases the others.
void GroupState::settle() {
  outcome_.reset();
  try {
    agree(posts_, id_);
    if (posts_[0].call.kind == Collective::kSplit) make_children();
  } catch (const Error& e) {
    outcome_ = e;
  } catch (const std::exception& e) {
    outcome_ = Error(MH_INTERNAL, e.what());
  }
}

void GroupState::make_children() {
  std::vector<SplitEntry> entries;
  for (const Post& p : posts_) entries.push_back(p.split);
  split_results_.assign(size(), {});
  for (int32_t r = 0; r < size(); ++r) {
    if (split_results_[r].group) continue;  // placed with an earlier rank of its color
    const std::vector<int32_t> members = split_members(entries, entries[r].color);
    auto child = std::make_shared<GroupState>(world_, id_.child(entries[r].color, members));
    world_->track(child);
    for (size_t i = 0; i < members.size(); ++i) split_results_[members[i]] = {child, static_cast<int32_t>(i)};
  }
}

std::string GroupState::not_arrived(uint64_t generation) const {
  std::vector<int32_t> missing;
  for (int32_t r = 0; r < size(); ++r)
    if (arrived_in_[r] != generation + 1) missing.push_back(r);
  return id_.globals(missing) + " had not arrived";
}

// Deliberately deaf to timeouts and failures: peers that arrived are reading
// this rank's send buffer and writing its recv buffer, and returning before
// they finish would hand both back to the caller while still in use. Moving
// data never blocks, so this wait is short.
void GroupState::depart(Lock& lock) {
  const uint64_t departures = departures_;
  if (++departed_ == size()) {
    departed_ = 0;
    ++departures_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return departures_ != departures; });
}

}  // namespace mh::comm::threads
