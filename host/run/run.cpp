#include "run/run.hpp"

#include <megahost/error.hpp>

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
#include <thread>

#include "data/data_sources.hpp"
#include "data/tokenizer.hpp"
#include "checkpoint/folder_owner.hpp"
#include "checkpoint/store.hpp"
#include "convert/hf_config.hpp"
#include "convert/hf_folder.hpp"
#include "convert/hf_to_megahost.hpp"
#include "engine/parts/moe_mlp.hpp"
#include "engine/tensor_weights.hpp"
#include "engine/trainer.hpp"
#include "generate/generate.hpp"
#include "serve/serve.hpp"
#include "preflight/memory_preflight.hpp"
#include "plugins/plugin_calls.hpp"
#include "run/stop_signals.hpp"
#include "run/rank_exits.hpp"
#include "preflight/run_agreement.hpp"

namespace mh {
namespace {

MH_ModelShape model_shape(const RunSetup& s, int32_t world) {
  return model_shape(s.dims, s.micro_batch, s.global_batch, world);
}

}  // namespace

MH_ModelShape model_shape(const ModelDims& d, int64_t micro_batch, int64_t global_batch, int32_t world) {
  // A mixture of experts is priced by its active experts (ModelDims::active_ffn,
  // ffn_hidden) and their all-to-all (its parts, 2.1); its memory, every
  // expert's weights included, comes from dry runs.
  return MH_ModelShape{sizeof(MH_ModelShape),
                       d.layers,
                       d.hidden,
                       d.heads,
                       d.active_ffn(),
                       d.seq,
                       d.vocab,
                       micro_batch,
                       global_batch,
                       world,
                       d.spec.activation == MlpActivation::kSwiglu,
                       d.spec.position == Position::kRope,
                       d.kv(),
                       !d.spec.tie_embeddings,
                       d.head_dim(),
                       d.spec.experts,
                       d.spec.router_topk,
                       d.moe_ffn,
                       d.spec.shared_experts,
                       d.shared_ffn,
                       d.spec.attention_backend == AttentionBackend::kFlash};
}

std::unique_ptr<data::Tokenizer> run_tokenizer(const Assembly& a, const Config& config) {
  Options data = a.data.options();
  auto file = [&](const char* key) {
    const std::string value = data.get_string(key);
    return value.empty() ? value : config.resolve(value).string();
  };
  const data::TokenizerFiles files{file("vocab_file"), file("merges_file"), file("tokenizer_file")};
  return data::make_tokenizer(data.get_string("tokenizer"), files);
}

ModelVocab model_vocab(const Assembly& a, const Config& config) {
  Options m = a.model.options();
  if (m.get_int("vocab") > 0) return {m.get_int("vocab"), "model.vocab"};
  return {run_tokenizer(a, config)->vocab_size(),
          "the " + a.data.options().get_string("tokenizer") + " tokenizer's, from data.tokenizer"};
}

data::DataKeys data_keys(const Assembly& a) {
  Options data = a.data.options();
  return {data.get_string("path"),        data.get_string("paths"),      data.get_string("train_paths"),
          data.get_string("valid_paths"), data.get_string("test_paths"), data.get_string("split")};
}

namespace {

ModelSpec model_spec(const Options& m) {
  ModelSpec spec;
  spec.norm = m.get_string("normalization") == "rmsnorm" ? Norm::kRmsNorm : Norm::kLayerNorm;
  spec.position = m.get_string("position") == "rope" ? Position::kRope : Position::kLearned;
  spec.activation = m.get_string("activation") == "swiglu" ? MlpActivation::kSwiglu : MlpActivation::kGelu;
  spec.attention_backend =
      m.get_string("attention_backend") == "flash" ? AttentionBackend::kFlash : AttentionBackend::kUnfused;
  spec.tie_embeddings = m.get_bool("tie_embeddings");
  spec.bias = m.get_bool("bias");
  spec.qkv_bias = m.get_bool("qkv_bias");
  spec.qk_norm = m.get_bool("qk_norm");
  spec.rope_theta = float(m.get_double("rope_theta"));
  spec.experts = m.get_int("experts");
  spec.router_topk = m.get_int("router_topk");
  spec.router_norm_topk = m.get_bool("router_norm_topk");
  spec.router_aux_loss_coef = float(m.get_double("router_aux_loss_coef"));
  spec.shared_experts = m.get_int("shared_experts");
  spec.shared_expert_gate = m.get_bool("shared_expert_gate");
  spec.capacity_factor = float(m.get_double("moe_capacity_factor"));
  return spec;
}

// 4h for GeLU; for SwiGLU, whose three matrices would otherwise hold 1.5x
// the parameters, Llama's 2/3 of 4h rounded up to a multiple of 256.
int64_t default_ffn(const ModelDims& d) {
  if (d.spec.activation == MlpActivation::kGelu) return 4 * d.hidden;
  return (8 * d.hidden / 3 + 255) / 256 * 256;
}

// [peft]'s LoRA settings; rank 0 when it trains every weight.
LoraSpec lora_spec(const Assembly& a) {
  Options p = a.peft.options();
  if (p.get_string("method") != "lora") return {};
  LoraSpec s;
  s.rank = p.get_int("rank");
  s.scale = float(p.get_double("alpha") / double(s.rank));
  s.dropout = float(p.get_double("dropout"));
  const std::pair<const char*, LoraTarget> names[] = {
      {"qkv", kLoraQkv}, {"proj", kLoraProj}, {"fc1", kLoraFc1}, {"fc2", kLoraFc2}, {"gate", kLoraGate}};
  std::stringstream list(p.get_string("targets"));
  for (std::string item; std::getline(list, item, ',');) {
    item.erase(std::remove(item.begin(), item.end(), ' '), item.end());
    const auto* it = std::find_if(std::begin(names), std::end(names), [&](const auto& n) { return item == n.first; });
    require(it != std::end(names), "peft.targets: '" + item + "' is not a linear layer; give a comma-separated list "
                                   "of qkv, proj, fc1, fc2, gate");
    s.targets |= it->second;
  }
  require(s.targets != 0, "peft.targets is empty; name at least one of qkv, proj, fc1, fc2, gate");
  return s;
}

}  // namespace

std::vector<std::string> shape_problems(const ModelDims& d) {
  std::vector<std::string> out;
  const auto check = [&](bool ok, const std::string& problem) {
    if (!ok) out.push_back(problem);
  };
  check(d.head_size > 0 || d.hidden % d.heads == 0,
        "model.hidden = " + std::to_string(d.hidden) + " is not divisible by model.heads = " +
            std::to_string(d.heads) + "; pick heads that divide hidden, or give model.head_dim");
  check(d.heads % d.kv() == 0, "model.kv_heads = " + std::to_string(d.kv()) + " does not divide model.heads = " +
                                   std::to_string(d.heads) + "; each key/value head serves a whole group of heads");
  check(d.max_positions == 0 || d.max_positions == d.seq || (d.spec.position == Position::kRope && d.max_positions > d.seq),
        "model.max_positions = " + std::to_string(d.max_positions) + " with model.seq_len = " + std::to_string(d.seq) +
            ": a learned position table has seq_len rows, and a rotary model serves at most max_positions; set "
            "max_positions to 0, or to at least seq_len with position = \"rope\"");
  check(d.spec.position != Position::kRope || (d.head_size == 0 && d.hidden % d.heads != 0) || d.head_dim() % 2 == 0,
        "model.position = \"rope\" rotates pairs of features, but the head size " +
            std::string(d.head_size > 0 ? "model.head_dim" : "hidden/heads") + " = " + std::to_string(d.head_dim()) +
            " is odd; pick an even head size");
  check(!d.moe() || d.spec.router_topk <= d.spec.experts,
        "model.router_topk = " + std::to_string(d.spec.router_topk) + " exceeds model.experts = " +
            std::to_string(d.spec.experts) + "; route each token to at most every expert");
  check(!d.moe() || (d.spec.activation == MlpActivation::kSwiglu && !d.spec.bias),
        "model.experts > 0 makes SwiGLU experts without biases; set model.activation = \"swiglu\" and model.bias = "
        "false (model.arch = \"llama\" does both)");
  check(d.moe() || (d.spec.shared_experts == 0 && d.spec.capacity_factor == 0),
        "model.shared_experts and model.moe_capacity_factor belong to a mixture of experts; set model.experts > 0 "
        "or leave them 0");
  check(d.spec.shared_experts > 0 || !d.spec.shared_expert_gate,
        "model.shared_expert_gate = true gates shared experts; set model.shared_experts > 0 or the gate false");
  check(!d.moe() || !d.lora.targets_any(kLoraGate | kLoraFc1 | kLoraFc2),
        "peft.targets names gate, fc1 or fc2, but model.experts > 0: the experts take no adapters yet; set "
        "peft.targets = \"qkv,proj\"");
  return out;
}

ModelDims model_dims(const Assembly& a, const Config& config) {
  Options m = a.model.options();
  ModelDims d{};
  d.spec = model_spec(m);
  d.layers = m.get_int("layers");
  d.hidden = m.get_int("hidden");
  d.heads = m.get_int("heads");
  d.kv_heads = m.get_int("kv_heads") > 0 ? m.get_int("kv_heads") : d.heads;
  d.head_size = m.get_int("head_dim");
  d.ffn = m.get_int("ffn_hidden") > 0 ? m.get_int("ffn_hidden") : default_ffn(d);
  d.moe_ffn = m.get_int("moe_ffn_hidden") > 0 ? m.get_int("moe_ffn_hidden") : d.ffn;
  d.shared_ffn = m.get_int("shared_expert_ffn_hidden") > 0 ? m.get_int("shared_expert_ffn_hidden") : d.moe_ffn;
  d.seq = m.get_int("seq_len");
  d.max_positions = m.get_int("max_positions");
  d.vocab_size = model_vocab(a, config).size;
  d.vocab = ckpt::padded_vocab(d.vocab_size);
  d.dropout = float(m.get_double("dropout"));
  d.attention_dropout = float(m.get_double("attention_dropout"));
  d.init_std = float(m.get_double("init_std"));
  d.layernorm_eps = float(m.get_double("layernorm_eps"));
  d.lora = lora_spec(a);
  return d;
}

ModelDims global_dims(const Assembly& a, const Config& config) {
  const ModelDims d = model_dims(a, config);
  const std::vector<std::string> problems = shape_problems(d);
  require(problems.empty(), problems.empty() ? "" : problems.front());
  return d;
}

namespace {

void plan_tensor(RunSetup& s, const Instance& tensor) {
  MH_ModelShape shape = model_shape(s, s.comm_info.world_size);
  const MH_TensorPlanArgs args = tensor_plan_args(shape);
  s.tensor_plan.struct_size = sizeof(MH_TensorPlan);
  s.tensor_plan.shard = s.tensor_shards.data();
  check(tensor.api<MH_TensorParallelApi>()->plan(tensor.get(), &args, &s.tensor_plan), tensor.label());
  s.tp = s.tensor_plan.size;
  // A third party's plan may not know key/value heads; the engine needs whole groups per rank.
  require(s.dims.kv() % s.tp == 0, tensor.label() + " planned parallel.tensor.size = " + std::to_string(s.tp) +
                                       ", which does not divide model.kv_heads = " + std::to_string(s.dims.kv()));
  s.dims.tp = s.tp;
  s.dims.sp = s.tensor_plan.sequence_parallel != 0;
  const std::string moe = moe_tensor_layout_problem(s.dims, s.tp, s.dims.sp, s.assembly->generates || s.assembly->serves);
  require(moe.empty(), moe);
}

// The context plan: the split of every sequence over cp ranks, which the
// engine executes with all-gathered keys and values or Ulysses' all-to-all
// (docs/parallelism.md).
void plan_context(RunSetup& s, const Instance& context) {
  MH_ModelShape shape = model_shape(s, s.comm_info.world_size);
  const MH_ContextPlanArgs args{MH_STRUCT_SIZE(MH_ContextPlanArgs, shape), nullptr, &shape};
  s.context_plan.struct_size = sizeof(MH_ContextPlan);
  check(context.api<MH_ContextParallelApi>()->plan(context.get(), &args, &s.context_plan), context.label());
  s.cp = s.context_plan.size;
  const int64_t chunks = s.context_plan.load_balance ? 2 * int64_t(s.cp) : s.cp;
  require(s.cp >= 1 && s.dims.seq % chunks == 0,
          context.label() + " planned parallel.context.size = " + std::to_string(s.cp) + " in " +
              std::to_string(chunks) + " chunks, which do not divide model.seq_len = " + std::to_string(s.dims.seq));
  require(s.cp == 1 || s.context_plan.comm == MH_CP_ALL_GATHER || s.context_plan.comm == MH_CP_P2P ||
              s.context_plan.comm == MH_CP_A2A,
          context.label() + " planned a comm_type the engine does not execute; set parallel.context.comm_type = "
                            "\"all_gather\", \"p2p\" or \"a2a\"");
  s.dims.cp_comm = s.context_plan.comm == MH_CP_A2A   ? ContextComm::kA2a
                   : s.context_plan.comm == MH_CP_P2P ? ContextComm::kP2p
                                                      : ContextComm::kAllGather;
  // The ring merges each key block's partial result by its log-sum-exp,
  // which the flash core keeps and the unfused core does not.
  require(s.cp == 1 || s.dims.cp_comm != ContextComm::kP2p ||
              s.dims.spec.attention_backend == AttentionBackend::kFlash,
          "parallel.context.comm_type = \"p2p\" merges each key block's partial attention by its log-sum-exp, "
          "which the flash core computes; set model.attention_backend = \"flash\", or comm_type = \"all_gather\"");
  // Ulysses splits each tensor rank's key/value groups (with their query
  // heads) over the context group.
  require(s.cp == 1 || s.dims.cp_comm != ContextComm::kA2a || s.dims.local_kv_heads() % s.cp == 0,
          "parallel.context.comm_type = \"a2a\" splits each tensor rank's " + std::to_string(s.dims.local_kv_heads()) +
              " key/value head(s) (model.kv_heads = " + std::to_string(s.dims.kv()) + " / parallel.tensor.size = " +
              std::to_string(s.tp) + ") over parallel.context.size = " + std::to_string(s.cp) +
              ", which does not divide them; use comm_type = \"all_gather\", or tensor and context sizes whose "
              "product divides " + std::to_string(s.dims.kv()));
  s.dims.cp = s.cp;
  s.dims.cp_balanced = s.context_plan.load_balance != 0;
  // A sequence-parallel shard of the rank's rows lies inside one of its
  // chunks, so its rows are one block of global rows (dropout's counters).
  require(!s.dims.sp || s.cp == 1 || (s.dims.local_seq() % s.tp == 0 && (s.tp % s.dims.chunks() == 0 || s.tp == 1)),
          "parallel.tensor.sequence_parallel with parallel.context.size = " + std::to_string(s.cp) +
              " shards each rank's " + std::to_string(s.dims.local_seq()) + " positions (" +
              std::to_string(s.dims.chunks()) + " chunk(s)) over parallel.tensor.size = " + std::to_string(s.tp) +
              ": use a tensor size that divides them and is a multiple of the chunks, or turn sequence_parallel off");
  // A capacity is per expert over the rows one rank routes, and the context
  // ranks (and the tensor ranks' sequence shards) each hold part of every
  // micro-batch's.
  require(s.cp == 1 || s.dims.spec.capacity_factor == 0,
          "model.moe_capacity_factor > 0 with parallel.context.size = " +
              std::to_string(s.cp) + ": the experts' capacity would count one context rank's share of each "
              "micro-batch; set model.moe_capacity_factor = 0 (dropless) or parallel.context.size = 1");
  require(!s.dims.sp || s.tp == 1 || s.dims.spec.capacity_factor == 0,
          "model.moe_capacity_factor > 0 with parallel.tensor.size = " + std::to_string(s.tp) +
              " and sequence parallelism: the experts' capacity would count one tensor rank's sequence shard of "
              "each micro-batch; set model.moe_capacity_factor = 0 (dropless) or parallel.tensor.size = 1");
}

// The pipeline plan depends on the data-parallel size, which depends on the
// pipeline size: plan once for p, then again with d = world / (t cp p).
void plan_pipeline(RunSetup& s, const Instance& pipeline) {
  const auto* api = pipeline.api<MH_PipelineParallelApi>();
  const int32_t world = s.comm_info.world_size;
  MH_ModelShape shape = model_shape(s, world);
  MH_PipelinePlanArgs args{MH_STRUCT_SIZE(MH_PipelinePlanArgs, data_parallel), nullptr, &shape, 1};
  MH_PipelinePlan plan{};
  plan.struct_size = sizeof(plan);
  check(api->plan(pipeline.get(), &args, &plan), pipeline.label());
  s.pp = plan.size;
  require(world % (s.tp * s.cp * s.pp) == 0,
          "comm world size " + std::to_string(world) + " is not a multiple of parallel.tensor.size (" +
              std::to_string(s.tp) + ") x parallel.context.size (" + std::to_string(s.cp) +
              ") x parallel.pipeline.size (" + std::to_string(s.pp) + ")");
  s.dp = world / (s.tp * s.cp * s.pp);
  args.data_parallel = s.dp;
  check(api->plan(pipeline.get(), &args, &plan), pipeline.label());
  s.microbatches = plan.microbatches;
  s.virtual_stages = plan.virtual_stages;
  s.stage_layers.assign(plan.layers, plan.layers + plan.num_layers);
  for (int32_t stage = 0; stage < s.pp; ++stage) {
    const MH_PipeAction* actions = nullptr;
    size_t count = 0;
    check(api->schedule(pipeline.get(), stage, &actions, &count), pipeline.label() + " schedule");
    s.schedules.emplace_back(actions, actions + count);
  }
}

// Expert parallelism draws its ranks from the stage's data-parallel
// replicas, their context ranks and, with experts whole on each rank
// (Megatron-Core's expert tensor-parallel size 1), their tensor ranks: the
// plan's data-parallel size is d cp t, known once d is.
void plan_expert(RunSetup& s, const Instance& expert) {
  const int32_t data_group = s.dp * s.cp * s.tp;
  const MH_ExpertPlanArgs args{MH_STRUCT_SIZE(MH_ExpertPlanArgs, data_parallel), nullptr, s.dims.spec.experts,
                               data_group};
  MH_ExpertPlan plan{};
  plan.struct_size = sizeof(plan);
  check(expert.api<MH_ExpertParallelApi>()->plan(expert.get(), &args, &plan), expert.label());
  require(plan.size >= 1 && data_group % plan.size == 0 && (s.dims.spec.experts % plan.size == 0),
          expert.label() + " planned parallel.expert.size = " + std::to_string(plan.size) +
              ", which does not divide the data-parallel x context x tensor size " + std::to_string(data_group) +
              " and model.experts = " + std::to_string(s.dims.spec.experts));
  s.ep = plan.size;
  s.dims.ep = s.ep;
}

// Training opens the train split, the valid split when it validates, and
// the test split when there is one; evaluation the valid and test splits
// that there are, whole.
void open_data(RunSetup& s, const Assembly& a, const Config& config) {
  Options train = a.train.options();
  const ModelVocab vocab = model_vocab(a, config);
  const data::DataKeys keys = data_keys(a);
  const bool test = data::split_given(keys, data::Split::kTest);
  const bool valid = s.evaluate_only ? data::split_given(keys, data::Split::kValid) : train.get_int("eval_interval") > 0;
  data::DataRequest request{keys,
                            [&config](const std::string& prefix) { return config.resolve(prefix).string(); },
                            s.dims.seq,
                            uint64_t(train.get_int("seed")),
                            !s.evaluate_only,
                            valid,
                            s.evaluate_only || train.get_int("eval_batches") == 0,
                            test,
                            vocab.size,
                            vocab.source};
  if (a.data.options().get_bool("eod_mask_loss")) request.eod_mask_id = run_tokenizer(a, config)->eod_id();
  data::OpenedData opened = data::open_data(request);
  s.datasets = std::move(opened.datasets);
  for (auto& mask : opened.loss_masks)  // kept as long as the samples reading them
    if (mask) s.datasets.push_back(std::move(mask));
  s.train = std::move(opened.train);
  s.valid = std::move(opened.valid);
  s.test = std::move(opened.test);
  const Options data = a.data.options();
  s.reset_position_ids = data.get_bool("reset_position_ids");
  s.reset_attention_mask = data.get_bool("reset_attention_mask");
  if (s.reset_position_ids || s.reset_attention_mask) s.eod = run_tokenizer(a, config)->eod_id();
  require(s.cp == 1 || !(s.reset_position_ids || s.reset_attention_mask),
          "data.reset_position_ids / data.reset_attention_mask (packed documents) with parallel.context.size = " +
              std::to_string(s.cp) + ": the documents' masks and positions are not split by context yet; turn "
              "them off or set parallel.context.size = 1");
}

// An imported model carries this run's own settings, so that loading it
// reads as a start from step 0, not as a resume with changed settings.
ckpt::Metadata run_settings(const RunSetup& s, const Assembly& a) {
  Options t = a.train.options();
  const int64_t decay = t.get_int("decay_steps");
  ckpt::Metadata m;
  m.global_batch = s.global_batch;
  m.micro_batch = s.micro_batch;
  m.seed = uint64_t(t.get_int("seed"));
  m.schedule = {{"lr", t.get_double("lr")},
                {"min_lr", t.get_double("min_lr")},
                {"warmup_steps", t.get_int("warmup_steps")},
                {"decay_steps", decay > 0 ? decay : s.steps},
                {"weight_decay", t.get_double("weight_decay")},
                {"adam_beta1", t.get_double("adam_beta1")},
                {"adam_beta2", t.get_double("adam_beta2")},
                {"adam_eps", t.get_double("adam_eps")},
                {"clip_grad", t.get_double("clip_grad")}};
  m.tokenizer = s.tokenizer;
  m.tokenizer["vocab_padded"] = s.dims.vocab;
  return m;
}

// The tokenizer as a checkpoint records it: its name, the files the user
// gave (absolute), its begin token and its end-of-document id as the end token.
nlohmann::json tokenizer_identity(const Assembly& a, const Config& config) {
  Options data = a.data.options();
  nlohmann::json t = {{"name", data.get_string("tokenizer")}};
  for (const char* key : {"vocab_file", "merges_file", "tokenizer_file"})
    if (!data.get_string(key).empty()) t[key] = config.resolve(data.get_string(key)).lexically_normal().string();
  const auto tokenizer = run_tokenizer(a, config);
  t["bos_token_id"] = tokenizer->bos_id();
  t["eos_token_id"] = tokenizer->eod_id();
  return t;
}

// The special ids the loaded model was made with win over the tokenizer's
// end-of-document id (Llama's bos 1 and eos 2, Llama 3's list of eos ids).
void adopt_special_ids(nlohmann::json& tokenizer, const nlohmann::json& saved_bos, const nlohmann::json& saved_eos) {
  if (!saved_bos.is_null()) tokenizer["bos_token_id"] = saved_bos;
  if (!saved_eos.is_null()) tokenizer["eos_token_id"] = saved_eos;
}

// The leader process of a run that saves locks checkpoint.dir for the
// run's lifetime and claims it (folder_owner.hpp) before step 1; the other
// processes read the identity from the folder when they first save.
void claim_checkpoint_dir(RunSetup& s) {
  if (s.checkpoint.dir.empty() || s.evaluate_only || s.comm_info.first_rank != 0) return;
  s.folder_lock = std::make_unique<ckpt::FolderLock>(s.checkpoint.dir);
  s.checkpoint.run = ckpt::claim_folder(s.checkpoint.dir, s.resume_from, s.checkpoint.load == "auto", s.checkpoint.overwrite);
}

// [checkpoint] with its paths resolved against the config, and the
// checkpoint to resume from. A dry run saves and loads nothing. A Hugging
// Face folder (its config.json already merged into [model]) is imported
// into a temporary checkpoint, which the result holds until the run ends.
std::unique_ptr<convert::TemporaryImport> plan_checkpoints(RunSetup& s, const Assembly& a, const Config& config) {
  Options c = a.checkpoint.options();
  auto path = [&](const std::string& p) { return p.empty() ? p : config.resolve(p).string(); };
  s.checkpoint = ckpt::Options{path(c.get_string("dir")), c.get_string("load"), c.get_int("interval"),
                               c.get_int("keep"), c.get_bool("async"), c.get_bool("save_optimizer"),
                               c.get_bool("overwrite"), ""};
  const std::string load = s.checkpoint.load == "auto" ? "auto" : path(s.checkpoint.load);
  require(load != "auto" || !s.checkpoint.dir.empty(),
          "checkpoint.load = \"auto\" resumes from checkpoint.dir, which is not set; set checkpoint.dir");
  if (s.dry_run) return nullptr;
  s.peft_base = path(a.peft.options().get_string("base"));
  // Before step 1, not at the first save an hour later; evaluation saves nothing.
  if (!s.checkpoint.dir.empty() && !s.evaluate_only) ckpt::check_writable(s.checkpoint.dir);
  std::unique_ptr<convert::TemporaryImport> imported;
  if (load != "auto" && convert::is_hf_folder(load)) {
    const convert::HfModel hf = convert::read_hf_config(load);
    adopt_special_ids(s.tokenizer, hf.bos_token_id, hf.eos_token_id);
    imported = std::make_unique<convert::TemporaryImport>(load, convert::ImportOptions{s.dims.seq, run_settings(s, a)});
    s.resume_from = imported->checkpoint();
    LOG(INFO) << (s.evaluate_only ? "evaluating" : "starting from") << " the Hugging Face model " << load
              << (s.evaluate_only ? "" : " (imported at step 0, AdamW's moments at zero)");
  } else {
    s.resume_from = ckpt::resolve_load(load, s.checkpoint.dir);
    if (!s.resume_from.empty()) {
      const nlohmann::json saved = ckpt::read_metadata(s.resume_from).tokenizer;
      adopt_special_ids(s.tokenizer, saved.value("bos_token_id", nlohmann::json()),
                        saved.value("eos_token_id", nlohmann::json()));
    }
    if (load == "auto" && s.resume_from.empty() && !s.evaluate_only)
      LOG(INFO) << "no checkpoint in " << s.checkpoint.dir << " yet: starting fresh";
  }
  if (!a.generates) claim_checkpoint_dir(s);
  return imported;
}

// What a rank's exception says to the user; std::bad_alloc says only its name.
std::string failure_text(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) == nullptr) return e.what();
  return "out of host memory (std::bad_alloc); lower train.micro_batch, model.seq_len or the model's size, or see "
         "each rank's needs with --dry_run";
}

// How long the comm waits for a peer (comm.timeout_s), the grace a failed
// run gives its other ranks to stop.
// A wrapper's section holds its inner communicator's options too (ABI 1.5).
double comm_timeout_s(const Assembly& a) {
  const Slot& slot = *a.slot(MH_KIND_COMM);
  for (const Options comm : {slot.options.options(), slot.inner_options.options()})
    if (comm.has("timeout_s")) return comm.get_double("timeout_s");
  return 30;
}

// Ends the process with status 1 without joining rank threads that are
// inside a plugin call that does not return: saying so is all the host can
// still do.
[[noreturn]] void exit_stuck(const std::string& failure, const std::string& stuck) {
  if (!failure.empty()) LOG(ERROR) << failure;
  LOG(ERROR) << stuck;
  google::FlushLogFiles(google::GLOG_INFO);
  std::fflush(nullptr);
  std::_Exit(1);
}

std::string not_stopped_text(const std::vector<int32_t>& stuck, double grace_s) {
  std::ostringstream text;
  text << "rank(s) ";
  for (size_t i = 0; i < stuck.size(); ++i) text << (i > 0 ? ", " : "") << stuck[i];
  text << " did not stop within comm.timeout_s = " << grace_s
       << " s after the run failed: stuck inside a plugin call (a kernel that never returns?); exiting without them";
  return text.str();
}

std::string hung_text(const PluginCalls::Stuck& stuck, double grace_s) {
  std::ostringstream text;
  text << "rank " << stuck.rank << " has been inside kernels call '" << stuck.what
       << "' for more than comm.timeout_s = " << grace_s
       << " s: a call that does not return (a hung kernel or device?); stopping the run without waiting for it "
          "(raise comm.timeout_s if one call of this run can take longer)";
  return text.str();
}

// Runs `body` for every local rank on its own thread. A rank that fails
// aborts the communicator so the others stop instead of waiting on it; the
// first failure that is not such an abort is the one reported.
void run_ranks(const RunSetup& s, const std::function<void(int32_t local)>& body) {
  std::mutex mu;
  std::string first_error, first_abort;
  std::vector<std::thread> threads;
  RankExits exits(s.comm_info.first_rank, s.comm_info.ranks_in_process);
  PluginCalls calls(s.comm_info.first_rank, s.comm_info.ranks_in_process);
  for (int32_t local = 0; local < s.comm_info.ranks_in_process; ++local) {
    threads.emplace_back([&, local] {
      const int32_t rank = s.comm_info.first_rank + local;
      calls.attach_this_thread(local);
      bool failed = true;
      try {
        body(local);
        failed = false;
      } catch (const std::exception& e) {
        const Error* err = dynamic_cast<const Error*>(&e);
        bool aborted = err != nullptr && err->code() == MH_ABORTED;
        std::string message = "rank " + std::to_string(rank) + ": " + failure_text(e);
        {
          std::lock_guard lock(mu);
          std::string& slot = aborted ? first_abort : first_error;
          if (slot.empty()) slot = message;
        }
        s.comm_api->abort(s.comm, rank, e.what());
      }
      exits.returned(local, failed);
    });
  }
  // A rank inside one call for longer than a peer would wait for it in a
  // collective is stuck, also where no peer waits (one rank, or all stuck).
  const double grace_s = comm_timeout_s(*s.assembly);
  std::optional<PluginCalls::Stuck> hung;
  const auto stalled = [&] { return (hung = calls.longer_than(std::chrono::duration<double>(grace_s))).has_value(); };
  if (std::vector<int32_t> stuck = exits.wait(std::chrono::duration<double>(grace_s), stalled); !stuck.empty()) {
    std::lock_guard lock(mu);
    exit_stuck(first_error.empty() ? first_abort : first_error,
               hung ? hung_text(*hung, grace_s) : not_stopped_text(stuck, grace_s));
  }
  for (auto& t : threads) t.join();
  if (!first_error.empty()) throw Error(MH_INTERNAL, first_error);
  if (!first_abort.empty()) throw Error(MH_ABORTED, first_abort);
}

std::unique_ptr<TrainingLog> training_log(const RunSetup& s, const Assembly& assembly, const Config& config) {
  Options train = assembly.train.options();
  const std::string dir = config.resolve_if_set(assembly.output.options().get_string("tensorboard_dir"));
  auto events =
      dir.empty() || s.dry_run ? nullptr : std::make_unique<tensorboard::EventFile>(dir, "output.tensorboard_dir");
  auto log = std::make_unique<TrainingLog>(s.steps, train.get_int("log_interval"), s.global_batch, std::move(events));
  std::ostringstream toml;
  toml << config.root();
  log->config(toml.str());
  return log;
}

// The splits evaluated are printed; the rest are abandoned.
int evaluation_stopped(int signal) {
  LOG(WARNING) << "received " << stop_signal_name(signal)
               << ": stopped evaluating; the splits printed above are whole, the rest abandoned";
  return interrupted_status(signal);
}

}  // namespace

int run(const Assembly& assembly, const Config& config, const RunFlags& flags) {
  // From the start: a signal during a checkpoint import abandons it and
  // removes its temporary folder (stop_if_signalled).
  StopSignals signals;
  if (flags.dry_run) std::cout << "assembled from " << config.file() << ":\n" << assembly.describe();
  RunSetup s;
  s.assembly = &assembly;
  s.dry_run = flags.dry_run;
  s.evaluate_only = flags.evaluate;
  s.report_memory = flags.report_memory;
  s.grads_out = flags.grads_out;
  Options train = assembly.train.options();
  s.steps = flags.dry_run ? 1 : train.get_int("steps");
  s.global_batch = train.get_int("global_batch");
  s.micro_batch = train.get_int("micro_batch");
  s.dims = global_dims(assembly, config);
  s.dims.micro_batch = s.micro_batch;

  Instance comm(*assembly.slot(MH_KIND_COMM), 0, -1);
  s.comm_api = comm.api<MH_CommApi>();
  s.comm = comm.get();
  s.comm_info.struct_size = sizeof(MH_CommInfo);
  check(s.comm_api->info(s.comm, &s.comm_info), comm.label());
  // The kernels split the node's cores between its ranks; a communicator
  // older than ABI 1.3 knows only its own process's.
  s.comm_info.ranks_on_node = std::max(s.comm_info.ranks_on_node, s.comm_info.ranks_in_process);
  agree_on_run(s.comm_api, s.comm, s.comm_info, assembly);
  Instance tensor(*assembly.slot(MH_KIND_TENSOR_PARALLEL), s.comm_info.ranks_in_process, -1);
  plan_tensor(s, tensor);
  Instance context(*assembly.slot(MH_KIND_CONTEXT_PARALLEL), s.comm_info.ranks_in_process, -1);
  plan_context(s, context);
  Instance pipeline(*assembly.slot(MH_KIND_PIPELINE_PARALLEL), s.comm_info.ranks_in_process, -1);
  plan_pipeline(s, pipeline);
  Instance expert(*assembly.slot(MH_KIND_EXPERT_PARALLEL), s.comm_info.ranks_in_process, -1);
  plan_expert(s, expert);
  require(s.ep == 1 || !(assembly.generates || assembly.serves),
          "parallel.expert.size = " + std::to_string(s.ep) +
              ": generation and serving hold every expert on each rank; set parallel.expert.size = 1 for them");
  if (!assembly.generates) open_data(s, assembly, config);
  s.tokenizer = tokenizer_identity(assembly, config);
  const std::unique_ptr<convert::TemporaryImport> imported = plan_checkpoints(s, assembly, config);
  const std::string metrics =
      flags.metrics_out.empty() ? config.resolve_if_set(assembly.output.options().get_string("metrics")) : flags.metrics_out;
  s.metrics = std::make_unique<MetricsWriter>(s.comm_info.first_rank == 0 ? metrics : "");
  if (assembly.serves) return serve::serve(s, config, [&](const auto& body) { run_ranks(s, body); });
  if (assembly.generates)
    return generate::serve(s, config, [&](const auto& body) { run_ranks(s, body); });
  if (s.comm_info.first_rank == 0) s.log = training_log(s, assembly, config);
  LOG_IF(INFO, s.comm_info.first_rank == 0)
      << (s.evaluate_only ? "evaluating " : "training ") << s.dims.layers << " layers, hidden " << s.dims.hidden
      << ", vocab " << s.dims.vocab << " on " << s.comm_info.world_size << " rank(s): TP " << s.tp << (s.dims.sp ? " with SP" : "") << (s.cp > 1 ? ", CP " + std::to_string(s.cp) : "") << ", PP " << s.pp
      << (s.virtual_stages > 1 ? " x " + std::to_string(s.virtual_stages) + " chunks" : "") << ", DP " << s.dp << (s.ep > 1 ? " (EP " + std::to_string(s.ep) + ")" : "") << ", "
      << (s.evaluate_only ? "" : std::to_string(s.microbatches) + " ") << "micro-batch(es) of " << s.micro_batch
      << (s.evaluate_only ? "" : " per step");
  if (s.evaluate_only) {
    run_ranks(s, [&](int32_t local) { evaluate_rank(s, local); });
    return s.abandoned_by == 0 ? 0 : evaluation_stopped(s.abandoned_by);
  }
  if (flags.memory_plan != nullptr)
    check_planned_memory(s, *flags.memory_plan, [&](const auto& body) { run_ranks(s, body); });
  run_ranks(s, [&](int32_t local) { train_rank(s, local); });
  return s.interrupted ? kExitInterrupted : 0;
}

}  // namespace mh
