#include "mpi_comm.hpp"

#include "mpi_calls.hpp"
#include "split.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

namespace mh::comm::mpi {

namespace {

constexpr MH_OptionSpec kOptions[] = {
    // Accepted so that one config serves thread ranks and mpirun alike.
    opt_int("world_size", "0", 0, 1 << 24, "the launcher's world size (mpirun -np); 0 takes it from the launcher"),
    kTimeoutOption,
};
constexpr int kTag = 0;

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// A duplicate of MPI_COMM_WORLD, so our traffic never matches anybody
// else's; non-blocking so that a rank that never creates its instance gives
// a timeout instead of a hang.
std::unique_ptr<MpiComm::Group> duplicate_world(Clock::duration timeout, Census& census) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Comm_idup(MPI_COMM_WORLD, &comm, &request), "MPI_Comm_idup");
  MPI_Status status;
  require(complete_by(request, Clock::now() + timeout, status),
          "mpi communicator: " + timed_out(timeout) + " waiting for every rank to create it",
          MH_DEADLINE_EXCEEDED);
  return std::make_unique<MpiComm::Group>(comm, GroupId::world(world_size()), timeout, census, 1);
}

// Every member splits a group in the same order, so the n-th split's color
// names the child alike on all of them.
uint64_t child_key(uint64_t parent, int64_t split, int32_t color) {
  uint64_t x = parent * 0x9E3779B97F4A7C15ull ^ (uint64_t(split) << 32 | uint32_t(color));
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 31);
}

// Asking starts this long before a collective's deadline, so that the
// ranks that had not arrived are named when it passes.
Clock::duration census_window(Clock::duration timeout) {
  return std::min<Clock::duration>(timeout / 2, std::chrono::seconds(2));
}

// The ranks sharing this node's memory: MPI's shared-memory split.
int32_t ranks_on_this_node() {
  MPI_Comm node = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int size = 0;
  MPI_Comm_size(node, &size);
  MPI_Comm_free(&node);
  return size;
}

}  // namespace

Runtime::Runtime() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized != 0) return;
  int provided = 0;
  // abort() may come from any thread.
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  owns_ = true;
}

Runtime::~Runtime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && finalized == 0) MPI_Finalize();
}

MpiComm::Group::Group(MPI_Comm comm, GroupId id, Clock::duration timeout, Census& census, uint64_t key)
    : comm_(comm), id_(std::move(id)), timeout_(timeout), census_(census), key_(key) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  census_.add(key_, &arrivals_);
}

MpiComm::Group::~Group() {
  census_.remove(key_);
  flush_sends();
  MPI_Comm_free(&comm_);
}

MpiComm::Group* MpiComm::Group::split(int32_t color, int32_t key) {
  enter(Collective::kSplit);
  // Gathering every rank's choice first gives split a deadline (MPI_Comm_split
  // has none) and lets all ranks refuse a bad color together.
  const SplitEntry mine{color, key};
  std::vector<SplitEntry> entries(size());
  run(Collective::kSplit, -1, [&](MPI_Request* r) {
    check(MPI_Iallgather(&mine, 2, MPI_INT32_T, entries.data(), 2, MPI_INT32_T, comm_, r), "MPI_Iallgather");
  });
  MPI_Comm child = MPI_COMM_NULL;
  with_context(id_, Collective::kSplit, [&] {
    check_colors(entries, id_);
    check(MPI_Comm_split(comm_, color, key, &child), "MPI_Comm_split");
  });
  return new Group(child, id_.child(color, split_members(entries, color)), timeout_, census_,
                   child_key(key_, ++splits_, color));
}

MpiComm::Group::Request::~Request() {
  if (waited_) return;
  try {
    wait();
  } catch (const Error&) {
    // Nobody asks for the outcome any more; the group keeps it if it broke.
  }
}

void MpiComm::Group::Request::wait() {
  waited_ = true;
  group_.complete(what_, -1, request_, deadline_, op_);
  if (then_) then_();
}

void MpiComm::Group::all_reduce(const MH_CollectiveArgs& args) { all_reduce_start(args)->wait(); }

void MpiComm::Group::reduce_scatter(const MH_CollectiveArgs& args) { reduce_scatter_start(args)->wait(); }

std::unique_ptr<MpiComm::Group::Request> MpiComm::Group::all_reduce_start(const MH_CollectiveArgs& args) {
  const Call c = enter(Collective::kAllReduce, args);
  const void* send = c.send == c.recv ? MPI_IN_PLACE : c.send;
  return start(c.kind, [&](MPI_Request* r) {
    check(MPI_Iallreduce(send, c.recv, count(c), datatype(c), reduce_op(c), comm_, r), "MPI_Iallreduce");
  });
}

std::unique_ptr<MpiComm::Group::Request> MpiComm::Group::reduce_scatter_start(const MH_CollectiveArgs& args) {
  const Call c = enter(Collective::kReduceScatter, args);
  auto* full = static_cast<std::byte*>(const_cast<void*>(c.send));
  if (c.recv != full + rank_ * c.bytes())
    return start(c.kind, [&](MPI_Request* r) {
      check(MPI_Ireduce_scatter_block(c.send, c.recv, count(c), datatype(c), reduce_op(c), comm_, r),
            "MPI_Ireduce_scatter_block");
    });
  // In place (recv is this rank's block of send, as NCCL takes it): MPI puts
  // the result at the start of the buffer, so it moves to the block after.
  const Clock::time_point deadline = Clock::now() + timeout_;
  const MPI_Request request = post(c.kind, [&](MPI_Request* r) {
    check(MPI_Ireduce_scatter_block(MPI_IN_PLACE, full, count(c), datatype(c), reduce_op(c), comm_, r),
          "MPI_Ireduce_scatter_block");
  });
  return std::make_unique<Request>(*this, c.kind, request, deadline, arrivals_, [full, c] {
    if (full != c.recv) std::memmove(c.recv, full, c.bytes());
  });
}

void MpiComm::Group::all_gather(const MH_CollectiveArgs& args) { all_gather_start(args)->wait(); }

std::unique_ptr<MpiComm::Group::Request> MpiComm::Group::all_gather_start(const MH_CollectiveArgs& args) {
  const Call c = enter(Collective::kAllGather, args);
  const void* own_block = static_cast<const std::byte*>(c.recv) + rank_ * c.bytes();
  const void* send = c.send == own_block ? MPI_IN_PLACE : c.send;
  return start(c.kind, [&](MPI_Request* r) {
    check(MPI_Iallgather(send, count(c), datatype(c), c.recv, count(c), datatype(c), comm_, r), "MPI_Iallgather");
  });
}

void MpiComm::Group::broadcast(const MH_CollectiveArgs& args) {
  const Call c = enter(Collective::kBroadcast, args);
  // MPI broadcasts one buffer; the root's is recv, filled from send first.
  if (rank_ == c.peer && c.recv != c.send && c.bytes() != 0) std::memcpy(c.recv, c.send, c.bytes());
  run(c.kind, -1, [&](MPI_Request* r) {
    check(MPI_Ibcast(c.recv, count(c), datatype(c), c.peer, comm_, r), "MPI_Ibcast");
  });
}

void MpiComm::Group::all_to_all(const MH_AllToAllArgs& args) {
  enter(Collective::kAllToAll);
  const Call c = with_context(id_, Collective::kAllToAll, [&] { return validate(args, size(), kHostMemory); });
  const Blocks out = with_context(id_, c.kind, [&] { return blocks(c.send_counts); });
  const Blocks in = with_context(id_, c.kind, [&] { return blocks(c.recv_counts); });
  run(c.kind, -1, [&](MPI_Request* r) {
    check(MPI_Ialltoallv(c.send, out.counts.data(), out.displacements.data(), datatype(c), c.recv, in.counts.data(),
                         in.displacements.data(), datatype(c), comm_, r),
          "MPI_Ialltoallv");
  });
}

void MpiComm::Group::send(const MH_CollectiveArgs& args) {
  const Call c = enter(Collective::kSend, args);
  with_context(id_, c.kind, [&] {
    PendingSend& s = sends_.emplace_back(
        PendingSend{c.peer, Clock::now(), std::make_unique_for_overwrite<std::byte[]>(c.bytes())});
    if (c.bytes() != 0) std::memcpy(s.data.get(), c.send, c.bytes());
    check(MPI_Isend(s.data.get(), count(c), datatype(c), c.peer, kTag, comm_, &s.request), "MPI_Isend");
  });
}

void MpiComm::Group::recv(const MH_CollectiveArgs& args) {
  const Call c = enter(Collective::kRecv, args);
  MPI_Status status = run(c.kind, c.peer, [&](MPI_Request* r) {
    check(MPI_Irecv(c.recv, count(c), datatype(c), c.peer, kTag, comm_, r), "MPI_Irecv");
  });
  int received = 0;
  MPI_Get_count(&status, datatype(c), &received);
  require(received == c.count, id_.context(c.kind) + ": " + id_.globals({&c.peer, 1}) + " sent " +
                                   std::to_string(received) + " elements but this recv expects " +
                                   std::to_string(c.count));
}

void MpiComm::Group::barrier() {
  enter(Collective::kBarrier);
  run(Collective::kBarrier, -1, [&](MPI_Request* r) { check(MPI_Ibarrier(comm_, r), "MPI_Ibarrier"); });
}

void MpiComm::Group::enter(Collective what) {
  if (!broken_.empty())
    throw Error(MH_DEADLINE_EXCEEDED, id_.context(what) + ": the group is unusable after a timeout (" + broken_ + ")");
  reap_sends();
  if (what != Collective::kSend && what != Collective::kRecv) ++arrivals_;
}

Call MpiComm::Group::enter(Collective what, const MH_CollectiveArgs& args) {
  enter(what);
  return with_context(id_, what, [&] { return validate(what, args, rank_, size(), kHostMemory); });
}

template <class Start>
MPI_Request MpiComm::Group::post(Collective what, Start start) {
  MPI_Request request = MPI_REQUEST_NULL;
  with_context(id_, what, [&] { start(&request); });
  return request;
}

template <class Start>
std::unique_ptr<MpiComm::Group::Request> MpiComm::Group::start(Collective what, Start start) {
  const Clock::time_point deadline = Clock::now() + timeout_;
  return std::make_unique<Request>(*this, what, post(what, start), deadline, arrivals_);
}

MPI_Status MpiComm::Group::complete(Collective what, int32_t peer, MPI_Request& request, Clock::time_point deadline,
                                    int64_t op) {
  MPI_Status status;
  std::string missing;
  const bool done = with_context(id_, what, [&] {
    return what == Collective::kRecv ? complete_by(request, deadline, status, [&] { census_.answer(); })
                                     : complete_collective(request, deadline, op, status, missing);
  });
  if (what == Collective::kRecv) missing = id_.globals({&peer, 1}) + " had not sent";
  if (!done) time_out(what, request, missing);
  return status;
}

// Waits for a collective, answering the census; near the deadline asks the
// members how far they got, which names the ranks that had not arrived.
bool MpiComm::Group::complete_collective(MPI_Request& request, Clock::time_point deadline, int64_t op,
                                         MPI_Status& status, std::string& missing) {
  const Clock::duration window = census_window(timeout_);
  if (complete_by(request, deadline - window, status, [&] { census_.answer(); })) return true;
  std::vector<int32_t> members;
  for (int32_t r = 0; r < size(); ++r) members.push_back(id_.global(r));
  int done = 0;
  // A request waited for after its deadline still gets its answers.
  const auto counts = census_.ask(key_, members, std::max(deadline, Clock::now() + window), [&] {
    check(MPI_Test(&request, &done, &status), "MPI_Test");
    return done != 0;
  });
  if (!counts) return true;
  missing = not_arrived(*counts, op, window);
  return false;
}

// "global rank 2 had not arrived (...)": the members that answered with
// fewer collectives than `op`, or did not answer at all.
std::string MpiComm::Group::not_arrived(const std::vector<std::optional<int64_t>>& counts, int64_t op,
                                        Clock::duration window) const {
  std::vector<int32_t> behind, silent;
  for (int32_t r = 0; r < size(); ++r) {
    if (!counts[size_t(r)]) silent.push_back(r);
    else if (*counts[size_t(r)] < op) behind.push_back(r);
  }
  std::string text;
  if (!silent.empty()) {
    std::ostringstream out;
    out << id_.globals(silent) << " had not arrived and did not answer within "
        << std::chrono::duration<double>(window).count()
        << " s (the process is stopped, or busy outside communication)";
    text = out.str();
  }
  if (!behind.empty())
    text += (text.empty() ? "" : "; ") + id_.globals(behind) +
            " had not arrived (waiting in an earlier collective of this group or in another group)";
  return text.empty() ? "every rank had arrived, yet MPI did not complete the collective" : text;
}

template <class Start>
MPI_Status MpiComm::Group::run(Collective what, int32_t peer, Start start) {
  const Clock::time_point deadline = Clock::now() + timeout_;
  MPI_Request request = post(what, start);
  return complete(what, peer, request, deadline, arrivals_);
}

void MpiComm::Group::time_out(Collective what, MPI_Request& request, const std::string& missing) {
  if (what == Collective::kRecv) {
    // Gives the buffer back. Collectives cannot be cancelled: should the
    // missing ranks ever arrive, MPI may still write their recv buffers.
    MPI_Cancel(&request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  broken_ = id_.context(what) + ": " + timed_out(timeout_) + "; " + missing;
  throw Error(MH_DEADLINE_EXCEEDED, broken_);
}

// Frees the copies of sends their receivers took; one still pending after
// the timeout means its receiver never came.
void MpiComm::Group::reap_sends() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    with_context(id_, Collective::kSend, [&] { check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test"); });
    if (done != 0) {
      it = sends_.erase(it);
      continue;
    }
    if (Clock::now() - it->posted >= timeout_) {
      broken_ = id_.context(Collective::kSend) + ": " + timed_out(timeout_) + "; " +
                id_.globals({&it->peer, 1}) + " had not received the message";
      throw Error(MH_DEADLINE_EXCEEDED, broken_);
    }
    ++it;
  }
}

// A send never received keeps its copy: MPI may still read it.
void MpiComm::Group::flush_sends() noexcept {
  const Clock::time_point deadline = Clock::now() + timeout_;
  for (PendingSend& s : sends_) {
    MPI_Status status;
    bool done = false;
    try {
      done = complete_by(s.request, deadline, status);
    } catch (const Error&) {
      done = true;  // MPI failed the send; it holds the buffer no longer
    }
    if (done) continue;
    std::fprintf(stderr, "megahost comm mpi: %s: a send to %s was never received; its buffer is leaked\n",
                 id_.context(Collective::kSend).c_str(), id_.globals({&s.peer, 1}).c_str());
    s.data.release();
  }
}

std::span<const MH_OptionSpec> MpiComm::options() { return kOptions; }

MpiComm::MpiComm(const CreateContext& ctx)
    : census_(to_duration(ctx.options.get_double("timeout_s"))),
      world_(duplicate_world(to_duration(ctx.options.get_double("timeout_s")), census_)),
      ranks_on_node_(ranks_on_this_node()) {
  const int64_t size = ctx.options.get_int("world_size");
  require(size == 0 || size == world_size(),
          ctx.options.key("world_size") + " = " + std::to_string(size) + ", but the launcher started " +
              std::to_string(world_size()) + " rank(s); set it to " + std::to_string(world_size()) +
              " or leave it out (mpirun -np sets the world size)");
}

void MpiComm::info(MH_CommInfo& out) const {
  out.world_size = world_size();
  out.ranks_in_process = 1;
  out.first_rank = world_rank();
  out.ranks_on_node = ranks_on_node_;
}

MpiComm::Group* MpiComm::world(int32_t local) {
  require(local == 0, "world: local rank " + std::to_string(local) +
                          " does not exist; the mpi communicator hosts one rank per process (local 0)");
  return world_.get();
}

void MpiComm::abort(int32_t rank, const char* reason) noexcept {
  std::fprintf(stderr, "megahost comm mpi: rank %d failed: %s; stopping every rank with MPI_Abort\n", rank,
               reason != nullptr ? reason : "no reason given");
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

MH_ComponentDesc mpi_component() {
  return component<MpiComm>("mpi", "0.1.0", "one process per rank under mpirun; non-blocking MPI with timeouts",
                            MpiComm::options());
}

}  // namespace mh::comm::mpi
