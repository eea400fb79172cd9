// Packing that keeps documents apart ([data] reset_position_ids and
// reset_attention_mask, docs/finetune.md): one window holding documents
// A EOD B EOD C trains as A, B and C each alone would, in losses and
// gradients, for learned positions (GPT-2) and RoPE (Llama); and every layout
// (and recomputing the attention core in backward) computes the packed
// function of one rank.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "layout_run.hpp"
#include "support/process.hpp"

namespace mh::test {
namespace {
namespace fs = std::filesystem;

// Byte-tokenizer documents (one token per character). Packed, they make the
// stream A EOD B EOD C EOD of 41 tokens: one window of seq_len 40, whose
// documents are A EOD, B EOD and C (the EOD's prediction of the next
// document's first token belongs to the document it ends).
const std::string kA = "Packing keeps", kB = "documents apart!", kC = "ok, then.";

const char* const kPacking = " data.reset_position_ids=true data.reset_attention_mask=true";

// A folder of datasets prepared with megahost_prepare, removed at exit.
class Datasets {
 public:
  Datasets() : dir_(fs::temp_directory_path() / ("megahost_packing_" + std::to_string(getpid()))) {
    fs::create_directories(dir_);
  }
  ~Datasets() { fs::remove_all(dir_); }

  // The prefix of a dataset of `docs`, one document each.
  std::string prepare(const std::string& name, const std::vector<std::string>& docs) {
    const fs::path input = dir_ / (name + ".jsonl");
    std::ofstream out(input);
    for (const std::string& d : docs) out << "{\"text\": \"" << d << "\"}\n";
    out.close();
    const std::string prefix = (dir_ / name).string();
    ProcessSpec prepare;
    prepare.argv = {MEGAHOST_PREPARE_BINARY, "--input", input.string(), "--output_prefix", prefix,
                    "--tokenizer", "byte"};
    const ProcessExit exit = run_process(prepare);
    EXPECT_EQ(exit.status, 0) << exit.err;
    return prefix;
  }

 private:
  fs::path dir_;
};

// One step on one window of the dataset, read twice (global batch 2 of
// micro-batches of 1, so data parallelism has a sample per replica). The loss
// and the gradients are means over the 2 x seq_len tokens.
std::string one_window(const std::string& prefix, int64_t seq_len, const std::string& model) {
  return "data.path=" + prefix + " data.split='\"1\"' model.seq_len=" + std::to_string(seq_len) +
         " model.dropout=0 model.attention_dropout=0 train.steps=1 train.global_batch=2 train.micro_batch=1 " + model;
}

struct Shape {
  const char* name;
  const char* model;
};

// gtest names a parameter by printing it.
void PrintTo(const Shape& s, std::ostream* out) { *out << s.name; }

class PackedDocuments : public ::testing::TestWithParam<Shape> {
 protected:
  static Datasets& datasets() {
    static Datasets d;
    return d;
  }
  std::string packed(const std::string& layout) {
    static const std::string prefix = datasets().prepare("packed", {kA, kB, kC});
    return one_window(prefix, kPackedSeq, GetParam().model) + kPacking + " " + layout;
  }
  static constexpr int64_t kPackedSeq = int64_t(13 + 1 + 16 + 1 + 9);
};

// A document alone: its tokens, its EOD, and the next document's first
// token as the EOD's target; the last document, C, predicts its own EOD.
struct Alone {
  std::vector<std::string> docs;
  int64_t seq_len;
};

TEST_P(PackedDocuments, TrainAsEachDocumentAlone) {
  const LayoutResult together = run_layout("comm.world_size=1 " + packed(""));
  ASSERT_EQ(together.exit_code, 0) << together.log;
  ASSERT_EQ(together.losses.size(), 1u) << together.log;
  const std::vector<Alone> alone = {{{kA, kB.substr(0, 1)}, int64_t(kA.size()) + 1},
                                    {{kB, kC.substr(0, 1)}, int64_t(kB.size()) + 1},
                                    {{kC}, int64_t(kC.size())}};
  // Both means are over the same tokens' losses: the packed one over
  // kPackedSeq positions, each alone one over its seq_len, so the sums
  // (mean x tokens) must agree, for the loss and for every gradient.
  double loss_sum = 0;
  std::map<std::string, std::vector<double>> grad_sum;
  for (size_t i = 0; i < alone.size(); ++i) {
    const std::string prefix = datasets().prepare("alone" + std::to_string(i), alone[i].docs);
    const LayoutResult r = run_layout("comm.world_size=1 " + one_window(prefix, alone[i].seq_len, GetParam().model));
    ASSERT_EQ(r.exit_code, 0) << r.log;
    ASSERT_EQ(r.losses.size(), 1u) << r.log;
    loss_sum += r.losses[0] * double(alone[i].seq_len);
    for (const auto& [name, g] : r.grads) {
      std::vector<double>& sum = grad_sum[name];
      // A learned position table has seq_len rows: each alone run's are the
      // first rows of the packed run's (the rows past them get nothing).
      if (sum.size() < g.size()) sum.resize(g.size());
      for (size_t k = 0; k < g.size(); ++k) sum[k] += double(g[k]) * double(alone[i].seq_len);
    }
  }
  // Float sums in another order: each value is a sum over at most 40 tokens
  // of terms formed through the same layers, so the orders differ by about
  // 40 float roundings (40 x 6e-8 = 2.4e-6) of the largest term; losses get
  // 1e-5 relative and gradients 1e-4 of their tensor's largest element, as
  // the layout tests allow for their reduction orders.
  EXPECT_NEAR(together.losses[0] * double(kPackedSeq), loss_sum, 1e-5 * loss_sum);
  ASSERT_FALSE(together.grads.empty()) << together.log;
  ASSERT_EQ(grad_sum.size(), together.grads.size());
  for (const auto& [name, g] : together.grads) {
    ASSERT_EQ(grad_sum.count(name), 1u) << name;
    std::vector<float> want(g.size()), got(g.size());
    const std::vector<double>& sum = grad_sum.at(name);
    ASSERT_LE(sum.size(), g.size()) << name;
    for (size_t k = 0; k < g.size(); ++k) {
      got[k] = float(double(g[k]) * double(kPackedSeq));
      want[k] = k < sum.size() ? float(sum[k]) : 0.0f;
    }
    EXPECT_LE(relative_difference(got, want), 1e-4) << name;
  }
}

// Packing changes the function (the documents no longer see each other),
// which the comparison above would miss were both options ignored. At
// initialisation the loss is about log(vocab) whatever the context, so the
// gradients show it: some tensor's differ by far more than the 1e-4 above.
TEST_P(PackedDocuments, DiffersFromTheWindowUnpacked) {
  static const std::string prefix = datasets().prepare("packed_plain", {kA, kB, kC});
  const LayoutResult plain = run_layout("comm.world_size=1 " + one_window(prefix, kPackedSeq, GetParam().model));
  const LayoutResult together = run_layout("comm.world_size=1 " + packed(""));
  ASSERT_EQ(plain.exit_code, 0) << plain.log;
  ASSERT_EQ(together.exit_code, 0) << together.log;
  double largest = 0;
  for (const auto& [name, g] : together.grads)
    largest = std::max(largest, relative_difference(plain.grads.at(name), g));
  EXPECT_GT(largest, 1e-2);
}

TEST_P(PackedDocuments, EveryLayoutComputesOneRanksFunction) {
  const LayoutResult ref = run_layout("comm.world_size=1 " + packed(""));
  ASSERT_EQ(ref.exit_code, 0) << ref.log;
  for (const char* layout : {"comm.world_size=2 parallel.tensor.size=2 parallel.tensor.sequence_parallel=true",
                             "comm.world_size=2 parallel.pipeline.size=2", "comm.world_size=2",
                             "comm.world_size=1 recompute.plugin=selective"}) {
    SCOPED_TRACE(layout);
    expect_same_function(ref, run_layout(packed(layout)), true);
  }
}

const Shape kShapes[] = {{"gpt2_learned_positions", "model.arch=gpt2"},
                         {"llama_rope_gqa", "model.arch=llama model.kv_heads=2"}};

INSTANTIATE_TEST_SUITE_P(Shapes, PackedDocuments, ::testing::ValuesIn(kShapes),
                         [](const ::testing::TestParamInfo<Shape>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace mh::test
