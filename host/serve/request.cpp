#include "serve/request.hpp"

#include <algorithm>

namespace mh::serve {

Request::Request(Ask ask) : ask_(std::move(ask)), arrival_(Clock::now()), choices_(size_t(ask_.choices())) {}

void Request::cancel() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
  }
  changed_.notify_all();
}

bool Request::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void Request::fail(std::string error) {
  {
    std::lock_guard lock(mu_);
    error_ = std::move(error);
    ++version_;
  }
  changed_.notify_all();
}

bool Request::View::done() const {
  return !error.empty() ||
         std::all_of(choices.begin(), choices.end(), [](const ChoiceOut& c) { return !c.finish.empty(); });
}

Request::View Request::wait(uint64_t seen, std::chrono::milliseconds wait) const {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, wait, [&] { return version_ != seen || cancelled_; });
  return View{choices_, version_, error_};
}

}  // namespace mh::serve
