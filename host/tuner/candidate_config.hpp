// The run a tuner candidate describes, as a TOML table: the tuned config's
// sections with the candidate's layout written over them and [tuner]
// dropped, so `megahost --config` runs it unchanged.
#pragma once

#include <megahost/abi.h>

#include <filesystem>
#include <string>

#include <toml++/toml.h>

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "tuner/hardware_profile.hpp"

namespace mh {

enum class CandidateRun {
  kFull,  // every rank: t * cp * p * d
  kDry,   // one data-parallel replica, t * cp * p ranks, on its 1/d of the
          // batch (at most 3p micro-batches, when the schedule's peak is
          // reached), or with expert parallelism the ep replicas that trade
          // tokens: every rank's memory is that of the full run, since a
          // replica's memory does not depend on d unless the optimizer state
          // is sharded over d (then the tuner dry-runs kFull)
};

// The candidate's context and expert parallelism (ABI 2.1): a tuner that
// does not name them (struct_size short of them, or 0) proposes 1 and 1,
// and leaves the config's comm type (NULL).
int32_t candidate_context(const MH_Candidate& candidate);
int32_t candidate_expert(const MH_Candidate& candidate);
const char* candidate_context_comm(const MH_Candidate& candidate);
// Its ranks: t * cp * p * d.
int32_t candidate_world(const MH_Candidate& candidate);

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

// What a generate candidate serves: the prompts file the tuner wrote (one
// line per request of the batch) and the tokens to generate for each.
struct GenerateRequest {
  std::filesystem::path prompts_file;
  int64_t output_tokens = 0;
  // Keep the config's own [generate] prompt (the tuned config) instead of
  // serving the tuner's prompts (the dry and measured runs).
  bool keep_prompt = false;
};

// An inference candidate's run: the config with the candidate's t and p
// (sequence parallelism off, one chunk per stage), a world of t * p, [tuner]
// dropped and [generate] serving `request` with the candidate's batch, never
// stopping at the end-of-document token, so every run generates the same
// number of tokens.
toml::table generate_config(const Config& config, const Assembly& assembly, const MH_Candidate& candidate,
                            const HardwareProfile& cluster, const GenerateRequest& request);

// The winner of an inference goal as a server (the tuned config has
// [serve]): the config with the candidate's t and p, a world of t * p,
// [tuner] and [generate] dropped, and serve.max_batch the candidate's batch.
toml::table serve_config(const Config& config, const Assembly& assembly, const MH_Candidate& candidate,
                         const HardwareProfile& cluster);

// The checkpoint and output paths of `root`, a candidate's config, resolved
// against the tuned config's folder: the winner (tuned.toml) saves and logs
// where the tuned config said; a measured candidate keeps them relative, in
// its own folder, away from the user's.
void resolve_output_paths(const Config& config, toml::table& root);

// Writes `table` to `file` with `comment` lines on top.
void write_toml(const toml::table& table, const std::filesystem::path& file, const std::string& comment);

}  // namespace mh
