#include "preflight/launch_check.hpp"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

namespace mh {

long mpi_launched_size(std::string& variable) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* value = std::getenv(name)) {
      variable = name + std::string("=") + value;
      return std::strtol(value, nullptr, 10);
    }
  }
  return 0;
}

namespace {

// A world_size the config sets for a communicator that takes its ranks from
// the launcher must be the launcher's: the shipped config names one for its
// thread ranks, and the same file serves mpirun.
void check_world_size(const Config& config, long processes, const std::string& variable, Diagnostics& diag) {
  const toml::table* section = find_table(config.root(), "comm");
  const toml::node* size = section != nullptr ? section->get("world_size") : nullptr;
  const std::optional<int64_t> value = size != nullptr ? size->value<int64_t>() : std::nullopt;
  if (!value || *value == processes || *value == 0) return;
  diag.error(config.where(*size), "comm.world_size is " + std::to_string(*value) + ", but the launcher started " +
                                      std::to_string(processes) + " rank(s) (" + variable + "); set it to " +
                                      std::to_string(processes) + " or leave it out");
}

}  // namespace

void check_launch(const Config& config, const Assembly& assembly, Diagnostics& diag) {
  const Slot* comm = assembly.slot(MH_KIND_COMM);
  std::string variable;
  const long processes = mpi_launched_size(variable);
  if (comm == nullptr || processes <= 1) return;
  if (std::strcmp(comm->component->desc->name, "threads") != 0)
    return check_world_size(config, processes, variable, diag);
  const toml::table* section = find_table(config.root(), "comm");
  const toml::node* plugin = section != nullptr ? section->get("plugin") : nullptr;
  diag.error(plugin != nullptr ? config.where(*plugin) : config.where(section),
             "comm.plugin is 'threads', but an MPI launcher started this process as one of " +
                 std::to_string(processes) + " (" + variable +
                 "): each would train its own copy; set comm.plugin=mpi (or nccl on GPUs), or run one process");
}

}  // namespace mh
