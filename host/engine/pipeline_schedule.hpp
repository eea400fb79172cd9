// Executes one stage's pipeline schedule for one optimizer step: the
// ordered forward/backward/send/recv actions the pipeline plugin returned,
// over this rank's model chunks. Received inputs, in-flight forward states
// and gradients to send are held per (micro-batch, chunk) until used.
#pragma once

#include <megahost/abi.h>

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "engine/collectives.hpp"
#include "engine/device.hpp"
#include "engine/transformer.hpp"

namespace mh {

class PipelineStage {
 public:
  // chunks[c] is this stage's virtual chunk c; `pipe` is the pipeline group
  // (group rank = stage); `load` gives micro-batch k of the step.
  // `finalised` hears, during each chunk's last backward of the step, of
  // the gradients that backward has completed.
  PipelineStage(Device& device, Collectives& pipe, std::vector<std::unique_ptr<Transformer>>& chunks,
                const ModelDims& dims, std::function<MicroBatch(int64_t)> load, GradsFinalised finalised = {});

  // Runs the actions; returns this stage's summed loss (0 but on the last stage).
  double run(std::span<const MH_PipeAction> actions, float loss_scale);
  // Seconds of the last run spent computing (forward, backward) and
  // waiting on the other stages (send, recv).
  double busy_seconds() const { return busy_; }
  double idle_seconds() const { return idle_; }
  // Forward only over the whole pipeline, model chunk by model chunk, for
  // evaluation; returns this stage's summed loss.
  double evaluate(const MicroBatch& mb);

 private:
  using Key = std::pair<int32_t, int32_t>;  // (micro-batch, chunk)
  int32_t next() const { return (pipe_.rank() + 1) % pipe_.size(); }
  int32_t prev() const { return (pipe_.rank() + pipe_.size() - 1) % pipe_.size(); }
  const MicroBatch& batch(int32_t mb);
  void finish_chunk(int32_t mb);
  // Backward of `key` with the listener when it is its chunk's last.
  Buffer backward(Key key, Buffer dout, float loss_scale);
  Buffer take(std::map<Key, Buffer>& from, Key key);

  Device& dev_;
  Collectives& pipe_;
  std::vector<std::unique_ptr<Transformer>>& chunks_;
  int64_t width_;  // elements of one activation message: local_rows * h
  std::function<MicroBatch(int64_t)> load_;
  GradsFinalised finalised_;
  std::vector<int32_t> backwards_left_;  // per chunk, in the running schedule
  std::map<int32_t, MicroBatch> batches_;
  std::map<int32_t, int32_t> chunks_done_;
  std::map<Key, ForwardState> states_;
  std::map<Key, Buffer> inputs_, grads_in_, grads_out_;
  double busy_ = 0, idle_ = 0;
};

}  // namespace mh
