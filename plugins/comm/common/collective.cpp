#include "collective.hpp"

#include <megahost/error.hpp>
#include <megahost/struct_size.hpp>

#include <numeric>
#include <string>

namespace mh::comm {

namespace {

constexpr const char* kWho = "this communicator";

size_t element_size(int32_t dtype) {
  const size_t bytes = dtype_size(dtype);
  if (bytes == 0) throw Error(MH_INVALID_ARGUMENT, "unknown dtype " + std::to_string(dtype));
  return bytes;
}

// Elements of `t`, which must be a contiguous row-major view.
int64_t numel(const MH_Tensor& t, const char* buffer) {
  const std::string what = std::string(buffer) + " buffer";
  require(t.ndim >= 0 && t.ndim <= MH_MAX_DIMS,
          what + " has ndim " + std::to_string(t.ndim) + "; it must be 0.." + std::to_string(MH_MAX_DIMS));
  int64_t n = 1;
  for (int32_t d = t.ndim - 1; d >= 0; --d) {
    require(t.shape[d] >= 0, what + " has negative extent " + std::to_string(t.shape[d]) +
                                 " in dimension " + std::to_string(d));
    require(t.shape[d] <= 1 || t.strides[d] == n,
            what + " is not contiguous: dimension " + std::to_string(d) + " has stride " +
                std::to_string(t.strides[d]) + ", expected " + std::to_string(n));
    n *= t.shape[d];
  }
  require(n == 0 || t.data != nullptr, what + " has " + std::to_string(n) + " elements but data is NULL");
  element_size(t.dtype);  // throws for an unknown dtype
  return n;
}

// The buffers a call uses; `scaled` holds one block of n per rank of the
// group, any other used buffer holds n elements.
enum class Buffer { kNone, kSend, kRecv };

struct Shape {
  bool send;
  bool recv;
  Buffer scaled = Buffer::kNone;
};

Shape shape_of(Collective kind, int32_t rank, int32_t peer) {
  switch (kind) {
    case Collective::kAllReduce: return {true, true};
    case Collective::kAllGather: return {true, true, Buffer::kRecv};
    case Collective::kReduceScatter: return {true, true, Buffer::kSend};
    case Collective::kBroadcast: return {rank == peer, true};
    case Collective::kSend: return {true, false};
    case Collective::kRecv: return {false, true};
    default: throw Error(MH_INTERNAL, std::string(name(kind)) + " takes no MH_CollectiveArgs");
  }
}

void check_header(Collective kind, const MH_CollectiveArgs& args) {
  require(args.struct_size >= MH_STRUCT_SIZE(MH_CollectiveArgs, peer),
          "MH_CollectiveArgs.struct_size is " + std::to_string(args.struct_size) + ", too small for ABI " +
              std::to_string(MH_ABI_MAJOR) + "." + std::to_string(MH_ABI_MINOR));
  const bool has_stream = reaches(args, &MH_CollectiveArgs::stream);
  require(!has_stream || args.stream == nullptr,
          "stream is set, but this communicator moves host memory only; device buffers need the "
          "nccl communicator",
          MH_UNIMPLEMENTED);
  require(!reduces(kind) || args.op == MH_REDUCE_SUM || args.op == MH_REDUCE_MAX,
          "op " + std::to_string(args.op) + " is not a reduction; use MH_REDUCE_SUM or MH_REDUCE_MAX");
}

void check_peer(Collective kind, int32_t peer, int32_t size) {
  const char* role = kind == Collective::kBroadcast ? "root " : "peer ";
  require(peer >= 0 && peer < size,
          role + std::to_string(peer) + " is not a rank of this group of " + std::to_string(size));
}

// n, from the buffer that holds it once; the other buffer must fit it.
int64_t per_rank_count(int64_t send_n, int64_t recv_n, Shape shape, int32_t size) {
  if (shape.scaled != Buffer::kNone) {
    const bool gather = shape.scaled == Buffer::kRecv;
    const int64_t n = gather ? send_n : recv_n, scaled = gather ? recv_n : send_n;
    const char* one = gather ? "send" : "recv";
    const char* many = gather ? "recv" : "send";
    require(scaled == n * size, std::string(many) + " has " + std::to_string(scaled) +
                                    " elements; it must have group size x " + one + " = " + std::to_string(size) +
                                    " x " + std::to_string(n) + " = " + std::to_string(n * size));
    return n;
  }
  if (!shape.send || !shape.recv) return shape.send ? send_n : recv_n;
  require(recv_n == send_n, "recv has " + std::to_string(recv_n) + " elements but send has " +
                                std::to_string(send_n) + "; they must be equal");
  return send_n;
}

// group size counts from `counts`, each non-negative; their sum must fit `n`.
std::vector<int64_t> block_counts(const int64_t* counts, int32_t size, int64_t n, const char* which,
                                  const char* buffer) {
  require(size == 0 || counts != nullptr, std::string(which) + " is NULL; it needs one count per group rank");
  std::vector<int64_t> out(counts, counts + size);
  int64_t sum = 0;
  for (int32_t p = 0; p < size; ++p) {
    require(out[p] >= 0, std::string(which) + "[" + std::to_string(p) + "] is " + std::to_string(out[p]) +
                             "; counts must be >= 0");
    sum += out[p];
  }
  require(sum <= n, std::string(which) + " sum to " + std::to_string(sum) + " elements but " + buffer + " has " +
                        std::to_string(n));
  return out;
}

}  // namespace

int64_t offset_of(const std::vector<int64_t>& counts, int32_t peer) {
  return std::accumulate(counts.begin(), counts.begin() + peer, int64_t{0});
}

Call validate(const MH_AllToAllArgs& args, int32_t size, Placement device) {
  require(args.struct_size >= MH_STRUCT_SIZE(MH_AllToAllArgs, recv_counts),
          "MH_AllToAllArgs.struct_size is " + std::to_string(args.struct_size) + ", too small for ABI " +
              std::to_string(MH_ABI_MAJOR) + "." + std::to_string(MH_ABI_MINOR));
  require(!reaches(args, &MH_AllToAllArgs::stream) || args.stream == nullptr,
          "stream is set, but this communicator moves host memory only; device buffers need the "
          "nccl communicator",
          MH_UNIMPLEMENTED);
  require_on_device("send", args.send, device, kWho);
  require_on_device("recv", args.recv, device, kWho);
  const int64_t send_n = numel(args.send, "send"), recv_n = numel(args.recv, "recv");
  require(args.send.dtype == args.recv.dtype, std::string("send is ") + dtype_name(args.send.dtype) +
                                                  " but recv is " + dtype_name(args.recv.dtype));
  Call call;
  call.kind = Collective::kAllToAll;
  call.send = args.send.data;
  call.recv = args.recv.data;
  call.dtype = args.send.dtype;
  call.element_size = element_size(call.dtype);
  call.send_counts = block_counts(args.send_counts, size, send_n, "send_counts", "send");
  call.recv_counts = block_counts(args.recv_counts, size, recv_n, "recv_counts", "recv");
  call.count = offset_of(call.recv_counts, size);
  const auto* send = static_cast<const std::byte*>(call.send);
  const auto* recv = static_cast<const std::byte*>(call.recv);
  const size_t send_bytes = size_t(offset_of(call.send_counts, size)) * call.element_size;
  require(send_bytes == 0 || call.bytes() == 0 || send + send_bytes <= recv || recv + call.bytes() <= send,
          "send and recv overlap; all_to_all does not run in place");
  return call;
}

const char* name(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kSend: return "send";
    case Collective::kRecv: return "recv";
    case Collective::kBarrier: return "barrier";
    case Collective::kSplit: return "split";
    case Collective::kAllToAll: return "all_to_all";
  }
  return "?";
}

bool reduces(Collective c) { return c == Collective::kAllReduce || c == Collective::kReduceScatter; }

bool reducible(int32_t dtype) { return dtype == MH_F32 || dtype == MH_I32 || dtype == MH_I64; }

Call validate(Collective kind, const MH_CollectiveArgs& args, int32_t rank, int32_t size, Placement device) {
  check_header(kind, args);
  const bool rooted = kind == Collective::kBroadcast || kind == Collective::kSend || kind == Collective::kRecv;
  if (rooted) check_peer(kind, args.peer, size);
  const Shape shape = shape_of(kind, rank, args.peer);
  if (shape.send) require_on_device("send", args.send, device, kWho);
  if (shape.recv) require_on_device("recv", args.recv, device, kWho);
  const int64_t send_n = shape.send ? numel(args.send, "send") : 0;
  const int64_t recv_n = shape.recv ? numel(args.recv, "recv") : 0;
  const int32_t dtype = shape.send ? args.send.dtype : args.recv.dtype;
  if (shape.send && shape.recv)
    require(args.send.dtype == args.recv.dtype, std::string("send is ") + dtype_name(args.send.dtype) +
                                                    " but recv is " + dtype_name(args.recv.dtype));
  require(!reduces(kind) || reducible(dtype),
          std::string("reductions support f32, i32 and i64, not ") + dtype_name(dtype), MH_UNIMPLEMENTED);
  Call call;
  call.kind = kind;
  call.send = shape.send ? args.send.data : nullptr;
  call.recv = shape.recv ? args.recv.data : nullptr;
  call.count = per_rank_count(send_n, recv_n, shape, size);
  call.dtype = dtype;
  call.element_size = element_size(dtype);
  call.op = reduces(kind) ? args.op : MH_REDUCE_SUM;
  call.peer = rooted ? args.peer : 0;
  return call;
}

}  // namespace mh::comm
