#include "convert/megahost_to_hf.hpp"

#include <megahost/error.hpp>

#include "checkpoint/store.hpp"
#include "checkpoint/tensor_reader.hpp"
#include "convert/hf_config.hpp"
#include "convert/hf_tokenizer_files.hpp"
#include "convert/tensor_map.hpp"

namespace mh::convert {

Matrix read_global(ckpt::TensorReader& reader, const ckpt::Metadata& meta, const std::string& dir,
                   const std::string& name, const std::array<int64_t, 2>& shape) {
  auto it = meta.tensors.find(name);
  require(it != meta.tensors.end(), dir + "/" + ckpt::kMetadataFile + ": tensor '" + name +
                                        "' is missing from the index; the checkpoint is not of the model it describes");
  require(it->second.shape == shape, dir + ": tensor '" + name + "' is [" + std::to_string(it->second.shape[0]) + ", " +
                                         std::to_string(it->second.shape[1]) + "], its model makes it [" +
                                         std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + "]");
  Matrix t{shape[0], shape[1], std::vector<float>(size_t(shape[0] * shape[1]))};
  const int64_t covered = reader.read(name, it->second, ckpt::Rect{0, 0, shape[0], shape[1]}, t.data.data());
  require(covered == shape[0] * shape[1], dir + ": tensor '" + name + "': its slices cover " + std::to_string(covered) +
                                              " of " + std::to_string(shape[0] * shape[1]) + " elements");
  return t;
}

namespace {

// w [out, in] += scale * b [out, r] @ a [r, in].
void add_low_rank(Matrix& w, const Matrix& b, const Matrix& a, float scale) {
  for (int64_t o = 0; o < w.rows; ++o)
    for (int64_t k = 0; k < b.cols; ++k) {
      const float s = scale * b.data[size_t(o * b.cols + k)];
      if (s == 0) continue;
      for (int64_t i = 0; i < w.cols; ++i) w.data[size_t(o * w.cols + i)] += s * a.data[size_t(k * a.cols + i)];
    }
}

}  // namespace

std::string lora_base(const std::string& dir, const ckpt::Metadata& meta) {
  const std::string base = meta.peft.value("base", std::string());
  require(!base.empty(), dir + " holds LoRA adapters of the seed's initial model, which no checkpoint holds; train "
                               "them on a peft.base to export them",
          MH_INVALID_ARGUMENT);
  return base;
}

std::string export_hf(const std::string& in, const std::string& out, const ShardOptions& options) {
  const std::string dir = ckpt::resolve_load(in, "");
  const ckpt::Metadata meta = ckpt::read_metadata(dir);
  // A LoRA checkpoint exports its base with the adapters merged: W + (alpha / r) B A.
  const bool lora = !meta.peft.is_null();
  const std::string weights_dir = lora ? lora_base(dir, meta) : dir;
  const ckpt::Metadata weights_meta = lora ? ckpt::read_metadata(weights_dir) : meta;
  const int64_t rank = lora ? meta.peft.value("rank", int64_t(0)) : 0;
  const float scale = lora ? float(meta.peft.value("alpha", 0.0) / double(rank)) : 0.f;
  ckpt::ModelShape shape = meta.model;
  std::string note;
  if (shape.vocab_size == 0) {
    shape.vocab_size = shape.vocab;
    note = dir + " predates the recorded vocabulary size: all " + std::to_string(shape.vocab) +
           " rows of the padded vocabulary are exported (vocab_size " + std::to_string(shape.vocab) + ")";
  }
  const HfClass cls = hf_class(shape);
  const std::string prefix = cls == HfClass::kGpt2 ? "transformer." : "model.";
  const std::vector<Link> links = model_links(shape);
  std::vector<HfEntry> entries;
  std::vector<std::pair<size_t, size_t>> source;  // entry -> (link, its k-th HF tensor)
  for (size_t l = 0; l < links.size(); ++l) {
    const auto shapes = hf_shapes(links[l], shape);
    for (size_t k = 0; k < links[l].hf.size(); ++k) {
      const std::string& name = links[l].hf[k];
      entries.push_back({name == "lm_head.weight" ? name : prefix + name, shapes[k]});
      source.emplace_back(l, k);
    }
  }
  ckpt::TensorReader reader(weights_dir, weights_meta), adapters(dir, meta);
  // The merged weight of link `megahost` ("layers.3.qkv_w"): its adapter is "layers.3.qkv_lora_a" / "_lora_b".
  auto weight = [&](const std::string& name) {
    const std::array<int64_t, 2> dims = megahost_shape(name, shape);
    Matrix w = read_global(reader, weights_meta, weights_dir, name, dims);
    const std::string stem = name.ends_with("_w") ? name.substr(0, name.size() - 2) : "";
    if (lora && !stem.empty() && meta.tensors.contains(stem + "_lora_a"))
      add_low_rank(w, read_global(adapters, meta, dir, stem + "_lora_b", {dims[0], rank}),
                   read_global(adapters, meta, dir, stem + "_lora_a", {rank, dims[1]}), scale);
    return w;
  };
  size_t cached = links.size();
  std::vector<HfTensor> tensors;  // the HF tensors of link `cached`
  const std::string torch_dtype = options.dtype == "BF16" ? "bfloat16" : "float32";
  const std::vector<FolderFile> files = tokenizer_files(meta.tokenizer, shape);
  if (files.empty()) note += (note.empty() ? "" : "; ") + dir + " predates the recorded tokenizer: no tokenizer files are written";
  write_hf_folder(out, hf_config_json(shape, torch_dtype, special_ids(meta.tokenizer)), files, entries, options,
                  [&](size_t i) -> const std::vector<float>& {
                    const auto [l, k] = source[i];
                    if (l != cached) {
                      const Link& link = links[l];
                      tensors = to_hf(link, shape, weight(link.megahost));
                      cached = l;
                    }
                    return tensors[k].data;
                  });
  return note;
}

}  // namespace mh::convert
