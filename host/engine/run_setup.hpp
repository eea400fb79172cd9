// What every rank of a run shares (the assembled components, the layout,
// the model's dimensions, the data), built once on the main thread; each
// rank builds its RankContext from it.
#pragma once

#include <megahost/abi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpointer.hpp"
#include "checkpoint/folder_owner.hpp"
#include "data/indexed_dataset.hpp"
#include "data/samples.hpp"
#include "engine/model.hpp"
#include "engine/tensor_weights.hpp"
#include "plugins/assembly.hpp"
#include "report/metrics.hpp"
#include "report/training_log.hpp"

namespace mh {

// What every rank of the run shares, built once on the main thread.
struct RunSetup {
  const Assembly* assembly = nullptr;
  const MH_CommApi* comm_api = nullptr;
  MH_Instance* comm = nullptr;
  MH_CommInfo comm_info{};
  MH_TensorPlan tensor_plan{};   // its shard points into tensor_shards
  TensorShards tensor_shards{};
  int32_t virtual_stages = 1;
  std::vector<MH_StageLayers> stage_layers;            // p * v model chunks, in model order
  std::vector<std::vector<MH_PipeAction>> schedules;   // per stage
  MH_ContextPlan context_plan{};
  int32_t tp = 1, pp = 1, dp = 1, cp = 1;
  int32_t ep = 1;  // expert-parallel ranks, drawn from the dp ones
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
  std::string peft_base;         // LoRA's frozen base (peft.base, resolved); "" keeps the initial model
  std::unique_ptr<ckpt::FolderLock> folder_lock;  // the leader's, on checkpoint.dir, for the run's lifetime
  // The data's tokenizer as checkpoints record it: name, files, special ids.
  nlohmann::json tokenizer;
  // Packed documents ([data] reset_position_ids, reset_attention_mask;
  // docs/finetune.md): a sample's documents end at `eod`, the end-of-document
  // id of data.tokenizer, which the dataset was prepared with.
  bool reset_position_ids = false, reset_attention_mask = false;
  int32_t eod = -1;
  mutable std::atomic<bool> interrupted{false};  // a stop signal ended the run
  mutable std::atomic<int> abandoned_by{0};      // the stop signal that cut an --evaluate run short
};

}  // namespace mh
