#include "tuner/candidate_config.hpp"

#include <megahost/error.hpp>
#include <megahost/struct_size.hpp>

#include <algorithm>
#include <fstream>

#include "engine/trainer.hpp"

namespace mh {
namespace {

toml::table& section(toml::table& root, const std::string& name) {
  toml::node* node = root.get(name);
  if (node == nullptr || !node->is_table()) node = &root.insert_or_assign(name, toml::table{}).first->second;
  return *node->as_table();
}

std::string string_or(const toml::table& t, const char* key, const std::string& fallback) {
  return t[key].value<std::string>().value_or(fallback);
}

// Paths of the data section are relative to the tuned config's folder; the
// candidate's file lives elsewhere. Every input the data section names, the
// default data.path included.
void resolve_data_paths(const Config& config, const Assembly& assembly, toml::table& root) {
  toml::table& data = section(root, "data");
  Options values = assembly.data.options();
  for (const char* key :
       {"path", "paths", "train_paths", "valid_paths", "test_paths", "vocab_file", "merges_file", "tokenizer_file"})
    if (std::string v = values.get_string(key); !v.empty())
      data.insert_or_assign(key, config.resolve_key(std::string("data.") + key, v));
}

// The model split: t, SP, p and v; the tuner splits the layers evenly.
void write_split(toml::table& root, const MH_Candidate& c) {
  toml::table& parallel = section(root, "parallel");
  toml::table& tensor = section(parallel, "tensor");
  tensor.insert_or_assign("size", c.tensor);
  tensor.insert_or_assign("sequence_parallel", c.sequence_parallel != 0);
  toml::table& pipeline = section(parallel, "pipeline");
  pipeline.insert_or_assign("size", c.pipeline);
  pipeline.insert_or_assign("virtual_stages", c.virtual_stages);
  const std::string schedule = string_or(pipeline, "schedule", "1f1b");
  if (c.virtual_stages > 1) pipeline.insert_or_assign("schedule", "interleaved");
  else if (schedule == "interleaved") pipeline.insert_or_assign("schedule", "1f1b");
  pipeline.erase("layers_per_stage");
}

// Context and expert parallelism, where the tuner names them.
void write_context_expert(toml::table& root, const MH_Candidate& c) {
  if (!reaches(c, &MH_Candidate::expert)) return;
  toml::table& parallel = section(root, "parallel");
  toml::table& context = section(parallel, "context");
  context.insert_or_assign("size", candidate_context(c));
  if (const char* comm = candidate_context_comm(c)) context.insert_or_assign("comm_type", std::string(comm));
  section(parallel, "expert").insert_or_assign("size", candidate_expert(c));
}

void write_layout(toml::table& root, const MH_Candidate& c) {
  write_split(root, c);
  write_context_expert(root, c);
  section(root, "train").insert_or_assign("micro_batch", c.micro_batch);
  if (names_data_choices(c)) {
    toml::table& data = section(section(root, "parallel"), "data");
    data.insert_or_assign("distributed_optimizer", c.distributed_optimizer != 0);
    data.insert_or_assign("overlap_param_gather", c.overlap_param_gather != 0);
    if (c.overlap_param_gather != 0) data.insert_or_assign("overlap_grad_reduce", true);  // its buckets
  }
  toml::table recompute{{"plugin", std::string(c.recompute)}};
  if (std::string(c.recompute) == "full") {
    recompute.insert("method", "uniform");
    recompute.insert("num_layers", c.recompute_layers);
  }
  root.insert_or_assign("recompute", std::move(recompute));
}

// The path keys `keys` of section `name`, relative to the tuned config's
// folder, resolved for a config written elsewhere.
void resolve_section_paths(const Config& config, toml::table& root, const std::string& name,
                           std::initializer_list<const char*> keys) {
  toml::table* table = root[name].as_table();
  if (table == nullptr) return;
  for (const char* key : keys)
    if (std::string v = string_or(*table, key, ""); !v.empty())
      table->insert_or_assign(key, config.resolve_key(name + "." + key, v));
}

// The checkpoint to generate from.
void resolve_checkpoint_paths(const Config& config, toml::table& root) {
  resolve_section_paths(config, root, "checkpoint", {"dir", "load"});
}

void write_generate(const Config& config, toml::table& root, const MH_Candidate& c, const GenerateRequest& r) {
  toml::table& generate = section(root, "generate");
  generate.insert_or_assign("batch", c.micro_batch);
  if (r.keep_prompt && generate.contains("prompt")) return;
  if (std::string own = string_or(generate, "prompts_file", ""); r.keep_prompt && !own.empty()) {
    generate.insert_or_assign("prompts_file", config.resolve(own).string());
    return;
  }
  generate.erase("prompt");
  generate.insert_or_assign("prompts_file", r.prompts_file.string());
  generate.insert_or_assign("max_new_tokens", r.output_tokens);
  generate.insert_or_assign("stop_at_eod", false);
}

// One replica's batch, stopped at 3p micro-batches unless every micro-batch
// stays in flight (GPipe): 1F1B holds at most p and interleaving at most
// (v - 1) p + 2 (p - 1) + 1 chunk-forwards, so the step's peaks are reached
// by then.
int64_t dry_run_batch(const Assembly& assembly, const toml::table& root, const MH_Candidate& c) {
  const int64_t replica = assembly.train.options().get_int("global_batch") / c.data;
  const int64_t m = replica / c.micro_batch;
  const bool gpipe = root["parallel"]["pipeline"]["schedule"].value<std::string>() == "gpipe";
  return c.micro_batch * (gpipe ? m : std::min<int64_t>(m, 3 * int64_t(c.pipeline)));
}

// The launch on a device cluster: one process per device under mpirun or
// srun, so no thread world.
void write_device_components(toml::table& root, const HardwareProfile& cluster, int32_t world) {
  const std::string dtype = cluster.dtype == MH_F32 ? "fp32" : "bf16";
  root.insert_or_assign("kernels", toml::table{{"plugin", "cuda"}, {"dtype", dtype}});
  toml::table comm{{"plugin", "nccl"}, {"world_size", world}};
  if (const toml::node* timeout = section(root, "comm").get("timeout_s")) comm.insert("timeout_s", *timeout);
  root.insert_or_assign("comm", std::move(comm));
}

}  // namespace

int32_t candidate_context(const MH_Candidate& c) {
  return reaches(c, &MH_Candidate::expert) ? std::max(1, c.context) : 1;
}

int32_t candidate_expert(const MH_Candidate& c) {
  return reaches(c, &MH_Candidate::expert) ? std::max(1, c.expert) : 1;
}

const char* candidate_context_comm(const MH_Candidate& c) {
  return reaches(c, &MH_Candidate::expert) ? c.context_comm : nullptr;
}

int32_t candidate_world(const MH_Candidate& c) {
  return c.tensor * candidate_context(c) * c.pipeline * c.data;
}

bool names_data_choices(const MH_Candidate& c) {
  return reaches(c, &MH_Candidate::overlap_param_gather);
}

bool shards_optimizer(const Assembly& assembly, const MH_Candidate& c) {
  if (names_data_choices(c)) return c.distributed_optimizer != 0 && c.data > 1;
  return shards_optimizer_state(assembly, c.data);
}

// The world: comm's size on a shared device (mpi takes it when it is
// mpirun's), or the device cluster's components.
void write_world(toml::table& root, const HardwareProfile& cluster, int32_t world) {
  if (!cluster.shared_device) write_device_components(root, cluster, world);
  else section(root, "comm").insert_or_assign("world_size", world);
}

toml::table candidate_config(const Config& config, const Assembly& assembly, const MH_Candidate& c,
                             CandidateRun run, const HardwareProfile& cluster) {
  toml::table root = config.root();
  root.erase("tuner");
  resolve_data_paths(config, assembly, root);
  write_layout(root, c);
  int32_t world = candidate_world(c);
  if (run == CandidateRun::kDry) {
    const int32_t replicas = candidate_expert(c);
    world = c.tensor * candidate_context(c) * c.pipeline * replicas;
    section(root, "train").insert_or_assign("global_batch", replicas * dry_run_batch(assembly, root, c));
  }
  write_world(root, cluster, world);
  return root;
}

toml::table generate_config(const Config& config, const Assembly& assembly, const MH_Candidate& c,
                            const HardwareProfile& cluster, const GenerateRequest& request) {
  toml::table root = config.root();
  root.erase("tuner");
  root.erase("serve");  // a candidate generates its requests; the winner may serve
  resolve_data_paths(config, assembly, root);
  resolve_checkpoint_paths(config, root);
  write_split(root, c);
  write_generate(config, root, c, request);
  write_world(root, cluster, c.tensor * c.pipeline);
  return root;
}

toml::table serve_config(const Config& config, const Assembly& assembly, const MH_Candidate& c,
                         const HardwareProfile& cluster) {
  toml::table root = config.root();
  root.erase("tuner");
  root.erase("generate");
  resolve_data_paths(config, assembly, root);
  resolve_checkpoint_paths(config, root);
  write_split(root, c);
  toml::table& serve = section(root, "serve");
  serve.insert_or_assign("max_batch", c.micro_batch);
  if (std::string own = string_or(serve, "chat_template", ""); !own.empty())
    serve.insert_or_assign("chat_template", config.resolve(own).string());
  write_world(root, cluster, c.tensor * c.pipeline);
  return root;
}

void resolve_output_paths(const Config& config, toml::table& root) {
  resolve_checkpoint_paths(config, root);
  resolve_section_paths(config, root, "output", {"metrics", "tensorboard_dir"});
}

void write_toml(const toml::table& table, const std::filesystem::path& file, const std::string& comment) {
  std::ofstream out(file);
  require(bool(out), "cannot write " + file.string());
  out << comment << table << "\n";
  require(bool(out), "writing " + file.string() + " failed");
}

}  // namespace mh
