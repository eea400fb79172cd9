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
  std::string gpt2_ids_dataset() {
    const std::string prefix = dir_.file("gpt2_ids");
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

}  // namespace
}  // namespace mh::host::testing
