// The [tuner] search space: each dimension a comma list or "auto", expanded
// against the model and the cluster into every candidate layout, each with
// the reasons it cannot run (a size that does not divide what it splits).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layout.hpp"

namespace mh {
class Options;
}

namespace mh::tuner {

struct SearchLists {
  std::string tensor, pipeline, virtual_stages, data, sequence_parallel, micro_batch, recompute,
      recompute_layers, distributed_optimizer, overlap_param_gather;
  // Context-parallel sizes, their comm types, expert-parallel sizes.
  std::string context = "1", context_comm = "auto", expert = "1";

  static SearchLists from(const Options& options);
};

struct Proposal {
  Layout layout;
  std::vector<std::string> problems;  // empty: the host can run it
};

// Every combination of the lists for `devices` ranks in all. `policies`:
// the recompute policies the host's registry holds, which "auto" searches
// and named ones must be among (empty: the host did not say, ABI < 1.4).
std::vector<Proposal> training_proposals(const SearchLists& lists, const Model& model, int32_t devices,
                                         const std::vector<std::string>& policies);

// Generation: (t, p) with t * p up to the devices (no data parallelism; the
// world is t * p) and the batch as the micro-batch.
std::vector<Proposal> inference_proposals(const SearchLists& lists, const std::string& batches, const Model& model,
                                          int32_t devices);

// "1,2,4" -> {1, 2, 4}; "auto" -> auto_values; throws naming `key` on a bad
// entry.
std::vector<int64_t> int_list(const std::string& text, const std::vector<int64_t>& auto_values, const std::string& key);

std::vector<int64_t> divisors(int64_t n);

}  // namespace mh::tuner
