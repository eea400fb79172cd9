#include "serve/request_queue.hpp"

namespace mh::serve {

bool RequestQueue::push(std::shared_ptr<Request> r) {
  {
    std::lock_guard lock(mu_);
    if (closed_ || int64_t(queue_.size()) >= limit_) return false;
    queue_.push_back(std::move(r));
  }
  pushed_.notify_one();
  return true;
}

std::shared_ptr<Request> RequestQueue::pop(int64_t slots) {
  std::lock_guard lock(mu_);
  if (queue_.empty() || queue_.front()->ask().choices() > slots) return nullptr;
  std::shared_ptr<Request> r = std::move(queue_.front());
  queue_.pop_front();
  return r;
}

void RequestQueue::wait(std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  pushed_.wait_for(lock, wait, [&] { return !queue_.empty(); });
}

void RequestQueue::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
}

bool RequestQueue::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

int64_t RequestQueue::size() const {
  std::lock_guard lock(mu_);
  return int64_t(queue_.size());
}

std::deque<std::shared_ptr<Request>> RequestQueue::take_all() {
  std::lock_guard lock(mu_);
  return std::exchange(queue_, {});
}

}  // namespace mh::serve
