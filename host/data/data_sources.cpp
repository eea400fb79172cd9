#include "data/data_sources.hpp"

#include "data/blend.hpp"
#include "data/gpt_samples.hpp"
#include "data/loss_mask.hpp"
#include "data/token_range.hpp"

#include <megahost/error.hpp>

namespace mh::data {
namespace {

// One split's list: which key names it, the prefixes, and how to cut each.
struct SplitList {
  std::string key;
  std::vector<BlendEntry> entries;
  Split split;
  std::string weights;  // split weights applied to each dataset
};

std::unique_ptr<Samples> samples_of(const SplitList& list, const std::vector<IndexedDataset*>& datasets,
                                    const OpenedData& opened, const DataRequest& r, bool concatenate) {
  std::vector<std::unique_ptr<Samples>> parts;
  std::vector<double> weights;
  for (size_t d = 0; d < datasets.size(); ++d) {
    // Each dataset its own order; the first keeps the seed as it is, so one
    // dataset gives the same samples as before blending existed.
    const IndexedDataset* mask = nullptr;
    for (size_t o = 0; o < opened.datasets.size(); ++o)
      if (opened.datasets[o].get() == datasets[d]) mask = opened.loss_masks[o].get();
    parts.push_back(std::make_unique<GptSamples>(*datasets[d], list.split, list.weights, r.seq_len, r.seed + d, mask,
                                                 r.eod_mask_id));
    weights.push_back(list.entries[d].weight);
  }
  if (concatenate) return std::make_unique<ConcatenatedSamples>(std::move(parts));
  return std::make_unique<BlendedSamples>(std::move(parts), std::move(weights));
}

class Opener {
 public:
  Opener(const DataRequest& r, OpenedData& out) : r_(r), out_(out) {}

  // The datasets of a list, each opened and checked once even when several
  // lists name it.
  std::vector<IndexedDataset*> open(const SplitList& list) {
    std::vector<IndexedDataset*> datasets;
    for (const BlendEntry& e : list.entries) {
      const std::string prefix = r_.resolve(e.prefix);
      IndexedDataset* found = nullptr;
      for (const auto& d : out_.datasets)
        if (d->prefix() == prefix) found = d.get();
      if (found == nullptr) {
        out_.datasets.push_back(std::make_unique<IndexedDataset>(prefix));
        found = out_.datasets.back().get();
        check_token_range(*found, r_.vocab, list.key, r_.vocab_source);
        found->limit_ids(r_.vocab, "re-create the dataset with megahost_prepare (and remove its .range file)");
        out_.loss_masks.push_back(open_loss_mask(*found));
      }
      datasets.push_back(found);
    }
    return datasets;
  }

 private:
  const DataRequest& r_;
  OpenedData& out_;
};

bool separate_lists(const DataKeys& k) {
  return !k.train_paths.empty() || !k.valid_paths.empty() || !k.test_paths.empty();
}

// The train, valid and test lists the keys describe; the train list only
// when training.
std::vector<SplitList> split_lists(const DataKeys& k, bool train) {
  if (!separate_lists(k)) {
    const std::string key = k.paths.empty() ? "data.path" : "data.paths";
    std::vector<BlendEntry> entries = parse_blend(k.paths.empty() ? k.path : k.paths, key);
    return {{key, entries, Split::kTrain, k.split}, {key, entries, Split::kValid, k.split},
            {key, entries, Split::kTest, k.split}};
  }
  require(k.paths.empty(), "data.paths and data.train_paths/valid_paths/test_paths are both given; use "
                           "data.paths with data.split, or the three lists, not both");
  require(!train || !k.train_paths.empty(), "data.valid_paths or data.test_paths is given without data.train_paths; "
                                            "give the training datasets in data.train_paths");
  std::vector<SplitList> lists;
  if (train)
    lists.push_back({"data.train_paths", parse_blend(k.train_paths, "data.train_paths"), Split::kTrain, "1,0,0"});
  if (!k.valid_paths.empty())
    lists.push_back({"data.valid_paths", parse_blend(k.valid_paths, "data.valid_paths"), Split::kValid, "0,1,0"});
  if (!k.test_paths.empty())
    lists.push_back({"data.test_paths", parse_blend(k.test_paths, "data.test_paths"), Split::kTest, "0,0,1"});
  return lists;
}

}  // namespace

bool split_given(const DataKeys& k, Split split) {
  if (!separate_lists(k)) return split_weighted(k.split, split);
  switch (split) {
    case Split::kTrain: return !k.train_paths.empty();
    case Split::kValid: return !k.valid_paths.empty();
    case Split::kTest: return !k.test_paths.empty();
  }
  return false;
}

OpenedData open_data(const DataRequest& r) {
  OpenedData out;
  Opener opener(r, out);
  for (const SplitList& list : split_lists(r.keys, r.train)) {
    std::vector<IndexedDataset*> datasets = opener.open(list);
    if (list.split == Split::kTrain && r.train) out.train = samples_of(list, datasets, out, r, false);
    if (list.split == Split::kValid && r.valid) out.valid = samples_of(list, datasets, out, r, r.whole_valid);
    if (list.split == Split::kTest && r.test) out.test = samples_of(list, datasets, out, r, true);
  }
  const bool separate = separate_lists(r.keys);
  require(!r.valid || out.valid != nullptr,
          std::string("validation is on (train.eval_interval > 0) but ") +
              (separate ? "data.valid_paths is empty; give validation datasets or set train.eval_interval = 0"
                        : "there is no validation split"));
  return out;
}

}  // namespace mh::data
