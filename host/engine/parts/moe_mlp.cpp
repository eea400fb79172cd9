#include "engine/parts/moe_mlp.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "engine/ops.hpp"

namespace mh {
namespace {

constexpr auto kAct = MemCategory::kActivations;
constexpr auto kWork = MemCategory::kWorkspace;

// Per-rank row counts as element counts of rows of `h`.
std::vector<int64_t> scaled(std::vector<int64_t> rows, int64_t h) {
  for (int64_t& n : rows) n *= h;
  return rows;
}

// Rows [first, first + count) of a row-major matrix of `cols` columns.
MH_Tensor rows_of(TypedPtr p, int64_t first, int64_t count, int64_t cols, int64_t row_stride) {
  return view((p + first * row_stride).data, p.dtype, {1, count, cols}, {0, row_stride, 1});
}

}  // namespace

std::string moe_tensor_layout_problem(const ModelDims& d, int32_t tp, bool sequence_parallel, bool generates) {
  if (!d.moe() || tp == 1 || sequence_parallel || generates) return "";
  return "model.experts = " + std::to_string(d.spec.experts) + " with parallel.tensor.size = " + std::to_string(tp) +
         " needs sequence parallelism: set parallel.tensor.sequence_parallel = true, or parallel.tensor.size = 1";
}

MoeMlpPart::MoeMlpPart(const PartContext& c, std::unique_ptr<SharedExpertPart> shared)
    : MlpPart(c), shared_(std::move(shared)) {
  const ModelDims& d = c.d;
  require(d.spec.activation == MlpActivation::kSwiglu && !d.spec.bias,
          "model.experts > 0 makes SwiGLU experts without biases; set model.activation = \"swiglu\" and "
          "model.bias = false (model.arch = \"llama\" does both)");
  require(d.ep == 1 || c.experts != nullptr, "parallel.expert.size = " + std::to_string(d.ep) +
                                                 " needs the expert group, which this engine was not given");
  require(d.spec.router_topk >= 1 && d.spec.router_topk <= d.spec.experts,
          "model.router_topk = " + std::to_string(d.spec.router_topk) + " must be between 1 and model.experts = " +
              std::to_string(d.spec.experts));
}

void MoeMlpPart::route(LayerActivations& A, const LayerParamIds& w, TypedPtr in, const LayerPass& pass) const {
  const int64_t N = c_.d.local_rows(), h = c_.d.hidden, e_count = E(), K = k();
  auto r = std::make_shared<MoeRouting>();
  r->probs.assign(size_t(N * e_count), 1.0f / float(e_count));
  r->expert.resize(size_t(N * K));
  r->gate.resize(size_t(N * K));
  Buffer logits(c_.dev, kWork, N * e_count);
  ops::linear(c_.dev, in, c_.P(w.router_w), logits.ptr(), N, h, e_count);
  if (c_.dev.info().dry) {
    // Nothing is computed: any routing takes the same memory (the slots are
    // rows k whatever the experts' shares), so spread the rows evenly.
    for (int64_t i = 0; i < N * K; ++i) {
      r->expert[size_t(i)] = int32_t(i % e_count);
      r->gate[size_t(i)] = 1.0f / float(K);
    }
  } else {
    c_.dev.to_host(r->probs.data(), logits.data(), r->probs.size() * sizeof(float));
    std::vector<int32_t> order(static_cast<size_t>(e_count));
    for (int64_t n = 0; n < N; ++n) {
      float* p = r->probs.data() + n * e_count;
      const float top = *std::max_element(p, p + e_count);
      double sum = 0;
      for (int64_t e = 0; e < e_count; ++e) sum += std::exp(double(p[e] - top));
      for (int64_t e = 0; e < e_count; ++e) p[e] = float(std::exp(double(p[e] - top)) / sum);
      std::iota(order.begin(), order.end(), 0);
      // The larger probability first, the lower expert on a tie (torch.topk's order).
      std::partial_sort(order.begin(), order.begin() + K, order.end(),
                        [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
      double chosen = 0;
      for (int64_t j = 0; j < K; ++j) chosen += p[order[size_t(j)]];
      for (int64_t j = 0; j < K; ++j) {
        r->expert[size_t(n * K + j)] = order[size_t(j)];
        const double g = p[order[size_t(j)]];
        r->gate[size_t(n * K + j)] = float(c_.d.spec.router_norm_topk ? g / chosen : g);
      }
    }
  }
  r->load.assign(size_t(e_count), 0);
  for (int32_t e : r->expert) ++r->load[size_t(e)];
  r->slot.assign(size_t(N * K), 0);
  if (c_.d.spec.capacity_factor > 0) drop_overflow(*r);
  // The slots in use sorted by expert, and by row within an expert.
  r->offset.assign(size_t(e_count + 1), 0);
  for (int64_t i = 0; i < N * K; ++i)
    if (r->slot[size_t(i)] >= 0) ++r->offset[size_t(r->expert[size_t(i)] + 1)];
  for (int64_t e = 0; e < e_count; ++e) r->offset[size_t(e + 1)] += r->offset[size_t(e)];
  std::vector<int64_t> fill(r->offset.begin(), r->offset.end() - 1);
  std::vector<int32_t> tokens(size_t(N * K));
  std::vector<float> gates(size_t(N * K));
  for (int64_t i = 0; i < N * K; ++i) {
    if (r->slot[size_t(i)] < 0) continue;
    const int64_t s = fill[size_t(r->expert[size_t(i)])]++;
    r->slot[size_t(i)] = int32_t(s);
    tokens[size_t(s)] = int32_t(i / K);
    gates[size_t(s)] = r->gate[size_t(i)];
  }
  // Switch's and Mixtral's load-balancing loss over the micro-batch's rows,
  // which context and sequence parallelism spread over the sequence group:
  // the choices and the probabilities per expert are summed over it, so
  // every rank of it holds the loss (and the router's gradient) one rank
  // would.
  const double coef = c_.d.spec.router_aux_loss_coef;
  r->rows = N;
  if (coef > 0) {
    std::vector<double> prob_sum(size_t(e_count), 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t e = 0; e < e_count; ++e) prob_sum[size_t(e)] += r->probs[size_t(n * e_count + e)];
    if (c_.sequence != nullptr && !c_.dev.info().dry) {
      sum_over_sequence(r->load, prob_sum);
      r->rows = N * c_.sequence->size();
    }
    double sum = 0;
    for (int64_t e = 0; e < e_count; ++e)
      sum += double(r->load[size_t(e)]) / double(r->rows) * prob_sum[size_t(e)] / double(r->rows);
    r->aux = coef * double(e_count) * sum;
  }
  r->aux_weight = pass.aux_weight;
  r->tokens = Buffer(c_.dev, pass.inference ? kWork : kAct, N * K, MH_I32);
  c_.dev.to_device(r->tokens.data(), tokens.data(), tokens.size() * sizeof(int32_t));
  Buffer staged(c_.dev, kWork, N * K);
  c_.dev.to_device(staged.data(), gates.data(), gates.size() * sizeof(float));
  r->gates = c_.activation(pass.inference ? kWork : kAct, N * K);
  ops::copy(c_.dev, staged.ptr(), r->gates.ptr(), N * K);
  plan_exchange(*r, pass.inference);
  A.routing = std::move(r);
}

// One f32 all-reduce carries both: the counts stay exact below 2^24.
void MoeMlpPart::sum_over_sequence(std::vector<int64_t>& load, std::vector<double>& prob_sum) const {
  const size_t e_count = load.size();
  std::vector<float> host(2 * e_count);
  for (size_t e = 0; e < e_count; ++e) {
    host[e] = float(load[e]);
    host[e_count + e] = float(prob_sum[e]);
  }
  Buffer sums(c_.dev, kWork, int64_t(host.size()));
  c_.dev.to_device(sums.data(), host.data(), host.size() * sizeof(float));
  c_.sequence->all_reduce(sums.ptr(), int64_t(host.size()));
  c_.dev.to_host(host.data(), sums.data(), host.size() * sizeof(float));
  for (size_t e = 0; e < e_count; ++e) {
    load[e] = int64_t(host[e]);
    prob_sum[e] = double(host[e_count + e]);
  }
}

// Megatron's drop_policy "probs": the choices with the larger gates stay.
void MoeMlpPart::drop_overflow(MoeRouting& r) const {
  const int64_t N = c_.d.local_rows(), K = k(), e_count = E();
  const auto capacity =
      size_t(std::ceil(double(c_.d.spec.capacity_factor) * double(N * K) / double(e_count)));
  std::vector<std::vector<int32_t>> choices(static_cast<size_t>(e_count));
  for (int64_t i = 0; i < N * K; ++i) choices[size_t(r.expert[size_t(i)])].push_back(int32_t(i));
  for (std::vector<int32_t>& c : choices) {
    if (c.size() <= capacity) continue;
    // The larger gate first, the earlier row on a tie (a stable sort of rows in order).
    std::stable_sort(c.begin(), c.end(), [&](int32_t a, int32_t b) { return r.gate[size_t(a)] > r.gate[size_t(b)]; });
    for (size_t j = capacity; j < c.size(); ++j) r.slot[size_t(c[j])] = -1;
  }
}

// The slots are sorted by expert, so rank j's are one block: those of its
// experts [j n, (j + 1) n). What arrives from rank q is q's block for this
// rank, itself sorted by local expert; the counts per expert come first.
void MoeMlpPart::plan_exchange(MoeRouting& r, bool inference) const {
  const int64_t ep = c_.d.ep, n = local_experts();
  if (ep == 1) {  // the slots themselves: the first kept() of rows k in use
    r.received = c_.d.routed_rows();
    r.local_offset = r.offset;
    return;
  }
  std::vector<int32_t> sent(static_cast<size_t>(E())), got(static_cast<size_t>(E()));  // got[q n + e]: rows of local expert e from q
  for (int64_t e = 0; e < E(); ++e) sent[size_t(e)] = int32_t(r.offset[size_t(e + 1)] - r.offset[size_t(e)]);
  if (c_.dev.info().dry) {
    // Nothing moves: every rank is taken to send what this one does.
    for (int64_t q = 0; q < ep; ++q)
      for (int64_t e = 0; e < n; ++e) got[size_t(q * n + e)] = sent[size_t(c_.d.first_expert() + e)];
  } else {
    Buffer out(c_.dev, kWork, E(), MH_I32), in(c_.dev, kWork, E(), MH_I32);
    c_.dev.to_device(out.data(), sent.data(), sent.size() * sizeof(int32_t));
    const std::vector<int64_t> per_rank(size_t(ep), n);
    c_.experts->all_to_all(out.ptr(), per_rank, in.ptr(), per_rank);
    c_.dev.to_host(got.data(), in.data(), got.size() * sizeof(int32_t));
  }
  r.send_rows.assign(size_t(ep), 0);
  r.recv_rows.assign(size_t(ep), 0);
  for (int64_t q = 0; q < ep; ++q) {
    r.send_rows[size_t(q)] = r.offset[size_t((q + 1) * n)] - r.offset[size_t(q * n)];
    for (int64_t e = 0; e < n; ++e) r.recv_rows[size_t(q)] += got[size_t(q * n + e)];
  }
  r.received = std::accumulate(r.recv_rows.begin(), r.recv_rows.end(), int64_t{0});
  std::vector<int64_t> next(size_t(ep), 0);  // per source: its next arrived row
  for (int64_t q = 1; q < ep; ++q) next[size_t(q)] = next[size_t(q - 1)] + r.recv_rows[size_t(q - 1)];
  std::vector<int32_t> expert_order(size_t(r.received)), arrival_order(size_t(r.received));
  r.local_offset.assign(size_t(n + 1), 0);
  int64_t row = 0;
  for (int64_t e = 0; e < n; ++e) {
    for (int64_t q = 0; q < ep; ++q)
      for (int32_t i = 0; i < got[size_t(q * n + e)]; ++i, ++row) {
        const int64_t arrived = next[size_t(q)]++;
        expert_order[size_t(row)] = int32_t(arrived);
        arrival_order[size_t(arrived)] = int32_t(row);
      }
    r.local_offset[size_t(e + 1)] = row;
  }
  auto upload = [&](const std::vector<int32_t>& host) {
    Buffer b(c_.dev, inference ? kWork : kAct, int64_t(host.size()), MH_I32);
    c_.dev.to_device(b.data(), host.data(), host.size() * sizeof(int32_t));
    return b;
  };
  r.expert_order = upload(expert_order);
  r.arrival_order = upload(arrival_order);
}

TypedPtr MoeMlpPart::to_experts(const MoeRouting& r, TypedPtr slots, Buffer& held) const {
  if (c_.d.ep == 1) return slots;
  const int64_t h = c_.d.hidden;
  Buffer arrived(c_.dev, kWork, r.received * h, slots.dtype);
  c_.experts->all_to_all(slots, scaled(r.send_rows, h), arrived.ptr(), scaled(r.recv_rows, h));
  held = Buffer(c_.dev, kWork, r.received * h, slots.dtype);
  ops::embedding(c_.dev, arrived.ptr(), r.received, static_cast<const int32_t*>(r.expert_order.data()), held.ptr(),
                 r.received, h, 0, false);
  return held.ptr();
}

TypedPtr MoeMlpPart::from_experts(const MoeRouting& r, TypedPtr rows, Buffer& held) const {
  if (c_.d.ep == 1) return rows;
  const int64_t h = c_.d.hidden;
  Buffer leaving(c_.dev, kWork, r.received * h, rows.dtype);
  ops::embedding(c_.dev, rows, r.received, static_cast<const int32_t*>(r.arrival_order.data()), leaving.ptr(),
                 r.received, h, 0, false);
  held = Buffer(c_.dev, kWork, c_.d.routed_rows() * h, rows.dtype);
  c_.experts->all_to_all(leaving.ptr(), scaled(r.recv_rows, h), held.ptr(), scaled(r.send_rows, h));
  return held.ptr();
}

Buffer MoeMlpPart::dispatch(const MoeRouting& r, TypedPtr in) const {
  const int64_t N = c_.d.local_rows(), h = c_.d.hidden, S = c_.d.routed_rows();
  Buffer out = c_.activation(kWork, S * h);
  ops::embedding(c_.dev, in, N, static_cast<const int32_t*>(r.tokens.data()), out.ptr(), r.kept(), h, 0, false);
  return out;
}

void MoeMlpPart::forward(LayerActivations& A, const LayerParamIds& w, const LayerPass& pass,
                         const LoraDropout&) const {
  const int64_t N = c_.d.local_rows(), h = c_.d.hidden, f = F();
  const TypedPtr in = A[kActLn2].ptr();
  if (!A.routing) {
    route(A, w, in, pass);
    if (shared_) shared_->gate(in, w, pass, *A.routing);
  }
  const MoeRouting& r = *A.routing;
  const int64_t R = r.received;
  if (!A.has(kActFc1)) {
    Buffer slots = dispatch(r, in), held;
    const TypedPtr x = to_experts(r, slots.ptr(), held);
    A[kActFc1] = c_.activation(kAct, R * 2 * f + N * 2 * Fs());
    const TypedPtr fc1 = A[kActFc1].ptr();
    for (int64_t e = 0; e < local_experts(); ++e) {
      const int64_t first = r.local_offset[size_t(e)], count = r.local_offset[size_t(e + 1)] - first;
      if (count == 0) continue;
      const MH_Tensor xe = rows_of(x, first, count, h, h);
      ops::gemm(c_.dev, xe, rows_of(c_.P(w.gate_w), e * f, f, h, h), rows_of(fc1, first, count, f, 2 * f), false, true, 0);
      ops::gemm(c_.dev, xe, rows_of(c_.P(w.fc1_w), e * f, f, h, h), rows_of(fc1 + f, first, count, f, 2 * f), false,
                true, 0);
    }
    if (shared_) shared_->fc1(in, fc1 + R * 2 * f, w);
  }
  if (A.has(kActGelu)) return;
  A[kActGelu] = c_.activation(kAct, R * f + N * Fs());
  ops::swiglu(c_.dev, A[kActFc1].ptr(), A[kActGelu].ptr(), r.local_offset.back(), f);
  if (shared_) ops::swiglu(c_.dev, A[kActFc1].ptr() + R * 2 * f, A[kActGelu].ptr() + R * f, N, Fs());
}

Buffer MoeMlpPart::expert_output(const MoeRouting& r, TypedPtr act, const LayerParamIds& w) const {
  const int64_t h = c_.d.hidden, f = F();
  Buffer y = c_.activation(kWork, r.received * h);
  for (int64_t e = 0; e < local_experts(); ++e) {
    const int64_t first = r.local_offset[size_t(e)], count = r.local_offset[size_t(e + 1)] - first;
    if (count == 0) continue;
    ops::gemm(c_.dev, rows_of(act, first, count, f, f), rows_of(c_.P(w.fc2_w), e * h, h, f, f),
              rows_of(y.ptr(), first, count, h, h), false, true, 0);
  }
  return y;
}

// A batch of rows k products [1, 1] x [1, h]: one GEMM scales every row.
Buffer MoeMlpPart::gated(const MoeRouting& r, TypedPtr x) const {
  const int64_t h = c_.d.hidden, S = r.kept();
  Buffer out = c_.activation(kWork, c_.d.routed_rows() * h);
  ops::gemm(c_.dev, view(r.gates.data(), r.gates.dtype(), {S, 1, 1}, {1, 1, 1}),
            view(x.data, x.dtype, {S, 1, h}, {h, h, 1}), view(out.data(), out.dtype(), {S, 1, h}, {h, h, 1}), false,
            false, 0);
  return out;
}

void MoeMlpPart::output(LayerActivations& A, const LayerParamIds& w, const LoraDropout&, float* partial) const {
  const int64_t N = c_.d.local_rows(), h = c_.d.hidden, f = F();
  const MoeRouting& r = *A.routing;
  Buffer y = expert_output(r, A[kActGelu].ptr(), w), held;
  Buffer weighted = gated(r, from_experts(r, y.ptr(), held));
  y.release();
  held.release();
  ops::fill(c_.dev, TypedPtr(partial), N * h, 0);
  ops::embedding_bwd(c_.dev, TypedPtr(partial), N, static_cast<const int32_t*>(r.tokens.data()), weighted.ptr(),
                     r.kept(), h, 0);
  if (shared_) shared_->output(r, A[kActGelu].ptr() + r.received * f, w, partial);
}

// The activations' gradient [rows k, moe_ffn] then the shared experts'
// [rows, Fs] and their gate logits' [rows] (SharedExpertPart::output_bwd).
Buffer MoeMlpPart::output_bwd(LayerActivations& A, const LayerParamIds& w, const LoraDropout&, TypedPtr dy) const {
  const int64_t N = c_.d.local_rows(), h = c_.d.hidden, f = F(), S = c_.d.routed_rows();
  MoeRouting& r = *A.routing;
  const int64_t kept = r.kept(), R = r.received;
  Buffer dslots = dispatch(r, dy);
  // The gates' gradient: each slot's output gradient dotted with its
  // expert's (ungated) output, recomputed rather than kept.
  Buffer y = expert_output(r, A[kActGelu].ptr(), w), returned;
  const TypedPtr ys = from_experts(r, y.ptr(), returned);
  Buffer dgate(c_.dev, kWork, S);
  ops::gemm(c_.dev, view(dslots.data(), dslots.dtype(), {kept, 1, h}, {h, h, 1}),
            view(ys.data, ys.dtype, {kept, 1, h}, {h, h, 1}), view(dgate.data(), MH_F32, {kept, 1, 1}, {1, 1, 1}),
            false, true, 0);
  y.release();
  returned.release();
  r.dgate.assign(size_t(S), 0);
  if (!c_.dev.info().dry) c_.dev.to_host(r.dgate.data(), dgate.data(), size_t(kept) * sizeof(float));
  Buffer dgated = gated(r, dslots.ptr()), held;
  dslots.release();
  const TypedPtr dout = to_experts(r, dgated.ptr(), held);
  Buffer dact = c_.activation(kWork, R * f + N * Fs() + (shared_ ? shared_->gate_grad_elements() : 0));
  const TypedPtr act = A[kActGelu].ptr();
  for (int64_t e = 0; e < local_experts(); ++e) {
    const int64_t first = r.local_offset[size_t(e)], count = r.local_offset[size_t(e + 1)] - first;
    if (count == 0) continue;
    const MH_Tensor de = rows_of(dout, first, count, h, h);
    ops::gemm(c_.dev, de, rows_of(c_.P(w.fc2_w), e * h, h, f, f), rows_of(dact.ptr(), first, count, f, f), false, false,
              0);
    ops::gemm(c_.dev, de, rows_of(act, first, count, f, f), rows_of(TypedPtr(c_.G(w.fc2_w)), e * h, h, f, f), true,
              false, 1);
  }
  if (shared_) {
    const TypedPtr ds = dact.ptr() + R * f;
    shared_->output_bwd(r, act + R * f, w, dy, ds, ds + N * Fs());
  }
  return dact;
}

void MoeMlpPart::backward(LayerActivations& A, const LayerParamIds& w, const LoraDropout&, Buffer& dact,
                          Buffer& dx) const {
  const int64_t N = c_.d.local_rows(), h = c_.d.hidden, f = F();
  const MoeRouting& r = *A.routing;
  const int64_t R = r.received;
  const TypedPtr in = A[kActLn2].ptr();
  Buffer dfc1 = c_.activation(kWork, R * 2 * f + N * 2 * Fs());
  ops::swiglu_bwd(c_.dev, A[kActFc1].ptr(), dact.ptr(), dfc1.ptr(), r.local_offset.back(), f);
  ops::fill(c_.dev, dx.ptr(), N * h, 0);
  if (shared_) {
    const TypedPtr ds = dact.ptr() + R * f;
    ops::swiglu_bwd(c_.dev, A[kActFc1].ptr() + R * 2 * f, ds, dfc1.ptr() + R * 2 * f, N, Fs());
    shared_->backward(in, dfc1.ptr() + R * 2 * f, ds + N * Fs(), w, dx.f32());
  }
  dact.release();
  Buffer slots = dispatch(r, in), held;
  const TypedPtr x = to_experts(r, slots.ptr(), held);
  Buffer dx_rows(c_.dev, kWork, R * h);
  for (int64_t e = 0; e < local_experts(); ++e) {
    const int64_t first = r.local_offset[size_t(e)], count = r.local_offset[size_t(e + 1)] - first;
    if (count == 0) continue;
    const MH_Tensor xe = rows_of(x, first, count, h, h), dxe = rows_of(dx_rows.ptr(), first, count, h, h);
    float beta = 0;
    for (const auto& [weight, column] : {std::pair{w.gate_w, int64_t(0)}, std::pair{w.fc1_w, f}}) {
      const MH_Tensor dye = rows_of(dfc1.ptr() + column, first, count, f, 2 * f);
      ops::gemm(c_.dev, dye, xe, rows_of(TypedPtr(c_.G(weight)), e * f, f, h, h), true, false, 1);
      ops::gemm(c_.dev, dye, rows_of(c_.P(weight), e * f, f, h, h), dxe, false, false, beta);
      beta = 1;
    }
  }
  slots.release();
  held.release();
  Buffer returned;
  const TypedPtr dslots = from_experts(r, dx_rows.ptr(), returned);
  ops::embedding_bwd(c_.dev, dx.ptr(), N, static_cast<const int32_t*>(r.tokens.data()), dslots, r.kept(), h, 0);
  // The router: its logits' gradient, through the gates and the
  // load-balancing loss.
  const std::vector<float> dlogits = router_grad(r);
  Buffer staged(c_.dev, kWork, N * E());
  c_.dev.to_device(staged.data(), dlogits.data(), dlogits.size() * sizeof(float));
  Buffer dl = c_.activation(kWork, N * E());
  ops::copy(c_.dev, staged.ptr(), dl.ptr(), N * E());
  ops::linear_dx(c_.dev, dl.ptr(), c_.P(w.router_w), dx.ptr(), N, h, E(), 1);
  ops::linear_dw(c_.dev, dl.ptr(), in, c_.G(w.router_w), N, h, E());
}

// With g_j = p_j / sum_K p (renormalised) dz_e = g_e (dg_e - sum_K g dg) on
// the chosen experts; with g_j = p_j, dz_e = p_e ([e in K] dg_e - sum_K p dg).
// The loss coef E sum_e f_e P_e, f constant, adds a_e = w coef E f_e / N to
// each dp_e, and dz_e = p_e (a_e - sum_m p_m a_m); N and f are the
// micro-batch's over the sequence group (r.rows, r.load), and each rank's
// router gradient is its own rows' share of the sum.
std::vector<float> MoeMlpPart::router_grad(const MoeRouting& r) const {
  const int64_t N = c_.d.local_rows(), e_count = E(), K = k();
  std::vector<float> dz(size_t(N * e_count), 0);
  if (c_.dev.info().dry) return dz;
  std::vector<double> a(size_t(e_count), 0);
  const double coef = double(c_.d.spec.router_aux_loss_coef) * double(r.aux_weight);
  for (int64_t e = 0; e < e_count; ++e)
    a[size_t(e)] = coef * double(e_count) * double(r.load[size_t(e)]) / double(r.rows) / double(r.rows);
  // A choice a capacity dropped contributes nothing: its gate's gradient is 0.
  auto dg = [&](int64_t i) { return r.slot[size_t(i)] < 0 ? 0.0 : double(r.dgate[size_t(r.slot[size_t(i)])]); };
  for (int64_t n = 0; n < N; ++n) {
    const float* p = r.probs.data() + n * e_count;
    float* d = dz.data() + n * e_count;
    double dot = 0;  // sum over the chosen of gate * its gradient
    for (int64_t j = 0; j < K; ++j)
      dot += double(r.gate[size_t(n * K + j)]) * dg(n * K + j);
    if (c_.d.spec.router_norm_topk) {
      for (int64_t j = 0; j < K; ++j) {
        const int64_t e = r.expert[size_t(n * K + j)];
        const double g = r.gate[size_t(n * K + j)];
        d[e] += float(g * (dg(n * K + j) - dot));
      }
    } else {
      for (int64_t e = 0; e < e_count; ++e) d[e] -= float(double(p[e]) * dot);
      for (int64_t j = 0; j < K; ++j) {
        const int64_t e = r.expert[size_t(n * K + j)];
        d[e] += float(double(p[e]) * dg(n * K + j));
      }
    }
    if (coef == 0) continue;
    double mean_a = 0;
    for (int64_t e = 0; e < e_count; ++e) mean_a += double(p[e]) * a[size_t(e)];
    for (int64_t e = 0; e < e_count; ++e) d[e] += float(double(p[e]) * (a[size_t(e)] - mean_a));
  }
  return dz;
}

}  // namespace mh
