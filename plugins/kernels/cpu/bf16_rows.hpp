// How the cpu component runs its f32 op loops on bf16 tensors without
// staging them whole: each thread takes blocks of rows, widens the bf16 rows
// of a block into its own f32 buffer (a few dozen KiB, so they stay in L1/L2),
// runs the f32 loop on the block and rounds the rows it wrote back. Memory
// sees each bf16 tensor once, at two bytes an element; the f32 copies never
// leave the cache. f32 tensors are passed through as they are. The result is
// what converting the whole tensor first would give (the same f32 loop, one
// rounding per element written), which is bf16 storage with f32 compute as
// the cuda kernels define it.
#pragma once

#include <megahost/abi.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "ops/ops.hpp"

#include <omp.h>

namespace mh::kernels::cpu {

// Vector conversions: AVX-512 where the CPU has it (checked once, capped by
// ONEDNN_MAX_CPU_ISA like the GEMMs), else a loop the compiler vectorises;
// bit for bit the conversions of bf16.hpp.
void widen_row(float* out, const uint16_t* in, int64_t n);
void narrow_row(uint16_t* out, const float* in, int64_t n);

// out = x over n contiguous elements, converting between f32 and bf16
// (round to nearest even) where their dtypes differ; out == x does nothing.
void convert(void* out, int32_t out_type, const void* x, int32_t x_type, int64_t n, int threads);

// A tensor of [groups, rows, cols] the op reads and/or writes: row r of
// group g starts at g * group_stride + r * row_stride elements.
struct RowView {
  void* data;  // NULL for an absent optional tensor: passed on as NULL
  int32_t dtype;  // MH_F32 or MH_BF16
  int64_t cols, row_stride, group_stride;
  bool read, written;
};

// A view of one tensor over a block of rows, as the f32 loop takes it.
struct F32Block {
  float* data;
  int64_t ld;  // elements between rows
};

inline RowView rows_of(const MH_Tensor& t, int64_t cols, int64_t row_stride, bool read, bool written,
                       int64_t group_stride = 0) {
  return {t.data, t.dtype, cols, row_stride, group_stride, read, written};
}

// Elements per block and tensor: 64 KiB of f32, L2-resident with room for
// the op's other tensors.
constexpr int64_t kBlockElements = 16384;

// Calls body(blocks, group, first_row, rows, thread) over every block of
// rows of `groups` x `rows` (blocks never span two groups), split between
// the team in a fixed order: thread t always gets the same blocks, so a body
// that accumulates into per-thread partial sums is deterministic. `work` is
// the elements of the whole op, for the team size.
template <size_t K, class Body>
void for_row_blocks(int threads, int64_t groups, int64_t rows, const std::array<RowView, K>& views, Body body) {
  int64_t cols = 1;
  for (const RowView& v : views) cols = std::max(cols, v.cols);
  const int64_t block = std::max<int64_t>(1, kBlockElements / cols);
  const int64_t per_group = (rows + block - 1) / block, blocks = groups * per_group;
  if (blocks == 0) return;
#pragma omp parallel num_threads(team(threads, groups * rows * cols))
  {
    std::array<std::vector<float>, K> scratch;
    for (size_t i = 0; i < K; ++i)
      if (views[i].data != nullptr && views[i].dtype == MH_BF16)
        scratch[i].resize(static_cast<size_t>(std::min(block, rows) * views[i].cols));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t g = b / per_group, r0 = (b % per_group) * block, n = std::min(block, rows - r0);
      std::array<F32Block, K> f{};
      for (size_t i = 0; i < K; ++i) {
        const RowView& v = views[i];
        const int64_t first = g * v.group_stride + r0 * v.row_stride;
        if (v.data == nullptr) continue;
        if (v.dtype != MH_BF16) {
          f[i] = {static_cast<float*>(v.data) + first, v.row_stride};
          continue;
        }
        f[i] = {scratch[i].data(), v.cols};
        if (!v.read) continue;
        const uint16_t* in = static_cast<const uint16_t*>(v.data) + first;
        for (int64_t r = 0; r < n; ++r) widen_row(f[i].data + r * v.cols, in + r * v.row_stride, v.cols);
      }
      body(f, g, r0, n, omp_get_thread_num());
      for (size_t i = 0; i < K; ++i) {
        const RowView& v = views[i];
        if (v.data == nullptr || v.dtype != MH_BF16 || !v.written) continue;
        uint16_t* out = static_cast<uint16_t*>(v.data) + g * v.group_stride + r0 * v.row_stride;
        for (int64_t r = 0; r < n; ++r) narrow_row(out + r * v.row_stride, f[i].data + r * v.cols, v.cols);
      }
    }
  }
}

// A contiguous tensor an element-wise op reads and/or writes.
struct FlatView {
  void* data;  // NULL for an absent optional tensor
  int32_t dtype;  // MH_F32 or MH_BF16
  bool read, written;
};

inline FlatView flat(const MH_Tensor& t, bool read, bool written) { return {t.data, t.dtype, read, written}; }

// for_row_blocks over n contiguous elements: body(blocks, first, count,
// thread) gets elements [first, first + count), contiguous in every view.
template <size_t K, class Body>
void for_flat_blocks(int threads, int64_t n, const std::array<FlatView, K>& views, Body body) {
  constexpr int64_t kRow = 1024;
  const int64_t rows = n / kRow, tail = n - rows * kRow;
  auto as_rows = [&](int64_t first, int64_t cols) {
    std::array<RowView, K> v{};
    for (size_t i = 0; i < K; ++i) {
      const FlatView& f = views[i];
      const size_t bytes = f.dtype == MH_BF16 ? 2 : 4;
      void* data = f.data == nullptr ? nullptr : static_cast<char*>(f.data) + first * bytes;
      v[i] = {data, f.dtype, cols, cols, 0, f.read, f.written};
    }
    return v;
  };
  for_row_blocks(threads, 1, rows, as_rows(0, kRow), [&](auto& f, int64_t, int64_t r0, int64_t count, int t) {
    body(f, r0 * kRow, count * kRow, t);
  });
  if (tail == 0) return;
  for_row_blocks(threads, 1, 1, as_rows(rows * kRow, tail),
                 [&](auto& f, int64_t, int64_t, int64_t, int t) { body(f, rows * kRow, tail, t); });
}

// A parameter vector (a norm's scale, a bias: n elements) as f32: the
// tensor itself, or a converted copy when it is bf16.
class F32Vector {
 public:
  F32Vector(const MH_Tensor& t, int64_t n);
  const float* get() const { return data_; }

 private:
  std::vector<float> copy_;
  const float* data_;
};

// Per-thread partial sums of a vector (a parameter's gradient) over the
// row blocks a thread ran, added into the tensor in thread order at the end,
// so the sum is the same on every run with the same team.
class Partials {
 public:
  Partials(int threads, int64_t n) : n_(n), sums_(static_cast<size_t>(threads * n), 0.0f) {}
  float* of(int thread) { return sums_.data() + thread * n_; }
  // t += the partials, t f32 or bf16 (rounded once)
  void add_into(const MH_Tensor& t) const;

 private:
  int64_t n_;
  std::vector<float> sums_;
};

}  // namespace mh::kernels::cpu
