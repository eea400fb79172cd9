#include "engine/pipeline_schedule.hpp"

#include <megahost/error.hpp>

#include <chrono>
#include <string>

namespace mh {

PipelineStage::PipelineStage(Device& device, Collectives& pipe, std::vector<std::unique_ptr<Transformer>>& chunks,
                             const ModelDims& dims, std::function<MicroBatch(int64_t)> load,
                             GradsFinalised finalised)
    : dev_(device),
      pipe_(pipe),
      chunks_(chunks),
      width_(dims.local_rows() * dims.hidden),
      load_(std::move(load)),
      finalised_(std::move(finalised)) {}

const MicroBatch& PipelineStage::batch(int32_t mb) {
  auto it = batches_.find(mb);
  if (it == batches_.end()) it = batches_.emplace(mb, load_(mb)).first;
  return it->second;
}

// A micro-batch's tokens are dropped once every chunk of the stage is done with it.
void PipelineStage::finish_chunk(int32_t mb) {
  if (++chunks_done_[mb] < int32_t(chunks_.size())) return;
  batches_.erase(mb);
  chunks_done_.erase(mb);
}

Buffer PipelineStage::take(std::map<Key, Buffer>& from, Key key) {
  auto it = from.find(key);
  require(it != from.end(),
          "pipeline schedule uses micro-batch " + std::to_string(key.first) + " chunk " + std::to_string(key.second) +
              " before it arrived",
          MH_INTERNAL);
  Buffer b = std::move(it->second);
  from.erase(it);
  return b;
}

Buffer PipelineStage::backward(Key key, Buffer dout, float loss_scale) {
  Transformer& chunk = *chunks_.at(size_t(key.second));
  const bool last = --backwards_left_.at(size_t(key.second)) == 0;
  return chunk.backward(states_.at(key), batch(key.first), std::move(dout), loss_scale,
                        last ? finalised_ : GradsFinalised());
}

double PipelineStage::run(std::span<const MH_PipeAction> actions, float loss_scale) {
  backwards_left_.assign(chunks_.size(), 0);
  for (const MH_PipeAction& a : actions)
    if (a.type == MH_PIPE_BACKWARD) ++backwards_left_.at(size_t(a.chunk));
  double loss = 0;
  for (const MH_PipeAction& a : actions) {
    const auto start = std::chrono::steady_clock::now();
    const bool compute = a.type == MH_PIPE_FORWARD || a.type == MH_PIPE_BACKWARD;
    const Key key{a.microbatch, a.chunk};
    Transformer& chunk = *chunks_.at(size_t(a.chunk));
    switch (a.type) {
      case MH_PIPE_RECV_ACTIVATION:
        inputs_[key] = Buffer(dev_, MemCategory::kActivations, width_, dev_.info().compute_dtype);
        pipe_.recv(inputs_[key].ptr(), width_, prev());
        break;
      case MH_PIPE_FORWARD: {
        Buffer input = chunk.chunk().first ? Buffer() : take(inputs_, key);
        loss += chunk.forward(states_[key], batch(a.microbatch), std::move(input), true);
        break;
      }
      case MH_PIPE_SEND_ACTIVATION: {
        // The output lives on in the next stage; freeing it here is the
        // paper's output-tensor deallocation (Appendix B).
        Buffer& out = chunk.output(states_.at(key));
        pipe_.send(out.ptr(), width_, next());
        out.release();
        break;
      }
      case MH_PIPE_RECV_GRADIENT:
        grads_in_[key] = Buffer(dev_, MemCategory::kWorkspace, width_);
        pipe_.recv(grads_in_[key].ptr(), width_, next());
        break;
      case MH_PIPE_BACKWARD: {
        Buffer dout = chunk.chunk().last ? Buffer() : take(grads_in_, key);
        Buffer dinput = backward(key, std::move(dout), loss_scale);
        states_.erase(key);
        if (dinput) grads_out_[key] = std::move(dinput);
        finish_chunk(a.microbatch);
        break;
      }
      case MH_PIPE_SEND_GRADIENT:
        pipe_.send(grads_out_.at(key).ptr(), width_, prev());
        grads_out_.erase(key);
        break;
      default:
        throw Error(MH_INTERNAL, "unknown pipeline action " + std::to_string(a.type));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    (compute ? busy_ : idle_) += seconds;
  }
  return loss;
}

double PipelineStage::evaluate(const MicroBatch& mb) {
  const int32_t p = pipe_.size(), stage = pipe_.rank();
  double loss = 0;
  for (int32_t k = 0; k < p * int32_t(chunks_.size()); ++k) {
    if (k % p != stage) continue;
    Transformer& chunk = *chunks_[size_t(k / p)];
    ForwardState st;
    Buffer input;
    if (k > 0) {
      input = Buffer(dev_, MemCategory::kActivations, width_, dev_.info().compute_dtype);
      pipe_.recv(input.ptr(), width_, prev());
    }
    loss += chunk.forward(st, mb, std::move(input), false);
    if (!chunk.chunk().last) pipe_.send(chunk.output(st).ptr(), width_, next());
  }
  return loss;
}

}  // namespace mh
