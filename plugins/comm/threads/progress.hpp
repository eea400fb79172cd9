// One rank's progress thread for one group: runs the collectives the rank
// started without waiting, in the order it started them, so a reduction
// moves data while the rank's own thread computes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace mh::comm::threads {

class Progress {
 public:
  // A started collective; wait() rethrows what the collective threw.
  class Request {
   public:
    ~Request();
    void wait();

   private:
    friend class Progress;
    struct Job {
      std::function<void()> run;
      bool done = false;
      std::exception_ptr error;
    };
    Request(Progress& progress, std::shared_ptr<Job> job) : progress_(progress), job_(std::move(job)) {}
    void finish();

    Progress& progress_;
    std::shared_ptr<Job> job_;
    bool waited_ = false;
  };

  Progress() = default;
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // Finishes what was started (each collective ends by its timeout or an
  // abort at the latest), then stops the thread.
  ~Progress();

  // Queues `run` behind every collective started before; the thread starts
  // with the first one, so groups that never start a collective cost none.
  std::unique_ptr<Request> start(std::function<void()> run);
  // Returns once every started collective has finished: a blocking call
  // must not join the group's rendezvous while this rank's earlier
  // collective is still in it.
  void drain();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Request::Job>> queue_;
  int64_t unfinished_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mh::comm::threads
