// Where the other ranks are, asked when a collective is about to time out.
// MPI says only that a collective did not complete, not which ranks never
// called it, and a stopped process (SIGSTOP, a debugger) cannot say anything
// itself. So every rank that waits answers questions on a communicator of
// its own: "how many collectives of group K have you entered?". A rank that
// answers with fewer than the asker, or not at all, had not arrived.
#pragma once

#include "timeout.hpp"

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

namespace mh::comm::mpi {

class Census {
 public:
  // Duplicates MPI_COMM_WORLD; every rank must create one, within `timeout`.
  explicit Census(Clock::duration timeout);
  ~Census();
  Census(const Census&) = delete;
  Census& operator=(const Census&) = delete;

  // Group `key` (the same on every member) has entered `*arrivals`
  // collectives; answers read it until remove(key).
  void add(uint64_t key, const std::atomic<int64_t>* arrivals);
  void remove(uint64_t key);

  // Answers the questions that have arrived; called while this rank waits.
  void answer();

  // Asks each of `members` (global ranks) how many collectives of group
  // `key` it entered, answering others meanwhile, until `deadline` or until
  // `completed()`. Returns each member's count (-1: it has not created the
  // group yet), none where it did not answer, or nothing at all when
  // `completed()`.
  std::optional<std::vector<std::optional<int64_t>>> ask(uint64_t key, std::span<const int32_t> members,
                                                         Clock::time_point deadline,
                                                         const std::function<bool()>& completed);

 private:
  using Message = std::array<int64_t, 3>;  // key, question number, count
  void send(int32_t to, int tag, const Message& m);
  void reap();

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::mutex mu_;  // guards what follows: a group may wait on any thread
  std::map<uint64_t, const std::atomic<int64_t>*> groups_;
  int64_t questions_ = 0;
  // Messages MPI may still read; kept until their sends complete.
  std::deque<std::pair<std::unique_ptr<Message>, MPI_Request>> outgoing_;
};

}  // namespace mh::comm::mpi
