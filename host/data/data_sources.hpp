// The datasets of a run and the samples of its splits, from the [data] keys:
//   path         one dataset prefix, cut by split (the original key)
//   paths        weighted prefixes, "0.3 data/a 0.7 data/b" (Megatron's
//                --data-path): each dataset is cut by split, and each split
//                blends the datasets' parts of it by the weights
//   train_paths, valid_paths, test_paths
//                weighted prefixes used whole for one split each (Megatron's
//                --train-data-path, ...); split is then not used
// Every dataset's token ids are checked against the model's vocabulary. A
// dataset with a loss mask beside it (loss_mask.hpp) trains on the masked-in
// targets only.
// Evaluation alone (megahost --evaluate) needs no training data: the
// training list is then neither required nor opened.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/indexed_dataset.hpp"
#include "data/samples.hpp"
#include "data/split.hpp"

namespace mh::data {

struct DataKeys {
  std::string path, paths, train_paths, valid_paths, test_paths, split;
};

struct DataRequest {
  DataKeys keys;
  std::function<std::string(const std::string&)> resolve;  // a prefix as written -> a path
  int64_t seq_len;
  uint64_t seed;
  bool train;        // open the training split
  bool valid;        // open a validation split
  bool whole_valid;  // validation visits every window of every dataset once
  bool test;         // open the test split, whole (every window once)
  int64_t vocab;     // ids must be 0..vocab-1
  std::string vocab_source;
  int32_t eod_mask_id = -1;  // data.eod_mask_loss: the EOD's id, whose next target is not trained on
};

struct OpenedData {
  std::vector<std::unique_ptr<IndexedDataset>> datasets;
  std::vector<std::unique_ptr<IndexedDataset>> loss_masks;  // each dataset's (loss_mask.hpp), or null
  std::unique_ptr<Samples> train, valid, test;  // each only when requested
};

// Whether the keys give `split` any data: its own list (data.valid_paths,
// data.test_paths), or a weight above zero in data.split when the datasets
// are cut by it. Throws mh::Error on malformed weights.
bool split_given(const DataKeys& keys, Split split);

// Throws mh::Error naming the key and the fix for bad lists, a dataset that
// cannot be opened, ids outside the vocabulary, or a split too short.
OpenedData open_data(const DataRequest& request);

}  // namespace mh::data
