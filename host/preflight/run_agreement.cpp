#include "preflight/run_agreement.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "engine/collectives.hpp"

namespace mh {
namespace {

struct Setting {
  std::string key, value;
};

std::string value_text(const MH_NamedValue& v) {
  std::ostringstream out;
  switch (v.type) {
    case MH_VALUE_BOOL: out << (v.value.b ? "true" : "false"); break;
    case MH_VALUE_INT: out << v.value.i; break;
    case MH_VALUE_DOUBLE: out.precision(17); out << v.value.d; break;
    default: out << '"' << v.value.s << '"'; break;
  }
  return out.str();
}

void add_options(const OptionValues& values, std::vector<Setting>& out) {
  const MH_Options* o = values.view();
  for (size_t i = 0; i < o->count; ++i) out.push_back({values.section() + "." + o->values[i].name, value_text(o->values[i])});
}

// Every option the run resolved, and each slot's plugin and version.
std::vector<Setting> resolved_run(const Assembly& a) {
  std::vector<Setting> out;
  for (const OptionValues* host : {&a.model, &a.train, &a.data, &a.output}) add_options(*host, out);
  for (const Slot& slot : a.slots) {
    out.push_back({slot.section + ".plugin", std::string(slot.component->desc->name) + " " + slot.component->desc->version});
    add_options(slot.options, out);
  }
  std::sort(out.begin(), out.end(), [](const Setting& x, const Setting& y) { return x.key < y.key; });
  return out;
}

uint64_t fnv1a(const std::string& text, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// 24 bits: a float holds every such integer exactly.
float low24(uint64_t h) { return float(h & 0xffffff); }

std::vector<float> gather(Collectives& world, const std::vector<float>& mine) {
  std::vector<float> all(mine.size() * size_t(world.size()));
  world.all_gather_host(mine.data(), all.data(), int64_t(mine.size()));
  return all;
}

// The keys of `mine` whose value hash differs from `theirs` (pairs of key
// hash, value hash, padded with -1), and keys only one side has.
std::vector<std::string> differing_keys(const std::vector<Setting>& mine, const float* theirs, size_t entries) {
  std::vector<std::string> out;
  for (const Setting& s : mine) {
    const float key = low24(fnv1a(s.key)), value = low24(fnv1a(s.key + "=" + s.value));
    bool same = false;
    for (size_t e = 0; e < entries; ++e) same = same || (theirs[2 * e] == key && theirs[2 * e + 1] == value);
    if (!same) out.push_back(s.key + " = " + s.value);
  }
  return out;
}

}  // namespace

void agree_on_run(const MH_CommApi* api, MH_Instance* comm, const MH_CommInfo& info, const Assembly& assembly) {
  if (info.ranks_in_process >= info.world_size) return;
  MH_Group* group = nullptr;
  check(api->world(comm, 0, &group), "comm world group");
  Collectives world(api, group, "world", false);
  const std::vector<Setting> run = resolved_run(assembly);
  uint64_t digest = fnv1a("");
  for (const Setting& s : run) digest = fnv1a(s.key + "=" + s.value + "\n", digest);
  // Every rank sends the same number of floats in each call, whatever its config.
  const std::vector<float> summary = gather(world, {float(run.size()), low24(digest), low24(digest >> 24)});
  size_t most = 0;
  bool agree = true;
  for (int32_t r = 0; r < world.size(); ++r) {
    most = std::max(most, size_t(summary[size_t(3 * r)]));
    agree = agree && std::equal(summary.begin(), summary.begin() + 3, summary.begin() + 3 * r);
  }
  if (agree) return;
  std::vector<float> entries(2 * most, -1.0f);
  for (size_t e = 0; e < run.size(); ++e) {
    entries[2 * e] = low24(fnv1a(run[e].key));
    entries[2 * e + 1] = low24(fnv1a(run[e].key + "=" + run[e].value));
  }
  const std::vector<float> all = gather(world, entries);
  std::string ranks;
  for (int32_t r = 1; r < world.size(); ++r)
    if (!std::equal(summary.begin(), summary.begin() + 3, summary.begin() + 3 * r))
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  const int32_t me = info.first_rank, other = me == 0 ? 1 : 0;
  std::string keys;
  for (const auto& k : differing_keys(run, all.data() + 2 * most * size_t(other), most))
    keys += (keys.empty() ? "" : ", ") + k;
  throw Error(MH_INVALID_ARGUMENT, "the ranks were started with different runs: rank(s) " + ranks +
                                       " differ from rank 0" +
                                       (keys.empty() ? "" : "; on this rank (" + std::to_string(me) + "), unlike rank " +
                                                                std::to_string(other) + ": " + keys) +
                                       "; start every rank with the same config, overrides and plugins");
}

}  // namespace mh
