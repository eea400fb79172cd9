#include "data_movement.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace mh::comm::threads {

namespace {

struct Sum {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;  // integers wrap instead of overflowing
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};

struct Max {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return (b > a || std::isnan(b)) ? b : a;  // a NaN wins, so overflow checks see it
    } else {
      return std::max(a, b);
    }
  }
};

// Reduced tiles live on the stack and stay in L1 while they are written out.
constexpr size_t kTileBytes = 16 * 1024;

template <class T>
const T* send_of(const Post& p, int64_t offset) {
  return static_cast<const T*>(p.call.send) + offset;
}

template <class T>
T* recv_of(const Post& p, int64_t offset) {
  return static_cast<T*>(p.call.recv) + offset;
}

// out[0, n) = op over ranks, in rank order, of send[offset, offset + n).
template <class T, class Op>
void reduce_into(std::span<const Post> posts, int64_t offset, int64_t n, T* out) {
  std::copy_n(send_of<T>(posts[0], offset), n, out);
  for (size_t r = 1; r < posts.size(); ++r) {
    const T* in = send_of<T>(posts[r], offset);
    for (int64_t i = 0; i < n; ++i) out[i] = Op{}(out[i], in[i]);
  }
}

// Reduces send elements [first, first + n) tile by tile into a stack buffer
// (recv may alias send) and hands each tile to deliver(tile, done, len).
template <class T, class Op, class Deliver>
void reduce_tiles(std::span<const Post> posts, int64_t first, int64_t n, Deliver deliver) {
  constexpr int64_t kTile = kTileBytes / sizeof(T);
  alignas(64) T tile[kTile];
  for (int64_t done = 0; done < n; done += kTile) {
    const int64_t len = std::min(kTile, n - done);
    reduce_into<T, Op>(posts, first + done, len, tile);
    deliver(tile, done, len);
  }
}

// Rank r reduces chunk r for every rank, so each rank reads and writes n
// elements whatever the group size; chunks are whole cache lines so no two
// ranks write the same line.
template <class T, class Op>
void all_reduce(std::span<const Post> posts, int32_t rank) {
  const int64_t n = posts[rank].call.count;
  const int64_t size = static_cast<int64_t>(posts.size());
  constexpr int64_t kLine = 64 / sizeof(T);
  const int64_t chunk = (n + size - 1) / size;
  const int64_t aligned = (chunk + kLine - 1) / kLine * kLine;
  const int64_t first = std::min(n, rank * aligned);
  const int64_t last = std::min(n, first + aligned);
  reduce_tiles<T, Op>(posts, first, last - first, [&](const T* tile, int64_t done, int64_t len) {
    for (const Post& p : posts) std::copy_n(tile, len, recv_of<T>(p, first + done));
  });
}

template <class T, class Op>
void reduce_scatter(std::span<const Post> posts, int32_t rank) {
  const int64_t n = posts[rank].call.count;
  reduce_tiles<T, Op>(posts, rank * n, n, [&](const T* tile, int64_t done, int64_t len) {
    std::copy_n(tile, len, recv_of<T>(posts[rank], done));
  });
}

template <class T, class Op>
void reduce(std::span<const Post> posts, int32_t rank) {
  if (posts[rank].call.kind == Collective::kAllReduce)
    all_reduce<T, Op>(posts, rank);
  else
    reduce_scatter<T, Op>(posts, rank);
}

template <class T>
void reduce_as(std::span<const Post> posts, int32_t rank) {
  if (posts[rank].call.op == MH_REDUCE_MAX)
    reduce<T, Max>(posts, rank);
  else
    reduce<T, Sum>(posts, rank);
}

// The dtypes here are the ones reducible() admits.
void reduce_any(std::span<const Post> posts, int32_t rank) {
  switch (posts[rank].call.dtype) {
    case MH_F32: return reduce_as<float>(posts, rank);
    case MH_I32: return reduce_as<int32_t>(posts, rank);
    case MH_I64: return reduce_as<int64_t>(posts, rank);
  }
}

// Copies unless the caller already placed the data there (in-place use).
void copy(void* dst, const void* src, size_t bytes) {
  if (dst != src) std::memcpy(dst, src, bytes);
}

void all_gather(std::span<const Post> posts, int32_t rank) {
  const size_t bytes = posts[rank].call.bytes();
  auto* out = static_cast<std::byte*>(posts[rank].call.recv);
  for (size_t r = 0; r < posts.size(); ++r) copy(out + r * bytes, posts[r].call.send, bytes);
}

void broadcast(std::span<const Post> posts, int32_t rank) {
  const Call& mine = posts[rank].call;
  copy(mine.recv, posts[mine.peer].call.send, mine.bytes());
}

// Each rank pulls its block from every peer's send.
void all_to_all(std::span<const Post> posts, int32_t rank) {
  const Call& mine = posts[rank].call;
  auto* out = static_cast<std::byte*>(mine.recv);
  for (size_t q = 0; q < posts.size(); ++q) {
    const Call& from = posts[q].call;
    const size_t bytes = size_t(mine.recv_counts[q]) * mine.element_size;
    if (bytes == 0) continue;
    const auto* in = static_cast<const std::byte*>(from.send) + size_t(offset_of(from.send_counts, rank)) * from.element_size;
    std::memcpy(out + size_t(offset_of(mine.recv_counts, int32_t(q))) * mine.element_size, in, bytes);
  }
}

}  // namespace

void move_data(std::span<const Post> posts, int32_t rank) {
  if (posts[rank].call.count == 0) return;
  switch (posts[rank].call.kind) {
    case Collective::kAllReduce:
    case Collective::kReduceScatter: return reduce_any(posts, rank);
    case Collective::kAllGather: return all_gather(posts, rank);
    case Collective::kBroadcast: return broadcast(posts, rank);
    case Collective::kAllToAll: return all_to_all(posts, rank);
    default: return;
  }
}

}  // namespace mh::comm::threads
