#include "engine/collectives.hpp"

#include <megahost/error.hpp>
#include <megahost/struct_size.hpp>

#include <numeric>
#include <utility>

#include "plugins/observer.hpp"

namespace mh {

namespace {

// What an observer's event counts: the send buffer, or the receive buffer
// of a recv (which sends nothing).
uint64_t event_bytes(const MH_CollectiveArgs& a) {
  const uint64_t sent = tensor_bytes(a.send);
  return sent != 0 ? sent : tensor_bytes(a.recv);
}

}  // namespace

Collectives::Collectives(const MH_CommApi* api, MH_Group* group, std::string name, bool owned)
    : api_(api), group_(group), name_(std::move(name)), owned_(owned) {}

Collectives::Collectives(Collectives&& other) noexcept { *this = std::move(other); }

Collectives& Collectives::operator=(Collectives&& other) noexcept {
  std::swap(api_, other.api_);
  std::swap(group_, other.group_);
  std::swap(name_, other.name_);
  std::swap(owned_, other.owned_);
  std::swap(dry_, other.dry_);
  std::swap(stream_, other.stream_);
  std::swap(placement_, other.placement_);
  return *this;
}

Collectives::~Collectives() {
  if (owned_ && group_ != nullptr) api_->group_destroy(group_);
}

MH_CollectiveArgs Collectives::args(TypedPtr send, int64_t send_n, TypedPtr recv, int64_t recv_n, int32_t op,
                                    int32_t peer) const {
  MH_CollectiveArgs args{};
  args.struct_size = sizeof(args);
  args.send = placed(send.t({send_n}), placement_);
  args.recv = placed(recv.t({recv_n}), placement_);
  args.op = op;
  args.peer = peer;
  args.stream = stream_;
  return args;
}

PendingCollective& PendingCollective::operator=(PendingCollective&& other) noexcept {
  std::swap(api_, other.api_);
  std::swap(request_, other.request_);
  std::swap(what_, other.what_);
  return *this;
}

PendingCollective::~PendingCollective() {
  if (request_ != nullptr) api_->request_destroy(request_);
}

void PendingCollective::wait() {
  if (request_ == nullptr) return;
  MH_Error* error = api_->request_wait(request_);
  api_->request_destroy(std::exchange(request_, nullptr));
  check(error, what_);
}

void Collectives::call(Blocking fn, TypedPtr send, int64_t send_n, TypedPtr recv, int64_t recv_n, int32_t op,
                       int32_t peer, const char* what) {
  if (dry_) return;
  const MH_CollectiveArgs a = args(send, send_n, recv, recv_n, op, peer);
  ObservedCall observed(MH_EVENT_COLLECTIVE, what, name_.c_str(), event_bytes(a));
  check((api_->*fn)(group_, &a), context(what));
}

// Fields an older table lacks lie beyond its struct_size; requests need the
// 1.1 wait and destroy.
bool Collectives::has(Start fn) const {
  return reaches(*api_, fn) && api_->*fn != nullptr && reaches(*api_, &MH_CommApi::request_destroy);
}

PendingCollective Collectives::start(Start fn, Blocking fallback, TypedPtr send, int64_t send_n, TypedPtr recv,
                                     int64_t recv_n, const char* what) {
  if (dry_ || !has(fn)) {
    call(fallback, send, send_n, recv, recv_n, MH_REDUCE_SUM, 0, what);
    return {};
  }
  const MH_CollectiveArgs a = args(send, send_n, recv, recv_n, MH_REDUCE_SUM, 0);
  MH_Request* request = nullptr;
  {
    ObservedCall observed(MH_EVENT_COLLECTIVE, what, name_.c_str(), event_bytes(a));
    check((api_->*fn)(group_, &a, &request), context(what));
  }
  return PendingCollective(api_, request, context(what));
}

PendingCollective Collectives::all_reduce_start(float* data, int64_t n) {
  return start(&MH_CommApi::all_reduce_start, &MH_CommApi::all_reduce, data, n, data, n, "all-reduce");
}

PendingCollective Collectives::reduce_scatter_start(const float* send, float* recv, int64_t n) {
  return start(&MH_CommApi::reduce_scatter_start, &MH_CommApi::reduce_scatter, send, n * size(), recv, n,
               "reduce-scatter");
}

PendingCollective Collectives::all_gather_start(TypedPtr send, TypedPtr recv, int64_t n) {
  return start(&MH_CommApi::all_gather_start, &MH_CommApi::all_gather, send, n, recv, n * size(), "all-gather");
}

void Collectives::all_reduce(TypedPtr data, int64_t n, MH_ReduceOp op) {
  call(&MH_CommApi::all_reduce, data, n, data, n, op, 0, "all-reduce");
}

void Collectives::all_gather(TypedPtr send, TypedPtr recv, int64_t n) {
  call(&MH_CommApi::all_gather, send, n, recv, n * size(), MH_REDUCE_SUM, 0, "all-gather");
}

void Collectives::reduce_scatter(TypedPtr send, TypedPtr recv, int64_t n) {
  call(&MH_CommApi::reduce_scatter, send, n * size(), recv, n, MH_REDUCE_SUM, 0, "reduce-scatter");
}

void Collectives::broadcast(TypedPtr data, int64_t n, int32_t root) {
  call(&MH_CommApi::broadcast, data, n, data, n, MH_REDUCE_SUM, root, "broadcast");
}

void Collectives::send(TypedPtr data, int64_t n, int32_t peer) {
  call(&MH_CommApi::send, data, n, {}, 0, MH_REDUCE_SUM, peer, "send");
}

void Collectives::recv(TypedPtr data, int64_t n, int32_t peer) {
  call(&MH_CommApi::recv, {}, 0, data, n, MH_REDUCE_SUM, peer, "recv");
}

void Collectives::all_to_all(TypedPtr send, const std::vector<int64_t>& send_counts, TypedPtr recv,
                             const std::vector<int64_t>& recv_counts) {
  require(has_entry(*api_, &MH_CommApi::all_to_all),
          context("all-to-all") + ": the communicator's table has no all_to_all (ABI 1.7); expert parallelism "
                                  "(parallel.expert.size > 1) needs a 1.7 communicator");
  if (dry_) return;
  const auto sum = [](const std::vector<int64_t>& counts) { return std::accumulate(counts.begin(), counts.end(), int64_t{0}); };
  MH_AllToAllArgs a{};
  a.struct_size = sizeof(a);
  a.send = placed(send.t({sum(send_counts)}), placement_);
  a.recv = placed(recv.t({sum(recv_counts)}), placement_);
  a.send_counts = send_counts.data();
  a.recv_counts = recv_counts.data();
  a.stream = stream_;
  ObservedCall observed(MH_EVENT_COLLECTIVE, "all-to-all", name_.c_str(), tensor_bytes(a.send));
  check(api_->all_to_all(group_, &a), context("all-to-all"));
}

// Without the stream and on the CPU: host buffers are not the device's
// work, and the communicators that move host memory refuse any call that
// names a stream.
void Collectives::all_gather_host(const float* send, float* recv, int64_t n) {
  const bool dry = std::exchange(dry_, false);
  void* stream = std::exchange(stream_, nullptr);
  const Placement where = std::exchange(placement_, Placement{});
  all_gather(send, recv, n);
  dry_ = dry;
  stream_ = stream;
  placement_ = where;
}

void Collectives::barrier() { check(api_->barrier(group_), context("barrier")); }

Collectives Collectives::split(int32_t color, int32_t key, std::string name) {
  MH_Group* out = nullptr;
  check(api_->split(group_, color, key, &out), "splitting the " + name_ + " group");
  Collectives group(api_, out, std::move(name), true);
  group.set_dry(dry_);
  group.set_device(stream_, placement_);
  return group;
}

std::vector<uint64_t> all_gather_counts(Collectives& group, const std::vector<uint64_t>& mine) {
  std::vector<float> packed;
  for (uint64_t v : mine)
    for (int k = 0; k < 4; ++k) packed.push_back(float((v >> (16 * k)) & 0xFFFF));
  std::vector<float> all(packed.size() * size_t(group.size()));
  group.all_gather_host(packed.data(), all.data(), int64_t(packed.size()));
  std::vector<uint64_t> out(all.size() / 4, 0);
  for (size_t i = 0; i < out.size(); ++i)
    for (int k = 0; k < 4; ++k) out[i] |= uint64_t(all[4 * i + size_t(k)]) << (16 * k);
  return out;
}

}  // namespace mh
