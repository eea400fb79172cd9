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

// The distributed optimizer's choices for a data group of d ranks (the
// replicas with their context ranks): with one there is nothing to shard, so
// only the plain optimizer.
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

// "all_gather,p2p,a2a" checked; "auto": every comm type the engine runs,
// ring attention only with the flash core it needs.
std::vector<std::string> comm_list(const std::string& text, const Model& m) {
  if (text == "auto") return m.flash ? std::vector<std::string>{"all_gather", "p2p", "a2a"}
                                     : std::vector<std::string>{"all_gather", "a2a"};
  std::vector<std::string> out = split(text);
  for (const auto& item : out)
    require(item == "all_gather" || item == "p2p" || item == "a2a",
            "tuner.context_comm: '" + item + "' is not a context comm type; give a comma list of \"all_gather\", "
            "\"p2p\" and \"a2a\", or \"auto\"");
  require(!out.empty(), "tuner.context_comm is empty; give a comma list such as \"a2a,p2p\", or \"auto\"");
  return out;
}

// What the engine refuses of context and expert parallelism (host/run/run.cpp,
// the context and expert plugins, the MoE MLP), one reason per line, so the
// tuner never proposes what a dry run would only fail on.
void context_expert_problems(const Layout& l, const Model& m, bool training, std::vector<std::string>& out) {
  // The experts run whole on each tensor rank's sequence shard; generation
  // holds every row on each tensor rank and runs the whole mixture there.
  if (training && m.moe() && l.t > 1 && !l.sp)
    out.push_back("t = " + str(l.t) + " without sequence parallelism: the mixture of experts needs it");
  if (l.cp > 1) {
    // Load-balanced: two chunks per rank, one from each end of the sequence.
    if (m.seq % (2 * int64_t(l.cp)) != 0)
      out.push_back("cp = " + str(l.cp) + " cuts seq_len = " + str(m.seq) + " into " + str(2 * l.cp) +
                    " chunks (2 per rank), which do not divide it");
    else if (l.sp && (m.seq / l.cp % l.t != 0 || l.t % 2 != 0))
      out.push_back("sequence parallelism with cp = " + str(l.cp) + ": t = " + str(l.t) +
                    " must divide each rank's " + str(m.seq / l.cp) + " positions and be a multiple of its 2 chunks");
    if (l.cp_comm == "a2a" && m.kv() % l.t == 0 && (m.kv() / l.t) % l.cp != 0)
      out.push_back("a2a: cp = " + str(l.cp) + " does not divide each tensor rank's " + str(m.kv() / l.t) +
                    " key/value heads");
    if (l.cp_comm == "p2p" && !m.flash)
      out.push_back("p2p: ring attention needs model.attention_backend = \"flash\"");
  }
  if (l.ep > 1) {
    if (!m.moe()) out.push_back("ep = " + str(l.ep) + " needs a mixture of experts (model.experts = 0)");
    else if (m.experts % l.ep != 0)
      out.push_back("ep = " + str(l.ep) + " does not divide the " + str(m.experts) + " experts");
    // The expert group is drawn from the replicas, their context ranks and
    // their tensor ranks.
    if (l.expert_ranks() % l.ep != 0)
      out.push_back("ep = " + str(l.ep) + " does not divide d*cp*t = " + str(l.d) + "*" + str(l.cp) + "*" + str(l.t) +
                    " = " + str(l.expert_ranks()));
  }
}

// What stops the layout from running, one reason per line.
std::vector<std::string> problems(const Layout& l, const Model& m, int32_t devices, bool training) {
  std::vector<std::string> out;
  if (l.world() != devices)
    out.push_back((l.cp > 1 ? "t*cp*p*d = " + str(l.t) + "*" + str(l.cp) + "*" : "t*p*d = " + str(l.t) + "*") +
                  str(l.p) + "*" + str(l.d) + " = " + str(l.world()) + " is not the " + str(devices) +
                  " devices of the cluster");
  context_expert_problems(l, m, training, out);
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

// How a candidate splits the model over the devices.
struct Split {
  int32_t t, cp, p, d, ep;
  std::string cp_comm;  // empty at cp = 1
};

// Every split of the lists; "auto" takes the sizes that divide what they
// split and the devices (cp: 2 cp chunks of the sequence; ep: the experts
// and d cp t). The comm type matters only with cp > 1.
template <class F>
void for_each_split(const SearchLists& lists, const Model& m, int32_t devices, F&& f) {
  const std::vector<std::string> comms = comm_list(lists.context_comm, m);
  for (int64_t t : int_list(lists.tensor, common_divisors(m.kv(), devices), "tuner.tensor"))
    for (int64_t cp : int_list(lists.context, common_divisors(m.seq / 2, std::max<int64_t>(1, devices / t)), "tuner.context"))
      for (int64_t p : int_list(lists.pipeline, common_divisors(m.layers, std::max<int64_t>(1, devices / (t * cp))), "tuner.pipeline"))
        for (int64_t d : int_list(lists.data, {std::max<int64_t>(1, devices / (t * cp * p))}, "tuner.data"))
          for (int64_t ep : int_list(lists.expert, m.moe() ? common_divisors(m.experts, d * cp * t) : std::vector<int64_t>{1}, "tuner.expert"))
            for (const std::string& comm : cp > 1 ? comms : std::vector<std::string>{""})
              f(Split{int32_t(t), int32_t(cp), int32_t(p), int32_t(d), int32_t(ep), comm});
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
                     o.get_string("overlap_param_gather"),
                     o.get_string("context"),
                     o.get_string("context_comm"),
                     o.get_string("expert")};
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
  for_each_split(lists, m, devices, [&](const Split& split) {
    const auto [t, cp, p, d, ep, comm] = split;
    const std::vector<DataChoice> optimizers = data_choices(lists, split.d * split.cp);
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
                Layout l{t, p, int32_t(v), d, int32_t(b), sp, r, int32_t(n), o.distributed, o.overlap, cp, ep, comm};
                out.push_back(Proposal{l, problems(l, m, devices, true)});
              }
          }
      }
  });
  return out;
}

std::vector<Proposal> inference_proposals(const SearchLists& lists, const std::string& batches, const Model& m,
                                          int32_t devices) {
  std::vector<Proposal> out;
  for (int64_t t : int_list(lists.tensor, common_divisors(m.kv(), devices), "tuner.tensor"))
    for (int64_t p : int_list(lists.pipeline, common_divisors(m.layers, std::max<int64_t>(1, devices / t)), "tuner.pipeline"))
      for (int64_t b : int_list(batches, {1}, "tuner.inference_batch")) {
        Layout l{int32_t(t), int32_t(p), 1, 1, int32_t(b), false, "none", 0};
        Model one = m;
        one.global_batch = b;  // one batch of requests
        std::vector<std::string> why = problems(l, one, l.world(), false);
        if (l.world() > devices)
          why.push_back("t*p = " + str(l.world()) + " is more than the " + str(devices) + " devices of the cluster");
        out.push_back(Proposal{l, std::move(why)});
      }
  return out;
}

}  // namespace mh::tuner
