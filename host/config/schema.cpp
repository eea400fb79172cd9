#include "config/schema.hpp"

#include <megahost/options.hpp>

#include <algorithm>

namespace mh {
namespace {

constexpr double kMaxInt = 1e12;

const MH_OptionSpec kModel[] = {
    opt_int("layers", "4", 1, 100000, "transformer layers"),
    opt_int("hidden", "256", 1, 1e6, "hidden size h"),
    opt_int("heads", "4", 1, 100000, "attention heads a (must divide hidden)"),
    opt_int("ffn_hidden", "0", 0, 1e7, "MLP inner size; 0 means 4 * hidden"),
    opt_int("seq_len", "128", 1, 1e7, "sequence length s"),
    opt_int("max_positions", "0", 0, 1e9, "positions the model is made for (exported as max_position_embeddings); 0 means seq_len; above seq_len only with position = \"rope\""),
    opt_int("vocab", "0", 0, 1e8, "vocabulary size; 0 takes the tokenizer's"),
    opt_double("dropout", "0.1", 0, 0.99, "dropout after attention, MLP and embeddings"),
    opt_double("attention_dropout", "0.1", 0, 0.99, "dropout on the attention probabilities"),
    opt_double("init_std", "0.02", 0, 10, "standard deviation of the normal weight init"),
    opt_double("layernorm_eps", "1e-5", 0, 1, "layernorm epsilon"),
    opt_choice("arch", "\"gpt2\"", "gpt2|llama", "preset of the variant keys below (docs/models.md); keys set explicitly win"),
    opt_choice("normalization", "\"layernorm\"", "layernorm|rmsnorm", "norm in each layer and before the output"),
    opt_choice("position", "\"learned\"", "learned|rope", "learned position table or rotary embedding"),
    opt_double("rope_theta", "10000", 1, 1e12, "RoPE base (position = \"rope\")"),
    opt_choice("activation", "\"gelu\"", "gelu|swiglu", "MLP activation"),
    opt_choice("attention_backend", "\"unfused\"", "unfused|flash", "attention core: unfused (scores, softmax and dropout stored for backward) or flash (the kernels' memory-efficient attention op: no [s, s] buffer, backward recomputes it); Megatron-Core's --attention-backend"),
    opt_int("kv_heads", "0", 0, 100000, "key/value heads (grouped-query attention); 0 means heads"),
    opt_int("head_dim", "0", 0, 100000, "a head's size: Q, K and V are heads x head_dim wide, the output projection reads heads x head_dim; 0 means hidden / heads"),
    opt_bool("tie_embeddings", "true", "the output layer shares the token embedding"),
    opt_bool("bias", "true", "biases on the linear layers"),
    opt_bool("qkv_bias", "false", "biases on the QKV projection alone (Qwen2) when bias = false"),
    opt_bool("qk_norm", "false", "RMSNorm over each query and key head before RoPE, weights [head size] (Qwen3)"),
    opt_int("experts", "0", 0, 100000, "mixture of experts: routed SwiGLU experts per layer; 0 is a dense MLP"),
    opt_int("router_topk", "2", 1, 100000, "experts each token is routed to (at most experts)"),
    opt_int("moe_ffn_hidden", "0", 0, 1e7, "an expert's inner size; 0 means ffn_hidden"),
    opt_bool("router_norm_topk", "true", "renormalise the k chosen probabilities to sum to 1 (Mixtral); false keeps the softmax over all experts (Qwen2-MoE's norm_topk_prob = false)"),
    opt_double("router_aux_loss_coef", "0", 0, 1e6, "weight of the load-balancing loss (Switch/Mixtral), reported as moe_aux_loss"),
    opt_int("shared_experts", "0", 0, 100000, "SwiGLU experts every token passes through beside its routed ones (Qwen2-MoE, DeepSeek)"),
    opt_int("shared_expert_ffn_hidden", "0", 0, 1e7, "a shared expert's inner size; 0 means moe_ffn_hidden"),
    opt_bool("shared_expert_gate", "false", "scale the shared experts' output by sigmoid(x g), g [1, hidden] (Qwen2-MoE)"),
    opt_double("moe_capacity_factor", "0", 0, 1e6, "each expert takes at most ceil(factor tokens k / experts) tokens, the lowest gates past it dropped; 0 is dropless"),
};

const MH_OptionSpec kTrain[] = {
    opt_int("steps", "200", 0, kMaxInt, "optimizer steps"),
    opt_int("global_batch", "8", 1, kMaxInt, "sequences per optimizer step"),
    opt_int("micro_batch", "8", 1, kMaxInt, "sequences per forward/backward"),
    opt_double("lr", "1e-3", 0, 10, "peak learning rate"),
    opt_double("min_lr", "1e-4", 0, 10, "learning rate at the end of cosine decay"),
    opt_int("warmup_steps", "20", 0, kMaxInt, "linear warm-up steps"),
    opt_int("decay_steps", "0", 0, kMaxInt, "cosine decay length; 0 means train.steps"),
    opt_double("weight_decay", "0.1", 0, 10, "AdamW weight decay (not on biases and norms)"),
    // Below 1 in float, where the kernels compute (beta = 1 never forgets):
    // 0.999999 rounds to a float below 1, and prints as itself in errors.
    opt_double("adam_beta1", "0.9", 0, 0.999999, "AdamW beta1, below 1"),
    opt_double("adam_beta2", "0.95", 0, 0.999999, "AdamW beta2, below 1"),
    opt_double("adam_eps", "1e-8", 0, 1, "AdamW epsilon"),
    opt_double("clip_grad", "1.0", 0, 1e9, "global gradient-norm clip; 0 disables"),
    opt_bool("skip_nonfinite", "false", "skip the update of a step whose loss or gradient norm is NaN or infinite, instead of stopping"),
    opt_int("seed", "1234", 0, 9e18, "seed of init, dropout and data order"),
    opt_int("eval_interval", "50", 0, kMaxInt, "steps between validation runs; 0 disables"),
    opt_int("eval_batches", "4", 0, kMaxInt, "micro-batches per validation run; 0: the whole validation split"),
    opt_int("log_interval", "10", 1, kMaxInt, "steps between log lines"),
};

const MH_OptionSpec kData[] = {
    opt("path", MH_VALUE_STRING, "\"../data/corpus_byte\"", "indexed dataset prefix (.bin/.idx), relative to the config"),
    opt("paths", MH_VALUE_STRING, "\"\"", "weighted prefixes to blend, \"0.3 a 0.7 b\"; replaces path"),
    opt("train_paths", MH_VALUE_STRING, "\"\"", "weighted prefixes used whole for training; split is then unused"),
    opt("valid_paths", MH_VALUE_STRING, "\"\"", "weighted prefixes used whole for validation"),
    opt("test_paths", MH_VALUE_STRING, "\"\"", "weighted prefixes used whole as the test split (evaluated at the end of training and by --evaluate)"),
    opt_choice("tokenizer", "\"byte\"", "byte|gpt2|huggingface|sentencepiece", "tokenizer the dataset was made with"),
    opt("vocab_file", MH_VALUE_STRING, "\"\"", "vocab.json (tokenizer = gpt2); empty: GPT-2's, shipped"),
    opt("merges_file", MH_VALUE_STRING, "\"\"", "merges.txt (tokenizer = gpt2); empty: GPT-2's, shipped"),
    opt("tokenizer_file", MH_VALUE_STRING, "\"\"", "tokenizer.json (tokenizer = huggingface) or tokenizer.model (tokenizer = sentencepiece)"),
    opt("split", MH_VALUE_STRING, "\"98,2,0\"", "train,valid,test weights over documents"),
    opt_bool("reset_position_ids", "false",
             "positions restart after each EOD of data.tokenizer in a sample "
             "(packed documents; training and evaluation)"),
    opt_bool("reset_attention_mask", "false",
             "no token attends across an EOD of data.tokenizer in a sample "
             "(packed documents; training and evaluation)"),
    opt_bool("eod_mask_loss", "false", "no loss on the target after an EOD (Megatron's --eod-mask-loss)"),
};

const MH_OptionSpec kOutput[] = {
    opt("metrics", MH_VALUE_STRING, "\"\"", "JSON-lines metrics file; --metrics_out overrides"),
    opt("tensorboard_dir", MH_VALUE_STRING, "\"\"",
        "folder for TensorBoard event files (loss, lr, grad norm, throughput, memory, validation, config); empty writes none"),
    opt("dir", MH_VALUE_STRING, "\"tuner_out\"", "folder of the tuner's tables and tuned.toml, relative to the config"),
};

const MH_OptionSpec kCheckpoint[] = {
    opt("dir", MH_VALUE_STRING, "\"\"", "folder of the checkpoints, relative to the config; empty saves none"),
    opt_int("interval", "0", 0, kMaxInt, "steps between saves; 0 saves only at the end (a run with dir always does)"),
    opt_int("keep", "0", 0, kMaxInt, "newest checkpoints kept, older ones deleted once a newer one is complete; 0 keeps all"),
    opt("load", MH_VALUE_STRING, "\"\"",
        "\"\" starts fresh; \"auto\" resumes from the newest complete checkpoint in dir, if any; else a checkpoint path"),
    opt_bool("async", "false", "snapshot to host memory and write in the background while training goes on"),
    opt_bool("save_optimizer", "true", "save AdamW's moments (needed to resume exactly)"),
    opt_bool("overwrite", "false",
             "let a run that does not resume from dir take a dir holding another run's checkpoints, deleting them"),
};

// Parameter-efficient fine-tuning (docs/finetune.md): adapters train, the base stays frozen.
const MH_OptionSpec kPeft[] = {
    opt_choice("method", "\"none\"", "none|lora", "none trains every weight; lora trains LoRA adapters on a frozen base"),
    opt_int("rank", "8", 1, 1e6, "LoRA rank r"),
    opt_double("alpha", "16", 0, 1e6, "LoRA alpha: the adapters' output is scaled by alpha / rank"),
    opt_double("dropout", "0", 0, 0.99, "dropout on the adapters' input in training (the base reads it undropped)"),
    opt("targets", MH_VALUE_STRING, "\"qkv,proj,fc1,fc2,gate\"",
        "comma-separated linear layers that get adapters: qkv, proj, fc1, fc2, gate"),
    opt("base", MH_VALUE_STRING, "\"\"",
        "checkpoint whose weights are the frozen base, relative to the config; empty: the seed's initial model"),
};

// A run whose TOML has [generate] generates text instead of training (docs/generate.md).
const MH_OptionSpec kGenerate[] = {
    opt("prompt", MH_VALUE_STRING, "\"\"", "one prompt; prompts_file gives many"),
    opt("prompts_file", MH_VALUE_STRING, "\"\"",
        "prompts, one per line, or JSON lines with a \"prompt\" field (.jsonl), relative to the config"),
    opt_int("max_new_tokens", "32", 1, 1e7, "tokens generated per prompt at most"),
    opt_double("temperature", "0", 0, 100, "sampling temperature; 0 is greedy"),
    opt_int("top_k", "0", 0, 1e8, "sample among the k likeliest tokens; 0 keeps all"),
    opt_double("top_p", "1", 0, 1, "sample among the likeliest tokens whose probabilities sum to top_p (nucleus)"),
    opt_int("seed", "1234", 0, 9e18, "seed of sampling; the draws do not depend on the layout or the batch"),
    opt_int("batch", "1", 1, 1e6, "requests served together (continuous batching over a KV cache of that many sequences)"),
    opt_bool("stop_at_eod", "true", "stop a request at the end-of-document token"),
};

// A run whose TOML has [serve] serves OpenAI's HTTP API instead of training (docs/serve.md).
const MH_OptionSpec kServe[] = {
    opt("host", MH_VALUE_STRING, "\"127.0.0.1\"", "address the HTTP server listens on"),
    opt_int("port", "8000", 0, 65535, "TCP port; 0 picks a free one (printed on stdout)"),
    opt_int("max_batch", "8", 1, 1e6, "sequences in flight: the KV cache's slots, of model.seq_len positions each"),
    opt_int("max_queue", "64", 0, 1e6, "requests waiting for a slot at most; more are refused with 429"),
    opt_int("max_new_tokens", "256", 0, 1e7, "max_tokens of a request that gives none, and the most it may ask"),
    opt("api_key", MH_VALUE_STRING, "\"\"", "when set, requests must send it as 'Authorization: Bearer KEY' (else 401)"),
    opt_double("timeout_s", "600", 0.001, 1e7,
               "longest a request waits in the queue (then 503) and a connection's read or write waits"),
    opt_int("prefill_chunk", "256", 1, 1e7,
            "prompt tokens one step prefills at most, beside the decode rows, so a long prompt does not stall them"),
    opt("model_name", MH_VALUE_STRING, "\"megahost\"", "the model's id in /v1/models and in responses"),
    opt("chat_template", MH_VALUE_STRING, "\"\"",
        "tokenizer_config.json (or a Jinja file) whose chat_template renders chat messages, relative to the config; "
        "empty: the tokenizer_config.json beside data.tokenizer_file"),
};

const HostSection kHostSections[] = {
    {"model", kModel},           {"train", kTrain},       {"data", kData},
    {"output", kOutput},         {"checkpoint", kCheckpoint}, {"generate", kGenerate},
    {"serve", kServe},           {"peft", kPeft},
};

const SlotSpec kSlots[] = {
    {"kernels", MH_KIND_KERNELS, "cpu"},
    {"comm", MH_KIND_COMM, "threads"},
    {"parallel.tensor", MH_KIND_TENSOR_PARALLEL, "megatron"},
    {"parallel.pipeline", MH_KIND_PIPELINE_PARALLEL, "megatron"},
    {"parallel.data", MH_KIND_DATA_PARALLEL, "megatron"},
    {"parallel.context", MH_KIND_CONTEXT_PARALLEL, "megatron"},
    {"parallel.expert", MH_KIND_EXPERT_PARALLEL, "megatron"},
    {"recompute", MH_KIND_RECOMPUTE, "none"},
    {"tuner", MH_KIND_TUNER, nullptr},
    {"observer", MH_KIND_OBSERVER, nullptr},
};

}  // namespace

std::span<const HostSection> host_sections() { return kHostSections; }
std::span<const SlotSpec> slot_specs() { return kSlots; }

std::vector<std::string> top_level_sections() {
  std::vector<std::string> names;
  for (const auto& s : kHostSections) names.emplace_back(s.name);
  for (const auto& s : kSlots) {
    std::string top(s.section);
    top = top.substr(0, top.find('.'));
    if (std::find(names.begin(), names.end(), top) == names.end()) names.push_back(top);
  }
  return names;
}

}  // namespace mh
