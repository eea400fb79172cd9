// The requests waiting for the engine, at most max_queue of them: the HTTP
// threads push (a full queue refuses, which the client sees as 429), the
// engine loop pops when it has free slots.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "serve/request.hpp"

namespace mh::serve {

class RequestQueue {
 public:
  explicit RequestQueue(int64_t limit) : limit_(limit) {}

  // False when full or closed.
  bool push(std::shared_ptr<Request> r);
  // The oldest request needing at most `slots` slots, or null. Requests
  // are served in order: a larger one at the front waits for slots.
  std::shared_ptr<Request> pop(int64_t slots);
  // Waits until a request is queued, or `wait` passes.
  void wait(std::chrono::milliseconds wait);
  // Refuses new requests; those waiting stay to be drained or failed.
  void close();
  bool closed() const;
  int64_t size() const;
  // Removes and returns every waiting request.
  std::deque<std::shared_ptr<Request>> take_all();

 private:
  const int64_t limit_;
  mutable std::mutex mu_;
  std::condition_variable pushed_;
  std::deque<std::shared_ptr<Request>> queue_;
  bool closed_ = false;
};

}  // namespace mh::serve
