// Observer "profile": per rank, the calls, host seconds and bytes of every
// kernels op and collective the rank issued (ABI 1.5 MH_ObserverApi),
// written at destroy to <dir>/profile-rank<R>.tsv, or to the log:
//
//   [observer]
//   plugin = "profile"
//   dir = "profile"
//
// Seconds are host time inside each call: on a device that enqueues (CUDA)
// the time to enqueue, not to run. It uses the SDK only.
#include <megahost/plugin.hpp>

#include <cstdio>
#include <map>
#include <string>
#include <tuple>

#include "../summary_file.hpp"

namespace {

class ProfileObserver {
 public:
  static constexpr MH_Kind kind = MH_KIND_OBSERVER;
  static constexpr MH_OptionSpec options[] = {
      mh::opt("dir", MH_VALUE_STRING, "\"\"", "folder for profile-rank<R>.tsv; empty: the log"),
  };

  explicit ProfileObserver(const mh::CreateContext& ctx) : dir_(ctx.options.get_string("dir")), rank_(ctx.rank) {}

  ~ProfileObserver() {
    std::string text = "type\tgroup\tname\tcalls\tseconds\tbytes\n";
    for (const auto& [key, t] : totals_) {
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%.6f", t.seconds);
      text += std::get<0>(key) + "\t" + std::get<1>(key) + "\t" + std::get<2>(key) + "\t" + std::to_string(t.calls) +
              "\t" + seconds + "\t" + std::to_string(t.bytes) + "\n";
    }
    try {
      mh::observe::write_summary(dir_, "profile", rank_, text);
    } catch (const std::exception& e) {
      mh::log(MH_LOG_WARNING, e.what());
    }
  }

  void on_event(const MH_Event& e) {
    const bool op = e.type == MH_EVENT_OP;
    Total& t = totals_[{op ? "op" : "collective", e.group != nullptr ? e.group : "-", e.name != nullptr ? e.name : "?"}];
    ++t.calls;
    t.seconds += e.seconds;
    t.bytes += e.bytes;
  }

 private:
  struct Total {
    int64_t calls = 0;
    double seconds = 0;
    uint64_t bytes = 0;
  };
  std::string dir_;
  int32_t rank_;
  std::map<std::tuple<std::string, std::string, std::string>, Total> totals_;
};

}  // namespace

MH_PLUGIN("profile", "1.0.0",
          mh::component<ProfileObserver>("profile", "1.0.0", "per-rank calls, seconds and bytes of every op and collective",
                                         ProfileObserver::options))
