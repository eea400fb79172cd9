#include "convert/peft_adapter.hpp"

#include <megahost/error.hpp>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

#include "checkpoint/safetensors.hpp"
#include "checkpoint/store.hpp"
#include "convert/hf_config.hpp"
#include "convert/megahost_to_hf.hpp"

namespace mh::convert {
namespace {

struct AdapterTensor {
  std::string key;
  Matrix value;
};

// Megahost's target, the module(s) transformers' Llama names it, and where.
struct Target {
  const char* megahost;
  const char* module;  // "self_attn" or "mlp"
  std::vector<const char*> projections;
};

const Target kTargets[] = {
    {"qkv", "self_attn", {"q_proj", "k_proj", "v_proj"}}, {"proj", "self_attn", {"o_proj"}},
    {"gate", "mlp", {"gate_proj"}}, {"fc1", "mlp", {"up_proj"}}, {"fc2", "mlp", {"down_proj"}}};

Matrix rows(const Matrix& a, int64_t begin, int64_t count) {
  Matrix out{count, a.cols, {}};
  out.data.assign(a.data.begin() + begin * a.cols, a.data.begin() + (begin + count) * a.cols);
  return out;
}

// The fused QKV's B [qkv, r], laid out per key/value group, as the B of q,
// k and v; the one A serves all three, since each projection's output is
// x A^T B_part^T.
std::vector<Matrix> split_qkv_b(const Matrix& b, const ckpt::ModelShape& m) {
  const int64_t d = m.head_dim(), per_group = m.heads / m.kv();
  std::vector<Matrix> out(3, Matrix{0, b.cols, {}});
  for (int64_t g = 0, row = 0; g < m.kv(); ++g) {
    const int64_t counts[3] = {per_group * d, d, d};
    for (int k = 0; k < 3; ++k) {
      const Matrix part = rows(b, row, counts[k]);
      out[size_t(k)].data.insert(out[size_t(k)].data.end(), part.data.begin(), part.data.end());
      out[size_t(k)].rows += counts[k];
      row += counts[k];
    }
  }
  return out;
}

}  // namespace

void export_peft(const std::string& in, const std::string& out) {
  const std::string dir = ckpt::resolve_load(in, "");
  const ckpt::Metadata meta = ckpt::read_metadata(dir);
  require(!meta.peft.is_null(), dir + " holds a whole model, not LoRA adapters; export it without --peft",
          MH_INVALID_ARGUMENT);
  const ckpt::ModelShape& m = meta.model;
  require(hf_class(m) == HfClass::kLlama, dir + ": --peft writes adapters of Llama models only (GPT-2's fused "
                                                "c_attn has no q/k/v modules to put them on); export the merged model "
                                                "without --peft",
          MH_INVALID_ARGUMENT);
  const std::string base = lora_base(dir, meta);
  const int64_t r = meta.peft.value("rank", int64_t(0));
  ckpt::TensorReader reader(dir, meta);
  std::vector<AdapterTensor> tensors;
  nlohmann::json modules = nlohmann::json::array();
  for (const Target& t : kTargets) {
    bool used = false;
    for (int64_t l = 0; l < m.layers; ++l) {
      const std::string stem = "layers." + std::to_string(l) + "." + t.megahost;
      if (!meta.tensors.contains(stem + "_lora_a")) continue;
      used = true;
      const auto [rows_out, cols_in] = megahost_shape(stem + "_w", m);
      const Matrix a = read_global(reader, meta, dir, stem + "_lora_a", {r, cols_in});
      const Matrix b = read_global(reader, meta, dir, stem + "_lora_b", {rows_out, r});
      const std::vector<Matrix> bs = t.projections.size() == 3 ? split_qkv_b(b, m) : std::vector<Matrix>{b};
      for (size_t p = 0; p < t.projections.size(); ++p) {
        const std::string key = "base_model.model.model.layers." + std::to_string(l) + "." + t.module + "." +
                                t.projections[p];
        tensors.push_back({key + ".lora_A.weight", a});
        tensors.push_back({key + ".lora_B.weight", bs[p]});
      }
    }
    if (used)
      for (const char* p : t.projections) modules.push_back(p);
  }
  const nlohmann::json config = {
      {"peft_type", "LORA"},          {"task_type", "CAUSAL_LM"},  {"base_model_name_or_path", base},
      {"r", r},                        {"lora_alpha", meta.peft.value("alpha", 0.0)},
      {"lora_dropout", 0.0},           {"target_modules", modules}, {"bias", "none"},
      {"fan_in_fan_out", false},       {"inference_mode", true},    {"init_lora_weights", true},
      {"use_rslora", false},           {"modules_to_save", nullptr}};
  StagedFolder staged(out, "PEFT adapter");
  std::ofstream(staged.path() + "/adapter_config.json") << config.dump(2) << "\n";
  std::vector<safetensors::Entry> entries;
  for (const AdapterTensor& t : tensors) entries.push_back({t.key, "F32", {t.value.rows, t.value.cols}});
  safetensors::write_file(staged.path() + "/adapter_model.safetensors", entries, {{"format", "pt"}}, [&](size_t i) {
    const std::vector<float>& data = tensors[i].value.data;
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.data()), data.size() * sizeof(float));
  });
  staged.commit();
}

}  // namespace mh::convert
