// The range of token ids a dataset holds, so that a run refuses a dataset
// made with another tokenizer before step 1 instead of training on ids the
// embedding table does not have. megahost_prepare stores it beside the
// dataset in PREFIX.range; any other dataset is scanned once and the result
// cached there (when the folder is writable). The sidecar names the .bin size
// and a hash of the .idx it describes, so a replaced dataset is rescanned.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

namespace mh::data {

class IndexedDataset;

struct TokenRange {
  int64_t tokens = 0;
  int64_t min = std::numeric_limits<int64_t>::max();
  int64_t max = std::numeric_limits<int64_t>::min();

  void add(int64_t id) {
    ++tokens;
    min = std::min(min, id);
    max = std::max(max, id);
  }
};

// Writes the sidecar for the finished .bin and .idx at bin_path, idx_path.
void write_token_range(const std::string& path, const std::string& bin_path,
                       const std::string& idx_path, const TokenRange& range);

// The dataset's range from PREFIX.range when it matches the .bin, else by a
// scan of the .bin (cached in PREFIX.range when possible).
TokenRange dataset_token_range(const IndexedDataset& dataset);

// Throws mh::Error naming the key, the prefix, the ids found and the
// vocabulary when an id is negative or not below vocab. `key` is the config
// key or flag that named the dataset; `vocab_source` says where vocab came
// from, for the fix.
void check_token_range(const IndexedDataset& dataset, int64_t vocab, const std::string& key,
                       const std::string& vocab_source);

}  // namespace mh::data
