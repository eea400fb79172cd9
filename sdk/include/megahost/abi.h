/*
 * Megahost plugin ABI, version 2.1.
 *
 * This header is the whole contract between the megahost host process and
 * the shared objects it loads. It is plain C: fixed-width integers, plain
 * structs and function pointers. Read it top to bottom; docs/sdk.md explains
 * the rules with examples.
 *
 * Rules that hold for every declaration below:
 *  1. Versioning. MH_ABI_MAJOR must match between host and plugin (the
 *     host adapts plugins of the previous major, docs/sdk.md); the minor
 *     may differ in either direction. Every struct that crosses the boundary
 *     starts with `struct_size`, filled with MH_STRUCT_SIZE(type, last_field)
 *     by whoever fills the struct. The reader only touches fields that lie
 *     inside struct_size. New fields are appended, never reordered or retyped.
 *     An array of such structs (components, options) is read with the stride
 *     the plugin compiled it with, never the reader's sizeof: MH_PluginDesc
 *     says it (component_size, option_size). Structs without struct_size
 *     (MH_Tensor, MH_NamedValue, MH_PipeAction, MH_StageLayers, the
 *     MH_*Rate rows) never change within a major.
 *  2. Errors. A fallible call returns MH_Error* (NULL on success). The caller
 *     owns the returned error and releases it with error->destroy(error).
 *  3. Ownership. Whoever creates an object destroys it, through the table
 *     that created it. Pointers handed into a call are borrowed for that call
 *     only unless the field comment says otherwise.
 *  4. Threading. An instance is used by one thread at a time (the rank that
 *     owns it) unless its table says otherwise. The entry point and every
 *     create are called on the host's main thread.
 *  5. Lifetime. A loaded library is never unloaded while the host runs.
 *     Strings and tables a plugin returns from its entry point live as long
 *     as the library.
 *
 *  6. Extensions. Optional features that only some plugins or devices have
 *     hang off an extension chain (`extensions`, a list of MH_Extension
 *     linked by `next`, each naming its type), as PJRT's do, instead of
 *     growing every table: a reader walks the chain for the types it knows
 *     (MH_FindExtension) and skips the rest.
 *  7. Vocabulary. Weights and activations are named at run time by strings
 *     (MH_TensorPlanArgs.weights, MH_RecomputeQuery.activation): a model
 *     that adds one changes no struct. Calls that may grow take one args
 *     struct that starts with struct_size and extensions.
 *
 * Version history (docs/sdk.md, "ABI history", has every minor of major 1):
 *   2.0  The 1.8 contract, with: the runtime lists of rule 7 for the tensor
 *        plan's weights (MH_TensorPlan.shard is filled per name the host
 *        lists) and the recompute decisions and keep tables (activations by
 *        name; MH_Weight, MH_Activation and their COUNTs are gone); args
 *        structs for every planning call; the extension chain of rule 6 on
 *        MH_HostApi, MH_CreateArgs and MH_ComponentDesc, and the kernels'
 *        native stream moved from MH_KernelsApi into MH_EXTENSION_STREAM;
 *        MH_KernelsApi.capabilities first, after struct_size; a device in
 *        every MH_Tensor. A plugin built for major 1 still loads for this
 *        major's releases: the host adapts its tables (docs/sdk.md, "Plugins
 *        built for ABI 1.x").
 *   2.1  The tuner searches context and expert parallelism: MH_Candidate
 *        appends context_comm, context and expert; MH_ModelShape appends
 *        a mixture of experts' parts (experts, router_topk, moe_ffn_hidden,
 *        shared_experts, shared_expert_ffn_hidden) and flash_attention.
 */
#ifndef MEGAHOST_ABI_H
#define MEGAHOST_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MH_ABI_MAJOR 2
#define MH_ABI_MINOR 1

/* The one symbol a plugin exports for ABI major 2 (see MH_EntryFn). */
#define MH_ENTRY_SYMBOL "mh_plugin_entry_v2"

/* Size of a struct up to and including `last`, the field it knew about. */
#define MH_STRUCT_SIZE(type, last) (offsetof(type, last) + sizeof(((type*)0)->last))

#if defined(_WIN32)
#define MH_EXPORT __declspec(dllexport)
#else
#define MH_EXPORT __attribute__((visibility("default")))
#endif

/* ------------------------------------------------------------------------
 * Errors
 * --------------------------------------------------------------------- */

typedef enum MH_ErrorCode {
  MH_OK = 0,
  MH_INVALID_ARGUMENT = 1,  /* bad option, shape or layout: the user can fix it */
  MH_NOT_FOUND = 2,
  MH_UNIMPLEMENTED = 3,     /* the component does not support this request */
  MH_RESOURCE_EXHAUSTED = 4,/* out of memory on the device */
  MH_UNAVAILABLE = 5,       /* device or peer missing: no CUDA device, rank gone */
  MH_DEADLINE_EXCEEDED = 6, /* a collective timed out */
  MH_ABORTED = 7,           /* another rank failed and the group was aborted */
  MH_INTERNAL = 8           /* a bug, or an exception caught at the boundary */
} MH_ErrorCode;

/* An error owns its message. Release it with destroy(self), which belongs to
 * the side that created it, so memory is freed by its allocator. */
typedef struct MH_Error {
  size_t struct_size;
  int32_t code;           /* MH_ErrorCode */
  const char* message;    /* UTF-8, NUL-terminated, owned by the error */
  void (*destroy)(struct MH_Error* self);
} MH_Error;

/* ------------------------------------------------------------------------
 * Tensors: non-owning views, DLPack-like
 * --------------------------------------------------------------------- */

typedef enum MH_DType {
  MH_F32 = 0,
  MH_BF16 = 1,
  MH_F16 = 2,
  MH_I32 = 3,
  MH_U8 = 4,
  MH_I64 = 5
} MH_DType;

typedef enum MH_DeviceType { MH_DEVICE_CPU = 0, MH_DEVICE_CUDA = 1 } MH_DeviceType;

#define MH_MAX_DIMS 4

/* A view of memory owned by somebody else. Strides are in elements;
 * strides[ndim-1] is 1 for every tensor the kernels accept unless an op says
 * otherwise. Dimensions beyond ndim are ignored. `device` says where data
 * lives: a kernels or comm component refuses (MH_INVALID_ARGUMENT) a tensor
 * that is not on its device, instead of reading the wrong memory. */
typedef struct MH_Tensor {
  void* data;
  int32_t dtype;   /* MH_DType */
  int32_t ndim;
  int64_t shape[MH_MAX_DIMS];
  int64_t strides[MH_MAX_DIMS];
  int32_t device;     /* MH_DeviceType */
  int32_t device_id;  /* the device's ordinal (CUDA device), 0 on the CPU */
} MH_Tensor;

/* ------------------------------------------------------------------------
 * Extensions (rule 6)
 * --------------------------------------------------------------------- */

typedef enum MH_ExtensionType {
  /* MH_StreamExtension, on a kernels component: the native stream its ops
   * are enqueued on. */
  MH_EXTENSION_STREAM = 1
} MH_ExtensionType;

/* The head of every extension struct. An extension struct's own fields
 * follow `next`; struct_size covers them. */
typedef struct MH_Extension {
  size_t struct_size;
  int32_t type;                       /* MH_ExtensionType */
  const struct MH_Extension* next;    /* NULL ends the chain */
} MH_Extension;

/* The first extension of `type` in `chain`, or NULL. */
static inline const MH_Extension* MH_FindExtension(const MH_Extension* chain, int32_t type) {
  for (; chain != NULL; chain = chain->next)
    if (chain->type == type) return chain;
  return NULL;
}

/* ------------------------------------------------------------------------
 * Options: typed, validated values of a component's TOML section
 * --------------------------------------------------------------------- */

typedef enum MH_ValueType {
  MH_VALUE_BOOL = 0,
  MH_VALUE_INT = 1,
  MH_VALUE_DOUBLE = 2,
  MH_VALUE_STRING = 3
} MH_ValueType;

enum MH_OptionFlags {
  MH_OPTION_REQUIRED = 1u << 0,  /* no default: the section must set it */
  MH_OPTION_HAS_MIN = 1u << 1,   /* value >= min (INT, DOUBLE) */
  MH_OPTION_HAS_MAX = 1u << 2,   /* value <= max (INT, DOUBLE) */
  /* A STRING option naming the component of the same kind that this
   * one wraps (at most one per component). The host resolves the name in its
   * registry, validates the section's remaining keys against that
   * component's options and hands them over as MH_CreateArgs.inner_options. */
  MH_OPTION_INNER = 1u << 3
};

/* One option a component accepts. The host validates the TOML section
 * against these specs (type, range, choices, unknown keys) before any create,
 * and reports every problem with file:line:col in one go. */
typedef struct MH_OptionSpec {
  size_t struct_size;
  const char* name;
  int32_t type;             /* MH_ValueType */
  uint32_t flags;           /* MH_OptionFlags */
  const char* default_value;/* TOML literal text ("4", "true", "\"uniform\""), NULL if REQUIRED */
  double min;
  double max;
  const char* choices;      /* STRING only: "a|b|c", or NULL for any string */
  const char* doc;          /* one line for --list_plugins */
} MH_OptionSpec;

typedef struct MH_NamedValue {
  const char* name;
  int32_t type;             /* MH_ValueType */
  int32_t reserved;
  union {
    int32_t b;
    int64_t i;
    double d;
    const char* s;
  } value;
} MH_NamedValue;

/* Read-only view of a component's options: every declared option appears
 * once, defaults filled in, in spec order. Borrowed for the create call. */
typedef struct MH_Options {
  size_t struct_size;
  const MH_NamedValue* values;
  size_t count;
  const char* section;      /* the TOML section, e.g. "parallel.tensor" */
} MH_Options;

/* ------------------------------------------------------------------------
 * Host services handed to the plugin's entry point
 * --------------------------------------------------------------------- */

typedef enum MH_LogLevel { MH_LOG_INFO = 0, MH_LOG_WARNING = 1, MH_LOG_ERROR = 2, MH_LOG_DEBUG = 3 } MH_LogLevel;

struct MH_ComponentDesc;
struct MH_CreateArgs;
struct MH_Instance;

typedef struct MH_HostApi {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  /* Writes one line to the host's log. Thread-safe. */
  void (*log)(int32_t level, const char* plugin, const char* message);

  /* Composition. Both run on the host's main thread, inside a create
   * (rule 4).
   *
   * The component of `kind` named `name` exactly as a TOML section naming
   * it would get it: from the host's registry of the plugins it loaded from
   * --plugin_path, MEGAHOST_PLUGIN_PATH and its own folders, the first on
   * the path winning. *out is in the host's struct layout and lives as long
   * as the process. MH_NOT_FOUND lists the names there are. */
  MH_Error* (*find_component)(int32_t kind, const char* name, const struct MH_ComponentDesc** out);
  /* Creates an instance of that component. args->options are the values to
   * forward (a wrapper's MH_CreateArgs.inner_options, or its own list, NULL
   * for none): the host checks them against the component's option specs as
   * it checks a TOML section (names, types, ranges, choices), fills in the
   * defaults of those left out and returns MH_INVALID_ARGUMENT naming each
   * problem. The caller owns the instance: it calls (*component)->api and
   * destroys the instance with (*component)->destroy, before its own
   * instance is destroyed. */
  MH_Error* (*create_component)(int32_t kind, const char* name, const struct MH_CreateArgs* args,
                                const struct MH_ComponentDesc** component, struct MH_Instance** out);
  /* Services of this host beyond the table (rule 6); none are defined in
   * 2.0, so it is NULL. */
  const MH_Extension* extensions;
} MH_HostApi;

/* ------------------------------------------------------------------------
 * Component kinds and the plugin descriptor
 * --------------------------------------------------------------------- */

typedef enum MH_Kind {
  MH_KIND_KERNELS = 0,
  MH_KIND_COMM = 1,
  MH_KIND_TENSOR_PARALLEL = 2,
  MH_KIND_PIPELINE_PARALLEL = 3,
  MH_KIND_DATA_PARALLEL = 4,
  MH_KIND_RECOMPUTE = 5,
  MH_KIND_TUNER = 6,
  MH_KIND_OBSERVER = 7,     /* MH_ObserverApi */
  MH_KIND_CONTEXT_PARALLEL = 8, /* MH_ContextParallelApi */
  MH_KIND_EXPERT_PARALLEL = 9  /* MH_ExpertParallelApi */
} MH_Kind;
#define MH_KIND_COUNT 10

/* An instance of a component; its real type is private to the plugin. */
typedef struct MH_Instance MH_Instance;

/* Arguments of create. Fields beyond options may be added in later minors. */
typedef struct MH_CreateArgs {
  size_t struct_size;
  const MH_Options* options;
  /* Number of ranks that share this machine's cores and memory: the ranks
   * of this process (threads comm: world size), or under mpirun/srun the
   * ranks on this node. Kernels use it to split the
   * cores and memory between ranks. */
  int32_t ranks_in_process;
  int32_t rank;             /* global rank the instance serves, -1 if shared */
  /* For a component with an MH_OPTION_INNER option, the validated
   * options of the component that option names (its section's other keys,
   * defaults filled in), to forward to create_component; NULL otherwise.
   * Borrowed for the create call. */
  const MH_Options* inner_options;
  const MH_Extension* extensions;  /* none defined in 2.0: NULL */
} MH_CreateArgs;

typedef struct MH_ComponentDesc {
  size_t struct_size;
  int32_t kind;             /* MH_Kind */
  const char* name;         /* unique per kind, [a-z0-9_]+ */
  const char* version;      /* the component's own version, "1.2.0" */
  const char* description;
  const MH_OptionSpec* options;
  size_t num_options;
  /* Creates an instance; *out is valid only when NULL is returned. */
  MH_Error* (*create)(const MH_CreateArgs* args, MH_Instance** out);
  /* Destroys an instance. NULL-safe. */
  void (*destroy)(MH_Instance* self);
  /* The kind's function table: MH_KernelsApi for MH_KIND_KERNELS, etc.
   * Static: lives as long as the library. */
  const void* api;
  /* The component's optional features (rule 6): static, each one's
   * functions take the component's instance. */
  const MH_Extension* extensions;
} MH_ComponentDesc;

typedef struct MH_PluginDesc {
  size_t struct_size;
  uint32_t abi_major;       /* MH_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor;       /* MH_ABI_MINOR the plugin was built with */
  const char* name;         /* the plugin (library) name */
  const char* version;
  const MH_ComponentDesc* components;
  size_t num_components;
  /* sizeof(MH_ComponentDesc) and sizeof(MH_OptionSpec) as the plugin
   * was compiled: the distance between consecutive elements of `components`
   * and of every component's `options`. struct_size is not the stride: it
   * leaves out the tail padding sizeof includes. */
  size_t component_size;
  size_t option_size;
} MH_PluginDesc;

/* The exported entry point, named MH_ENTRY_SYMBOL. Called once, on the main
 * thread, right after loading. `host` lives as long as the process. */
typedef MH_Error* (*MH_EntryFn)(const MH_HostApi* host, const MH_PluginDesc** out);

/* ------------------------------------------------------------------------
 * Kernels: device memory and every op of the model (MH_KIND_KERNELS)
 *
 * Ops are enqueued in call order on the instance's stream; the host calls
 * synchronize before it reads results. Shapes use: B batch, S sequence,
 * H hidden, A heads, D head size, V vocabulary, N rows, C columns.
 * Tensors are row-major, contiguous unless the op says otherwise.
 * --------------------------------------------------------------------- */

typedef struct MH_DeviceInfo {
  size_t struct_size;
  int32_t device_type;      /* MH_DeviceType */
  int32_t threads;          /* worker threads used by this instance */
  const char* name;         /* "cpu: AMD EPYC ... (openblas)" */
  double peak_flops;        /* FLOP/s of the compute dtype, for MFU */
  uint64_t memory_bytes;    /* device memory capacity, 0 if unknown */
  int32_t compute_dtype;    /* MH_DType of activations and GEMM inputs */
  int32_t dry;              /* nonzero: allocates and computes nothing */
  /* The device's ordinal (the CUDA device of this instance), 0 on the
   * CPU: the host places the tensors it hands this instance there
   * (MH_Tensor.device_id). */
  int32_t device_id;
} MH_DeviceInfo;

/* C = alpha * op(A) @ op(B) + beta * C, for each of `batch` matrices.
 * a, b, c are 3-D views [batch, rows, cols] of the stored (untransposed)
 * matrices; strides[0] is the batch stride (may be 0 to broadcast) and
 * strides[1] the leading dimension. op(X) = X^T when trans_x is nonzero. */
typedef struct MH_GemmArgs {
  size_t struct_size;
  MH_Tensor a, b, c;
  int32_t trans_a, trans_b;
  float alpha, beta;
} MH_GemmArgs;

/* out[n, :] = (x[n, :] - mean) * rstd * weight + bias; mean, rstd: [N] f32 */
typedef struct MH_LayerNormArgs {
  size_t struct_size;
  MH_Tensor x, weight, bias, out, mean, rstd;
  float eps;
} MH_LayerNormArgs;

/* dx += ...; dweight += ...; dbias += ... (gradients accumulate) */
typedef struct MH_LayerNormBwdArgs {
  size_t struct_size;
  MH_Tensor dout, x, weight, mean, rstd, dx, dweight, dbias;
} MH_LayerNormBwdArgs;

/* Elementwise ops over n = numel(out) contiguous elements. */
typedef enum MH_UnaryOp {
  MH_GELU = 0,        /* out = gelu_tanh(x) */
  MH_GELU_BWD = 1,    /* out = y * gelu_tanh'(x), y being the output gradient */
  MH_SCALE = 2,       /* out = alpha * x */
  MH_COPY = 3,        /* out = x */
  MH_FILL = 4,        /* out = alpha (x unused) */
  MH_ADD = 5,         /* out = x + y */
  MH_AXPY = 6         /* out = alpha * x + y */
} MH_UnaryOp;

typedef struct MH_ElementwiseArgs {
  size_t struct_size;
  int32_t op;               /* MH_UnaryOp */
  MH_Tensor x, y, out;      /* y: second operand where the op has one */
  float alpha;
} MH_ElementwiseArgs;

/* Forward:  out[n, c] = x[n, c] + bias[c]   (in place allowed)
 * Backward: bias[c] += sum_n out[n, c], i.e. dbias from dout (x unused) */
typedef struct MH_BiasArgs {
  size_t struct_size;
  MH_Tensor x, bias, out;
} MH_BiasArgs;

/* Causal scaled softmax over the last dim of [G, Q, T] scores, 1 <= Q <= T:
 * the Q rows are the last Q positions of a sequence of T, so row i sees
 * columns 0 .. T - Q + i (training has Q = T, [G, S, S]; decode Q = 1):
 * forward out = softmax(scale * x with x[g, i, j] for j > T - Q + i masked out);
 * backward dx = out * (dout - sum(dout * out)) * scale. Masked entries come
 * out 0 in both. A host gives non-square scores (Q < T) only to a plugin
 * with MH_KERNELS_CAP_PARTIAL_SOFTMAX. */
typedef struct MH_SoftmaxArgs {
  size_t struct_size;
  MH_Tensor x, out, dout, dx;  /* forward uses x, out; backward out, dout, dx */
  float scale;
  /* With MH_KERNELS_CAP_DOCUMENTS: packed documents. Absent (past
   * struct_size, or data NULL): the causal mask alone. Else I32 [B, T] with B
   * dividing G: group g belongs to sample b = g / (G / B), and its row at
   * position p = T - Q + i sees only columns starts[b, p] .. p, where
   * 0 <= starts[b, p] <= p is the first position of p's document; the
   * columns before it are masked like the future ones (0 in both passes). */
  MH_Tensor starts;
} MH_SoftmaxArgs;

/* Counter-based randomness: element (r, j) of a local [rows, row_len] view
 * draws counter base + r * row_stride + j under key `seed`, so the same
 * global element gets the same draw on every layout and on recompute. */
typedef struct MH_RngSpan {
  uint64_t seed;
  uint64_t base;
  uint64_t row_len;
  uint64_t row_stride;
} MH_RngSpan;

/* Forward: mask = (uniform >= p); out = x * mask / (1 - p) + residual.
 * Backward mirrors forward, each field holding the gradient of its forward
 * tensor: x <- out * mask / (1 - p), i.e. dx from dout (residual, rng unused).
 * mask is MH_U8 with numel(x) elements; residual may have data == NULL. */
typedef struct MH_DropoutArgs {
  size_t struct_size;
  MH_Tensor x, residual, out, mask;
  float p;
  MH_RngSpan rng;
} MH_DropoutArgs;

/* out[n, :] (beta ? += : =) table[ids[n] - id_start, :] for ids inside
 * [id_start, id_start + rows(table)), else 0 (vocabulary-parallel shards).
 * Backward: dtable[ids[n] - id_start, :] += dout[n, :]. ids: MH_I32 [N]. */
typedef struct MH_EmbeddingArgs {
  size_t struct_size;
  MH_Tensor table, ids, out;
  int64_t id_start;
  int32_t accumulate;
} MH_EmbeddingArgs;

/* Softmax cross-entropy over a (possibly vocabulary-sharded) logits [N, V]
 * in three steps so that shards can combine with collectives in between:
 *   MH_XENT_MAX:   row_max[n] = max_v logits[n, v]
 *   MH_XENT_STATS: sum_exp[n] = sum_v exp(logits[n, v] - row_max[n]);
 *                  target_logit[n] = logits[n, targets[n] - id_start] or 0
 *   MH_XENT_BWD:   logits[n, v] <- scale * (softmax - onehot(target)), in place,
 *                  with softmax = exp(logits - row_max) / sum_exp.
 * loss[n] = log(sum_exp[n]) + row_max[n] - target_logit[n]. Vectors are f32 [N]. */
typedef enum MH_XentStep { MH_XENT_MAX = 0, MH_XENT_STATS = 1, MH_XENT_BWD = 2 } MH_XentStep;

typedef struct MH_XentArgs {
  size_t struct_size;
  int32_t step;             /* MH_XentStep */
  MH_Tensor logits, targets, row_max, sum_exp, target_logit;
  int64_t id_start;
  float scale;
  int64_t id_limit;         /* global ids >= id_limit (when > 0) are not
                             * in the vocabulary: excluded from row_max and sum_exp,
                             * and their gradient is 0 */
} MH_XentArgs;

/* AdamW with bias correction on n contiguous f32 elements:
 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr * (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + wd * p). */
typedef struct MH_AdamWArgs {
  size_t struct_size;
  MH_Tensor param, grad, m, v;
  float lr, beta1, beta2, eps, weight_decay;
  int64_t step;             /* t, from 1 */
} MH_AdamWArgs;

/* out[0] += sum(x^2) in f32 (out: one element on the device). */
typedef struct MH_SumSquaresArgs {
  size_t struct_size;
  MH_Tensor x, out;
} MH_SumSquaresArgs;

/* RMSNorm: out[n, :] = x[n, :] * rstd[n] * weight[:],
 * rstd[n] = 1 / sqrt(mean_c(x[n, c]^2) + eps). x, out: [N, C] in the compute
 * dtype (f32 or bf16); weight: [C] f32; rstd: [N] f32, written for the
 * backward. out may equal x. */
typedef struct MH_RmsNormArgs {
  size_t struct_size;
  MH_Tensor x, weight, out, rstd;
  float eps;
} MH_RmsNormArgs;

/* dx += ...; dweight += ... (gradients accumulate, as layernorm_bwd's).
 * dout: compute dtype or f32 (as layernorm_bwd accepts); dx, dweight: f32. */
typedef struct MH_RmsNormBwdArgs {
  size_t struct_size;
  MH_Tensor dout, x, weight, rstd, dx, dweight;
} MH_RmsNormBwdArgs;

/* Rotary position embedding, "rotate half" convention (GPT-NeoX,
 * Llama, Hugging Face): x and out are 3-D views [G, S, D] strided like gemm's
 * views (strides[0] batch, strides[1] row, innermost contiguous); row s of
 * every batch is at position p = position_offset + s; for i < D/2 the pair
 * (i, i + D/2) rotates by the angle p * theta^(-2i/D):
 *   out[i] = x[i] cos - x[i + D/2] sin;   out[i + D/2] = x[i + D/2] cos + x[i] sin.
 * D is even. out may equal x (in place); otherwise the two do not overlap.
 * inverse != 0 rotates by the negative angle, which is the backward (dx from
 * dout). Angles and sin/cos in f32 at least, inv_freq computed as Hugging
 * Face does (1 / theta^(2i/D) in f32), so logits match transformers to 1e-5
 * relative. */
typedef struct MH_RopeArgs {
  size_t struct_size;
  MH_Tensor x, out;
  int64_t position_offset;
  float theta;
  int32_t inverse;
  /* With MH_KERNELS_CAP_DOCUMENTS: per-row positions of packed
   * documents. Absent (past struct_size, or data NULL): row s is at
   * position_offset + s as above. Else I32 [B, S] with B dividing G: row s of
   * batch g is at position_offset + positions[g / (G / B), s], each >= 0. */
  MH_Tensor positions;
} MH_RopeArgs;

/* SwiGLU over x [N, 2F] holding the gate in columns [0, F) and the
 * up projection in [F, 2F) of each row (rows may have a leading dimension
 * > 2F per strides[0]):
 *   forward:  out[n, j] = silu(x[n, j]) * x[n, F + j], silu(g) = g / (1 + exp(-g));  out [N, F]
 *   backward: dx[n, j] = dout[n, j] * x[n, F + j] * silu'(x[n, j]);
 *             dx[n, F + j] = dout[n, j] * silu(x[n, j]);
 *             dx [N, 2F] is written (not accumulated) and may alias neither x nor dout.
 * All in the compute dtype (f32 or bf16), math in f32. The forward reads
 * x and out; the backward x, dout and dx. */
typedef struct MH_SwigluArgs {
  size_t struct_size;
  MH_Tensor x, out, dout, dx;
} MH_SwigluArgs;

/* out[g, r, c] = x[g, r, c] over two 3-D views of the same shape and
 * dtype (f32, bf16, f16 or i32; copied bit for bit, whatever the component computes
 * in), strided as gemm's views (strides[0] between matrices, strides[1] between rows,
 * innermost contiguous, no two rows of a view overlapping); the views do not overlap
 * (the spans from each one's first element to its last are disjoint). The generation
 * engine appends each sequence's keys and values to its KV cache with it. */
typedef struct MH_StridedCopyArgs {
  size_t struct_size;
  MH_Tensor x, out;
} MH_StridedCopyArgs;

/* Memory-efficient causal attention (FlashAttention): for every
 * group g < G (a sample's key/value head) and each of its M query heads h,
 *   P[g, h] = softmax(scale * q[g, h] k[g]^T, masked),  out[g, h] = drop(P) v[g],
 * without storing P: keys are visited in tiles with an online softmax, and
 * lse[g, h, i] = log sum_j exp(scale * q_i . k_j) over row i's visible
 * columns is written for the backward, which recomputes P tile by tile from
 * q, k, v and lse (FlashAttention-2's algorithm). Shapes, D the head size:
 *   q, out, dout, dq: [G, M, Sq, D]  (M query heads share each k/v group: GQA)
 *   k, v, dk, dv:     [G, Sk, D]     (3-D, strided like gemm's views)
 *   lse:              f32 [G, M, Sq], contiguous
 * Views are strided (strides[0] between groups, strides[1] between heads of
 * q-like tensors or rows of k-like ones, strides[2] between rows of q-like
 * ones), innermost contiguous: the engine's QKV rows (per group, its M query
 * heads, then K, then V) are read in place, with no transpose. q, k, v, out,
 * dout in the compute dtype; dq, dk, dv in it or f32.
 * Masking: query row i is at position q_offset + i against keys at 0 .. Sk - 1
 * and sees columns max(0, starts[b, i]) .. min(Sk - 1, q_offset + i), where
 * starts (I32 [B, Sq], B dividing G, group g of sample b = g / (G / B)) is
 * optional (data NULL: from column 0; packed documents, as
 * MH_SoftmaxArgs.starts with its positions made relative to the keys). A
 * block of a longer causal sequence is one call (q_offset = the block's
 * first query position minus its first key position; a negative offset or
 * a start past the offset leaves a row seeing nothing: its out is 0 and its
 * lse -inf); q_offset >= Sk - 1 sees every key (a past block in ring
 * attention). Training is Sq = Sk, q_offset = 0; decode Sq = 1, q_offset = Sk - 1.
 * Dropout (p > 0) multiplies P by mask / (1 - p), the mask drawn exactly as
 * MH_DropoutArgs draws it for the [G, M, Sq, Sk] probabilities laid out
 * contiguously, with `rng` the span the dropout op would take for them, so
 * the unfused path (gemm, softmax, dropout) and this op compute the same
 * function. A call that is a block of larger probabilities [G, M, rows,
 * cols] draws at (row0 + i, col0 + j) of those; rows = cols = 0 means this
 * call's Sq and Sk (row0 = col0 = 0).
 * Forward reads q, k, v and writes out and lse. Backward reads q, k, v, out,
 * dout and lse (as the forward wrote them, same p, rng and masking) and
 * ACCUMULATES dq += ..., dk += ..., dv += ... (a caller zeroes them first;
 * ring attention adds each key block's share); a query row that sees
 * nothing adds nothing. dq, dk, dv alias none of the inputs.
 * With MH_KERNELS_CAP_ATTENTION_ACCUMULATE: with accumulate = 1 the
 * forward reads out and lse as the result of earlier key blocks (lse -inf
 * and out 0 where a row saw nothing yet) and writes the result over both
 * blocks: lse' = log(exp(lse) + exp(lse_b)), out' = exp(lse - lse') out +
 * exp(lse_b - lse') out_b, so a ring of calls over the key blocks equals
 * one call over all keys. Backward takes the final out and lse with each
 * block's keys (it ignores accumulate). 0 (or absent past struct_size):
 * out and lse are written as before. */
typedef struct MH_AttentionArgs {
  size_t struct_size;
  MH_Tensor q, k, v, out, lse;   /* forward: out, lse written */
  MH_Tensor dout, dq, dk, dv;    /* backward only */
  MH_Tensor starts;              /* optional I32 [B, Sq] */
  int64_t q_offset;
  float scale;                   /* 1 / sqrt(D) for GPT attention */
  float dropout_p;               /* 0 <= p < 1 */
  MH_RngSpan rng;
  int64_t dropout_rows, dropout_cols, dropout_row0, dropout_col0;
  int32_t accumulate;            /* 1 merges into out and lse */
} MH_AttentionArgs;

/* What a kernels component accepts beyond each op's plain contract. */
typedef enum MH_KernelsCapability {
  /* softmax and softmax_bwd take [G, Q, T] scores with Q < T (decode). */
  MH_KERNELS_CAP_PARTIAL_SOFTMAX = 1u << 0,
  /* softmax and softmax_bwd read MH_SoftmaxArgs.starts, rope reads
   * MH_RopeArgs.positions (packed documents). */
  MH_KERNELS_CAP_DOCUMENTS = 1u << 1,
  /* attention reads MH_AttentionArgs.accumulate (ring attention). */
  MH_KERNELS_CAP_ATTENTION_ACCUMULATE = 1u << 2
} MH_KernelsCapability;

typedef enum MH_CopyKind { MH_HOST_TO_DEVICE = 0, MH_DEVICE_TO_HOST = 1, MH_DEVICE_TO_DEVICE = 2 } MH_CopyKind;

/* Every entry is required but the model-family ops (rmsnorm .. swiglu_bwd,
 * strided_copy, attention, attention_bwd), which may be NULL: the host then
 * names the op and refuses only a run whose model needs it. */
typedef struct MH_KernelsApi {
  size_t struct_size;
  uint64_t capabilities;         /* MH_KernelsCapability bits */
  MH_Error* (*device_info)(MH_Instance* self, MH_DeviceInfo* out);
  /* Device memory. alloc returns 256-byte aligned memory or
   * MH_RESOURCE_EXHAUSTED; free is NULL-safe. */
  MH_Error* (*alloc)(MH_Instance* self, uint64_t bytes, void** out);
  void (*free)(MH_Instance* self, void* ptr);
  MH_Error* (*copy)(MH_Instance* self, void* dst, const void* src, uint64_t bytes, int32_t kind);
  MH_Error* (*synchronize)(MH_Instance* self);

  MH_Error* (*gemm)(MH_Instance* self, const MH_GemmArgs* args);
  MH_Error* (*layernorm)(MH_Instance* self, const MH_LayerNormArgs* args);
  MH_Error* (*layernorm_bwd)(MH_Instance* self, const MH_LayerNormBwdArgs* args);
  MH_Error* (*elementwise)(MH_Instance* self, const MH_ElementwiseArgs* args);
  MH_Error* (*bias_add)(MH_Instance* self, const MH_BiasArgs* args);
  MH_Error* (*bias_bwd)(MH_Instance* self, const MH_BiasArgs* args);
  MH_Error* (*softmax)(MH_Instance* self, const MH_SoftmaxArgs* args);
  MH_Error* (*softmax_bwd)(MH_Instance* self, const MH_SoftmaxArgs* args);
  MH_Error* (*dropout)(MH_Instance* self, const MH_DropoutArgs* args);
  MH_Error* (*dropout_bwd)(MH_Instance* self, const MH_DropoutArgs* args);
  MH_Error* (*embedding)(MH_Instance* self, const MH_EmbeddingArgs* args);
  MH_Error* (*embedding_bwd)(MH_Instance* self, const MH_EmbeddingArgs* args);
  MH_Error* (*xent)(MH_Instance* self, const MH_XentArgs* args);
  MH_Error* (*adamw)(MH_Instance* self, const MH_AdamWArgs* args);
  MH_Error* (*sum_squares)(MH_Instance* self, const MH_SumSquaresArgs* args);
  /* The Llama family's norm, position encoding and MLP. */
  MH_Error* (*rmsnorm)(MH_Instance* self, const MH_RmsNormArgs* args);
  MH_Error* (*rmsnorm_bwd)(MH_Instance* self, const MH_RmsNormBwdArgs* args);
  MH_Error* (*rope)(MH_Instance* self, const MH_RopeArgs* args);
  MH_Error* (*swiglu)(MH_Instance* self, const MH_SwigluArgs* args);
  MH_Error* (*swiglu_bwd)(MH_Instance* self, const MH_SwigluArgs* args);
  /* Generation's KV cache appends. */
  MH_Error* (*strided_copy)(MH_Instance* self, const MH_StridedCopyArgs* args);
  /* [model] attention_backend = "flash". */
  MH_Error* (*attention)(MH_Instance* self, const MH_AttentionArgs* args);
  MH_Error* (*attention_bwd)(MH_Instance* self, const MH_AttentionArgs* args);
} MH_KernelsApi;

/* MH_EXTENSION_STREAM, on a kernels component that enqueues its ops (CUDA):
 * the native stream (cudaStream_t) of an instance. Communicators that share
 * the device order their work after it. A component without it runs each
 * op before returning. */
typedef struct MH_StreamExtension {
  MH_Extension base;
  /* NULL when this instance has no stream after all (a wrapper's chain is
   * fixed per component, but what it wraps is chosen per run). */
  void* (*stream)(MH_Instance* self);
} MH_StreamExtension;

/* ------------------------------------------------------------------------
 * Communicators (MH_KIND_COMM)
 *
 * One instance per process. It hosts ranks_in_process ranks; each rank gets
 * its world group from world() and uses it from its own thread. Collective
 * calls are blocking on the CPU (the *_start calls excepted) and
 * stream-ordered on devices. Every call
 * honours the instance's timeout and returns MH_DEADLINE_EXCEEDED, or
 * MH_ABORTED naming the failed rank, instead of hanging.
 * --------------------------------------------------------------------- */

typedef struct MH_Group MH_Group;

/* A non-blocking collective in flight. */
typedef struct MH_Request MH_Request;

typedef enum MH_ReduceOp { MH_REDUCE_SUM = 0, MH_REDUCE_MAX = 1 } MH_ReduceOp;

typedef struct MH_CommInfo {
  size_t struct_size;
  int32_t world_size;
  int32_t ranks_in_process;
  int32_t first_rank;       /* global rank of the process's first local rank */
  /* Ranks of the world on this machine, this process's included: under MPI
   * the size of MPI_COMM_TYPE_SHARED's split (0 = unknown). */
  int32_t ranks_on_node;
} MH_CommInfo;

/* Buffers are contiguous tensors on the kernels' device.
 * all_reduce:     recv = op over ranks of send (recv may equal send)
 * all_gather:     recv[size * n] = concat of every rank's send[n], rank order
 *                 (in place when send is recv + rank * n)
 * reduce_scatter: recv[n] = slice `rank` of op over ranks of send[size * n]
 *                 (in place when recv is send + rank * n)
 * broadcast:      recv = root's send on every rank (root: rank in group)
 * send / recv:    point-to-point with group rank `peer` */
typedef struct MH_CollectiveArgs {
  size_t struct_size;
  MH_Tensor send, recv;
  int32_t op;               /* MH_ReduceOp */
  int32_t peer;             /* root for broadcast, peer for send/recv */
  void* stream;             /* the kernels' stream, NULL on the CPU */
} MH_CollectiveArgs;

/* all_to_all: rank r sends send_counts[p] elements to group rank
 * p, the block at offset send_counts[0] + ... + send_counts[p - 1] of send,
 * and receives recv_counts[p] elements from rank p into recv at offset
 * recv_counts[0] + ... + recv_counts[p - 1]: MPI_Alltoallv with packed
 * displacements. The counts must match pairwise (send_counts[p] on rank r
 * equals recv_counts[r] on rank p), so callers exchange them first (an
 * all_to_all of one count per peer); send and recv hold at least their
 * counts' sums, have one dtype and do not overlap. */
typedef struct MH_AllToAllArgs {
  size_t struct_size;
  MH_Tensor send, recv;
  const int64_t* send_counts;    /* group size entries, borrowed */
  const int64_t* recv_counts;    /* group size entries, borrowed */
  void* stream;                  /* the kernels' stream, NULL on the CPU */
} MH_AllToAllArgs;

typedef struct MH_CommApi {
  size_t struct_size;
  MH_Error* (*info)(MH_Instance* self, MH_CommInfo* out);
  /* The world group of local rank `local` (0 <= local < ranks_in_process).
   * Owned by the instance. */
  MH_Error* (*world)(MH_Instance* self, int32_t local, MH_Group** out);
  /* Collective over `group`: ranks with equal color form a new group,
   * ordered by key. Release it with group_destroy. */
  MH_Error* (*split)(MH_Group* group, int32_t color, int32_t key, MH_Group** out);
  void (*group_destroy)(MH_Group* group);
  int32_t (*group_rank)(const MH_Group* group);
  int32_t (*group_size)(const MH_Group* group);
  MH_Error* (*all_reduce)(MH_Group* group, const MH_CollectiveArgs* args);
  MH_Error* (*all_gather)(MH_Group* group, const MH_CollectiveArgs* args);
  MH_Error* (*reduce_scatter)(MH_Group* group, const MH_CollectiveArgs* args);
  MH_Error* (*broadcast)(MH_Group* group, const MH_CollectiveArgs* args);
  MH_Error* (*send)(MH_Group* group, const MH_CollectiveArgs* args);
  MH_Error* (*recv)(MH_Group* group, const MH_CollectiveArgs* args);
  MH_Error* (*barrier)(MH_Group* group);
  /* Marks the calling rank failed with `reason`: every rank's pending and
   * future calls return MH_ABORTED naming it. Thread-safe, never blocks. */
  void (*abort)(MH_Instance* self, int32_t rank, const char* reason);

  /* The entries below may be NULL: the host then reduces and gathers with
   * the blocking calls, and refuses an expert-parallel layout without
   * all_to_all, naming the call.
   *
   * Non-blocking all_reduce and reduce_scatter: same arguments and checks as the blocking calls, but
   * they return once the collective is posted, with *out set, and the
   * reduction progresses while the rank does other work. The buffers are
   * borrowed until request_wait returns. A group runs its collectives in
   * the order each rank issues them, blocking calls included (a blocking
   * call after a start waits for the started one first), so every rank must
   * issue them in the same order. Destroy every request before its group. */
  MH_Error* (*all_reduce_start)(MH_Group* group, const MH_CollectiveArgs* args, MH_Request** out);
  MH_Error* (*reduce_scatter_start)(MH_Group* group, const MH_CollectiveArgs* args, MH_Request** out);
  /* Waits until the request completes and returns its outcome (timeout and
   * abort as for the blocking call). Call it at most once per request. */
  MH_Error* (*request_wait)(MH_Request* request);
  /* Releases a request; one still in flight is waited for first, since its
   * peers may still read this rank's buffers. NULL-safe. */
  void (*request_destroy)(MH_Request* request);

  /* Non-blocking all_gather: same arguments and checks as the blocking
   * call (in place when send is this rank's block of recv), the request and
   * ordering rules of the calls above. */
  MH_Error* (*all_gather_start)(MH_Group* group, const MH_CollectiveArgs* args, MH_Request** out);

  /* Blocking all-to-all with per-peer
   * counts (MH_AllToAllArgs). */
  MH_Error* (*all_to_all)(MH_Group* group, const MH_AllToAllArgs* args);
} MH_CommApi;

/* ------------------------------------------------------------------------
 * Model shape shared by the planning kinds
 * --------------------------------------------------------------------- */

typedef struct MH_ModelShape {
  size_t struct_size;
  int64_t layers, hidden, heads, ffn_hidden, seq_len, vocab;
  int64_t micro_batch, global_batch;
  int32_t world_size;
  /* The model's parts the planners and the tuner price (docs/models.md). */
  int32_t gated_mlp;             /* 1: SwiGLU, a gate GEMM beside FC1 */
  int32_t rotary;                /* 1: RoPE rotates Q and K (no position table) */
  int64_t kv_heads;              /* key/value heads; heads/kv_heads share each */
  int32_t untied_output;         /* 1: the output layer has its own weight */
  int64_t head_dim;              /* a head's size; 0 means hidden / heads */
  /* 2.1: a mixture of experts' parts (docs/models.md), which the tuner
   * prices expert parallelism from; experts = 0 is a dense MLP. */
  int64_t experts;               /* routed experts per layer */
  int64_t router_topk;           /* experts each token is routed to */
  int64_t moe_ffn_hidden;        /* a routed expert's inner size; 0 means ffn_hidden */
  int64_t shared_experts;        /* experts every token passes through */
  int64_t shared_expert_ffn_hidden; /* a shared expert's inner size; 0 means moe_ffn_hidden */
  int32_t flash_attention;       /* 1: the flash attention core, which ring
                                    attention (MH_CP_P2P) needs */
} MH_ModelShape;

/* ------------------------------------------------------------------------
 * Tensor parallelism (MH_KIND_TENSOR_PARALLEL): how each weight is sharded
 * across the tensor group and which collective sits at each region boundary
 * (Megatron's f and g operators). The engine executes the plan.
 * --------------------------------------------------------------------- */

typedef enum MH_CollectiveKind {
  MH_COLL_NONE = 0,
  MH_COLL_ALL_REDUCE = 1,
  MH_COLL_ALL_GATHER = 2,      /* along the sequence dimension */
  MH_COLL_REDUCE_SCATTER = 3   /* along the sequence dimension */
} MH_CollectiveKind;

typedef enum MH_ShardDim {
  MH_SHARD_NONE = -1,          /* replicated */
  MH_SHARD_ROWS = 0,           /* weight [out, in] split along out: column-parallel */
  MH_SHARD_COLS = 1            /* split along in: row-parallel */
} MH_ShardDim;

/* The weights the host asks the plan for, by name (rule 7), each a
 * [out, in] matrix:
 *   "embedding"       [V, H], the word embedding, also the output layer's
 *                     (tied or not): its vocabulary shard
 *   "attention.qkv"   [(A + 2 A_kv) D, H], the fused Q, K, V projection
 *   "attention.proj"  [H, A D], attention's output projection
 *   "mlp.gate"        [F, H], the gated MLP's gate (SwiGLU models only)
 *   "mlp.fc1"         [F, H]
 *   "mlp.fc2"         [H, F]
 * A plan that meets a name it does not know returns MH_INVALID_ARGUMENT
 * naming it: sharding a weight wrongly computes another function. */
typedef struct MH_TensorPlanArgs {
  size_t struct_size;
  const MH_Extension* extensions;
  const MH_ModelShape* shape;
  const char* const* weights;  /* num_weights names, borrowed for the call */
  size_t num_weights;
} MH_TensorPlanArgs;

typedef struct MH_TensorPlan {
  size_t struct_size;
  int32_t size;                /* t */
  int32_t sequence_parallel;   /* layernorm/dropout regions hold S/t rows */
  /* The host's array of num_weights entries: the plan writes the
   * MH_ShardDim of args->weights[i] into shard[i]. */
  int32_t* shard;
  /* Entering a column-parallel block (attention, MLP, output logits):
   * forward and backward collectives (f: NONE/ALL_REDUCE, or with SP g:
   * ALL_GATHER/REDUCE_SCATTER). */
  int32_t enter_fwd, enter_bwd;
  /* Leaving a row-parallel block (and the vocabulary-parallel embedding). */
  int32_t exit_fwd, exit_bwd;
  /* Norm weight and bias gradients need an all-reduce over the group
   * (true when their inputs are sequence shards). */
  int32_t reduce_norm_grads;
} MH_TensorPlan;

typedef struct MH_TensorParallelApi {
  size_t struct_size;
  /* Fills the plan for args->shape and args->weights, or
   * MH_INVALID_ARGUMENT naming the dimension the size does not divide. */
  MH_Error* (*plan)(MH_Instance* self, const MH_TensorPlanArgs* args, MH_TensorPlan* out);
} MH_TensorParallelApi;

/* ------------------------------------------------------------------------
 * Pipeline parallelism (MH_KIND_PIPELINE_PARALLEL): which layers each stage
 * owns and the ordered actions of each stage's schedule.
 * --------------------------------------------------------------------- */

typedef enum MH_PipeActionType {
  MH_PIPE_FORWARD = 0,
  MH_PIPE_BACKWARD = 1,
  MH_PIPE_SEND_ACTIVATION = 2,   /* to the next stage */
  MH_PIPE_RECV_ACTIVATION = 3,   /* from the previous stage */
  MH_PIPE_SEND_GRADIENT = 4,     /* to the previous stage */
  MH_PIPE_RECV_GRADIENT = 5      /* from the next stage */
} MH_PipeActionType;

typedef struct MH_PipeAction {
  int32_t type;                  /* MH_PipeActionType */
  int32_t microbatch;
  int32_t chunk;                 /* virtual model chunk, 0 without interleaving */
  int32_t reserved;
} MH_PipeAction;

/* Layers [first, first + count) belong to (stage, chunk). */
typedef struct MH_StageLayers {
  int32_t stage, chunk;
  int32_t first, count;
} MH_StageLayers;

typedef struct MH_PipelinePlan {
  size_t struct_size;
  int32_t size;                  /* p */
  int32_t virtual_stages;        /* v */
  int32_t microbatches;          /* m */
  const MH_StageLayers* layers;  /* p * v entries, owned by the instance */
  size_t num_layers;
} MH_PipelinePlan;

typedef struct MH_PipelinePlanArgs {
  size_t struct_size;
  const MH_Extension* extensions;
  const MH_ModelShape* shape;
  int32_t data_parallel;         /* d, for the micro-batches per stage */
} MH_PipelinePlanArgs;

typedef struct MH_PipelineParallelApi {
  size_t struct_size;
  /* Stage assignment; arrays stay valid until the next plan or destroy. */
  MH_Error* (*plan)(MH_Instance* self, const MH_PipelinePlanArgs* args, MH_PipelinePlan* out);
  /* Ordered actions of `stage`; valid until the next call or destroy. */
  MH_Error* (*schedule)(MH_Instance* self, int32_t stage, const MH_PipeAction** actions,
                        size_t* count);
} MH_PipelineParallelApi;

/* ------------------------------------------------------------------------
 * Data parallelism (MH_KIND_DATA_PARALLEL): gradient buckets and optimizer
 * sharding.
 * --------------------------------------------------------------------- */

typedef struct MH_DataPlan {
  size_t struct_size;
  int32_t size;                  /* d */
  int32_t distributed_optimizer; /* reduce-scatter grads, shard AdamW state 1/d */
  int32_t overlap;               /* start a bucket's reduction when it is final */
  const int32_t* bucket_of;      /* bucket index per parameter, owned by the instance */
  int32_t num_buckets;
  /* With the distributed optimizer: gather each
   * bucket's updated parameters without blocking after the step, and wait
   * for a bucket just before the next forward first reads it. */
  int32_t overlap_param_gather;
} MH_DataPlan;

typedef struct MH_DataPlanArgs {
  size_t struct_size;
  const MH_Extension* extensions;
  int32_t data_parallel;         /* d */
  /* Each parameter's gradient size, in the order backward finalises them;
   * borrowed for the call. */
  const uint64_t* param_bytes;
  size_t num_params;
} MH_DataPlanArgs;

typedef struct MH_DataParallelApi {
  size_t struct_size;
  MH_Error* (*plan)(MH_Instance* self, const MH_DataPlanArgs* args, MH_DataPlan* out);
} MH_DataParallelApi;

/* ------------------------------------------------------------------------
 * Context parallelism (MH_KIND_CONTEXT_PARALLEL): the sequence of
 * every sample is split over the cp ranks of a context group, each holding
 * s/cp of its rows through every token-wise part; attention exchanges keys
 * and values over the group. Weights are replicated over it, so gradients
 * are reduced over the data and context groups together.
 * --------------------------------------------------------------------- */

typedef enum MH_ContextComm {
  /* All-gather K and V over the group; each local query chunk attends to
   * the keys before it; backward reduce-scatters their gradients. */
  MH_CP_ALL_GATHER = 0,
  /* Ring: K and V blocks passed around the group with send/recv, partial
   * results merged by their log-sum-exp (Megatron's default, p2p). */
  MH_CP_P2P = 1,
  /* Ulysses: all-to-all from sequence shards to head shards and back. */
  MH_CP_A2A = 2
} MH_ContextComm;

typedef struct MH_ContextPlan {
  size_t struct_size;
  int32_t size;                  /* cp */
  int32_t comm;                  /* MH_ContextComm */
  /* 1: the sequence is cut into 2 cp chunks and cp rank r holds chunks r
   * and 2 cp - 1 - r, so that every rank has the same causal work
   * (Megatron's load balancing); 0: rank r holds the r-th of cp chunks. */
  int32_t load_balance;
} MH_ContextPlan;

typedef struct MH_ContextPlanArgs {
  size_t struct_size;
  const MH_Extension* extensions;
  const MH_ModelShape* shape;
} MH_ContextPlanArgs;

typedef struct MH_ContextParallelApi {
  size_t struct_size;
  /* Fills the plan for args->shape, or MH_INVALID_ARGUMENT naming the
   * dimension the split does not divide. */
  MH_Error* (*plan)(MH_Instance* self, const MH_ContextPlanArgs* args, MH_ContextPlan* out);
} MH_ContextParallelApi;

/* ------------------------------------------------------------------------
 * Expert parallelism (MH_KIND_EXPERT_PARALLEL): how the experts
 * of a mixture-of-experts layer are spread over ranks. As in Megatron-Core,
 * the expert group's ep ranks are drawn from the data-parallel dimension,
 * with context parallelism its replicas and their context ranks, d = the
 * data-parallel size x the context size (ep divides d): each owns
 * experts / ep experts, the tokens of every rank of the group reach their
 * experts by all_to_all, expert weights are reduced over the d / ep ranks
 * that hold the same experts (the expert-data-parallel group) and every
 * other weight over all d.
 * --------------------------------------------------------------------- */

typedef struct MH_ExpertPlan {
  size_t struct_size;
  int32_t size;                  /* ep */
  int32_t experts_per_rank;      /* experts / ep; rank e of the group owns [e * n, (e + 1) * n) */
  int32_t expert_data_parallel;  /* d / ep: the ranks holding the same experts */
} MH_ExpertPlan;

typedef struct MH_ExpertPlanArgs {
  size_t struct_size;
  const MH_Extension* extensions;
  int64_t experts;               /* of each MoE layer; 0: a dense model */
  int32_t data_parallel;         /* d: the stage's ranks expert parallelism draws from,
                                    data-parallel x context x tensor size (the experts are
                                    whole on each tensor rank, Megatron-Core's expert
                                    tensor-parallel size 1) */
} MH_ExpertPlanArgs;

typedef struct MH_ExpertParallelApi {
  size_t struct_size;
  /* Fills the plan, or MH_INVALID_ARGUMENT naming the key and the number the
   * size does not divide. */
  MH_Error* (*plan)(MH_Instance* self, const MH_ExpertPlanArgs* args, MH_ExpertPlan* out);
} MH_ExpertParallelApi;

/* ------------------------------------------------------------------------
 * Activation recomputation (MH_KIND_RECOMPUTE): for each activation a layer
 * would keep for backward, keep it or recompute it from what is kept.
 * --------------------------------------------------------------------- */

/* The activations a layer keeps for backward, by name (rule 7), in the
 * order the host lists them (MH_Estimate.activations):
 *   "layer_input"    residual stream entering the layer
 *   "norm1"          first norm's output (the QKV input)
 *   "qkv"            Q, K, V
 *   "attn_scores"    softmax output
 *   "attn_mask"      attention dropout mask
 *   "attn_probs"     attention dropout output
 *   "attn_context"   attention output, the projection's input
 *   "attn_out_mask"  dropout mask after the projection
 *   "residual1"      residual stream after attention
 *   "norm2"          second norm's output (the MLP's input)
 *   "fc1"            FC1's output (with the gate's, in a gated MLP)
 *   "mlp_act"        the activation's output, FC2's input
 *   "mlp_out_mask"   dropout mask after FC2
 * A policy meeting a name it does not know should keep it: keeping is
 * always correct and only costs memory. */
typedef enum MH_Decision { MH_KEEP = 0, MH_RECOMPUTE = 1 } MH_Decision;

typedef struct MH_RecomputeQuery {
  size_t struct_size;
  int32_t layer;                 /* global layer index */
  int32_t stage_first_layer;     /* first layer of the stage (chunk) */
  int32_t stage_layers;          /* layers in the stage (chunk) */
  const char* activation;        /* its name, borrowed for the call */
  uint64_t bytes;                /* its size per micro-batch */
} MH_RecomputeQuery;

typedef struct MH_RecomputeApi {
  size_t struct_size;
  MH_Error* (*decide)(MH_Instance* self, const MH_RecomputeQuery* query, int32_t* decision);
} MH_RecomputeApi;

/* ------------------------------------------------------------------------
 * Tuner (MH_KIND_TUNER): which configurations to try and which is best.
 * The tuner owns the strategy (the candidates, its cost model, the ranking);
 * the host executes: it loads the hardware profile, dry-runs or measures
 * each candidate with the real engine and writes the results. A
 * search runs in four steps:
 *   1. needs:        the tuner names the target (hardware profile, nodes,
 *                    devices per node) and how many of its best candidates
 *                    the host should measure with the real engine;
 *   2. begin:        the host hands over the model and the loaded profile;
 *   3. next, report: for every candidate the host runs what its workload
 *                    asks (a dry run of one training step: exact memory per
 *                    rank) and reports the estimate;
 *   4. results:      ranked and rejected candidates. The host measures the
 *                    best measure_top_k that fit, reports each again with
 *                    measured = 1, and reads results once more.
 * --------------------------------------------------------------------- */

typedef enum MH_Workload {
  MH_WORKLOAD_TRAIN = 0,         /* the host dry-runs a training step */
  MH_WORKLOAD_INFERENCE = 1      /* the host dry-runs (and measures) a [generate] config of
                                    batch micro_batch */
} MH_Workload;

typedef struct MH_Candidate {
  size_t struct_size;
  int32_t tensor, pipeline, virtual_stages, data;
  int32_t sequence_parallel;
  int32_t micro_batch;           /* inference: the batch */
  const char* recompute;         /* policy name, owned by the tuner */
  int32_t recompute_layers;
  int32_t reserved;
  int32_t workload;              /* MH_Workload */
  /* parallel.data's distributed_optimizer and overlap_param_gather (1 or 0). */
  int32_t distributed_optimizer;
  int32_t overlap_param_gather;
  /* 2.1: context and expert parallelism. The pointer comes first so that
   * it starts at offset 64: a 2.0 writer that filled struct_size with
   * sizeof (64, its tail padding included) reaches none of these. */
  const char* context_comm;      /* parallel.context.comm_type ("all_gather",
                                    "p2p", "a2a"), owned by the tuner; NULL:
                                    the config's */
  int32_t context;               /* parallel.context.size; 0 or unreached: 1 */
  int32_t expert;                /* parallel.expert.size; 0 or unreached: 1 */
} MH_Candidate;

typedef struct MH_Estimate {
  size_t struct_size;
  uint64_t memory_bytes;         /* peak per rank (the largest over ranks) */
  double step_seconds;           /* measured: the step time of a real run */
  double mfu;
  int32_t fits;                  /* memory fits the device */
  int32_t measured;              /* step_seconds comes from a real run */
  uint64_t capacity_bytes;       /* device memory one rank may use */
  const char* failure;           /* why the host has no estimate (the
                                    engine's error), NULL when it has one;
                                    borrowed for the call */
  /* The keep table of the candidate's recompute policy as the engine uses
   * it: keep[l * num_activations + a] is the MH_Decision for activations[a]
   * of layer l, for the keep_layers layers of the model in order, each
   * asked within its pipeline chunk of the candidate's layout (a chunk's
   * received input is kept whatever the policy says). NULL for inference
   * and for measured reports. Borrowed for the call. */
  const int32_t* keep;
  int64_t keep_layers;
  double ttft_seconds;           /* measured inference: time to first token */
  double tpot_seconds;           /* measured inference: time per output token */
  const char* const* activations;  /* the keep table's columns; NULL with keep */
  int64_t num_activations;
} MH_Estimate;

/* A hardware profile (configs/hardware/NAME.toml, docs/tuner.md), loaded by
 * the host. Rates are per rank; `ranks` says how many ranks shared the
 * device when a rate was measured (1 for a GPU; 1, 2, 4, ... for a CPU
 * whose cores all ranks of a node share), and `busy` how many of them were
 * computing (0: all; fewer while a pipeline fills and drains, when a rank
 * alone may get more of a shared device than its share). Arrays live as
 * long as the call to begin; the tuner copies what it keeps. */
typedef struct MH_GemmRate {
  int32_t ranks;
  int32_t busy;                  /* ranks of those computing; 0: all */
  int64_t batch, m, n, k;        /* batch products of (m x k) @ (k x n) */
  double flops_per_s;            /* achieved, 2 * batch * m * n * k / time */
} MH_GemmRate;

/* A memory-bound op: n elements take n * bytes_per_element / bytes_per_s,
 * the rate measured on calls of `elements` elements (0: any size). */
typedef struct MH_VectorRate {
  const char* op;                /* a kernels op: "softmax", "dropout", ... */
  int32_t ranks;
  int32_t busy;                  /* as in MH_GemmRate */
  int64_t elements;
  double bytes_per_element;
  double bytes_per_s;
} MH_VectorRate;

typedef enum MH_LinkLevel {
  MH_LINK_INTRA_NODE = 0,        /* NVLink, or memory inside one process */
  MH_LINK_INTER_NODE = 1         /* InfiniBand between nodes */
} MH_LinkLevel;

/* A collective over `ranks` ranks moving S bytes (the gathered or reduced
 * size; a rank's whole send buffer for all_to_all; one message for
 * send_recv) takes latency_s + S * f / bus_bytes_per_s with the ring factor
 * f = 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and
 * all_to_all, 1 for send_recv (nccl-tests' busbw convention). A reader
 * skips the rows of an op it does not know. */
typedef struct MH_CollectiveRate {
  int32_t level;                 /* MH_LinkLevel */
  int32_t ranks;                 /* group size measured at; 0: any */
  const char* op;                /* "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv", "any" */
  double latency_s;
  double bus_bytes_per_s;
} MH_CollectiveRate;

typedef struct MH_Hardware {
  size_t struct_size;
  const char* name;              /* "dgx_a100_80gb" */
  const char* device;            /* "NVIDIA A100-SXM4-80GB" */
  int32_t dtype;                 /* MH_DType the engine computes in there */
  int32_t devices_per_node;      /* GPUs of a node; ranks of the process on a CPU */
  int32_t shared_device;         /* nonzero: the ranks of a node share one device */
  int32_t reserved;
  double peak_flops;             /* dense peak of one device in dtype, for MFU */
  uint64_t memory_bytes;         /* of one device */
  const MH_GemmRate* gemm;
  size_t num_gemm;
  const MH_VectorRate* vector;
  size_t num_vector;
  const MH_CollectiveRate* collectives;
  size_t num_collectives;
} MH_Hardware;

/* What the tuner needs from the host before the search. */
typedef struct MH_TunerNeeds {
  size_t struct_size;
  const char* hardware;          /* profile name or TOML file; owned by the tuner */
  int32_t nodes;
  int32_t devices_per_node;      /* 0: the profile's */
  int32_t measure_top_k;         /* best fitting candidates to run for real; 0: none */
  int32_t measure_steps;         /* optimizer steps of each such run (training) */
  int64_t prompt_tokens;         /* inference: tokens of each prompt */
  int64_t output_tokens;         /* inference: tokens generated for each */
} MH_TunerNeeds;

typedef enum MH_Verdict { MH_VERDICT_RANKED = 0, MH_VERDICT_REJECTED = 1 } MH_Verdict;

/* One candidate's outcome. Strings and the candidate are owned by the tuner. */
typedef struct MH_TunerResult {
  size_t struct_size;
  const MH_Candidate* candidate;
  int32_t verdict;               /* MH_Verdict */
  int32_t rank;                  /* 1 = best; 0 when rejected */
  const char* reason;            /* why rejected, or how far behind the best */
  double step_seconds;           /* predicted by the cost model */
  double measured_seconds;       /* from a real run; 0 when not measured */
  double tokens_per_s;           /* training, or generated tokens for inference */
  double latency_seconds;        /* inference: one batch, prompt and output */
  double mfu;                    /* model FLOPs utilization ([K22] Eq. 7) */
  double days;                   /* to process the tuner's token goal */
  uint64_t memory_bytes;         /* per rank */
  int32_t memory_measured;       /* 1: from the engine's dry run; 0: modelled */
  double ttft_seconds;           /* inference, predicted: time to first token */
  double tpot_seconds;           /* inference, predicted: time per output token */
  double measured_ttft_seconds;  /* inference, from a real run; 0 when not measured */
  double measured_tpot_seconds;  /* as ttft */
} MH_TunerResult;

typedef struct MH_TunerApi {
  size_t struct_size;
  /* Next candidate to evaluate; *done = 1 when the search is over. The
   * candidate stays valid until the next call. */
  MH_Error* (*next)(MH_Instance* self, const MH_ModelShape* shape, MH_Candidate* out,
                    int32_t* done);
  /* The host's estimate for the candidate last returned by next, and
   * also for any candidate of results, with measured = 1, after the search. */
  MH_Error* (*report)(MH_Instance* self, const MH_Candidate* candidate,
                      const MH_Estimate* estimate);
  /* The entries below may be NULL (a table that only proposes and hears
   * candidates): the host lists such a tuner and refuses to tune with it,
   * naming the entry.
   *
   * Fills what the host must load and run for this search. */
  MH_Error* (*needs)(MH_Instance* self, MH_TunerNeeds* out);
  /* Called once before the first next. */
  MH_Error* (*begin)(MH_Instance* self, const MH_ModelShape* shape, const MH_Hardware* hardware);
  /* Every candidate, ranked ones first by rank, then the rejected;
   * valid until the next report or results call. */
  MH_Error* (*results)(MH_Instance* self, const MH_TunerResult** rows, size_t* count);
  /* The names of every recompute policy (MH_KIND_RECOMPUTE component)
   * the host's registry holds, a third party's too; called once before
   * begin. `names` is borrowed for the call. */
  MH_Error* (*recompute_policies)(MH_Instance* self, const char* const* names, size_t count);
} MH_TunerApi;

/* ------------------------------------------------------------------------
 * Observers (MH_KIND_OBSERVER): per-op and per-collective events,
 * for profilers. Selected by an [observer] section; without one the host
 * emits nothing. One instance per rank, created with that rank (args->rank)
 * on the host's main thread before the rank's first op and destroyed after
 * its last; on_event runs on the rank's own thread, so an instance needs no
 * locking. An instance that writes a summary does so in its destroy.
 * --------------------------------------------------------------------- */

typedef enum MH_EventType {
  MH_EVENT_OP = 0,          /* a kernels call: an op, alloc, copy, synchronize */
  MH_EVENT_COLLECTIVE = 1   /* a comm call on one of the rank's groups */
} MH_EventType;

typedef struct MH_Event {
  size_t struct_size;
  int32_t type;             /* MH_EventType */
  int32_t rank;             /* global rank that issued the call */
  const char* name;         /* op: the MH_KernelsApi member ("gemm", "alloc");
                               collective: "all-reduce", "all-gather",
                               "reduce-scatter", "broadcast", "send", "recv" */
  const char* group;        /* collective: "world", "tensor", "data",
                               "pipeline", "embedding"; op: NULL */
  double start_seconds;     /* host steady clock, seconds from an arbitrary origin */
  double seconds;           /* host time inside the call: on a device that
                               enqueues (CUDA), the time to enqueue; for a
                               non-blocking collective, the time to post it */
  uint64_t bytes;           /* op: bytes of every tensor the call names (or
                               allocates, or copies); collective: bytes of
                               the send buffer, of the receive buffer for recv */
} MH_Event;

typedef struct MH_ObserverApi {
  size_t struct_size;
  /* Borrowed for the call. Must not fail and should be short: it runs
   * inside the rank's step, on its thread. */
  void (*on_event)(MH_Instance* self, const MH_Event* event);
} MH_ObserverApi;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MEGAHOST_ABI_H */
