// How each Megahost global tensor (docs/checkpoint.md) relates to the
// Hugging Face tensors of the same model: one Link per Megahost tensor, the
// HF names it is made of and the transform between them, so that import and
// export are the same table read in opposite directions.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/metadata.hpp"

namespace mh::convert {

// A tensor as a Hugging Face file holds it, in f32.
struct HfTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// A Megahost global tensor: row-major [rows, cols] f32.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;
};

enum class Transform {
  kSame,       // the same elements; a vector [n] is Megahost's [1, n]
  kTranspose,  // GPT-2's Conv1D stores [in, out], Megahost [out, in]
  kVocab,      // rows: HF's vocab_size, Megahost's padded with zero rows (trimmed on export)
  kPositions,  // learned positions: Megahost keeps the first seq_len rows
  kFusedQkv,   // GPT-2's c_attn: [in, 3 out], the columns all q, then all k, then all v
  kSplitQkv,   // Llama's q_proj, k_proj, v_proj
  kStack,      // experts: Megahost stacks the HF tensors' rows, one block per expert
};

struct Link {
  std::string megahost;         // "layers.0.qkv_w"
  std::vector<std::string> hf;  // without the "transformer." / "model." prefix
  Transform transform = Transform::kSame;
};

// The links of `m`'s class (hf_class), in Megahost's tensor order.
std::vector<Link> model_links(const ckpt::ModelShape& m);

// The global shape of Megahost tensor `name` in model `m`.
std::array<int64_t, 2> megahost_shape(const std::string& name, const ckpt::ModelShape& m);
// The shapes of the link's HF tensors, in the order of `link.hf`.
std::vector<std::vector<int64_t>> hf_shapes(const Link& link, const ckpt::ModelShape& m);

// Import: the Megahost tensor from its HF tensors (`hf(name)`); throws
// naming the HF tensor whose shape is not the model's.
Matrix to_megahost(const Link& link, const ckpt::ModelShape& m, const std::function<HfTensor(const std::string&)>& hf);
// Export: the link's HF tensors from the Megahost tensor.
std::vector<HfTensor> to_hf(const Link& link, const ckpt::ModelShape& m, const Matrix& t);

}  // namespace mh::convert
