#include "checkpoint/metadata.hpp"

#include <megahost/error.hpp>

#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

#include "checkpoint/json_limits.hpp"
#include "checkpoint/safetensors.hpp"
#include "checkpoint/slice_cover.hpp"
#include "data/regular_file.hpp"

namespace mh::ckpt {
namespace {

using json = nlohmann::json;

constexpr const char* kChecksumKey = "checksum";

nlohmann::ordered_json rect_json(const Rect& r) { return {{"offset", {r.row, r.col}}, {"shape", {r.rows, r.cols}}}; }

// Whether `v` is an integer that T holds: get<T> of 2^70 (read as a double)
// or of -1 as unsigned would wrap silently.
template <class T>
bool integer_fits(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max());
  return v.is_number_integer() && std::is_signed_v<T>;
}

// Reads field `key` of `j` as T, throwing a message that names the field.
template <class T>
T field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw Error(MH_INVALID_ARGUMENT, where + ": missing '" + key + "'");
  const json& v = j.at(key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    require(integer_fits<T>(v), where + ": '" + key + "' must be an integer from " +
                                    std::to_string(std::numeric_limits<T>::min()) + " to " +
                                    std::to_string(std::numeric_limits<T>::max()) + ", got " + v.dump());
  try {
    return v.get<T>();
  } catch (const json::exception&) {
    throw Error(MH_INVALID_ARGUMENT, where + ": '" + key + "' has the wrong type");
  }
}

// Field `key` of `j`, which must be a JSON object.
json object_field(const json& j, const char* key, const std::string& where) {
  json v = field<json>(j, key, where);
  require(v.is_object(), where + ": '" + key + "' must be a JSON object, got " + std::string(v.type_name()) +
                             "; the file was edited or damaged: load an earlier checkpoint");
  return v;
}

std::array<int64_t, 2> pair(const json& j, const char* key, const std::string& where) {
  auto v = field<std::vector<int64_t>>(j, key, where);
  require(v.size() == 2 && v[0] >= 0 && v[1] >= 0, where + ": '" + key + "' must be two non-negative integers");
  return {v[0], v[1]};
}

// Field `key` of `j` as T, or `fallback` when absent (checkpoints written
// before the field existed).
template <class T>
T optional_field(const json& j, const char* key, T fallback, const std::string& where) {
  return j.contains(key) ? field<T>(j, key, where) : fallback;
}

std::string choice(const json& j, const char* key, const std::string& fallback, std::initializer_list<const char*> allowed,
                   const std::string& where) {
  const std::string v = optional_field<std::string>(j, key, fallback, where);
  for (const char* a : allowed)
    if (v == a) return v;
  throw Error(MH_INVALID_ARGUMENT, where + ": '" + key + "' is \"" + v + "\", which this Megahost does not know");
}

ModelShape parse_model(const json& j, const std::string& where) {
  ModelShape m{field<int64_t>(j, "layers", where), field<int64_t>(j, "hidden", where), field<int64_t>(j, "heads", where),
               field<int64_t>(j, "ffn_hidden", where), field<int64_t>(j, "seq_len", where), field<int64_t>(j, "vocab", where)};
  m.head_size = optional_field<int64_t>(j, "head_dim", 0, where);
  require(m.layers > 0 && m.hidden > 0 && m.heads > 0 && m.ffn > 0 && m.seq_len > 0 && m.vocab > 0 &&
              m.head_size >= 0 && (m.head_size > 0 || m.hidden % m.heads == 0),
          where + ": layers, hidden, heads, ffn_hidden, seq_len and vocab must be positive, heads dividing hidden "
                  "unless head_dim is given");
  const ModelShape gpt2;
  m.vocab_size = optional_field<int64_t>(j, "vocab_size", 0, where);
  m.max_positions = optional_field<int64_t>(j, "max_positions", 0, where);
  require(m.max_positions == 0 || m.max_positions >= m.seq_len,
          where + ": max_positions must be 0 or at least seq_len");
  m.arch = choice(j, "arch", gpt2.arch, {"gpt2", "llama"}, where);
  m.normalization = choice(j, "normalization", gpt2.normalization, {"layernorm", "rmsnorm"}, where);
  m.position = choice(j, "position", gpt2.position, {"learned", "rope"}, where);
  m.rope_theta = optional_field<double>(j, "rope_theta", gpt2.rope_theta, where);
  m.activation = choice(j, "activation", gpt2.activation, {"gelu", "swiglu"}, where);
  m.kv_heads = optional_field<int64_t>(j, "kv_heads", 0, where);
  m.tie_embeddings = optional_field<bool>(j, "tie_embeddings", gpt2.tie_embeddings, where);
  m.bias = optional_field<bool>(j, "bias", gpt2.bias, where);
  m.norm_eps = optional_field<double>(j, "norm_eps", gpt2.norm_eps, where);
  m.experts = optional_field<int64_t>(j, "experts", 0, where);
  m.router_topk = optional_field<int64_t>(j, "router_topk", gpt2.router_topk, where);
  m.moe_ffn = optional_field<int64_t>(j, "moe_ffn_hidden", 0, where);
  m.router_norm_topk = optional_field<bool>(j, "router_norm_topk", gpt2.router_norm_topk, where);
  m.router_aux_loss_coef = optional_field<double>(j, "router_aux_loss_coef", 0, where);
  m.shared_experts = optional_field<int64_t>(j, "shared_experts", 0, where);
  m.shared_ffn = optional_field<int64_t>(j, "shared_expert_ffn_hidden", 0, where);
  m.shared_expert_gate = optional_field<bool>(j, "shared_expert_gate", false, where);
  m.qkv_bias = optional_field<bool>(j, "qkv_bias", false, where);
  m.qk_norm = optional_field<bool>(j, "qk_norm", false, where);
  require(m.shared_experts >= 0 && m.shared_ffn >= 0 && (m.shared_experts == 0 || m.experts > 0),
          where + ": shared_experts and shared_expert_ffn_hidden must be non-negative, and shared experts need "
                  "experts > 0");
  require(m.experts >= 0 && m.moe_ffn >= 0 && (m.experts == 0 || (m.router_topk >= 1 && m.router_topk <= m.experts)),
          where + ": experts and moe_ffn_hidden must be non-negative, router_topk between 1 and experts");
  require(m.vocab_size >= 0 && m.vocab_size <= m.vocab && m.kv_heads >= 0 && (m.kv() <= m.heads && m.heads % m.kv() == 0),
          where + ": vocab_size must lie in [0, vocab] and kv_heads divide heads");
  return m;
}

Layout parse_layout(const json& j, const std::string& where) {
  return Layout{field<int64_t>(j, "tensor", where),         field<int64_t>(j, "pipeline", where),
                field<int64_t>(j, "data", where),           field<int64_t>(j, "virtual_stages", where),
                field<int64_t>(j, "world", where),          field<bool>(j, "sequence_parallel", where),
                field<bool>(j, "distributed_optimizer", where)};
}

TensorEntry parse_tensor(const std::string& name, const json& j, const Metadata& m, const std::string& path) {
  const std::string where = path + ": tensor '" + name + "'";
  TensorEntry t{pair(j, "shape", where), field<std::string>(j, "dtype", where), {}};
  require(t.dtype == "F32", where + ": dtype " + t.dtype + " (this version reads F32)");
  const json slices = field<json>(j, "slices", where);
  for (const json& s : slices) {
    auto offset = pair(s, "offset", where), shape = pair(s, "shape", where);
    SliceRef ref{field<std::string>(s, "file", where), field<std::string>(s, "key", where),
                 Rect{offset[0], offset[1], shape[0], shape[1]}};
    require(m.files.count(ref.file) == 1, where + ": slice in '" + ref.file + "', which the index does not list");
    // Subtractions: offset + shape could pass INT64_MAX.
    require(ref.rect.row <= t.shape[0] && ref.rect.rows <= t.shape[0] - ref.rect.row && ref.rect.col <= t.shape[1] &&
                ref.rect.cols <= t.shape[1] - ref.rect.col,
            where + ": slice '" + ref.key + "' lies outside the tensor's shape");
    t.slices.push_back(std::move(ref));
  }
  if (std::string problem = cover_problem(t.shape, t.slices); !problem.empty())
    throw Error(MH_INVALID_ARGUMENT, where + ": its slices do not cover it exactly once: " + problem +
                                         "; the index is damaged: load an earlier checkpoint");
  return t;
}

void parse_index(const json& j, Metadata& m, const std::string& path) {
  const json files = field<json>(j, "files", path), tensors = field<json>(j, "tensors", path);
  for (const auto& [name, f] : files.items()) {
    const std::string where = path + ": file '" + name + "'";
    require(name.find('/') == std::string::npos && !name.empty() && name[0] != '.',
            where + ": file names must be plain names inside the checkpoint folder");
    m.files[name] = FileEntry{field<uint64_t>(f, "bytes", where), field<std::string>(f, "xxh3", where)};
  }
  for (const auto& [name, t] : tensors.items()) m.tensors[name] = parse_tensor(name, t, m, path);
}

// XXH3-64 of the metadata's compact, key-sorted text without the checksum
// itself: what the writer meant, whatever whitespace the file has.
std::string contents_checksum(json j) {
  j.erase(kChecksumKey);
  const std::string text = j.dump();
  return safetensors::hex(safetensors::checksum(std::as_bytes(std::span(text.data(), text.size()))));
}

void verify_checksum(const json& j, const std::string& path) {
  if (!j.contains(kChecksumKey)) return;  // written before metadata.json carried one
  const std::string stated = field<std::string>(j, kChecksumKey, path), actual = contents_checksum(j);
  require(stated == actual, path + ": its checksum " + stated + " does not match its contents (" + actual +
                                "): the file was damaged or edited; load an earlier checkpoint");
}

}  // namespace

json to_json(const Metadata& m) {
  nlohmann::ordered_json j;
  j["format"] = kFormatName;
  j["version"] = m.version;
  j["step"] = m.step;
  j["consumed_samples"] = m.consumed_samples;
  j["global_batch"] = m.global_batch;
  j["micro_batch"] = m.micro_batch;
  j["seed"] = m.seed;
  j["dtype"] = m.dtype;
  j["optimizer"] = m.optimizer;
  const ModelShape& s = m.model;
  j["model"] = {{"layers", s.layers},
                {"hidden", s.hidden},
                {"heads", s.heads},
                {"ffn_hidden", s.ffn},
                {"seq_len", s.seq_len},
                {"vocab", s.vocab},
                {"vocab_size", s.vocab_size},
                {"max_positions", s.positions()},
                {"arch", s.arch},
                {"normalization", s.normalization},
                {"position", s.position},
                {"rope_theta", s.rope_theta},
                {"activation", s.activation},
                {"kv_heads", s.kv()},
                {"tie_embeddings", s.tie_embeddings},
                {"bias", s.bias},
                {"norm_eps", s.norm_eps}};
  if (s.experts > 0) {
    j["model"]["experts"] = s.experts;
    j["model"]["router_topk"] = s.router_topk;
    j["model"]["moe_ffn_hidden"] = s.moe_ffn;
    j["model"]["router_norm_topk"] = s.router_norm_topk;
    j["model"]["router_aux_loss_coef"] = s.router_aux_loss_coef;
  }
  if (s.shared_experts > 0) {
    j["model"]["shared_experts"] = s.shared_experts;
    j["model"]["shared_expert_ffn_hidden"] = s.shared_ffn;
    j["model"]["shared_expert_gate"] = s.shared_expert_gate;
  }
  if (s.qkv_bias) j["model"]["qkv_bias"] = true;
  if (s.qk_norm) j["model"]["qk_norm"] = true;
  if (!s.derived_head_dim()) j["model"]["head_dim"] = s.head_dim();
  j["layout"] = {{"tensor", m.layout.tensor},
                 {"pipeline", m.layout.pipeline},
                 {"data", m.layout.data},
                 {"virtual_stages", m.layout.virtual_stages},
                 {"world", m.layout.world},
                 {"sequence_parallel", m.layout.sequence_parallel},
                 {"distributed_optimizer", m.layout.distributed_optimizer}};
  j["schedule"] = m.schedule;
  j["tokenizer"] = m.tokenizer;
  if (!m.peft.is_null()) j["peft"] = m.peft;
  for (const auto& [name, f] : m.files) j["files"][name] = {{"bytes", f.bytes}, {"xxh3", f.xxh3}};
  for (const auto& [name, t] : m.tensors) {
    nlohmann::ordered_json slices = nlohmann::ordered_json::array();
    for (const SliceRef& s : t.slices) {
      nlohmann::ordered_json e = {{"file", s.file}, {"key", s.key}};
      e.update(rect_json(s.rect));
      slices.push_back(e);
    }
    j["tensors"][name] = {{"shape", t.shape}, {"dtype", t.dtype}, {"slices", slices}};
  }
  json out = json::parse(j.dump());
  out[kChecksumKey] = contents_checksum(out);
  return out;
}

Metadata parse_metadata(std::string_view text, const std::string& path) {
  const json j = parse_json_limited(text, path, 16);
  require(j.is_object() && j.value("format", "") == kFormatName, path + ": not a Megahost checkpoint (no \"format\": \"" +
                                                                      std::string(kFormatName) + "\")");
  verify_checksum(j, path);
  Metadata m;
  m.version = field<int64_t>(j, "version", path);
  require(m.version >= 1 && m.version <= kFormatVersion,
          path + ": checkpoint format version " + std::to_string(m.version) + "; this Megahost reads versions 1 to " +
              std::to_string(kFormatVersion) + " (a newer Megahost wrote it: upgrade to load it)");
  m.step = field<int64_t>(j, "step", path);
  m.consumed_samples = field<int64_t>(j, "consumed_samples", path);
  m.global_batch = field<int64_t>(j, "global_batch", path);
  m.micro_batch = field<int64_t>(j, "micro_batch", path);
  m.seed = field<uint64_t>(j, "seed", path);
  m.dtype = field<std::string>(j, "dtype", path);
  m.optimizer = field<bool>(j, "optimizer", path);
  require(m.step >= 0 && m.consumed_samples >= 0, path + ": negative step or consumed_samples");
  m.model = parse_model(field<json>(j, "model", path), path + ": model");
  m.layout = parse_layout(field<json>(j, "layout", path), path + ": layout");
  m.schedule = object_field(j, "schedule", path);
  m.tokenizer = field<json>(j, "tokenizer", path);
  if (j.contains("peft")) m.peft = object_field(j, "peft", path);
  parse_index(j, m, path);
  return m;
}

Metadata read_metadata(const std::string& dir) {
  const std::string path = dir + "/" + kMetadataFile;
  return parse_metadata(data::read_regular_file(path, dir + " is not a complete checkpoint; load an earlier one"), path);
}

std::vector<std::string> shape_differences(const ModelShape& saved, const ModelShape& run) {
  std::vector<std::string> out;
  auto compare = [&](const char* key, int64_t a, int64_t b) {
    if (a != b) out.push_back(std::string("model.") + key + ": checkpoint " + std::to_string(a) + ", this run " + std::to_string(b));
  };
  compare("layers", saved.layers, run.layers);
  compare("hidden", saved.hidden, run.hidden);
  compare("heads", saved.heads, run.heads);
  compare("ffn_hidden", saved.ffn, run.ffn);
  compare("seq_len", saved.seq_len, run.seq_len);
  compare("vocab (padded)", saved.vocab, run.vocab);
  if (saved.vocab_size > 0 && run.vocab_size > 0) compare("vocab", saved.vocab_size, run.vocab_size);
  compare("kv_heads", saved.kv(), run.kv());
  // Both hidden / heads: the keys above already name what differs.
  if (!saved.derived_head_dim() || !run.derived_head_dim()) compare("head_dim", saved.head_dim(), run.head_dim());
  compare("max_positions", saved.positions(), run.positions());
  compare("experts", saved.experts, run.experts);
  if (saved.experts > 0 && run.experts > 0) {
    compare("router_topk", saved.router_topk, run.router_topk);
    compare("moe_ffn_hidden", saved.moe_ffn, run.moe_ffn);
    compare("shared_experts", saved.shared_experts, run.shared_experts);
    if (saved.shared_experts > 0 && run.shared_experts > 0)
      compare("shared_expert_ffn_hidden", saved.shared_ffn, run.shared_ffn);
  }
  auto compare_text = [&](const char* key, const std::string& a, const std::string& b) {
    if (a != b) out.push_back(std::string("model.") + key + ": checkpoint \"" + a + "\", this run \"" + b + "\"");
  };
  compare_text("normalization", saved.normalization, run.normalization);
  compare_text("position", saved.position, run.position);
  compare_text("activation", saved.activation, run.activation);
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  compare_text("tie_embeddings", flag(saved.tie_embeddings), flag(run.tie_embeddings));
  compare_text("bias", flag(saved.bias), flag(run.bias));
  compare_text("qkv_bias", flag(saved.qkv_bias), flag(run.qkv_bias));
  compare_text("qk_norm", flag(saved.qk_norm), flag(run.qk_norm));
  compare_text("shared_expert_gate", flag(saved.shared_expert_gate), flag(run.shared_expert_gate));
  return out;
}

}  // namespace mh::ckpt
