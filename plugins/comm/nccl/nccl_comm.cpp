#include "nccl_comm.hpp"

#include "nccl_calls.hpp"

#include <megahost/error.hpp>
#include <megahost/struct_size.hpp>

#include <algorithm>
#include <cstring>

namespace mh::comm::nccl {
namespace {

constexpr MH_OptionSpec kOptions[] = {
    opt_int("world_size", "1", 1, 1024,
            "ranks as threads of this process, one CUDA device each (leave 1 under mpirun: -n says it)"),
    kTimeoutOption,
};

cudaStream_t stream_of(const MH_CollectiveArgs& args) {
  const bool has_stream = reaches(args, &MH_CollectiveArgs::stream);
  return has_stream ? static_cast<cudaStream_t>(args.stream) : nullptr;
}

// Waits for communicators being created (comms[r] on devices[r]); if any
// fails or the deadline passes, aborts them all and throws.
void await_created(std::span<const ncclComm_t> comms, std::span<const int> devices, ncclResult_t started,
                   Clock::duration timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  ncclResult_t state = started;
  for (size_t r = 0; r < comms.size() && (state == ncclSuccess || state == ncclInProgress); ++r) {
    cudaSetDevice(devices[r]);
    state = await(comms[r], deadline);
  }
  if (state == ncclSuccess) return;
  for (size_t r = 0; r < comms.size(); ++r) {
    cudaSetDevice(devices[r]);
    if (comms[r] != nullptr) ncclCommAbort(comms[r]);
  }
  if (state == ncclInProgress)
    throw Error(MH_DEADLINE_EXCEEDED,
                "comm nccl: " + timed_out(timeout) + " waiting for every rank to create its communicator");
  throw Error(error_code(state), "comm nccl: creating the communicators: " + describe(state, nullptr));
}

}  // namespace

NcclComm::Group::Group(ncclComm_t comm, GroupId id, int device, std::shared_ptr<const Health> health,
                       Clock::duration timeout)
    : comm_(comm), id_(std::move(id)), device_(device), health_(std::move(health)), timeout_(timeout) {
  try {
    check_cuda(cudaSetDevice(device_), "comm nccl: cudaSetDevice");
    const ncclResult_t ranked = ncclCommUserRank(comm_, &rank_);
    require(ranked == ncclSuccess, "comm nccl: ncclCommUserRank: " + describe(ranked, comm_), error_code(ranked));
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "comm nccl: cudaEventCreate");
    check_cuda(cudaMalloc(&scratch_, std::max<size_t>(256, size() * sizeof(SplitEntry))), "comm nccl: cudaMalloc");
  } catch (...) {
    ncclCommAbort(comm_);
    if (done_ != nullptr) cudaEventDestroy(done_);
    throw;
  }
}

// Finalised cleanly, destroy frees the rest locally. Finalising waits for
// every rank of the group, which after a rank failed some never start: then,
// or when it does not finish in time, abort.
NcclComm::Group::~Group() {
  cudaSetDevice(device_);
  if (comm_ != nullptr && !health_->failed()) {
    start_finalize();
    if (await(comm_, Clock::now() + timeout_) == ncclSuccess) {
      ncclCommDestroy(comm_);
      comm_ = nullptr;
    }
  }
  if (comm_ != nullptr) ncclCommAbort(comm_);
  cudaEventDestroy(done_);
  cudaFree(scratch_);
}

void NcclComm::Group::start_finalize() noexcept {
  if (comm_ == nullptr || finalizing_) return;
  cudaSetDevice(device_);
  ncclCommFinalize(comm_);
  finalizing_ = true;
}

NcclComm::Group* NcclComm::Group::split(int32_t color, int32_t key) {
  enter(Collective::kSplit);
  // Every rank learns every rank's choice first, so that all refuse a bad
  // color together and the new group knows its members' global ranks.
  const std::vector<SplitEntry> entries = gather(SplitEntry{color, key});
  const std::vector<int32_t> members = with_context(id_, Collective::kSplit, [&] {
    check_colors(entries, id_);
    return split_members(entries, color);
  });
  const Clock::time_point deadline = Clock::now() + timeout_;
  ncclConfig_t config = nonblocking_config();
  ncclComm_t child = nullptr;
  ncclResult_t state = ncclCommSplit(comm_, color, key, &child, &config);
  if (child != nullptr && (state == ncclSuccess || state == ncclInProgress)) state = await(child, deadline);
  if (state != ncclSuccess) {
    const std::string why = state == ncclInProgress ? timed_out(timeout_) : describe(state, child);
    if (child != nullptr) ncclCommAbort(child);
    fail(Collective::kSplit, state == ncclInProgress ? MH_DEADLINE_EXCEEDED : error_code(state),
         "creating the new communicator: " + why);
  }
  settle(Collective::kSplit, ncclInProgress, deadline);  // the parent's state, too
  return new Group(child, id_.child(color, members), device_, health_, timeout_);
}

NcclComm::Group::Request::~Request() {
  if (!waited_) {
    try {
      wait();
    } catch (const Error&) {
      // Nobody asks for the outcome any more; the group keeps it as broken.
    }
  }
  cudaEventDestroy(event_);
}

// A failure since the start (of this group or another rank) ends it at once.
void NcclComm::Group::Request::wait() {
  waited_ = true;
  group_.enter(what_);
  group_.complete(what_, event_, deadline_);
}

void NcclComm::Group::all_reduce(const MH_CollectiveArgs& args) { all_reduce_start(args)->wait(); }

void NcclComm::Group::reduce_scatter(const MH_CollectiveArgs& args) { reduce_scatter_start(args)->wait(); }

std::unique_ptr<NcclComm::Group::Request> NcclComm::Group::all_reduce_start(const MH_CollectiveArgs& args) {
  const Call c = enter(Collective::kAllReduce, args);
  cudaStream_t stream = stream_of(args);
  return start(c.kind, stream, [&] {
    return ncclAllReduce(c.send, c.recv, count(c), datatype(c), reduce_op(c), comm_, stream);
  });
}

std::unique_ptr<NcclComm::Group::Request> NcclComm::Group::reduce_scatter_start(const MH_CollectiveArgs& args) {
  const Call c = enter(Collective::kReduceScatter, args);
  cudaStream_t stream = stream_of(args);
  return start(c.kind, stream, [&] {
    return ncclReduceScatter(c.send, c.recv, count(c), datatype(c), reduce_op(c), comm_, stream);
  });
}

void NcclComm::Group::all_gather(const MH_CollectiveArgs& args) { all_gather_start(args)->wait(); }

std::unique_ptr<NcclComm::Group::Request> NcclComm::Group::all_gather_start(const MH_CollectiveArgs& args) {
  const Call c = enter(Collective::kAllGather, args);
  cudaStream_t stream = stream_of(args);
  return start(c.kind, stream, [&] { return ncclAllGather(c.send, c.recv, count(c), datatype(c), comm_, stream); });
}

// Only the root's send is read; the others pass their recv, which NCCL ignores.
void NcclComm::Group::broadcast(const MH_CollectiveArgs& args) {
  const Call c = enter(Collective::kBroadcast, args);
  cudaStream_t stream = stream_of(args);
  const void* send = c.send != nullptr ? c.send : c.recv;
  run(c.kind, stream, [&] { return ncclBroadcast(send, c.recv, count(c), datatype(c), c.peer, comm_, stream); });
}

void NcclComm::Group::send(const MH_CollectiveArgs& args) {
  const Call c = enter(Collective::kSend, args);
  cudaStream_t stream = stream_of(args);
  run(c.kind, stream, [&] { return ncclSend(c.send, count(c), datatype(c), c.peer, comm_, stream); });
}

void NcclComm::Group::recv(const MH_CollectiveArgs& args) {
  const Call c = enter(Collective::kRecv, args);
  cudaStream_t stream = stream_of(args);
  run(c.kind, stream, [&] { return ncclRecv(c.recv, count(c), datatype(c), c.peer, comm_, stream); });
}

// NCCL has no barrier: an all-reduce of one int on the legacy default
// stream, which also waits for the device's earlier work on blocking streams.
void NcclComm::Group::barrier() {
  enter(Collective::kBarrier);
  run(Collective::kBarrier, nullptr,
      [&] { return ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, nullptr); });
}

void NcclComm::Group::enter(Collective what) {
  if (!broken_.empty())
    throw Error(broken_code_, id_.context(what) + ": the group is unusable after an earlier failure (" + broken_ + ")");
  check_health(what);
  check_cuda(cudaSetDevice(device_), id_.context(what) + ": cudaSetDevice");
}

Call NcclComm::Group::enter(Collective what, const MH_CollectiveArgs& args) {
  enter(what);
  return with_context(id_, what, [&] {
    // The shared checks refuse any stream (the host communicators have
    // none); here the buffers' device is checked instead. Only the fields
    // the caller knows are read.
    MH_CollectiveArgs checked{};
    std::memcpy(&checked, &args, std::min(args.struct_size, sizeof(checked)));
    checked.stream = nullptr;
    const Call call = validate(what, checked, rank_, size(), {MH_DEVICE_CUDA, device_});
    require_on_device(call);
    return call;
  });
}

void NcclComm::Group::require_on_device(const Call& call) const {
  const bool sends = call.kind == Collective::kAllToAll ? offset_of(call.send_counts, size()) > 0 : call.bytes() > 0;
  if (sends && call.send != nullptr) require_device_memory("send", call.send, device_);
  if (call.bytes() > 0 && call.recv != nullptr) require_device_memory("recv", call.recv, device_);
}

void NcclComm::Group::all_to_all(const MH_AllToAllArgs& args) {
  enter(Collective::kAllToAll);
  const Call c = with_context(id_, Collective::kAllToAll, [&] {
    MH_AllToAllArgs checked{};  // as in enter(): the device is checked instead of the stream
    std::memcpy(&checked, &args, std::min(args.struct_size, sizeof(checked)));
    checked.stream = nullptr;
    const Call call = validate(checked, size(), {MH_DEVICE_CUDA, device_});
    require_on_device(call);
    return call;
  });
  cudaStream_t stream = reaches(args, &MH_AllToAllArgs::stream) ? static_cast<cudaStream_t>(args.stream) : nullptr;
  const auto* send = static_cast<const std::byte*>(c.send);
  auto* recv = static_cast<std::byte*>(c.recv);
  run(c.kind, stream, [&] {
    ncclResult_t result = ncclGroupStart();
    if (result != ncclSuccess) return result;
    for (int32_t p = 0; p < size() && result == ncclSuccess; ++p) {
      const size_t out = size_t(c.send_counts[p]) * c.element_size, in = size_t(c.recv_counts[p]) * c.element_size;
      if (out > 0)
        result = ncclSend(send + size_t(offset_of(c.send_counts, p)) * c.element_size, out, ncclUint8, p, comm_, stream);
      if (in > 0 && result == ncclSuccess)
        result = ncclRecv(recv + size_t(offset_of(c.recv_counts, p)) * c.element_size, in, ncclUint8, p, comm_, stream);
    }
    const ncclResult_t ended = ncclGroupEnd();  // always closes the group it opened
    return result != ncclSuccess ? result : ended;
  });
}

template <class Enqueue>
void NcclComm::Group::enqueue(Collective what, cudaStream_t stream, cudaEvent_t event, Clock::time_point deadline,
                              Enqueue work) {
  settle(what, work(), deadline);
  const cudaError_t recorded = cudaEventRecord(event, stream);
  if (recorded != cudaSuccess) fail(what, MH_INTERNAL, std::string("cudaEventRecord: ") + cudaGetErrorString(recorded));
}

template <class Enqueue>
void NcclComm::Group::run(Collective what, cudaStream_t stream, Enqueue work) {
  const Clock::time_point deadline = Clock::now() + timeout_;
  enqueue(what, stream, done_, deadline, work);
  complete(what, done_, deadline);
}

// Each request has an event of its own, so that several can be in flight.
template <class Enqueue>
std::unique_ptr<NcclComm::Group::Request> NcclComm::Group::start(Collective what, cudaStream_t stream, Enqueue work) {
  const Clock::time_point deadline = Clock::now() + timeout_;
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), id_.context(what) + ": cudaEventCreate");
  try {
    enqueue(what, stream, event, deadline, work);
  } catch (...) {
    cudaEventDestroy(event);
    throw;
  }
  return std::make_unique<Request>(*this, what, event, deadline);
}

void NcclComm::Group::complete(Collective what, cudaEvent_t event, Clock::time_point deadline) {
  if (!poll_until(deadline, [&] { return finished(what, event); })) time_out(what);
}

// A nonblocking call may return before NCCL has enqueued its work
// (ncclInProgress, e.g. while connecting to peers); then nothing else may be
// called on the communicator until its state leaves ncclInProgress.
void NcclComm::Group::settle(Collective what, ncclResult_t result, Clock::time_point deadline) {
  ncclResult_t state = result;
  const bool settled = poll_until(deadline, [&] {
    check_health(what);
    if (state == ncclInProgress && ncclCommGetAsyncError(comm_, &state) != ncclSuccess) state = ncclInvalidUsage;
    return state != ncclInProgress;
  });
  if (!settled) time_out(what);
  if (state != ncclSuccess) fail(what, error_code(state), describe(state, comm_));
}

bool NcclComm::Group::finished(Collective what, cudaEvent_t event) {
  check_health(what);
  const cudaError_t query = cudaEventQuery(event);
  // Not ready is recorded as the thread's last CUDA error; clear it, or the
  // next kernel launch check of the same thread would report it.
  if (query == cudaErrorNotReady) cudaGetLastError();
  else if (query != cudaSuccess) fail(what, MH_INTERNAL, std::string("CUDA: ") + cudaGetErrorString(query));
  ncclResult_t state = ncclSuccess;
  ncclCommGetAsyncError(comm_, &state);
  if (state != ncclSuccess && state != ncclInProgress) fail(what, error_code(state), describe(state, comm_));
  return query == cudaSuccess;
}

void NcclComm::Group::check_health(Collective what) {
  if (health_->failed()) fail(what, MH_ABORTED, health_->reason());
}

std::vector<SplitEntry> NcclComm::Group::gather(SplitEntry mine) {
  auto* slots = static_cast<SplitEntry*>(scratch_);
  const std::string context = id_.context(Collective::kSplit);
  check_cuda(cudaMemcpy(slots + rank_, &mine, sizeof(mine), cudaMemcpyHostToDevice), context);
  run(Collective::kSplit, nullptr, [&] { return ncclAllGather(slots + rank_, slots, 2, ncclInt32, comm_, nullptr); });
  std::vector<SplitEntry> entries(static_cast<size_t>(size()));
  check_cuda(cudaMemcpy(entries.data(), slots, entries.size() * sizeof(SplitEntry), cudaMemcpyDeviceToHost), context);
  return entries;
}

void NcclComm::Group::time_out(Collective what) {
  fail(what, MH_DEADLINE_EXCEEDED, timed_out(timeout_) + "; NCCL does not tell which ranks had not arrived");
}

// NCCL cannot take back work it started: aborting the communicator ends its
// kernels, so that no stream waits on them forever.
void NcclComm::Group::fail(Collective what, MH_ErrorCode code, const std::string& why) {
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
  broken_code_ = code;
  broken_ = id_.context(what) + ": " + why;
  throw Error(code, broken_);
}

std::span<const MH_OptionSpec> NcclComm::options() { return kOptions; }

NcclComm::NcclComm(const CreateContext& ctx) : health_(std::make_shared<Health>()) {
  const int devices = device_count();
  const Clock::duration timeout = to_duration(ctx.options.get_double("timeout_s"));
  const int64_t world_size = ctx.options.get_int("world_size");
  if (under_mpirun()) {
    join_mpi_world(devices, timeout);
    // The default, or the launcher's size: one config serves both launches.
    require(world_size == 1 || world_size == world_size_,
            ctx.options.key("world_size") + " = " + std::to_string(world_size) + ", but mpirun started " +
                std::to_string(world_size_) + " rank(s); set it to " + std::to_string(world_size_) +
                " or leave it out (-np sets the world size)");
  } else {
    require(world_size <= devices,
            ctx.options.key("world_size") + " = " + std::to_string(world_size) +
                " needs as many CUDA devices (NCCL runs one rank per device); this machine has " +
                std::to_string(devices));
    start_local_world(static_cast<int32_t>(world_size), timeout);
  }
}

// One thread creates every local rank's communicator (rank r on device r),
// so the calls form one NCCL group.
void NcclComm::start_local_world(int32_t size, Clock::duration timeout) {
  ncclUniqueId id{};
  const ncclResult_t got_id = ncclGetUniqueId(&id);
  require(got_id == ncclSuccess, "comm nccl: ncclGetUniqueId: " + describe(got_id, nullptr), error_code(got_id));
  std::vector<ncclComm_t> comms(static_cast<size_t>(size), nullptr);
  std::vector<ncclConfig_t> configs(static_cast<size_t>(size), nonblocking_config());
  std::vector<int> devices(static_cast<size_t>(size));
  ncclResult_t started = ncclGroupStart();
  for (int32_t r = 0; r < size && (started == ncclSuccess || started == ncclInProgress); ++r) {
    devices[size_t(r)] = r;
    check_cuda(cudaSetDevice(r), "comm nccl: cudaSetDevice");
    started = ncclCommInitRankConfig(&comms[size_t(r)], size, id, r, &configs[size_t(r)]);
  }
  const ncclResult_t ended = ncclGroupEnd();
  const bool started_well = started == ncclSuccess || started == ncclInProgress;
  await_created(comms, devices, started_well ? ended : started, timeout);
  world_size_ = size;
  for (int32_t r = 0; r < size; ++r)
    world_.push_back(std::make_unique<Group>(comms[size_t(r)], GroupId::world(size), r, health_, timeout));
}

void NcclComm::join_mpi_world(int devices, Clock::duration timeout) {
  mpi_ = std::make_unique<MpiBootstrap>(timeout);
  const int device = mpi_->local_rank() % devices;
  check_cuda(cudaSetDevice(device), "comm nccl: cudaSetDevice");
  ncclConfig_t config = nonblocking_config();
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, mpi_->size(), mpi_->id(), mpi_->rank(), &config);
  const ncclComm_t comms[] = {comm};
  const int comm_devices[] = {device};
  await_created(comms, comm_devices, started, timeout);
  world_size_ = mpi_->size();
  first_rank_ = mpi_->rank();
  world_.push_back(std::make_unique<Group>(comm, GroupId::world(world_size_), device, health_, timeout));
}

// Finalising completes only once every rank of a communicator started it,
// and this thread owns every local rank's world: start them all first.
NcclComm::~NcclComm() {
  for (auto& group : world_) group->start_finalize();
  world_.clear();
}

void NcclComm::info(MH_CommInfo& out) const {
  out.world_size = world_size_;
  out.ranks_in_process = static_cast<int32_t>(world_.size());
  out.first_rank = first_rank_;
  out.ranks_on_node = out.ranks_in_process;  // one rank per device; nobody shares CPU cores by it
}

NcclComm::Group* NcclComm::world(int32_t local) {
  require(local >= 0 && local < static_cast<int32_t>(world_.size()),
          "world: local rank " + std::to_string(local) + " is outside 0.." + std::to_string(world_.size() - 1));
  return world_[static_cast<size_t>(local)].get();
}

void NcclComm::abort(int32_t rank, const char* reason) noexcept {
  health_->fail(rank, reason);
  if (mpi_ != nullptr) MpiBootstrap::abort_world(rank, reason);
}

MH_ComponentDesc nccl_component() {
  return component<NcclComm>("nccl", "0.1.0",
                             "NCCL on CUDA devices: ranks as threads (one device each) or under mpirun; with timeouts",
                             NcclComm::options());
}

}  // namespace mh::comm::nccl
