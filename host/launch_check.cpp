#include "launch_check.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

namespace mh {
namespace {

// The world size an MPI launcher announced to this process (Open MPI, then
// MPICH's and PMIx's process managers), or 0 when none started it.
long mpi_launched_size(std::string& variable) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* value = std::getenv(name)) {
      variable = name + std::string("=") + value;
      return std::strtol(value, nullptr, 10);
    }
  }
  return 0;
}

}  // namespace

void check_launch(const Config& config, const Assembly& assembly, Diagnostics& diag) {
  const Slot* comm = assembly.slot(MH_KIND_COMM);
  if (comm == nullptr || std::strcmp(comm->component->desc->name, "threads") != 0) return;
  std::string variable;
  const long processes = mpi_launched_size(variable);
  if (processes <= 1) return;
  const toml::table* section = find_table(config.root(), "comm");
  const toml::node* plugin = section != nullptr ? section->get("plugin") : nullptr;
  diag.error(plugin != nullptr ? config.where(*plugin) : config.where(section),
             "comm.plugin is 'threads', but an MPI launcher started this process as one of " +
                 std::to_string(processes) + " (" + variable +
                 "): each would train its own copy; set comm.plugin=mpi (or nccl on GPUs), or run one process");
}

}  // namespace mh
