// Point-to-point messages of GroupState. Sends never wait, so the pattern of
// a 1F1B pipeline, where stage i sends to i + 1 while i + 1 sends back to i,
// cannot deadlock; messages between a pair arrive in the order sent.
#include "group_state.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <cstring>

namespace mh::comm::threads {

namespace {

template <class Queue>
auto first_from(Queue& queued, int32_t src) {
  return std::find_if(queued.begin(), queued.end(), [&](const auto& m) { return m.src == src; });
}

}  // namespace

void GroupState::send(int32_t rank, const Call& call) {
  Lock lock(mu_);
  throw_if_unusable(Collective::kSend);
  Mailbox& box = mailboxes_[call.peer];
  // Straight into the buffer only when no earlier message from this rank is
  // queued ahead of it.
  if (box.waiting != nullptr && box.waiting->src == rank && first_from(box.queued, rank) == box.queued.end())
    return deliver(lock, *box.waiting, rank, call);
  lock.unlock();
  Message message{rank, call, std::make_unique_for_overwrite<std::byte[]>(call.bytes())};
  if (call.bytes() != 0) std::memcpy(message.data.get(), call.send, call.bytes());
  lock.lock();
  box.queued.push_back(std::move(message));
  cv_.notify_all();
}

void GroupState::deliver(Lock& lock, WaitingRecv& to, int32_t rank, const Call& call) {
  to.claimed = true;
  mailboxes_[call.peer].waiting = nullptr;  // this rank's next message queues behind this one
  to.error = mismatch(rank, call, call.peer, to.call);
  if (to.error.empty() && call.bytes() != 0) {
    lock.unlock();
    std::memcpy(to.call.recv, call.send, call.bytes());
    lock.lock();
  }
  to.filled = true;
  cv_.notify_all();
  require(to.error.empty(), id_.context(Collective::kSend) + ": " + to.error);
}

void GroupState::recv(int32_t rank, const Call& call) {
  const Clock::time_point until = deadline();
  Lock lock(mu_);
  throw_if_unusable(Collective::kRecv);
  Mailbox& box = mailboxes_[rank];
  if (first_from(box.queued, call.peer) == box.queued.end()) {
    WaitingRecv waiting{call.peer, call};
    box.waiting = &waiting;
    await_message(lock, box, waiting, until);
    if (waiting.filled) {
      require(waiting.error.empty(), id_.context(Collective::kRecv) + ": " + waiting.error);
      return;
    }
  }
  auto it = first_from(box.queued, call.peer);
  Message message = std::move(*it);
  box.queued.erase(it);
  lock.unlock();
  unpack(message, rank, call);
}

// Returns once `waiting` is filled or a message from its source is queued.
void GroupState::await_message(Lock& lock, Mailbox& box, WaitingRecv& waiting, Clock::time_point deadline) {
  const int32_t src = waiting.src;
  try {
    wait(lock, deadline, Collective::kRecv,
         [&] { return waiting.filled || first_from(box.queued, src) != box.queued.end(); },
         [&] { return id_.globals({&src, 1}) + " had not sent"; });
  } catch (const Error&) {
    // A sender that claimed the buffer is copying into it right now.
    cv_.wait(lock, [&] { return !waiting.claimed || waiting.filled; });
    box.waiting = nullptr;
    throw;
  }
  box.waiting = nullptr;
}

void GroupState::unpack(const Message& message, int32_t rank, const Call& call) const {
  const std::string error = mismatch(message.src, message.call, rank, call);
  require(error.empty(), id_.context(Collective::kRecv) + ": " + error);
  if (call.bytes() != 0) std::memcpy(call.recv, message.data.get(), call.bytes());
}

std::string GroupState::mismatch(int32_t src, const Call& sent, int32_t dst, const Call& posted) const {
  if (sent.dtype == posted.dtype && sent.count == posted.count) return {};
  return id_.globals({&src, 1}) + " sent " + std::to_string(sent.count) + " " + dtype_name(sent.dtype) +
         " elements but " + id_.globals({&dst, 1}) + " posted a recv of " + std::to_string(posted.count) + " " +
         dtype_name(posted.dtype) + " elements";
}

}  // namespace mh::comm::threads
