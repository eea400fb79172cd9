#include "engine/trainer.hpp"

#include <megahost/error.hpp>
#include <megahost/model_flops.hpp>
#include <megahost/rng.hpp>
#include <megahost/struct_size.hpp>

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <numeric>
#include <span>

#include "checkpoint/model_weights.hpp"
#include "checkpoint/store.hpp"
#include "engine/collectives.hpp"
#include "engine/finite_check.hpp"
#include "engine/grad_buckets.hpp"
#include "engine/grad_sync.hpp"
#include "engine/gradient_dump.hpp"
#include "engine/keep_agreement.hpp"
#include "engine/keep_table.hpp"
#include "engine/memory_report.hpp"
#include "engine/ops.hpp"
#include "engine/optimizer.hpp"
#include "engine/param_gather.hpp"
#include "engine/params.hpp"
#include "engine/pipeline_schedule.hpp"
#include "engine/rank_context.hpp"
#include "engine/split_evaluation.hpp"
#include "engine/tensor_parallel.hpp"
#include "engine/transformer.hpp"
#include "plugins/plugin_loader.hpp"
#include "run/stop_signals.hpp"

namespace mh {
namespace {

// The distributed optimizer splits the buffer over the data group, and the
// expert weights over the expert-data group (d cp t / ep ranks, which holds
// tensor ranks under a mixture of experts): each slot is padded to split
// evenly over both.
int64_t pad_to(const RunSetup& s) {
  const int64_t replicas = int64_t(s.dp) * s.cp;
  return s.dims.moe() ? std::lcm(replicas, replicas * s.tp / s.ep) : replicas;
}

// Model FLOPs of one optimizer step (megahost/model_flops.hpp).
double step_model_flops(const ModelDims& d, int64_t global_batch) {
  return model_flops({d.layers, d.hidden, d.heads, d.kv(), d.active_ffn(), d.seq, d.vocab,
                      d.spec.activation == MlpActivation::kSwiglu, d.head_dim()},
                     global_batch);
}

void print_memory(const nlohmann::json& ranks) {
  std::printf("memory per rank, MiB (measured peaks; activations beside the paper's formula; ckpt file: what the "
              "rank writes per checkpoint; B/param: params + grads + optimizer per parameter of the rank)\n");
  std::printf("%5s %9s %9s %9s %9s %9s %9s %9s %9s %11s %9s %8s\n", "rank", "params", "grads", "optimizer", "workspace",
              "comm", "ckpt stg", "total", "activ.", "formula", "ckpt file", "B/param");
  auto mib = [](const nlohmann::json& v) { return double(v.get<uint64_t>()) / double(1 << 20); };
  auto per_param = [](const nlohmann::json& j) {
    const double state =
        double(j["params"].get<uint64_t>() + j["grads"].get<uint64_t>() + j["optimizer"].get<uint64_t>());
    return j["parameters"].get<uint64_t>() > 0 ? state / double(j["parameters"].get<uint64_t>()) : 0.0;
  };
  for (const auto& j : ranks)
    std::printf("%5lld %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %11.2f %9.2f %8.2f\n",
                (long long)j["rank"].get<int64_t>(),
                mib(j["params"]), mib(j["grads"]), mib(j["optimizer"]), mib(j["workspace"]), mib(j["comm"]),
                mib(j["checkpoint"]), mib(j["total"]), mib(j["activations"]), mib(j["activations_formula"]),
                mib(j["checkpoint_bytes"]), per_param(j));
}

// What every rank learns from every other at the end of a step.
struct StepExchange {
  double hw_flops = 0;               // summed over the world
  int stop_signal = 0;               // the largest any rank received
  std::vector<int32_t> writers;      // each rank's checkpoint writer
};

// How gradients are reduced over the data-parallel replicas.
struct DataSync {
  bool distributed = false;  // reduce-scatter into 1/d shards (the distributed optimizer)
  bool overlap = false;      // start each bucket as soon as backward finalised it
  bool overlap_param_gather = false;  // gather the updated parameters while the next forward runs
  std::vector<GradBucket> buckets;
};

// Whether the parameters start from the seed's random values. A run that
// loads a checkpoint fills every parameter it trains from it (a load that
// misses one fails before step 1, with the distributed optimizer's master
// pieces too), so values drawn first would be overwritten unread: a sixth
// of a GPT-2 small resume's CPU. LoRA's frozen base is not in its
// checkpoint (it may be the seed's model): drawn.
bool draws_initial_values(const RunSetup& s, const ModelDims& dims) {
  return s.resume_from.empty() || dims.lora.on();
}

class RankTrainer {
 public:
  RankTrainer(const RunSetup& s, int32_t local)
      : s_(s),
        rc_(s, local),
        chunk_specs_(stage_chunks(s, rc_.coords.pp)),
        params_(rc_.dev, rc_.dims, s.tensor_plan, seed(), owned_parts(chunk_specs_),
                ParamStorage{pad_to(s), !shards_optimizer_state(*s.assembly, s.dp * s.cp), true,
                             draws_initial_values(s, rc_.dims)}),
        tp_(rc_.dev, rc_.groups.tensor, s.tensor_plan, rc_.dims),
        data_sync_(plan_data_sync()),
        optimizer_(rc_.dev, params_, adamw_config(), data_sync_.distributed ? &rc_.groups.data : nullptr,
                   reduction_ranges(data_sync_.buckets), &rc_.groups.expert_data),
        grad_sync_(params_, optimizer_, data_sync_.buckets, grad_sync_groups()),
        param_gather_(optimizer_, data_sync_.buckets, params_.infos().size(), data_sync_.overlap_param_gather),
        checkpointer_(rc_.dev, rc_.groups.world, rc_.rank,
                      ckpt::rank_state(params_, optimizer_,
                                       {rc_.coords.tp, rc_.coords.replica(s.cp), data_sync_.distributed,
                                        rc_.coords.expert_slot(s.cp, s.tp) / s.ep},
                                       s.checkpoint.save_optimizer),
                      s.checkpoint) {
    Instance policy(*s.assembly->slot(MH_KIND_RECOMPUTE), s.comm_info.ranks_in_process, rc_.rank);
    for (const ChunkSpec& c : chunk_specs_) {
      KeepTable keep = keep_table(policy, c, rc_.dims.spec.attention_backend);
      keep_.insert(keep_.end(), keep.begin(), keep.end());
      ParamsNeeded needed;
      if (param_gather_.overlapped()) needed = [this](std::span<const int> ids) { param_gather_.needed(ids); };
      chunks_.push_back(std::make_unique<Transformer>(rc_.dev, params_, tp_, s.cp > 1 ? &rc_.groups.context : nullptr,
                                                      rc_.dims, c, std::move(keep), std::move(needed),
                                                      &rc_.groups.expert,
                                                      s.cp * s.tp > 1 ? &rc_.groups.sequence : nullptr));
      chunks_.back()->set_moe_aux_weight(float(double(s.micro_batch) / double(s.global_batch)));
    }
    check_keep_tables_agree(rc_.groups.tensor, keep_, policy.label());
    if (s.cp > 1) {
      rc_.dev.require_op(&MH_KernelsApi::strided_copy, "strided_copy", "parallel.context.size > 1");
      require((kernels_capabilities(rc_.dev.api()) & MH_KERNELS_CAP_PARTIAL_SOFTMAX) != 0,
              "parallel.context.size > 1 gives softmax the last c of T positions (MH_KERNELS_CAP_PARTIAL_SOFTMAX), "
              "which the kernels lack; use kernels \"cpu\" or \"cuda\", or parallel.context.size = 1");
      require(s.dims.cp_comm != ContextComm::kP2p ||
                  (kernels_capabilities(rc_.dev.api()) & MH_KERNELS_CAP_ATTENTION_ACCUMULATE) != 0,
              "parallel.context.comm_type = \"p2p\" merges each key block into the attention's running result "
              "(MH_KERNELS_CAP_ATTENTION_ACCUMULATE, ABI 1.8), which the kernels lack; use kernels \"cpu\" or "
              "\"cuda\", or comm_type = \"all_gather\"");
    }
  }

  void train();
  void evaluate_model();
  const MemoryTracker& memory() { return rc_.dev.memory(); }

 private:
  uint64_t seed() const { return uint64_t(s_.assembly->train.options().get_int("seed")); }
  AdamWConfig adamw_config() const;
  DataSync plan_data_sync() const;
  GradSyncGroups grad_sync_groups();
  MicroBatch load(const data::Samples& samples, int64_t first_sample, uint64_t key);
  void cut_documents(std::span<const int32_t> window, int64_t b, std::vector<int32_t>& positions,
                     std::vector<int32_t>& starts) const;
  int64_t loss_targets(const data::Samples& samples, int64_t first_sample, int64_t count) const;
  double step(int64_t step);
  double evaluate(int64_t step);
  SplitLoss evaluate_whole(const data::Samples& samples, bool stoppable = false);
  int agreed_stop_signal();
  void test(int64_t step);
  double sum_scalar(double local, bool stages);
  StepExchange exchange(double hw_flops);
  ckpt::Metadata checkpoint_metadata(int64_t step) const;
  ckpt::Metadata load_model();
  void load_base(const std::string& base);
  int64_t resume();
  void check_consumed(const ckpt::Metadata& saved) const;
  void stop(int64_t step, int signal);
  void record_stage_time(double busy, double idle);
  std::vector<GroupRange> norm_ranges(bool experts) const;
  double grad_norm();
  void finish();
  bool leader() const { return rc_.rank == 0; }
  // The ranks of the data group: the replicas and their context ranks.
  int32_t replicas() const { return s_.dp * s_.cp; }
  // What this rank adds to the count of a batch's targets: context ranks
  // hold parts of the same samples, whose targets the first one counts.
  int64_t counted_by_rank(int64_t targets) const { return rc_.coords.cp == 0 ? targets : 0; }

  const RunSetup& s_;
  RankContext rc_;
  std::vector<ChunkSpec> chunk_specs_;
  ParamSet params_;
  TensorParallel tp_;
  DataSync data_sync_;
  Optimizer optimizer_;
  GradSync grad_sync_;
  ParamGather param_gather_;
  ckpt::Checkpointer checkpointer_;
  int64_t consumed_ = 0;  // samples trained on: the data order's position
  std::string base_of_run_;  // LoRA's base checkpoint, recorded in the adapters' checkpoints
  KeepTable keep_;  // every layer of the rank, for the memory formula
  std::vector<std::unique_ptr<Transformer>> chunks_;
  std::vector<float> stage_busy_, stage_idle_;  // per stage, last step (on the pipeline group)
  double moe_aux_loss_ = 0;                      // the last step's load-balancing loss
};

AdamWConfig RankTrainer::adamw_config() const {
  Options t = s_.assembly->train.options();
  int64_t decay = t.get_int("decay_steps");
  return AdamWConfig{t.get_double("lr"),         t.get_double("min_lr"),      t.get_int("warmup_steps"),
                     decay > 0 ? decay : s_.steps, t.get_double("weight_decay"), t.get_double("adam_beta1"),
                     t.get_double("adam_beta2"),  t.get_double("adam_eps"),     t.get_double("clip_grad")};
}

// Asks the data-parallel plugin for buckets over the parameters in the
// order backward finalises them. With d = 1 there is nothing to reduce, so
// nothing to shard or overlap.
DataSync RankTrainer::plan_data_sync() const {
  Instance data(*s_.assembly->slot(MH_KIND_DATA_PARALLEL), s_.comm_info.ranks_in_process, rc_.rank);
  const std::vector<int> order = backward_order(params_, chunk_specs_);
  std::vector<uint64_t> bytes;
  for (int id : order) bytes.push_back(uint64_t(params_.info(id).numel()) * 4);
  const MH_DataPlanArgs args{MH_STRUCT_SIZE(MH_DataPlanArgs, num_params), nullptr, replicas(), bytes.data(),
                             bytes.size()};
  MH_DataPlan plan{};
  plan.struct_size = sizeof(plan);
  check(data.api<MH_DataParallelApi>()->plan(data.get(), &args, &plan), data.label());
  plan.overlap = plan.overlap != 0 && replicas() > 1;
  const Slot& comm = *s_.assembly->slot(MH_KIND_COMM);
  const MH_PluginDesc& built = *comm.component->plugin->desc;
  require(plan.distributed_optimizer == 0 || replicas() == 1 || built.abi_major > 1 || built.abi_minor >= 3,
          "parallel.data.distributed_optimizer reduce-scatters in place, which communicators support since ABI 1.3; "
          "comm '" + std::string(comm.component->desc->name) + "' was built against ABI " +
              std::to_string(built.abi_major) + "." + std::to_string(built.abi_minor) +
              ": rebuild it, or turn the option off");
  const bool distributed = plan.distributed_optimizer != 0 && replicas() > 1;
  const bool gather_overlap =
      reaches(plan, &MH_DataPlan::overlap_param_gather) && plan.overlap_param_gather != 0;
  return DataSync{distributed, plan.overlap != 0, distributed && plan.overlap != 0 && gather_overlap,
                  make_buckets(params_, order, plan)};
}

GradSyncGroups RankTrainer::grad_sync_groups() {
  GradSyncGroups g;
  if (replicas() > 1) g.data = &rc_.groups.data;
  // Expert weights reduce over the ranks that hold the same experts: the
  // data group's, and with tensor parallelism their tensor ranks', less the
  // expert group's.
  g.expert_data = replicas() * s_.tp / s_.ep > 1 ? &rc_.groups.expert_data : nullptr;
  // LoRA's replicated adapters always hold partial sums (docs/finetune.md).
  if ((s_.tensor_plan.reduce_norm_grads || s_.dims.lora.on()) && s_.tp > 1) g.tensor = &rc_.groups.tensor;
  if (s_.tp > 1) g.heads = &rc_.groups.tensor;
  if (s_.pp > 1 && s_.dims.spec.tie_embeddings && params_.wte() >= 0 && params_.trainable(params_.wte()))
    g.embedding = &rc_.groups.embedding;
  return g;
}

// Megatron's reset_position_ids / reset_attention_mask: a document ends at
// its EOD, so the token after an EOD starts the next one. For each sample b
// and position t, `starts` [b, s] holds where t's document starts and
// `positions` [b, s] t's position in the sample (or in its document when
// positions reset).
void RankTrainer::cut_documents(std::span<const int32_t> window, int64_t b, std::vector<int32_t>& positions,
                                std::vector<int32_t>& starts) const {
  const int64_t S = rc_.dims.seq;
  int32_t start = 0;
  for (int64_t t = 0; t < S; ++t) {
    starts[size_t(b * S + t)] = start;
    positions[size_t(b * S + t)] = int32_t(t) - (s_.reset_position_ids ? start : 0);
    if (window[size_t(t)] == s_.eod) start = int32_t(t + 1);
  }
}

MicroBatch RankTrainer::load(const data::Samples& samples, int64_t first_sample, uint64_t key) {
  const ModelDims& d = rc_.dims;
  const int64_t S = d.seq, B = d.micro_batch, N = d.rows(), n = d.local_rows();
  std::vector<int32_t> window(static_cast<size_t>(S + 1)), ids(static_cast<size_t>(N)),
      targets(static_cast<size_t>(N)), positions(static_cast<size_t>(n)), document_positions(size_t(B * S)),
      document_starts(size_t(B * S));
  std::vector<uint8_t> mask(static_cast<size_t>(S + 1)), loss_mask(samples.masks_loss() ? size_t(N) : 0);
  for (int64_t b = 0; b < B; ++b) {
    samples.get(first_sample + b, window.data());
    // Every context rank reads the whole sample and takes its positions.
    for (int64_t t = 0; t < d.local_seq(); ++t) {
      ids[size_t(t * B + b)] = window[size_t(d.global_position(t))];
      targets[size_t(t * B + b)] = window[size_t(d.global_position(t) + 1)];
    }
    cut_documents(window, b, document_positions, document_starts);
    if (loss_mask.empty()) continue;
    samples.get_loss_mask(first_sample + b, window.data(), mask.data());
    for (int64_t t = 0; t < d.local_seq(); ++t) loss_mask[size_t(t * B + b)] = mask[size_t(d.global_position(t) + 1)];
  }
  // Local row r is global row R of the [s, b] rows.
  for (int64_t r = 0; r < n; ++r) {
    const int64_t R = d.global_row(d.first_local_row() + r);
    positions[size_t(r)] = document_positions[size_t((R % B) * S + R / B)];
  }
  MicroBatch mb;
  auto upload = [&](const std::vector<int32_t>& host) {
    Buffer device(rc_.dev, MemCategory::kWorkspace, int64_t(host.size()), MH_I32);
    rc_.dev.to_device(device.data(), host.data(), host.size() * 4);
    return device;
  };
  mb.ids = upload(ids);
  mb.targets = upload(targets);
  mb.positions = upload(positions);
  // Learned positions reach the model through mb.positions alone.
  if (s_.reset_position_ids && rc_.dims.spec.position == Position::kRope)
    mb.document_positions = upload(document_positions);
  if (s_.reset_attention_mask) mb.document_starts = upload(document_starts);
  mb.key = key;
  mb.loss_mask = std::move(loss_mask);
  return mb;
}

// The targets the loss counts in samples [first_sample, first_sample +
// count): every one, but those the samples' loss mask leaves out.
int64_t RankTrainer::loss_targets(const data::Samples& samples, int64_t first_sample, int64_t count) const {
  const int64_t S = rc_.dims.seq;
  if (!samples.masks_loss()) return count * S;
  std::vector<int32_t> window(static_cast<size_t>(S + 1));
  std::vector<uint8_t> mask(static_cast<size_t>(S + 1));
  int64_t targets = 0;
  for (int64_t i = first_sample; i < first_sample + count; ++i) {
    samples.get(i, window.data());
    samples.get_loss_mask(i, window.data(), mask.data());
    targets += std::count(mask.begin() + 1, mask.end(), uint8_t{1});
  }
  return targets;
}

// A scalar summed over the data group (the replicas and their context
// ranks), and with `stages` over the pipeline stages too; in f32, as the
// collectives carry it.
double RankTrainer::sum_scalar(double local, bool stages) {
  Buffer total(rc_.dev, MemCategory::kWorkspace, 1);
  float value = float(local);
  rc_.dev.to_device(total.data(), &value, sizeof(float));
  if (stages && s_.pp > 1) rc_.groups.pipeline.all_reduce(total.f32(), 1);
  if (replicas() > 1) rc_.groups.data.all_reduce(total.f32(), 1);
  rc_.dev.to_host(&value, total.data(), sizeof(float));
  return double(value);
}

double RankTrainer::step(int64_t step) {
  ops::fill(rc_.dev, params_.grads().f32(), params_.trainable_numel(), 0);
  const int64_t m = s_.microbatches, b = s_.micro_batch, dp_rank = rc_.coords.dp;
  // The loss is the mean over the global batch's counted targets, as
  // Megatron's sum(loss * mask) / sum(mask): with a loss mask each replica
  // counts its own and all add them up, so every layout takes one rank's
  // gradient. A step whose targets are all masked out changes nothing.
  double targets = double(s_.global_batch * rc_.dims.seq);
  if (s_.train->masks_loss())
    targets = std::max(
        1.0, sum_scalar(double(counted_by_rank(loss_targets(*s_.train, consumed_ + dp_rank * m * b, m * b))), false));
  const float scale = float(1.0 / targets);
  // Global micro-batch index: the same samples and dropout stream on every layout.
  GradsFinalised finalised;
  if (data_sync_.overlap) finalised = [this](std::span<const int> ids) { grad_sync_.finalised(ids); };
  PipelineStage stage(
      rc_.dev, rc_.groups.pipeline, chunks_, rc_.dims,
      [&](int64_t k) {
        const int64_t g = dp_rank * m + k;
        return load(*s_.train, consumed_ + g * b,
                    rng::splitmix64(seed() ^ rng::splitmix64(uint64_t(step) << 20 | uint64_t(g))));
      },
      std::move(finalised));
  for (auto& chunk : chunks_) chunk->take_moe_aux();  // what evaluation left
  double loss = stage.run(s_.schedules[size_t(rc_.coords.pp)], scale);
  grad_sync_.finish();
  if (rc_.dims.moe()) {
    // The mean over the step's micro-batches of their layers' summed losses;
    // every context rank holds its micro-batches' whole loss, which the
    // first counts.
    double aux = 0;
    for (auto& chunk : chunks_) aux += chunk->take_moe_aux();
    moe_aux_loss_ = sum_scalar(rc_.coords.cp == 0 ? aux : 0, true) * double(b) / double(s_.global_batch);
  }
  consumed_ += s_.global_batch;
  record_stage_time(stage.busy_seconds(), stage.idle_seconds());
  return sum_scalar(loss, true) * double(scale);
}

// One gather per step carries the FLOPs, a stop request and the
// checkpoint writers' states, so every rank decides alike.
StepExchange RankTrainer::exchange(double hw_flops) {
  const float mine[3] = {float(hw_flops), float(stop_signal()), float(checkpointer_.writer_state())};
  std::vector<float> all(size_t(3 * s_.comm_info.world_size));
  rc_.groups.world.all_gather_host(mine, all.data(), 3);
  StepExchange e;
  for (size_t r = 0; r < all.size(); r += 3) {
    e.hw_flops += double(all[r]);
    e.stop_signal = std::max(e.stop_signal, int(all[r + 1]));
    e.writers.push_back(int32_t(all[r + 2]));
  }
  return e;
}

ckpt::Metadata RankTrainer::checkpoint_metadata(int64_t step) const {
  const AdamWConfig c = adamw_config();
  ckpt::Metadata m;
  m.step = step;
  m.consumed_samples = consumed_;
  m.global_batch = s_.global_batch;
  m.micro_batch = s_.micro_batch;
  m.seed = seed();
  m.model = ckpt::checkpoint_model(rc_.dims, s_.assembly->model.options().get_string("arch"));
  m.layout = {s_.tp, s_.pp, s_.dp, s_.virtual_stages, s_.comm_info.world_size, rc_.dims.sp, data_sync_.distributed};
  m.schedule = {{"lr", c.lr}, {"min_lr", c.min_lr}, {"warmup_steps", c.warmup_steps}, {"decay_steps", c.decay_steps},
                {"weight_decay", c.weight_decay}, {"adam_beta1", c.beta1}, {"adam_beta2", c.beta2},
                {"adam_eps", c.eps}, {"clip_grad", c.clip_grad}};
  m.tokenizer = s_.tokenizer;
  m.tokenizer["vocab_padded"] = rc_.dims.vocab;
  m.dtype = rc_.dev.info().compute_dtype == MH_F32 ? "fp32" : "bf16";
  m.optimizer = s_.checkpoint.save_optimizer;
  if (rc_.dims.lora.on()) {
    Options p = s_.assembly->peft.options();
    m.peft = {{"method", "lora"}, {"rank", p.get_int("rank")}, {"alpha", p.get_double("alpha")},
              {"targets", p.get_string("targets")}, {"base", base_of_run_}};
  }
  return m;
}

// Loads the checkpoint the run starts from (s_.resume_from) into the
// model and the optimizer; returns its metadata.
ckpt::Metadata RankTrainer::load_model() {
  const std::string& path = s_.resume_from;
  const ckpt::Metadata saved = ckpt::read_metadata(path);
  ckpt::check_model(path, saved, rc_.dims);
  const bool lora = rc_.dims.lora.on();
  const std::string saved_base = saved.peft.is_null() ? "" : saved.peft.value("base", std::string());
  require(lora || saved.peft.is_null(), path + " holds LoRA adapters of the base '" + saved_base +
                                            "', not a whole model: set [peft] method = \"lora\" as it was trained, "
                                            "or load a whole model");
  require(!lora || !saved.peft.is_null(),
          path + " holds a whole model, not LoRA adapters: give it as peft.base to fine-tune it with LoRA");
  if (lora) load_base(s_.peft_base.empty() ? saved_base : s_.peft_base);
  checkpointer_.load(path, saved);
  optimizer_.publish();
  return saved;
}

// LoRA's frozen base: the weights of checkpoint `base`, or with "" the
// seed's initial model. The adapters come from their own checkpoint or
// their initialisation.
void RankTrainer::load_base(const std::string& base) {
  base_of_run_ = base;
  if (base.empty()) {
    LOG_IF(WARNING, leader()) << "peft.base is empty: the LoRA adapters adapt the seed's initial model";
    return;
  }
  const ckpt::Metadata saved = ckpt::read_metadata(base);
  ckpt::check_model(base, saved, rc_.dims);
  require(saved.peft.is_null(), "peft.base = " + base + " holds LoRA adapters, not a whole model; give the "
                                "checkpoint they adapt, or merge them into it first (megahost_convert)");
  ckpt::load_weights(base, saved, params_, rc_.coords.tp);
  LOG_IF(INFO, leader()) << "LoRA adapts the frozen base " << base << " (step " << saved.step << ")";
}

// The blend compares sample indices in double (exact below 2^53), so every
// index the run will read must stay below it: a consumed_samples near
// INT64_MAX (a damaged file) would overflow the indices.
void RankTrainer::check_consumed(const ckpt::Metadata& saved) const {
  const double last = double(saved.consumed_samples) +
                      double(std::max<int64_t>(s_.steps - saved.step, 0)) * double(s_.global_batch);
  require(last < 0x1p53, s_.resume_from + "/" + ckpt::kMetadataFile + ": consumed_samples = " +
                             std::to_string(saved.consumed_samples) + " at step " + std::to_string(saved.step) +
                             ": training on to step " + std::to_string(s_.steps) +
                             " would read past sample 2^53, the data order's limit; the checkpoint is damaged or "
                             "not this run's: load an earlier one");
}

// Loads the checkpoint the run resumes from; returns its step.
int64_t RankTrainer::resume() {
  const std::string& path = s_.resume_from;
  const auto started = std::chrono::steady_clock::now();
  const std::clock_t cpu_started = std::clock();
  const ckpt::Metadata saved = load_model();
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // The process's CPU time beside the wall time: the machine may be shared.
  const double load_cpu_s = double(std::clock() - cpu_started) / CLOCKS_PER_SEC;
  check_consumed(saved);
  consumed_ = saved.consumed_samples;
  if (!leader()) return saved.step;
  const ckpt::Layout& l = saved.layout;
  LOG(INFO) << "resumed from " << path << " in " << load_s << " s (" << load_cpu_s << " s CPU): step " << saved.step << ", "
            << saved.consumed_samples << " samples consumed (saved on TP " << l.tensor << ", PP " << l.pipeline << " x " << l.virtual_stages
            << ", DP " << l.data << (l.distributed_optimizer ? " with the distributed optimizer" : "") << ")";
  if (!saved.optimizer) LOG(WARNING) << "the checkpoint holds no optimizer state: AdamW's moments start from zero";
  if (saved.seed != seed())
    LOG(WARNING) << "train.seed " << seed() << " differs from the checkpoint's " << saved.seed
                 << ": the data order and dropout continue from another stream";
  const nlohmann::json schedule = checkpoint_metadata(saved.step).schedule;
  for (const auto& [key, value] : schedule.items())
    if (saved.schedule.value(key, nlohmann::json()) != value)
      LOG(WARNING) << "the learning-rate schedule changed since the checkpoint: " << key << " was "
                   << saved.schedule.value(key, nlohmann::json()).dump() << ", now " << value.dump()
                   << (key == "decay_steps" ? " (train.decay_steps = 0 follows train.steps; set it to keep the decay)" : "");
  if (saved.global_batch != s_.global_batch)
    LOG(INFO) << "train.global_batch changed from " << saved.global_batch << " to " << s_.global_batch
              << ": the data order continues at sample " << saved.consumed_samples << ", each step now takes "
              << s_.global_batch << " samples";
  return saved.step;
}

// A stop signal: the step is finished; save, record and end the run.
void RankTrainer::stop(int64_t step, int signal) {
  if (leader())
    LOG(WARNING) << "received " << stop_signal_name(signal) << ": stopping after step " << step
                 << (checkpointer_.saving() ? ", saving a checkpoint first" : " (no checkpoint.dir: nothing is saved)");
  if (checkpointer_.saving() && !checkpointer_.due(step, s_.steps)) checkpointer_.save(checkpoint_metadata(step));
  checkpointer_.wait();
  if (leader()) s_.metrics->write({{"step", step}, {"stopped", stop_signal_name(signal)}});
  s_.interrupted = true;
}

void RankTrainer::record_stage_time(double busy, double idle) {
  const float mine[2] = {float(busy), float(idle)};
  std::vector<float> all(size_t(2 * s_.pp));
  rc_.groups.pipeline.all_gather_host(mine, all.data(), 2);
  stage_busy_.clear();
  stage_idle_.clear();
  for (int32_t st = 0; st < s_.pp; ++st) {
    stage_busy_.push_back(all[size_t(2 * st)]);
    stage_idle_.push_back(all[size_t(2 * st + 1)]);
  }
}

// What this rank adds to the global gradient norm, of the expert weights
// or of the rest. The rest: tensor shards always, replicated parameters on
// the tensor group's first rank, the tied embedding on the first stage
// only. The experts: each rank its own, which its tensor ranks need not
// share (expert parallelism draws from them too).
std::vector<GroupRange> RankTrainer::norm_ranges(bool experts) const {
  std::vector<GroupRange> ranges;
  for (size_t g = 0; g < kParamGroups; ++g) {
    auto group = static_cast<ParamGroup>(g);
    if ((group == ParamGroup::kExpertDecay) != experts) continue;
    const bool replicated = group == ParamGroup::kReplicatedDecay || group == ParamGroup::kReplicatedNoDecay ||
                            group == ParamGroup::kAdapterReplicated;
    GroupRange r = params_.group(group);
    if ((replicated && rc_.coords.tp != 0) || r.offset >= params_.trainable_numel()) continue;
    if (group == ParamGroup::kShardedDecay && params_.embedding_copy()) {
      const int64_t skip = params_.info(params_.wte()).numel();  // wte comes first in its group
      r = GroupRange{r.offset + skip, r.count - skip};
    }
    if (r.count > 0) ranges.push_back(r);
  }
  return ranges;
}

// The rest summed over the tensor and pipeline groups, the experts over the
// expert and pipeline groups; the distributed optimizer's pieces each over
// the group that shards them (each element counted once), every other
// replica's copy left out.
double RankTrainer::grad_norm() {
  Collectives* data = data_sync_.distributed ? &rc_.groups.data : nullptr;
  const double rest = optimizer_.grad_norm(norm_ranges(false), {&rc_.groups.tensor, &rc_.groups.pipeline, data});
  if (!rc_.dims.moe()) return rest;
  Collectives* expert_data = data_sync_.distributed ? &rc_.groups.expert_data : nullptr;
  return std::hypot(rest, optimizer_.grad_norm(norm_ranges(true),
                                               {&rc_.groups.expert, &rc_.groups.pipeline, expert_data}));
}

// The validation loss: over train.eval_batches micro-batches per replica,
// or with 0 over the whole split.
double RankTrainer::evaluate(int64_t step) {
  const int64_t b = s_.micro_batch, batches = s_.assembly->train.options().get_int("eval_batches");
  if (batches == 0) return evaluate_whole(*s_.valid).loss;
  PipelineStage stage(rc_.dev, rc_.groups.pipeline, chunks_, rc_.dims, {});
  double loss = 0;
  for (int64_t k = 0; k < batches; ++k) {
    const int64_t g = rc_.coords.dp * batches + k;
    loss += stage.evaluate(load(*s_.valid, g * b, rng::splitmix64(seed() ^ uint64_t(step))));
  }
  double targets = double(batches * s_.dp * b * rc_.dims.seq);
  if (s_.valid->masks_loss())
    targets = std::max(
        1.0, sum_scalar(double(counted_by_rank(loss_targets(*s_.valid, rc_.coords.dp * batches * b, batches * b))),
                        false));
  return sum_scalar(loss, true) / targets;
}

// The largest stop signal any rank received, so that all stop together.
int RankTrainer::agreed_stop_signal() {
  const float mine = float(stop_signal());
  std::vector<float> all(size_t(s_.comm_info.world_size));
  rc_.groups.world.all_gather_host(&mine, all.data(), 1);
  return int(*std::max_element(all.begin(), all.end()));
}

// `stoppable` (--evaluate, which has nothing to save): a stop signal
// abandons the pass between two batches, recorded in s_.abandoned_by.
SplitLoss RankTrainer::evaluate_whole(const data::Samples& samples, bool stoppable) {
  const auto started = std::chrono::steady_clock::now();
  PipelineStage stage(rc_.dev, rc_.groups.pipeline, chunks_, rc_.dims, {});
  double loss = 0;
  int64_t targets = 0;
  const std::vector<SplitBatch> batches = whole_split_batches(samples.size(), s_.micro_batch, s_.dp, rc_.coords.dp);
  // Replicas may run one batch more than others; each checks for a stop
  // signal as often as the busiest, so that every rank joins every check.
  const int64_t rounds = ((samples.size() + s_.micro_batch - 1) / s_.micro_batch + s_.dp - 1) / s_.dp;
  for (int64_t k = 0; k < rounds; ++k) {
    if (stoppable && (s_.abandoned_by = agreed_stop_signal()) != 0) return {};
    if (k >= int64_t(batches.size())) {
      // The expert group exchanges tokens in every forward, so a replica
      // out of batches runs one that counts nothing beside its peers.
      if (s_.ep == 1) continue;
      MicroBatch idle = load(samples, 0, 0);
      idle.counted = 0;
      stage.evaluate(idle);
      continue;
    }
    const SplitBatch& sb = batches[size_t(k)];
    MicroBatch mb = load(samples, sb.first_sample, 0);  // evaluation has no dropout to key
    mb.counted = sb.counted;
    loss += stage.evaluate(mb);
    if (samples.masks_loss())
      targets += counted_by_rank(loss_targets(samples, sb.first_sample, std::min(sb.counted, s_.micro_batch)));
  }
  const int64_t tokens = samples.size() * rc_.dims.seq;
  const double counted = samples.masks_loss() ? std::max(1.0, sum_scalar(double(targets), false)) : double(tokens);
  const double total = sum_scalar(loss, true);
  return {total / counted, tokens,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()};
}

// The test split's loss at the end of training, as Megatron reports it.
void RankTrainer::test(int64_t step) {
  const SplitLoss r = evaluate_whole(*s_.test);
  if (!leader()) return;
  s_.metrics->write({{"step", step}, {"test_loss", r.loss}, {"test_perplexity", r.perplexity()}});
  s_.log->test(step, r.loss);
}

void RankTrainer::evaluate_model() {
  if (s_.resume_from.empty()) {
    LOG_IF(WARNING, leader()) << "no checkpoint to load (checkpoint.load is empty, or \"auto\" found none in "
                                 "checkpoint.dir): evaluating the freshly initialised model";
    if (rc_.dims.lora.on()) load_base(s_.peft_base);
  } else {
    const ckpt::Metadata saved = load_model();
    LOG_IF(INFO, leader()) << "evaluating the model of " << s_.resume_from << " (step " << saved.step << ")";
  }
  const std::pair<const char*, const data::Samples*> splits[] = {{"valid", s_.valid.get()}, {"test", s_.test.get()}};
  for (const auto& [name, samples] : splits) {
    if (samples == nullptr) continue;
    const SplitLoss r = evaluate_whole(*samples, true);
    if (s_.abandoned_by != 0) return;
    if (!leader()) continue;
    std::cout << split_line(name, r) << std::endl;
    s_.metrics->write(split_record(name, r));
  }
}

void RankTrainer::train() {
  Options t = s_.assembly->train.options();
  const int64_t eval_interval = t.get_int("eval_interval");
  const double flops = step_model_flops(rc_.dims, s_.global_batch);
  const double world = double(s_.comm_info.world_size), peak = rc_.dev.info().peak_flops;
  if (leader()) LOG(INFO) << "rank 0 computes on " << rc_.dev.info().name;
  if (s_.resume_from.empty() && rc_.dims.lora.on() && !s_.dry_run) load_base(s_.peft_base);
  const int64_t first = s_.resume_from.empty() ? 1 : resume() + 1;
  int64_t last = first - 1;  // the step the model is at
  for (int64_t st = first; st <= s_.steps; ++st) {
    last = st;
    auto start = std::chrono::steady_clock::now();
    const double flops_before = rc_.dev.gemm_flops();
    double loss = step(st);
    const StepExchange ex = exchange(rc_.dev.gemm_flops() - flops_before);
    const double hw_flops = ex.hw_flops;
    if (st == s_.steps && !s_.grads_out.empty())
      dump_gradients(rc_.dev, params_, rc_.groups.tensor, rc_.groups.expert, s_.grads_out + (s_.pp > 1 ? ".stage" + std::to_string(rc_.coords.pp) : ""),
                     rc_.coords.tp == 0 && rc_.coords.replica(s_.cp) == 0);
    const double norm = grad_norm();
    const bool finite =
        s_.dry_run || finite_step(st, loss, norm, {t.get_bool("skip_nonfinite"), leader()}, params_, rc_.dev);
    if (finite) {
      optimizer_.step(st, norm);
      param_gather_.publish();
    }
    rc_.dev.synchronize();
    const double gather_wait_s = param_gather_.take_wait_s();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (leader() && !s_.dry_run) {
      // Per device, as Megatron reports them: the sum over ranks divided by the ranks.
      const double tokens_per_s = double(s_.global_batch * rc_.dims.seq) / seconds;
      const double tflops = flops / seconds / world / 1e12, hw_tflops = hw_flops / seconds / world / 1e12;
      nlohmann::json record{{"step", st},
                            {"loss", loss},
                            {"lr", learning_rate(adamw_config(), st)},
                            {"grad_norm", norm},
                            {"step_s", seconds},
                            {"tokens_per_s", tokens_per_s},
                            {"tflops", tflops},
                            {"mfu", peak > 0 ? tflops * 1e12 / peak : 0.0},
                            {"hw_tflops", hw_tflops},
                            {"hfu", peak > 0 ? hw_tflops * 1e12 / peak : 0.0},
                            {"skipped", !finite},
                            {"stage_busy_s", stage_busy_},
                            {"stage_idle_s", stage_idle_},
                            {"grad_buckets", grad_sync_.stats().buckets},
                            {"grad_buckets_in_backward", grad_sync_.stats().started_in_backward},
                            {"grad_overlap_s", grad_sync_.stats().overlap_s},
                            {"grad_wait_s", grad_sync_.stats().wait_s}};
      if (rc_.dims.moe()) record["moe_aux_loss"] = moe_aux_loss_;
      if (optimizer_.distributed()) {
        record["param_gather_overlap"] = param_gather_.overlapped();
        record["param_gather_wait_s"] = gather_wait_s;
      }
      s_.metrics->write(record);
      s_.log->step({st, consumed_, loss, learning_rate(adamw_config(), st), norm, seconds, tokens_per_s, tflops,
                    !finite, !finite, rc_.dev.memory().total_peak(),
                    rc_.dims.moe() ? std::optional<double>(moe_aux_loss_) : std::nullopt});
    }
    if (!s_.dry_run && eval_interval > 0 && (st % eval_interval == 0 || st == s_.steps)) {
      double val = evaluate(st);
      if (leader()) {
        s_.metrics->write({{"step", st}, {"val_loss", val}});
        s_.log->validation(st, val);
      }
    }
    checkpointer_.settle(ex.writers);
    // A dry run has nothing to save; the real run that follows the memory
    // check's dry pass sees the signal at its first step.
    if (ex.stop_signal != 0 && !s_.dry_run) {
      param_gather_.wait_all();  // the checkpoint reads the parameters
      stop(st, ex.stop_signal);
      break;
    }
    if (!s_.dry_run && checkpointer_.due(st, s_.steps)) {
      param_gather_.wait_all();
      checkpointer_.save(checkpoint_metadata(st));
      if (leader()) s_.metrics->write({{"step", st}, {"checkpoint_stall_s", checkpointer_.last_stall_s()}});
    }
  }
  param_gather_.wait_all();
  checkpointer_.wait();
  if (s_.dry_run && checkpointer_.saving()) checkpointer_.dry_save();
  if (s_.plan_only) return;
  if (s_.test && !s_.dry_run && !s_.interrupted) test(last);
  finish();
}

void RankTrainer::finish() {
  const double e = double(dtype_size(rc_.dev.info().compute_dtype));
  const ActivationFormula per_layer = activation_formula(rc_.dims, e, keep_);
  const double formula = scheduled_activation_bytes(rc_.dims, e, chunk_specs_, keep_, s_.schedules[size_t(rc_.coords.pp)]);
  std::vector<uint64_t> mine;
  for (size_t c = 0; c < kMemCategories; ++c) mine.push_back(rc_.dev.memory().peak(static_cast<MemCategory>(c)));
  mine.push_back(rc_.dev.memory().total_peak());
  mine.push_back(uint64_t(formula));
  mine.push_back(checkpointer_.saving() ? checkpointer_.save_bytes() : 0);
  mine.push_back(uint64_t(params_.numel()));
  const std::vector<uint64_t> all = all_gather_counts(rc_.groups.world, mine);
  if (!leader()) return;
  const int64_t per_rank = int64_t(mine.size()), world = s_.comm_info.world_size;
  auto field = [&](int64_t rank, size_t index) { return all[size_t(rank * per_rank) + index]; };
  nlohmann::json ranks = nlohmann::json::array();
  for (int64_t r = 0; r < world; ++r) {
    nlohmann::json j;
    for (size_t c = 0; c < kMemCategories; ++c) j[category_name(static_cast<MemCategory>(c))] = field(r, c);
    j["total"] = field(r, kMemCategories);
    j["activations_formula"] = field(r, kMemCategories + 1);
    j["checkpoint_bytes"] = field(r, kMemCategories + 2);
    j["parameters"] = field(r, kMemCategories + 3);  // padded elements: what the state is held for
    j["rank"] = r;
    ranks.push_back(j);
  }
  s_.metrics->write({{"final", true}, {"memory", ranks}, {"activations_formula_per_layer", per_layer.per_layer}});
  if (s_.report_memory || s_.dry_run) print_memory(ranks);
}

}  // namespace

// This stage's model chunks, in chunk order.
std::vector<ChunkSpec> stage_chunks(const RunSetup& s, int32_t stage) {
  std::vector<ChunkSpec> chunks(size_t(s.virtual_stages));
  const size_t total = s.stage_layers.size();
  for (size_t k = 0; k < total; ++k) {
    const MH_StageLayers& e = s.stage_layers[k];
    if (e.stage != stage) continue;
    chunks[size_t(e.chunk)] = ChunkSpec{e.first, e.count, k == 0, k + 1 == total};
  }
  return chunks;
}

OwnedParts owned_parts(const std::vector<ChunkSpec>& chunks) {
  OwnedParts owned{{}, false, false};
  for (const ChunkSpec& c : chunks) {
    for (int64_t l = c.first_layer; l < c.first_layer + c.layers; ++l) owned.layers.push_back(l);
    owned.embedding |= c.first;
    owned.head |= c.last;
  }
  std::sort(owned.layers.begin(), owned.layers.end());
  return owned;
}

bool shards_optimizer_state(const Assembly& assembly, int32_t d) {
  if (d <= 1) return false;
  Instance data(*assembly.slot(MH_KIND_DATA_PARALLEL), 1, -1);
  const uint64_t one = 4;
  const MH_DataPlanArgs args{MH_STRUCT_SIZE(MH_DataPlanArgs, num_params), nullptr, d, &one, 1};
  MH_DataPlan plan{};
  plan.struct_size = sizeof(plan);
  check(data.api<MH_DataParallelApi>()->plan(data.get(), &args, &plan), data.label());
  return plan.distributed_optimizer != 0;
}

MemoryTracker train_rank(const RunSetup& setup, int32_t local) {
  RankTrainer trainer(setup, local);
  trainer.train();
  return trainer.memory();
}

void evaluate_rank(const RunSetup& setup, int32_t local) {
  RankTrainer trainer(setup, local);
  trainer.evaluate_model();
}

}  // namespace mh
