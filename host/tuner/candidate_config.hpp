// The run a tuner candidate describes, as a TOML table: the tuned config's
// sections with the candidate's layout written over them and [tuner]
// dropped, so `megahost --config` runs it unchanged.
#pragma once

#include <megahost/abi.h>

#include <filesystem>
#include <string>

#include <toml++/toml.h>

#include "assembly.hpp"
#include "config.hpp"
#include "tuner/hardware_profile.hpp"

namespace mh {

enum class CandidateRun {
  kFull,  // every rank: t * p * d
  kDry,   // one data-parallel replica, t * p ranks, on its 1/d of the batch
          // (at most 3p micro-batches, when the schedule's peak is reached):
          // every rank's memory is that of the full run, since a replica's
          // memory does not depend on d unless the optimizer state is
          // sharded over d (then the tuner dry-runs kFull)
};

// On a cluster of devices (a profile whose device is not shared, a GPU)
// the config is the one to launch there: kernels "cuda" in the profile's
// dtype, comm "nccl" with the candidate's world size (which mpirun's -np
// must match); a dry run simulates both (dry_run.hpp). On a shared device
// (a CPU) the tuned config's kernels and comm stay, with its world size.
toml::table candidate_config(const Config& config, const Assembly& assembly, const MH_Candidate& candidate,
                             CandidateRun run, const HardwareProfile& cluster);

// Whether the candidate names the data-parallel choices (a tuner of ABI
// 1.4); otherwise the config's [parallel.data] stands.
bool names_data_choices(const MH_Candidate& candidate);
// Whether the candidate's run shards the optimizer state over its data
// replicas (so its dry run must run them all).
bool shards_optimizer(const Assembly& assembly, const MH_Candidate& candidate);

// Writes `table` to `file` with `comment` lines on top.
void write_toml(const toml::table& table, const std::filesystem::path& file, const std::string& comment);

}  // namespace mh
