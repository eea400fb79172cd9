#include "dry_run.hpp"

#include "launch_check.hpp"

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
  if (dtype.empty()) dtype = default_dtype(registry, kernels["plugin"].value_or(std::string()));
  toml::table dry{{"plugin", "dry"}};
  if (!dtype.empty()) dry.insert("dtype", dtype);
  return dry;
}

std::optional<toml::table> dry_comm_section(const Config& config) {
  const toml::node_view comm = config.root()["comm"];
  std::string variable;
  if (comm["plugin"].value_or(std::string("threads")) == "threads" || mpi_launched_size(variable) > 1) return std::nullopt;
  toml::table threads{{"plugin", "threads"}, {"world_size", std::max<int64_t>(1, comm["world_size"].value_or(int64_t{1}))}};
  if (const toml::node* timeout = comm["timeout_s"].node()) threads.insert("timeout_s", *timeout);
  return threads;
}

}  // namespace mh
