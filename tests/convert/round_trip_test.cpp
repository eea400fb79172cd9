// Whole folders: a Hugging Face model imported as a Megahost checkpoint (one
// the checkpoint reader accepts) and exported again, every tensor exact;
// and the models and folders the conversion refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <megahost/error.hpp>

#include <filesystem>

#include "checkpoint/store.hpp"
#include "checkpoint/tensor_reader.hpp"
#include "convert/hf_to_megahost.hpp"
#include "convert/megahost_to_hf.hpp"
#include "hf_fixture.hpp"

namespace mh::convert {
namespace {

namespace fs = std::filesystem;
using testing::message;
using testing::scratch;
using ::testing::HasSubstr;

void expect_same_tensors(const fs::path& dir, const std::map<std::string, HfTensor>& want) {
  const HfFolder folder(dir.string());
  EXPECT_EQ(folder.names().size(), want.size());
  for (const auto& [name, t] : want) {
    const std::string short_name =
        name.starts_with("transformer.") ? name.substr(12) : name.starts_with("model.") ? name.substr(6) : name;
    const HfTensor got = folder.get(short_name);
    EXPECT_EQ(got.shape, t.shape) << name;
    EXPECT_EQ(got.data, t.data) << name;
  }
}

void round_trip(const ckpt::ModelShape& m, const ShardOptions& options) {
  const fs::path hf = scratch("hf"), ckpt_dir = scratch("ckpt"), back = scratch("back");
  const auto tensors = testing::random_tensors(m, 3);
  testing::write_folder(hf, m, tensors);
  const ckpt::Metadata meta = import_hf(hf.string(), ckpt_dir.string(), {});
  EXPECT_EQ(meta.step, 0);
  EXPECT_FALSE(meta.optimizer);
  const ckpt::Metadata read = ckpt::read_metadata(ckpt_dir.string());
  EXPECT_EQ(read.model.vocab, m.vocab);
  EXPECT_EQ(read.model.vocab_size, m.vocab_size);
  EXPECT_EQ(read.model.kv(), m.kv());
  for (const auto& [name, f] : read.files) ckpt::verify_file(data::MappedFile((ckpt_dir / name).string(), ""), f);
  export_hf(ckpt_dir.string(), back.string(), options);
  expect_same_tensors(back, tensors);
  EXPECT_EQ(parse_hf_config(hf_config_json(m, "float32"), "c").shape.ffn, read_hf_config(back.string()).shape.ffn);
  fs::remove_all(hf);
  fs::remove_all(ckpt_dir);
  fs::remove_all(back);
}

TEST(RoundTrip, Gpt2TiedEveryTensorExact) { round_trip(testing::tiny_gpt2(), {}); }

TEST(RoundTrip, Gpt2UntiedSharded) {
  ckpt::ModelShape m = testing::tiny_gpt2();
  m.tie_embeddings = false;
  round_trip(m, {"F32", 2000});
}

TEST(RoundTrip, LlamaGroupedQueryEveryTensorExact) { round_trip(testing::tiny_llama(), {"F32", 1500}); }

TEST(RoundTrip, LlamaTiedWithBiases) {
  ckpt::ModelShape m = testing::tiny_llama();
  m.tie_embeddings = true;
  m.bias = true;
  round_trip(m, {});
}

TEST(RoundTrip, ImportedPaddingRowsAreZero) {
  const ckpt::ModelShape m = testing::tiny_gpt2();
  const fs::path hf = scratch("pad_hf"), ckpt_dir = scratch("pad_ckpt");
  testing::write_folder(hf, m, testing::random_tensors(m, 5));
  const ckpt::Metadata meta = import_hf(hf.string(), ckpt_dir.string(), {});
  ckpt::TensorReader reader(ckpt_dir.string(), meta);
  std::vector<float> rows(size_t((m.vocab - m.vocab_size) * m.hidden), 1.f);
  reader.read("wte", meta.tensors.at("wte"), ckpt::Rect{m.vocab_size, 0, m.vocab - m.vocab_size, m.hidden}, rows.data());
  EXPECT_THAT(rows, ::testing::Each(0.f));
  fs::remove_all(hf);
  fs::remove_all(ckpt_dir);
}

TEST(RoundTrip, ImportTrimsLearnedPositionsToTheRunsSeqLen) {
  const ckpt::ModelShape m = testing::tiny_gpt2();
  const fs::path hf = scratch("trim_hf"), ckpt_dir = scratch("trim_ckpt");
  testing::write_folder(hf, m, testing::random_tensors(m, 5));
  const ckpt::Metadata meta = import_hf(hf.string(), ckpt_dir.string(), {4, {}});
  EXPECT_EQ(meta.model.seq_len, 4);
  EXPECT_EQ(meta.tensors.at("wpe").shape, (std::array<int64_t, 2>{4, m.hidden}));
  fs::remove_all(hf);
  fs::remove_all(ckpt_dir);
}

TEST(RoundTrip, Bf16WeightsImportAsTheirF32Values) {
  const ckpt::ModelShape m = testing::tiny_llama();
  const fs::path hf = scratch("bf_hf"), ckpt_dir = scratch("bf_ckpt"), back = scratch("bf_back");
  testing::write_folder(hf, m, testing::random_tensors(m, 9), {"BF16", 1 << 20});
  std::map<std::string, HfTensor> stored;  // the bf16 values, as f32
  const HfFolder folder(hf.string());
  for (const std::string& name : folder.names())
    stored[name == "lm_head.weight" ? name : "model." + name] = folder.get(name);
  import_hf(hf.string(), ckpt_dir.string(), {});
  export_hf(ckpt_dir.string(), back.string(), {"BF16", 1 << 20});
  expect_same_tensors(back, stored);
  fs::remove_all(hf);
  fs::remove_all(ckpt_dir);
  fs::remove_all(back);
}

TEST(RoundTrip, ATensorTheModelDoesNotHaveIsRefused) {
  const ckpt::ModelShape m = testing::tiny_gpt2();
  auto tensors = testing::random_tensors(m, 1);
  tensors["transformer.h.0.attn.extra"] = {{2}, {1, 2}};
  const fs::path hf = scratch("extra_hf");
  testing::write_folder(hf, m, tensors);
  EXPECT_THAT(message([&] { import_hf(hf.string(), scratch("extra_ckpt").string(), {}); }),
              HasSubstr("'h.0.attn.extra' is not part of the GPT2LMHeadModel"));
  EXPECT_FALSE(fs::exists(scratch("extra_ckpt")));
  fs::remove_all(hf);
}

TEST(RoundTrip, AnUntiedModelWithoutItsOutputLayerIsRefused) {
  const ckpt::ModelShape m = testing::tiny_llama();
  auto tensors = testing::random_tensors(m, 1);
  tensors.erase("lm_head.weight");
  const fs::path hf = scratch("nohead_hf"), out = scratch("nohead_ckpt");
  testing::write_folder(hf, m, tensors);
  EXPECT_THAT(message([&] { import_hf(hf.string(), out.string(), {}); }), HasSubstr("no tensor 'lm_head.weight'"));
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(hf);
  fs::remove_all(fs::path(out).parent_path() / (".tmp_" + out.filename().string()));
}

TEST(RoundTrip, ExportOfAModelNeitherClassExpressesIsRefused) {
  const ckpt::ModelShape m = testing::tiny_gpt2();
  const fs::path hf = scratch("rope_hf"), ckpt_dir = scratch("rope_ckpt");
  testing::write_folder(hf, m, testing::random_tensors(m, 1));
  ckpt::Metadata meta = import_hf(hf.string(), ckpt_dir.string(), {});
  meta.model.position = "rope";
  fs::remove(ckpt_dir / ckpt::kMetadataFile);
  ckpt::write_synced((ckpt_dir / ckpt::kMetadataFile).string(), ckpt::to_json(meta).dump());
  EXPECT_THAT(message([&] { export_hf(ckpt_dir.string(), scratch("rope_back").string(), {}); }),
              HasSubstr("position = \"rope\""));
  fs::remove_all(hf);
  fs::remove_all(ckpt_dir);
}

}  // namespace
}  // namespace mh::convert
