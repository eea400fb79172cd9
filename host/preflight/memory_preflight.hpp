// Before step 1, each rank's exact planned memory against its device's.
// The engine's accounting is exact, so a dry pass of the run (the same
// engine against kernels that allocate nothing) knows each rank's peak
// before anything is allocated: a run too large for its machine is refused
// with both numbers instead of allocating until the OS kills it.
#pragma once

#include <functional>
#include <optional>

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "engine/trainer.hpp"
#include "plugins/registry.hpp"

namespace mh {

// The run's assembly with the dry kernels in place of its own; none when
// the dry kernels are not on the plugin path.
std::optional<Assembly> memory_plan_assembly(const Config& config, const Registry& registry);

// Runs `body(local)` on every rank of this process, stopping them all when
// one fails (what run.cpp does for training).
using RankRunner = std::function<void(const std::function<void(int32_t)>& body)>;

// Runs one step of `s` against `plan`'s dry kernels, then compares each
// rank's planned peak with its device's memory_bytes; throws on the first
// rank past it, naming both numbers and what to lower. `s` is as it was
// when this returns.
void check_planned_memory(RunSetup& s, const Assembly& plan, const RankRunner& run_ranks);

}  // namespace mh
