#include "census.hpp"

#include "mpi_calls.hpp"

#include <megahost/error.hpp>

#include <thread>

namespace mh::comm::mpi {
namespace {

constexpr int kQuestion = 1, kAnswer = 2;
constexpr auto kNap = std::chrono::microseconds(50);

// The message waiting with `tag`, received; none when nothing waits. A
// matched probe, so that no other thread can take the message in between.
template <class Message>
std::optional<std::pair<Message, int>> receive(MPI_Comm comm, int tag) {
  int waiting = 0;
  MPI_Message handle = MPI_MESSAGE_NULL;
  MPI_Status status;
  check(MPI_Improbe(MPI_ANY_SOURCE, tag, comm, &waiting, &handle, &status), "MPI_Improbe");
  if (waiting == 0) return std::nullopt;
  Message m{};
  check(MPI_Mrecv(m.data(), int(m.size()), MPI_INT64_T, &handle, MPI_STATUS_IGNORE), "MPI_Mrecv");
  return std::pair{m, status.MPI_SOURCE};
}

}  // namespace

Census::Census(Clock::duration timeout) {
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &request), "MPI_Comm_idup");
  MPI_Status status;
  require(complete_by(request, Clock::now() + timeout, status),
          "mpi communicator: " + timed_out(timeout) + " waiting for every rank to create it", MH_DEADLINE_EXCEEDED);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

Census::~Census() {
  // A question to a stopped rank may never be delivered: MPI may read its
  // buffer until MPI_Finalize, so it stays until the process ends.
  static std::deque<std::unique_ptr<Message>> undelivered;
  for (auto& [message, request] : outgoing_) {
    MPI_Request_free(&request);
    undelivered.push_back(std::move(message));
  }
  MPI_Comm_free(&comm_);
}

void Census::add(uint64_t key, const std::atomic<int64_t>* arrivals) {
  std::lock_guard lock(mu_);
  groups_[key] = arrivals;
}

void Census::remove(uint64_t key) {
  std::lock_guard lock(mu_);
  groups_.erase(key);
}

void Census::send(int32_t to, int tag, const Message& m) {
  auto& [message, request] = outgoing_.emplace_back(std::make_unique<Message>(m), MPI_REQUEST_NULL);
  check(MPI_Isend(message->data(), int(message->size()), MPI_INT64_T, to, tag, comm_, &request), "MPI_Isend");
}

void Census::reap() {
  while (!outgoing_.empty()) {
    int done = 0;
    check(MPI_Test(&outgoing_.front().second, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done == 0) return;
    outgoing_.pop_front();
  }
}

void Census::answer() {
  std::lock_guard lock(mu_);
  reap();
  while (auto question = receive<Message>(comm_, kQuestion)) {
    auto [m, asker] = *question;
    const auto it = groups_.find(uint64_t(m[0]));
    m[2] = it == groups_.end() ? -1 : it->second->load();
    send(asker, kAnswer, m);
  }
}

std::optional<std::vector<std::optional<int64_t>>> Census::ask(uint64_t key, std::span<const int32_t> members,
                                                               Clock::time_point deadline,
                                                               const std::function<bool()>& completed) {
  std::unique_lock lock(mu_);
  const int64_t number = ++questions_;
  for (int32_t member : members) send(member, kQuestion, Message{int64_t(key), number, 0});
  lock.unlock();
  std::vector<std::optional<int64_t>> counts(members.size());
  while (Clock::now() < deadline) {
    if (completed()) return std::nullopt;
    answer();
    lock.lock();
    while (auto reply = receive<Message>(comm_, kAnswer)) {
      const auto& [m, from] = *reply;
      if (m[1] != number) continue;  // an earlier question's
      for (size_t i = 0; i < members.size(); ++i)
        if (members[i] == from) counts[i] = m[2];
    }
    lock.unlock();
    std::this_thread::sleep_for(kNap);
  }
  return counts;
}

}  // namespace mh::comm::mpi
