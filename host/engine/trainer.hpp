// One rank's training loop: builds its groups, parameters, model and
// optimizer from the assembled components, then runs the steps, evaluation
// and metrics; or, for megahost --evaluate, evaluates the model alone.
#pragma once

#include <megahost/abi.h>

#include <cstdint>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/memory.hpp"
#include "engine/params.hpp"
#include "engine/run_setup.hpp"
#include "engine/transformer.hpp"

namespace mh {

// Whether the data-parallel component shards optimizer state (and the
// master weights) over d replicas: Megatron's distributed optimizer.
bool shards_optimizer_state(const Assembly& assembly, int32_t d);

// Stage `stage`'s model chunks, in chunk order, and what of the model they
// hold: its layers, and the embedding or head when it has the first or last.
std::vector<ChunkSpec> stage_chunks(const RunSetup& setup, int32_t stage);
OwnedParts owned_parts(const std::vector<ChunkSpec>& chunks);

// Runs rank `local` of this process to the end and returns its memory
// accounting; throws on failure.
MemoryTracker train_rank(const RunSetup& setup, int32_t local);

// Loads rank `local`'s part of the model (setup.resume_from; none keeps the
// initialised one) and evaluates each of the valid and test splits the
// setup has, whole; rank 0 prints a line and writes a metrics record per
// split. Throws on failure.
void evaluate_rank(const RunSetup& setup, int32_t local);

}  // namespace mh
