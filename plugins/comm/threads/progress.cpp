#include "progress.hpp"

namespace mh::comm::threads {

Progress::Request::~Request() {
  if (!waited_) finish();
}

void Progress::Request::wait() {
  waited_ = true;
  finish();
  if (job_->error) std::rethrow_exception(job_->error);
}

void Progress::Request::finish() {
  std::unique_lock<std::mutex> lock(progress_.mu_);
  progress_.cv_.wait(lock, [&] { return job_->done; });
}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::unique_ptr<Progress::Request> Progress::start(std::function<void()> run) {
  auto job = std::make_shared<Request::Job>();
  job->run = std::move(run);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(job);
    ++unfinished_;
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_all();
  return std::unique_ptr<Request>(new Request(*this, std::move(job)));
}

void Progress::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return unfinished_ == 0; });
}

void Progress::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to finish
    std::shared_ptr<Request::Job> job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      job->run();
    } catch (...) {
      job->error = std::current_exception();
    }
    lock.lock();
    job->done = true;
    --unfinished_;
    cv_.notify_all();
  }
}

}  // namespace mh::comm::threads
