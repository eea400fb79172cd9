// Checks shared by the planning plugins: collecting every problem of a plan
// so the user sees them all in one report, and listing the values that would
// have worked when a size does not divide a dimension.
#pragma once

#include <megahost/abi.h>
#include <megahost/error.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mh::plan {

// "1, 2, 3, 4, 6, 12": the positive divisors of n up to `limit`, ascending.
inline std::string divisors(int64_t n, int64_t limit) {
  std::string out;
  for (int64_t d = 1; d <= n && d <= limit; ++d) {
    if (n % d != 0) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(d);
  }
  return out;
}

// "parallel.tensor.size = 5 does not divide model.heads = 12; use a size that
// divides 12 (1, 2, 3, 4, 6, 12)", listing sizes up to `limit`.
inline std::string does_not_divide(const std::string& size_key, int64_t size,
                                   const std::string& what, int64_t n, int64_t limit) {
  return size_key + " = " + std::to_string(size) + " does not divide " + what + " = " +
         std::to_string(n) + "; use a size that divides " + std::to_string(n) + " (" +
         divisors(n, limit) + ")";
}

// The model shape a plan's arguments point to (`args_type` names their
// struct in the message); arguments without one are refused.
template <class Args>
const MH_ModelShape& shape_of(const Args& args, const std::string& args_type) {
  require(args.shape != nullptr, "the plan's arguments name no model shape (" + args_type + ".shape is NULL)");
  return *args.shape;
}

// Every problem found while checking a plan; raise() reports them together,
// one per line, as a single MH_INVALID_ARGUMENT.
class Problems {
 public:
  void add(std::string message) { messages_.push_back(std::move(message)); }

  void raise() const {
    if (messages_.empty()) return;
    std::string text;
    for (const std::string& m : messages_) {
      if (!text.empty()) text += '\n';
      text += m;
    }
    throw Error(MH_INVALID_ARGUMENT, text);
  }

 private:
  std::vector<std::string> messages_;
};

}  // namespace mh::plan
