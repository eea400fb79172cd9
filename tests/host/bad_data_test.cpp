// What a user sees when the data does not fit the model: the run stops
// before step 1 with status 1, naming the key, the dataset and the numbers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data/indexed_dataset.hpp"
#include "data/temp_dir.hpp"
#include "megahost_process.hpp"

namespace mh::host::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class BadData : public ::testing::Test {
 protected:
  // A dataset of GPT-2 ids, as megahost_prepare --tokenizer=gpt2 makes.
  std::string gpt2_ids_dataset(const std::string& name = "gpt2_ids") {
    const std::string prefix = dir_.file(name);
    data::IndexedDatasetWriter writer(prefix, data::TokenDType::kUint16);
    for (int d = 0; d < 20; ++d) writer.add_document(std::vector<int32_t>{15496, 11, 995, 50256});
    writer.finish();
    return prefix;
  }
  Outcome train_on(const std::string& prefix, std::vector<std::string> overrides = {}) {
    std::vector<std::string> args = tiny_run();
    args.insert(args.end(), {"train.steps=1", "model.seq_len=8", "data.split=\"1\"", "data.path=" + prefix});
    args.insert(args.end(), overrides.begin(), overrides.end());
    return run_megahost(args);
  }

  mh::data::testing::TempDir dir_;
};

TEST_F(BadData, DatasetOfALargerVocabularyIsRefusedBeforeStepOne) {
  const std::string prefix = gpt2_ids_dataset();
  Outcome o = train_on(prefix);
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("data.path: dataset " + prefix + " holds token ids 11..50256, but "
                               "the model's vocabulary is 257"));
  EXPECT_THAT(o.err, HasSubstr("set data.tokenizer to the tokenizer the dataset was prepared with"));
  EXPECT_THAT(o.out + o.err, Not(HasSubstr("step 1")));
}

TEST_F(BadData, DatasetTrainsWithTheTokenizerItWasMadeWith) {
  Outcome o = train_on(gpt2_ids_dataset(), {"data.tokenizer=gpt2"});
  EXPECT_EQ(o.status, 0) << o.err;
}

TEST_F(BadData, SeparateTrainingListWithoutValidationListIsAClearError) {
  const std::string prefix = gpt2_ids_dataset();
  Outcome o = train_on(prefix, {"data.tokenizer=gpt2", "data.train_paths=" + prefix, "train.eval_interval=1"});
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("data.valid_paths is empty; give validation datasets or set train.eval_interval = 0"));
}

TEST_F(BadData, BlendedDatasetsTrainAndValidateOverTheWholeSplit) {
  const std::string a = gpt2_ids_dataset("a"), b = gpt2_ids_dataset("b");
  Outcome o = train_on(a, {"data.tokenizer=gpt2", "data.paths=0.25 " + a + " 0.75 " + b,
                                "data.split=\"1,1\"", "train.eval_interval=1", "train.eval_batches=0"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.err, HasSubstr("validation loss"));
}

}  // namespace
}  // namespace mh::host::testing
