#include "data/split.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>

namespace mh::data {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

void expect_range(std::string_view weights, Split split, int64_t documents, int64_t begin,
                  int64_t end) {
  DocumentRange range = split_documents(weights, split, documents);
  EXPECT_EQ(range.begin, begin) << weights << " " << split_name(split);
  EXPECT_EQ(range.end, end) << weights << " " << split_name(split);
}

TEST(Split, WeightsCutConsecutiveDocumentRanges) {
  expect_range("98,2,0", Split::kTrain, 100, 0, 98);
  expect_range("98,2,0", Split::kValid, 100, 98, 100);
  expect_range("98,2,0", Split::kTest, 100, 100, 100);
}

TEST(Split, WeightsAreNormalised) {
  expect_range("8,1,1", Split::kTrain, 10, 0, 8);
  expect_range("0.8, 0.1, 0.1", Split::kValid, 10, 8, 9);
  expect_range("80/10/10", Split::kTest, 10, 9, 10);
}

TEST(Split, MissingWeightsAreZero) {
  expect_range("1", Split::kTrain, 7, 0, 7);
  expect_range("1", Split::kValid, 7, 7, 7);
  expect_range("3,1", Split::kValid, 8, 6, 8);
}

TEST(Split, BoundsRoundHalfToEvenAsPython) {
  // 5 documents at 1:1 put the bound at 2.5, which Python's round() takes to 2.
  expect_range("1,1", Split::kTrain, 5, 0, 2);
  expect_range("1,1", Split::kValid, 5, 2, 5);
  // 7 at 1:1 puts it at 3.5, which rounds to 4.
  expect_range("1,1", Split::kTrain, 7, 0, 4);
}

TEST(Split, MalformedWeightsAreAClearError) {
  for (std::string_view weights : {"", "a,b", "1,,2", "1,2,3,4", "-1,2", "0,0,0", "1x"}) {
    EXPECT_THAT([&] { split_documents(weights, Split::kTrain, 10); },
                ThrowsMessage<Error>(HasSubstr("e.g. \"98,2,0\"")))
        << weights;
  }
}

}  // namespace
}  // namespace mh::data
