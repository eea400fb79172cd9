// What a search leaves behind: the ranked and rejected tables for a person
// (printed, and in report.txt) and as CSV with named columns (ranked.csv,
// rejected.csv), and the winner as a config megahost runs unchanged
// (tuned.toml): a training run, or for an inference goal a [generate] run.
#pragma once

#include <megahost/abi.h>

#include <filesystem>
#include <map>
#include <ostream>
#include <span>
#include <string>

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "tuner/hardware_profile.hpp"
#include "tuner/probe.hpp"

namespace mh {

// The measured candidates' spreads by describe_candidate: of their step
// times (training) or their batches' latencies (inference).
using MeasuredSpreads = std::map<std::string, Spread>;

struct TunedRun {
  const Config& config;
  const Assembly& assembly;
  const HardwareProfile& profile;
  MH_ModelShape shape;
  std::filesystem::path dir;
  int32_t devices_per_node;
  std::filesystem::path binary;  // megahost, for the launch line
  const MH_TunerNeeds& needs;    // inference: the request the candidates served
  const MeasuredSpreads& spreads;
};

// "t=2 p=1 v=1 d=2 sp b=4 selective", with " cp=2/a2a ep=2" where they are
// above 1; inference: "t=2 p=1 batch=4"
std::string describe_candidate(const MH_Candidate& c);
// Bytes as GiB with two decimals.
std::string gib(uint64_t bytes);

// The winner: the first ranked row, unless the measurements do not separate
// the measured best from others measured (their medians closer than their
// spreads), when the cost model's best of those is declared instead.
// Returns its index in `rows`.
size_t declared_winner(std::span<const MH_TunerResult> rows, const TunedRun& run);

// Writes every output; false when no candidate was ranked (no tuned.toml
// then), saying whether none fits or their dry runs failed.
bool write_results(std::span<const MH_TunerResult> rows, const TunedRun& run, std::ostream& human);

}  // namespace mh
