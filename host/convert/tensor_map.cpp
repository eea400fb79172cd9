#include "convert/tensor_map.hpp"

#include <megahost/error.hpp>

#include <algorithm>

#include "convert/hf_config.hpp"
#include "convert/hf_gpt2.hpp"
#include "convert/hf_llama.hpp"

namespace mh::convert {
namespace {

std::string leaf(const std::string& name) { return name.substr(name.rfind('.') + 1); }

// Biases and norm weights: [n] in HF files, [1, n] in Megahost's.
bool is_vector(const std::string& name) {
  const std::string l = leaf(name);
  return l.ends_with("_b") || l.starts_with("ln") || l == "q_norm_w" || l == "k_norm_w";
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

Matrix transpose(const Matrix& a) {
  Matrix t{a.cols, a.rows, std::vector<float>(a.data.size())};
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t c = 0; c < a.cols; ++c) t.data[size_t(c * a.rows + r)] = a.data[size_t(r * a.cols + c)];
  return t;
}

// Rows [begin, begin + count) of `a`, zeros past its last row.
Matrix rows_of(const Matrix& a, int64_t begin, int64_t count) {
  Matrix out{count, a.cols, std::vector<float>(size_t(count * a.cols), 0.f)};
  const int64_t have = std::clamp<int64_t>(a.rows - begin, 0, count);
  std::copy_n(a.data.begin() + begin * a.cols, have * a.cols, out.data.begin());
  return out;
}

void append_rows(Matrix& out, const Matrix& a, int64_t begin, int64_t count) {
  out.data.insert(out.data.end(), a.data.begin() + begin * a.cols, a.data.begin() + (begin + count) * a.cols);
  out.rows += count;
}

// Megahost's fused QKV rows, per key/value group g: the m = a / k query
// heads of the group, then its key head, then its value head (D rows each).
Matrix group_qkv(const Matrix& q, const Matrix& k, const Matrix& v, const ckpt::ModelShape& m) {
  const int64_t d = m.head_dim(), per_group = m.heads / m.kv();
  Matrix out{0, q.cols, {}};
  out.data.reserve(size_t((q.rows + k.rows + v.rows) * q.cols));
  for (int64_t g = 0; g < m.kv(); ++g) {
    append_rows(out, q, g * per_group * d, per_group * d);
    append_rows(out, k, g * d, d);
    append_rows(out, v, g * d, d);
  }
  return out;
}

std::array<Matrix, 3> ungroup_qkv(const Matrix& qkv, const ckpt::ModelShape& m) {
  const int64_t d = m.head_dim(), per_group = m.heads / m.kv(), group_rows = (per_group + 2) * d;
  std::array<Matrix, 3> out{Matrix{0, qkv.cols, {}}, Matrix{0, qkv.cols, {}}, Matrix{0, qkv.cols, {}}};
  for (int64_t g = 0; g < m.kv(); ++g) {
    append_rows(out[0], qkv, g * group_rows, per_group * d);
    append_rows(out[1], qkv, g * group_rows + per_group * d, d);
    append_rows(out[2], qkv, g * group_rows + (per_group + 1) * d, d);
  }
  return out;
}

// An HF tensor as a matrix: vectors as one column, so that rows are the
// output features in every case.
Matrix as_matrix(HfTensor t) {
  const int64_t rows = t.shape[0], cols = t.shape.size() == 2 ? t.shape[1] : 1;
  return Matrix{rows, cols, std::move(t.data)};
}

HfTensor as_hf(Matrix a, std::vector<int64_t> shape) { return HfTensor{std::move(shape), std::move(a.data)}; }

void check_shape(const std::string& name, const HfTensor& t, const std::vector<int64_t>& want, bool at_least_rows) {
  const bool ok = t.shape.size() == want.size() &&
                  (at_least_rows ? t.shape[0] >= want[0] && t.shape[1] == want[1] : t.shape == want);
  require(ok, "tensor '" + name + "' is " + shape_text(t.shape) + "; the model's config.json makes it " +
                  (at_least_rows ? "at least " : "") + shape_text(want) +
                  (at_least_rows ? " (seq_len may not exceed the positions the model has)" : ""));
}

}  // namespace

std::vector<Link> model_links(const ckpt::ModelShape& m) {
  switch (hf_class(m)) {
    case HfClass::kGpt2: return gpt2_links(m);
    case HfClass::kLlama:
    case HfClass::kQwen2:
    case HfClass::kQwen3:
    case HfClass::kMixtral:
    case HfClass::kQwen2Moe:
    case HfClass::kQwen3Moe: return llama_links(m);
  }
  return {};
}

std::array<int64_t, 2> megahost_shape(const std::string& name, const ckpt::ModelShape& m) {
  const int64_t h = m.hidden, f = m.ffn, qkv = (m.heads + 2 * m.kv()) * m.head_dim();
  const std::string l = leaf(name);
  if (name == "wte" || name == "lm_head") return {m.vocab, h};
  if (name == "wpe") return {m.seq_len, h};
  if (l == "qkv_w") return {qkv, h};
  if (l == "qkv_b") return {1, qkv};
  if (l == "shared_gate_w" || l == "shared_fc1_w") return {m.shared_width(), h};
  if (l == "shared_fc2_w") return {h, m.shared_width()};
  if (l == "shared_expert_gate_w") return {1, h};
  if (l == "q_norm_w" || l == "k_norm_w") return {1, m.head_dim()};
  if (l == "proj_w") return {h, m.heads * m.head_dim()};
  if (m.experts > 0 && (l == "fc1_w" || l == "gate_w")) return {m.experts * m.moe_ffn, h};
  if (m.experts > 0 && l == "fc2_w") return {m.experts * h, m.moe_ffn};
  if (l == "router_w") return {m.experts, h};
  if (l == "fc1_w" || l == "gate_w") return {f, h};
  if (l == "fc1_b" || l == "gate_b") return {1, f};
  if (l == "fc2_w") return {h, f};
  require(is_vector(name), "no Megahost tensor is called '" + name + "'", MH_INTERNAL);
  return {1, h};  // the layer norms, proj_b, fc2_b
}

std::vector<std::vector<int64_t>> hf_shapes(const Link& link, const ckpt::ModelShape& m) {
  const auto [rows, cols] = megahost_shape(link.megahost, m);
  const bool vec = is_vector(link.megahost);
  const int64_t h = m.hidden, q = m.heads * m.head_dim(), kv = m.kv() * m.head_dim();
  switch (link.transform) {
    case Transform::kSame: return {vec ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols}};
    case Transform::kTranspose: return {{cols, rows}};
    case Transform::kVocab: return {{m.vocab_size, cols}};
    case Transform::kPositions: return {{m.seq_len, cols}};
    case Transform::kFusedQkv: return {vec ? std::vector<int64_t>{3 * h} : std::vector<int64_t>{h, 3 * h}};
    case Transform::kSplitQkv:
      if (vec) return {{q}, {kv}, {kv}};
      return {{q, h}, {kv, h}, {kv, h}};
    case Transform::kStack: {
      const int64_t n = int64_t(link.hf.size());
      return std::vector<std::vector<int64_t>>(size_t(n), std::vector<int64_t>{rows / n, cols});
    }
  }
  return {};
}

Matrix to_megahost(const Link& link, const ckpt::ModelShape& m, const std::function<HfTensor(const std::string&)>& hf) {
  const std::vector<std::vector<int64_t>> want = hf_shapes(link, m);
  std::vector<Matrix> in;
  for (size_t i = 0; i < link.hf.size(); ++i) {
    HfTensor t = hf(link.hf[i]);
    check_shape(link.hf[i], t, want[i], link.transform == Transform::kPositions);
    in.push_back(as_matrix(std::move(t)));
  }
  const auto [rows, cols] = megahost_shape(link.megahost, m);
  Matrix out;
  switch (link.transform) {
    case Transform::kSame: out = std::move(in[0]); break;
    case Transform::kTranspose: out = transpose(in[0]); break;
    case Transform::kVocab:
    case Transform::kPositions: out = rows_of(in[0], 0, rows); break;
    case Transform::kFusedQkv: {
      const Matrix all = is_vector(link.megahost) ? std::move(in[0]) : transpose(in[0]);
      const int64_t h = m.hidden;
      out = group_qkv(rows_of(all, 0, h), rows_of(all, h, h), rows_of(all, 2 * h, h), m);
      break;
    }
    case Transform::kSplitQkv: out = group_qkv(in[0], in[1], in[2], m); break;
    case Transform::kStack:
      out = Matrix{0, cols, {}};
      for (const Matrix& part : in) append_rows(out, part, 0, part.rows);
      break;
  }
  out.rows = rows;
  out.cols = cols;
  return out;
}

std::vector<HfTensor> to_hf(const Link& link, const ckpt::ModelShape& m, const Matrix& t) {
  const std::vector<std::vector<int64_t>> shapes = hf_shapes(link, m);
  const bool vec = is_vector(link.megahost);
  // Vectors as one column, as as_matrix() reads them.
  const Matrix a = vec ? Matrix{t.cols, 1, t.data} : t;
  switch (link.transform) {
    case Transform::kSame: return {as_hf(a, shapes[0])};
    case Transform::kTranspose: return {as_hf(transpose(a), shapes[0])};
    case Transform::kVocab:
    case Transform::kPositions: return {as_hf(rows_of(a, 0, shapes[0][0]), shapes[0])};
    case Transform::kFusedQkv: {
      std::array<Matrix, 3> qkv = ungroup_qkv(a, m);
      Matrix all{0, a.cols, {}};
      for (const Matrix& part : qkv) append_rows(all, part, 0, part.rows);
      return {as_hf(vec ? std::move(all) : transpose(all), shapes[0])};
    }
    case Transform::kSplitQkv: {
      std::array<Matrix, 3> qkv = ungroup_qkv(a, m);
      return {as_hf(std::move(qkv[0]), shapes[0]), as_hf(std::move(qkv[1]), shapes[1]), as_hf(std::move(qkv[2]), shapes[2])};
    }
    case Transform::kStack: {
      std::vector<HfTensor> out;
      for (size_t i = 0; i < shapes.size(); ++i) out.push_back(as_hf(rows_of(a, int64_t(i) * shapes[i][0], shapes[i][0]), shapes[i]));
      return out;
    }
  }
  return {};
}

}  // namespace mh::convert
