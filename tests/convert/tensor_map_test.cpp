// The tensor maps: where each Hugging Face element lands in Megahost's
// global tensors, and back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <megahost/error.hpp>

#include <map>

#include "convert/tensor_map.hpp"
#include "hf_fixture.hpp"

namespace mh::convert {
namespace {

using testing::tiny_gpt2;
using testing::tiny_llama;
using ::testing::HasSubstr;

// An HF tensor whose element (r, c) is r * 1000 + c + offset: any element out
// of place shows by its value.
HfTensor numbered(std::vector<int64_t> shape, float offset = 0) {
  HfTensor t{shape, {}};
  const int64_t rows = shape[0], cols = shape.size() == 2 ? shape[1] : 1;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t.data.push_back(float(r * 1000 + c) + offset);
  return t;
}

const Link& link_of(const std::vector<Link>& links, const std::string& name) {
  for (const Link& l : links)
    if (l.megahost == name) return l;
  throw std::runtime_error("no link " + name);
}

Matrix import_link(const ckpt::ModelShape& m, const std::string& name, std::map<std::string, HfTensor> hf) {
  return to_megahost(link_of(model_links(m), name), m, [&](const std::string& n) { return hf.at(n); });
}

float at(const Matrix& t, int64_t r, int64_t c) { return t.data[size_t(r * t.cols + c)]; }

TEST(TensorMap, Gpt2FusedQkvIsTransposedAndGroupedPerHead) {
  const ckpt::ModelShape m = tiny_gpt2();  // h = 8, 2 heads of D = 4
  const Matrix qkv = import_link(m, "layers.0.qkv_w", {{"h.0.attn.c_attn.weight", numbered({8, 24})}});
  ASSERT_EQ(qkv.rows, 24);
  ASSERT_EQ(qkv.cols, 8);
  // Megahost row (head a, part p, d) = a * 3D + p * D + d holds HF column p * h + a * D + d.
  for (int a = 0; a < 2; ++a)
    for (int p = 0; p < 3; ++p)
      for (int d = 0; d < 4; ++d)
        for (int in = 0; in < 8; ++in)
          ASSERT_EQ(at(qkv, a * 12 + p * 4 + d, in), float(in * 1000 + p * 8 + a * 4 + d)) << a << p << d << in;
}

TEST(TensorMap, Gpt2FusedQkvBiasFollowsTheSameOrder) {
  const Matrix b = import_link(tiny_gpt2(), "layers.1.qkv_b", {{"h.1.attn.c_attn.bias", numbered({24})}});
  ASSERT_EQ(b.rows, 1);
  ASSERT_EQ(b.cols, 24);
  EXPECT_EQ(at(b, 0, 4), 8000.f);    // head 0's k starts at HF's k block (column 8)
  EXPECT_EQ(at(b, 0, 12), 4000.f);   // head 1's q starts at HF's column 4
  EXPECT_EQ(at(b, 0, 23), 23000.f);  // head 1's last v element is HF's last
}

TEST(TensorMap, Conv1DWeightsAreTransposed) {
  const ckpt::ModelShape m = tiny_gpt2();
  const Matrix fc1 = import_link(m, "layers.0.fc1_w", {{"h.0.mlp.c_fc.weight", numbered({8, 32})}});
  ASSERT_EQ(fc1.rows, 32);
  EXPECT_EQ(at(fc1, 5, 3), 3005.f);  // [out 5, in 3] = HF [in 3, out 5]
  const Matrix fc2 = import_link(m, "layers.0.fc2_w", {{"h.0.mlp.c_proj.weight", numbered({32, 8})}});
  ASSERT_EQ(fc2.rows, 8);
  EXPECT_EQ(at(fc2, 2, 31), 31002.f);
}

TEST(TensorMap, LlamaQkvGroupsQueryHeadsWithTheirKeyValueHead) {
  const ckpt::ModelShape m = tiny_llama();  // 4 heads, 2 kv heads, D = 2: 2 query heads per group
  const Matrix qkv = import_link(m, "layers.0.qkv_w",
                                 {{"layers.0.self_attn.q_proj.weight", numbered({8, 8}, 0.1f)},
                                  {"layers.0.self_attn.k_proj.weight", numbered({4, 8}, 0.2f)},
                                  {"layers.0.self_attn.v_proj.weight", numbered({4, 8}, 0.3f)}});
  ASSERT_EQ(qkv.rows, 16);  // (4 + 2 * 2) * 2
  // Group g: q rows 4g..4g+3 (heads 2g, 2g+1), k rows 2g..2g+1, v rows 2g..2g+1.
  const float expect[16] = {0.1f, 1000.1f, 2000.1f, 3000.1f, 0.2f, 1000.2f, 0.3f, 1000.3f,
                            4000.1f, 5000.1f, 6000.1f, 7000.1f, 2000.2f, 3000.2f, 2000.3f, 3000.3f};
  for (int r = 0; r < 16; ++r) EXPECT_FLOAT_EQ(at(qkv, r, 0), expect[r]) << "row " << r;
}

TEST(TensorMap, VocabularyIsPaddedWithZeroRowsAndTrimmedOnExport) {
  const ckpt::ModelShape m = tiny_gpt2();
  const std::vector<Link> links = model_links(m);
  const Link& wte = link_of(links, "wte");
  const Matrix padded = import_link(m, "wte", {{"wte.weight", numbered({200, 8}, 1)}});
  ASSERT_EQ(padded.rows, 256);
  EXPECT_EQ(at(padded, 199, 7), 199008.f);
  for (int64_t r = 200; r < 256; ++r)
    for (int64_t c = 0; c < 8; ++c) ASSERT_EQ(at(padded, r, c), 0.f);
  const std::vector<HfTensor> back = to_hf(wte, m, padded);
  EXPECT_EQ(back[0].shape, (std::vector<int64_t>{200, 8}));
  EXPECT_EQ(back[0].data, numbered({200, 8}, 1).data);
}

TEST(TensorMap, LearnedPositionsKeepTheFirstSeqLenRows) {
  ckpt::ModelShape m = tiny_gpt2();
  m.seq_len = 4;
  const Matrix wpe = import_link(m, "wpe", {{"wpe.weight", numbered({16, 8})}});
  EXPECT_EQ(wpe.rows, 4);
  EXPECT_EQ(at(wpe, 3, 1), 3001.f);
}

TEST(TensorMap, EveryLinkRoundTripsExactly) {
  for (const ckpt::ModelShape& m : {tiny_gpt2(), tiny_llama()}) {
    std::map<std::string, HfTensor> hf;
    for (const auto& [name, t] : testing::random_tensors(m, 7))
      hf[name.starts_with("transformer.") ? name.substr(12) : name.starts_with("model.") ? name.substr(6) : name] = t;
    for (const Link& l : model_links(m)) {
      const Matrix t = to_megahost(l, m, [&](const std::string& n) { return hf.at(n); });
      EXPECT_EQ((std::array<int64_t, 2>{t.rows, t.cols}), megahost_shape(l.megahost, m)) << l.megahost;
      const std::vector<HfTensor> back = to_hf(l, m, t);
      ASSERT_EQ(back.size(), l.hf.size());
      for (size_t k = 0; k < back.size(); ++k) {
        EXPECT_EQ(back[k].shape, hf.at(l.hf[k]).shape) << l.hf[k];
        EXPECT_EQ(back[k].data, hf.at(l.hf[k]).data) << l.hf[k];
      }
    }
  }
}

TEST(TensorMap, TiedEmbeddingsHaveNoOutputLayer) {
  ckpt::ModelShape m = tiny_gpt2();
  auto has_head = [](const ckpt::ModelShape& s) {
    for (const Link& l : model_links(s))
      if (l.megahost == "lm_head") return true;
    return false;
  };
  EXPECT_FALSE(has_head(m));
  m.tie_embeddings = false;
  EXPECT_TRUE(has_head(m));
  EXPECT_TRUE(has_head(tiny_llama()));
  ckpt::ModelShape tied = tiny_llama();
  tied.tie_embeddings = true;
  EXPECT_FALSE(has_head(tied));
}

TEST(TensorMap, LlamaHasNoPositionTableAndBiasesOnlyWithBias) {
  ckpt::ModelShape m = tiny_llama();
  std::vector<std::string> names;
  for (const Link& l : model_links(m)) names.push_back(l.megahost);
  EXPECT_THAT(names, ::testing::Not(::testing::Contains("wpe")));
  EXPECT_THAT(names, ::testing::Contains("layers.1.gate_w"));
  EXPECT_THAT(names, ::testing::Not(::testing::Contains("layers.0.qkv_b")));
  m.bias = true;
  names.clear();
  for (const Link& l : model_links(m)) names.push_back(l.megahost);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"layers.0.qkv_b", "layers.0.proj_b", "layers.0.gate_b", "layers.0.fc2_b"}));
}

TEST(TensorMap, AWrongShapeNamesTheTensorAndBothShapes) {
  try {
    import_link(tiny_gpt2(), "layers.0.fc1_w", {{"h.0.mlp.c_fc.weight", numbered({32, 8})}});
    FAIL() << "accepted a [32, 8] c_fc";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'h.0.mlp.c_fc.weight' is [32, 8]"));
    EXPECT_THAT(e.what(), HasSubstr("[8, 32]"));
  }
}

TEST(TensorMap, SeqLenBeyondTheLearnedPositionsIsRefused) {
  ckpt::ModelShape m = tiny_gpt2();
  m.seq_len = 32;
  EXPECT_THROW(import_link(m, "wpe", {{"wpe.weight", numbered({16, 8})}}), Error);
}

}  // namespace
}  // namespace mh::convert
