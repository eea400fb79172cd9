#include "run/dry_run.hpp"

#include "preflight/launch_check.hpp"

#include "plugins/assembly.hpp"

#include <algorithm>
#include <string>
#include <string_view>

namespace mh {
namespace {

// The default of the real component's `dtype` option ("bf16" from the
// literal "\"bf16\""), or "" when it has none.
std::string default_dtype(const Registry& registry, const std::string& plugin) {
  const Component* c = registry.find(MH_KIND_KERNELS, plugin);
  if (c == nullptr) return "";
  for (size_t i = 0; i < c->desc->num_options; ++i) {
    const MH_OptionSpec& spec = c->desc->options[i];
    if (std::string_view(spec.name) != "dtype" || spec.default_value == nullptr) continue;
    try {
      return toml::parse("v = " + std::string(spec.default_value))["v"].value_or(std::string());
    } catch (const toml::parse_error&) {
      return "";  // the registry reports malformed defaults
    }
  }
  return "";
}

}  // namespace

toml::table dry_kernels_section(const Config& config, const Registry& registry) {
  const toml::node_view kernels = config.root()["kernels"];
  std::string dtype = kernels["dtype"].value_or(std::string());
  std::string plugin = kernels["plugin"].value_or(std::string());
  // A wrapper's dtype is its inner component's (ABI 1.5, MH_OPTION_INNER).
  if (const Component* c = registry.find(MH_KIND_KERNELS, plugin))
    if (const MH_OptionSpec* inner = inner_option(*c->desc)) plugin = kernels[inner->name].value_or(std::string());
  if (dtype.empty()) dtype = default_dtype(registry, plugin);
  toml::table dry{{"plugin", "dry"}};
  if (!dtype.empty()) dry.insert("dtype", dtype);
  return dry;
}

std::optional<toml::table> dry_comm_section(const Config& config) {
  std::string variable;
  if (mpi_launched_size(variable) > 1) return std::nullopt;
  const toml::node_view comm = config.root()["comm"];
  const int64_t world = std::max<int64_t>(1, comm["world_size"].value_or(int64_t{1}));
  // W thread ranks take turns on the machine's cores, and a collective
  // waits until every one of them was scheduled: 1024 ranks on 2 cores need
  // more than the default 30 s.
  const double timeout = std::max(comm["timeout_s"].value_or(30.0), 0.25 * double(world));
  return toml::table{{"plugin", "threads"}, {"world_size", world}, {"timeout_s", timeout}};
}

}  // namespace mh
