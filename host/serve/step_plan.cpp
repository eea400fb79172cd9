#include "serve/step_plan.hpp"

#include <megahost/error.hpp>

#include <cstring>
#include <type_traits>

namespace mh::serve {
namespace {

class Writer {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  std::vector<uint8_t> out;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  template <typename T>
  T get() {
    require(at_ + sizeof(T) <= in_.size(), "a step plan ends early");
    T v;
    std::memcpy(&v, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }

 private:
  std::span<const uint8_t> in_;
  size_t at_ = 0;
};

}  // namespace

std::vector<uint8_t> encode(const StepPlan& plan) {
  Writer w;
  w.put<uint8_t>(plan.stop);
  w.put<uint64_t>(plan.release.size());
  for (int64_t slot : plan.release) w.put(slot);
  w.put<uint64_t>(plan.admit.size());
  for (const auto& [slot, q] : plan.admit) {
    w.put(slot);
    w.put(q.stream);
    w.put(q.sampling.temperature);
    w.put(q.sampling.top_k);
    w.put(q.sampling.top_p);
    w.put(q.sampling.seed);
    w.put(q.top_logprobs);
    w.put<uint8_t>(q.prompt_logprobs);
    w.put<uint64_t>(q.prompt.size());
    for (int32_t id : q.prompt) w.put(id);
  }
  return std::move(w.out);
}

StepPlan decode_plan(std::span<const uint8_t> bytes) {
  StepPlan plan;
  if (bytes.empty()) return plan;
  Reader r(bytes);
  plan.stop = r.get<uint8_t>() != 0;
  plan.release.resize(r.get<uint64_t>());
  for (int64_t& slot : plan.release) slot = r.get<int64_t>();
  const uint64_t admits = r.get<uint64_t>();
  for (uint64_t i = 0; i < admits; ++i) {
    const auto slot = r.get<int64_t>();
    generate::Sequence q;
    q.stream = r.get<uint64_t>();
    q.sampling.temperature = r.get<double>();
    q.sampling.top_k = r.get<int64_t>();
    q.sampling.top_p = r.get<double>();
    q.sampling.seed = r.get<uint64_t>();
    q.top_logprobs = r.get<int32_t>();
    q.prompt_logprobs = r.get<uint8_t>() != 0;
    q.prompt.resize(r.get<uint64_t>());
    for (int32_t& id : q.prompt) id = r.get<int32_t>();
    plan.admit.emplace_back(slot, std::move(q));
  }
  return plan;
}

void apply(const StepPlan& plan, generate::StepBatch& batch) {
  for (int64_t slot : plan.release) batch.release(slot);
  for (const auto& [slot, q] : plan.admit) batch.admit(slot, q);
}

}  // namespace mh::serve
