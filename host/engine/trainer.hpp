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

#include "plugins/assembly.hpp"
#include "checkpoint/checkpointer.hpp"
#include "data/indexed_dataset.hpp"
#include "data/samples.hpp"
#include "engine/memory.hpp"
#include "engine/model.hpp"
#include "engine/params.hpp"
#include "engine/transformer.hpp"
#include "report/metrics.hpp"
#include "report/training_log.hpp"

namespace mh {

// What every rank of the run shares, built once on the main thread.
struct RunSetup {
  const Assembly* assembly = nullptr;
  const MH_CommApi* comm_api = nullptr;
  MH_Instance* comm = nullptr;
  MH_CommInfo comm_info{};
  MH_TensorPlan tensor_plan{};
  int32_t virtual_stages = 1;
  std::vector<MH_StageLayers> stage_layers;            // p * v model chunks, in model order
  std::vector<std::vector<MH_PipeAction>> schedules;   // per stage
  int32_t tp = 1, pp = 1, dp = 1;
  ModelDims dims{};  // global dims; each rank sets tp_rank
  int64_t steps = 0, global_batch = 0, micro_batch = 0, microbatches = 0;
  std::vector<std::unique_ptr<data::IndexedDataset>> datasets;
  std::unique_ptr<data::Samples> train, valid, test;  // test: whole, when the run has a test split
  bool dry_run = false, report_memory = false;
  bool evaluate_only = false;  // megahost --evaluate: no training, no train split
  bool plan_only = false;  // a dry pass that only measures memory: it reports and writes nothing
  std::string grads_out;  // full gradients of the last step, for equivalence tests
  std::unique_ptr<MetricsWriter> metrics;
  std::unique_ptr<TrainingLog> log;  // on the process of rank 0
  ckpt::Options checkpoint;      // dir resolved against the config
  std::string resume_from;       // the checkpoint to load; "" starts fresh
  // The data's tokenizer as checkpoints record it: name, files, special ids.
  nlohmann::json tokenizer;
  mutable std::atomic<bool> interrupted{false};  // a stop signal ended the run
};

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
