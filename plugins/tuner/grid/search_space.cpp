#include "search_space.hpp"

#include <megahost/error.hpp>
#include <megahost/options.hpp>

#include <algorithm>
#include <sstream>

namespace mh::tuner {
namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::vector<bool> bool_list(const std::string& text, const std::string& key) {
  if (text == "auto") return {true, false};
  std::vector<bool> out;
  for (const auto& item : split(text)) {
    require(item == "true" || item == "false",
            key + ": '" + item + "' is not true or false; give \"true\", \"false\", \"true,false\" or \"auto\"");
    out.push_back(item == "true");
  }
  return out;
}

// "auto": every policy the host's registry holds, a third party's too.
std::vector<std::string> recompute_list(const std::string& text, const std::string& key,
                                        const std::vector<std::string>& policies) {
  if (text == "auto") {
    require(!policies.empty(), key + " = \"auto\" searches the recompute policies the host registers, and this host "
                               "(ABI < 1.4) does not list them; name them, e.g. \"none,selective,full\"");
    return policies;
  }
  std::vector<std::string> out = split(text);
  for (const auto& item : out)
    require(policies.empty() || std::find(policies.begin(), policies.end(), item) != policies.end(),
            key + ": '" + item + "' is not a registered recompute policy; use " + joined(policies) +
                " or \"auto\" (a third party's plugin comes in with --plugin_path)");
  require(!out.empty(), key + " is empty; name recompute policies such as \"none,selective,full\", or \"auto\"");
  return out;
}

// The distributed optimizer's choices at data-parallel size d: with d = 1
// there is nothing to shard, so only the plain optimizer.
struct DataChoice {
  bool distributed, overlap;
};
std::vector<DataChoice> data_choices(const SearchLists& lists, int32_t d) {
  std::vector<DataChoice> out;
  for (bool dist : bool_list(lists.distributed_optimizer, "tuner.distributed_optimizer")) {
    if (dist && d == 1) continue;
    for (bool overlap : bool_list(lists.overlap_param_gather, "tuner.overlap_param_gather"))
      if (dist || !overlap) out.push_back(DataChoice{dist, overlap});
  }
  if (out.empty()) out.push_back(DataChoice{false, false});  // d = 1 asked for the distributed optimizer only
  return out;
}

std::string str(int64_t v) { return std::to_string(v); }

// What stops the layout from running, one reason per line.
std::vector<std::string> problems(const Layout& l, const Model& m, int32_t devices) {
  std::vector<std::string> out;
  if (l.world() != devices)
    out.push_back("t*p*d = " + str(l.t) + "*" + str(l.p) + "*" + str(l.d) + " = " + str(l.world()) + " is not the " +
                  str(devices) + " devices of the cluster");
  if (m.heads % l.t != 0) out.push_back("t = " + str(l.t) + " does not divide the " + str(m.heads) + " heads");
  else if (m.kv() % l.t != 0)
    out.push_back("t = " + str(l.t) + " does not divide the " + str(m.kv()) + " key/value heads");
  else if (m.ffn % l.t != 0 || m.vocab % l.t != 0)
    out.push_back("t = " + str(l.t) + " does not divide ffn_hidden = " + str(m.ffn) + " or the padded vocabulary " + str(m.vocab));
  if (l.sp && m.seq % l.t != 0)
    out.push_back("sequence parallelism: t = " + str(l.t) + " does not divide seq_len = " + str(m.seq));
  if (m.layers % (int64_t(l.p) * l.v) != 0)
    out.push_back("p*v = " + str(int64_t(l.p) * l.v) + " does not divide the " + str(m.layers) + " layers");
  if (l.v > 1 && l.p < 2) out.push_back("v = " + str(l.v) + " virtual stages need p >= 2");
  if (m.global_batch % (int64_t(l.b) * l.d) != 0)
    out.push_back("b*d = " + str(int64_t(l.b) * l.d) + " does not divide the global batch " + str(m.global_batch));
  else if (l.v > 1 && l.microbatches(m) % l.p != 0)
    out.push_back("interleaving needs the " + str(l.microbatches(m)) + " micro-batches to be a multiple of p = " + str(l.p));
  return out;
}

// The divisors of n that also divide m.
std::vector<int64_t> common_divisors(int64_t n, int64_t m) {
  std::vector<int64_t> out = divisors(n);
  std::erase_if(out, [&](int64_t k) { return m % k != 0; });
  return out;
}

// Every (t, p, d) of the lists; "auto" takes the sizes that divide what
// they split and the devices.
template <class F>
void for_each_split(const SearchLists& lists, const Model& m, int32_t devices, F&& f) {
  for (int64_t t : int_list(lists.tensor, common_divisors(m.kv(), devices), "tuner.tensor"))
    for (int64_t p : int_list(lists.pipeline, common_divisors(m.layers, std::max<int64_t>(1, devices / t)), "tuner.pipeline"))
      for (int64_t d : int_list(lists.data, {std::max<int64_t>(1, devices / (t * p))}, "tuner.data"))
        f(int32_t(t), int32_t(p), int32_t(d));
}

}  // namespace

SearchLists SearchLists::from(const Options& o) {
  return SearchLists{o.get_string("tensor"),
                     o.get_string("pipeline"),
                     o.get_string("virtual_stages"),
                     o.get_string("data"),
                     o.get_string("sequence_parallel"),
                     o.get_string("micro_batch"),
                     o.get_string("recompute"),
                     o.get_string("recompute_layers"),
                     o.get_string("distributed_optimizer"),
                     o.get_string("overlap_param_gather")};
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t k = 1; k <= n; ++k)
    if (n % k == 0) out.push_back(k);
  return out;
}

std::vector<int64_t> int_list(const std::string& text, const std::vector<int64_t>& auto_values, const std::string& key) {
  if (text == "auto") return auto_values;
  std::vector<int64_t> out;
  for (const auto& item : split(text)) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(used == item.size() && v >= 1,
            key + ": '" + item + "' is not a positive whole number; give a comma list such as \"1,2,4\" or \"auto\"");
    out.push_back(v);
  }
  require(!out.empty(), key + " is empty; give a comma list such as \"1,2,4\" or \"auto\"");
  return out;
}

std::vector<Proposal> training_proposals(const SearchLists& lists, const Model& m, int32_t devices,
                                         const std::vector<std::string>& registered) {
  const std::vector<bool> sps = bool_list(lists.sequence_parallel, "tuner.sequence_parallel");
  const std::vector<std::string> policies = recompute_list(lists.recompute, "tuner.recompute", registered);
  std::vector<Proposal> out;
  for_each_split(lists, m, devices, [&](int32_t t, int32_t p, int32_t d) {
    const std::vector<DataChoice> optimizers = data_choices(lists, d);
    const int64_t stage_layers = std::max<int64_t>(1, m.layers / p);
    for (int64_t v : int_list(lists.virtual_stages, divisors(stage_layers), "tuner.virtual_stages"))
      for (bool sp : sps) {
        if (sp && t == 1) continue;  // sequence parallelism is off at t = 1, as in Megatron
        for (int64_t b : int_list(lists.micro_batch, divisors(std::max<int64_t>(1, m.global_batch / d)), "tuner.micro_batch"))
          for (const std::string& r : policies) {
            // Megatron's full recompute checkpoints groups of layers; other
            // policies run with their defaults.
            const std::vector<int64_t> groups =
                r == "full" ? int_list(lists.recompute_layers, divisors(std::max<int64_t>(1, stage_layers / v)),
                                       "tuner.recompute_layers")
                            : std::vector<int64_t>{0};
            for (int64_t n : groups)
              for (DataChoice o : optimizers) {
                Layout l{t, p, int32_t(v), d, int32_t(b), sp, r, int32_t(n), o.distributed, o.overlap};
                out.push_back(Proposal{l, problems(l, m, devices)});
              }
          }
      }
  });
  return out;
}

std::vector<Proposal> inference_proposals(const SearchLists& lists, const std::string& batches, const Model& m,
                                          int32_t devices) {
  std::vector<Proposal> out;
  for_each_split(lists, m, devices, [&](int32_t t, int32_t p, int32_t d) {
    for (int64_t b : int_list(batches, {1}, "tuner.inference_batch")) {
      Layout l{t, p, 1, d, int32_t(b), false};
      Model one = m;
      one.global_batch = int64_t(b) * d;  // one batch per replica
      out.push_back(Proposal{l, problems(l, one, devices)});
    }
  });
  return out;
}

}  // namespace mh::tuner
