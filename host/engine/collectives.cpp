#include "engine/collectives.hpp"

#include <megahost/error.hpp>

#include <utility>

#include "engine/device.hpp"

namespace mh {

Collectives::Collectives(const MH_CommApi* api, MH_Group* group, std::string name, bool owned)
    : api_(api), group_(group), name_(std::move(name)), owned_(owned) {}

Collectives::Collectives(Collectives&& other) noexcept { *this = std::move(other); }

Collectives& Collectives::operator=(Collectives&& other) noexcept {
  std::swap(api_, other.api_);
  std::swap(group_, other.group_);
  std::swap(name_, other.name_);
  std::swap(owned_, other.owned_);
  std::swap(dry_, other.dry_);
  return *this;
}

Collectives::~Collectives() {
  if (owned_ && group_ != nullptr) api_->group_destroy(group_);
}

namespace {

MH_CollectiveArgs collective_args(const float* send, int64_t send_n, float* recv, int64_t recv_n, int32_t op,
                                  int32_t peer) {
  MH_CollectiveArgs args{};
  args.struct_size = sizeof(args);
  args.send = view(const_cast<float*>(send), MH_F32, {send_n});
  args.recv = view(recv, MH_F32, {recv_n});
  args.op = op;
  args.peer = peer;
  return args;
}

}  // namespace

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

void Collectives::call(Blocking fn, const float* send, int64_t send_n, float* recv, int64_t recv_n, int32_t op,
                       int32_t peer, const char* what) {
  if (dry_) return;
  const MH_CollectiveArgs args = collective_args(send, send_n, recv, recv_n, op, peer);
  check((api_->*fn)(group_, &args), context(what));
}

// Fields a 1.0 table lacks lie beyond its struct_size.
bool Collectives::nonblocking() const {
  return api_->struct_size >= MH_STRUCT_SIZE(MH_CommApi, request_destroy) && api_->all_reduce_start != nullptr;
}

PendingCollective Collectives::start(Start fn, Blocking fallback, const float* send, int64_t send_n, float* recv,
                                     int64_t recv_n, const char* what) {
  if (dry_ || !nonblocking()) {
    call(fallback, send, send_n, recv, recv_n, MH_REDUCE_SUM, 0, what);
    return {};
  }
  const MH_CollectiveArgs args = collective_args(send, send_n, recv, recv_n, MH_REDUCE_SUM, 0);
  MH_Request* request = nullptr;
  check((api_->*fn)(group_, &args, &request), context(what));
  return PendingCollective(api_, request, context(what));
}

PendingCollective Collectives::all_reduce_start(float* data, int64_t n) {
  return start(&MH_CommApi::all_reduce_start, &MH_CommApi::all_reduce, data, n, data, n, "all-reduce");
}

PendingCollective Collectives::reduce_scatter_start(const float* send, float* recv, int64_t n) {
  return start(&MH_CommApi::reduce_scatter_start, &MH_CommApi::reduce_scatter, send, n * size(), recv, n,
               "reduce-scatter");
}

void Collectives::all_reduce(float* data, int64_t n, MH_ReduceOp op) {
  call(&MH_CommApi::all_reduce, data, n, data, n, op, 0, "all-reduce");
}

void Collectives::all_gather(const float* send, float* recv, int64_t n) {
  call(&MH_CommApi::all_gather, send, n, recv, n * size(), MH_REDUCE_SUM, 0, "all-gather");
}

void Collectives::reduce_scatter(const float* send, float* recv, int64_t n) {
  call(&MH_CommApi::reduce_scatter, send, n * size(), recv, n, MH_REDUCE_SUM, 0, "reduce-scatter");
}

void Collectives::broadcast(float* data, int64_t n, int32_t root) {
  call(&MH_CommApi::broadcast, data, n, data, n, MH_REDUCE_SUM, root, "broadcast");
}

void Collectives::send(const float* data, int64_t n, int32_t peer) {
  call(&MH_CommApi::send, data, n, nullptr, 0, MH_REDUCE_SUM, peer, "send");
}

void Collectives::recv(float* data, int64_t n, int32_t peer) {
  call(&MH_CommApi::recv, nullptr, 0, data, n, MH_REDUCE_SUM, peer, "recv");
}

void Collectives::all_gather_host(const float* send, float* recv, int64_t n) {
  const bool dry = std::exchange(dry_, false);
  all_gather(send, recv, n);
  dry_ = dry;
}

void Collectives::barrier() { check(api_->barrier(group_), context("barrier")); }

Collectives Collectives::split(int32_t color, int32_t key, std::string name) {
  MH_Group* out = nullptr;
  check(api_->split(group_, color, key, &out), "splitting the " + name_ + " group");
  Collectives group(api_, out, std::move(name), true);
  group.set_dry(dry_);
  return group;
}

}  // namespace mh
