// How the cpu component runs its f32 op loops on bf16 tensors: each op reads
// every bf16 tensor it takes into f32 scratch, runs the f32 loop there and
// rounds what it wrote back to bf16. That is "bf16 storage, f32 compute"
// exactly as the cuda kernels define it (they also convert on load and round
// on store), one loop per op instead of one per dtype combination. The
// conversions cost memory traffic, not accuracy: this mode is for checking
// mixed precision on a machine without a GPU, not for speed.
//
// The scratch is host heap, outside the engine's accounting (which counts
// what a device would hold: the bf16 tensors themselves).
#pragma once

#include <megahost/abi.h>

#include <cstdint>
#include <vector>

namespace mh::kernels::cpu {

class F32Staging {
 public:
  explicit F32Staging(int threads) : threads_(threads) {}
  F32Staging(const F32Staging&) = delete;
  F32Staging& operator=(const F32Staging&) = delete;

  // The memory of `t` as f32 (NULL for a tensor without data): `t` itself
  // when it is f32, else an f32 copy laid out like it (same strides). A
  // second call for the same address returns the same copy, so an output
  // that aliases an input stays aliased.
  const float* in(const MH_Tensor& t) { return stage(t, false); }
  // As in(), for a tensor the op writes (or accumulates into): its copy is
  // rounded back to bf16 by write_back().
  float* out(const MH_Tensor& t) { return stage(t, true); }
  // Rounds every staged output back into its bf16 tensor. Call once, after
  // the op.
  void write_back();

 private:
  struct Staged {
    void* data;
    int64_t span;  // elements from the first to one past the last the view reaches
    bool written;
    std::vector<float> copy;
  };
  float* stage(const MH_Tensor& t, bool written);

  int threads_;
  std::vector<Staged> staged_;
};

}  // namespace mh::kernels::cpu
