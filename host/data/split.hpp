// Megatron's train/valid/test split: weights such as "98,2,0" (or "98/2/0";
// missing trailing weights are 0) are normalised and cut the documents, in
// file order, into three consecutive ranges.
#pragma once

#include <cstdint>
#include <string_view>

namespace mh::data {

enum class Split { kTrain = 0, kValid = 1, kTest = 2 };

std::string_view split_name(Split split);

// Documents [begin, end) of one split out of `documents`. As in Megatron the
// bounds are the cumulative normalised weights times the document count,
// rounded to nearest with ties to even (Python's round). Throws mh::Error on
// malformed weights.
struct DocumentRange {
  int64_t begin;
  int64_t end;
};
DocumentRange split_documents(std::string_view weights, Split split, int64_t documents);

// Whether `weights` give `split` a weight above zero. Throws mh::Error on
// malformed weights.
bool split_weighted(std::string_view weights, Split split);

}  // namespace mh::data
