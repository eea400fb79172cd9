#include "hf_fixture.hpp"

#include <megahost/error.hpp>

#include <unistd.h>

#include <random>

namespace mh::convert::testing {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("megahost_convert_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(p);
  return p;
}

ckpt::ModelShape tiny_gpt2() {
  ckpt::ModelShape m{2, 8, 2, 32, 16, 256};
  m.vocab_size = 200;
  return m;
}

ckpt::ModelShape tiny_llama() {
  ckpt::ModelShape m{2, 8, 4, 12, 16, 256};
  m.vocab_size = 130;
  m.arch = "llama";
  m.normalization = "rmsnorm";
  m.position = "rope";
  m.activation = "swiglu";
  m.kv_heads = 2;
  m.tie_embeddings = false;
  m.bias = false;
  m.norm_eps = 1e-6;
  return m;
}

std::map<std::string, HfTensor> random_tensors(const ckpt::ModelShape& m, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  const std::string prefix = hf_class(m) == HfClass::kGpt2 ? "transformer." : "model.";
  std::map<std::string, HfTensor> out;
  for (const Link& l : model_links(m)) {
    const auto shapes = hf_shapes(l, m);
    for (size_t k = 0; k < l.hf.size(); ++k) {
      HfTensor t{shapes[k], {}};
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      for (int64_t i = 0; i < n; ++i) t.data.push_back(normal(gen));
      out[l.hf[k] == "lm_head.weight" ? l.hf[k] : prefix + l.hf[k]] = std::move(t);
    }
  }
  return out;
}

void write_folder(const fs::path& dir, const ckpt::ModelShape& m, const std::map<std::string, HfTensor>& tensors,
                  const ShardOptions& options) {
  std::vector<HfEntry> entries;
  std::vector<const std::vector<float>*> data;
  for (const auto& [name, t] : tensors) {
    entries.push_back({name, t.shape});
    data.push_back(&t.data);
  }
  write_hf_folder(dir.string(), hf_config_json(m, options.dtype == "BF16" ? "bfloat16" : "float32"), {}, entries, options,
                  [&](size_t i) -> const std::vector<float>& { return *data[i]; });
}

std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace mh::convert::testing
