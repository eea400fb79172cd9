// What a recompute policy costs, priced from its keep table rather than its
// name: backward walks each chunk's layers from the last, as the engine
// does (Transformer::recompute_for_backward), and before a layer's backward
// runs the forward ops that produce what the layer lacks -- first
// rebuilding a dropped layer input from the nearest kept one, each layer on
// the way run whole with its output.
#pragma once

#include <vector>

#include "layout.hpp"
#include "op_pricer.hpp"

namespace mh::tuner {

// Seconds of recomputation per micro-batch on each of the p stages, priced
// by `pricer`; `keep` holds every layer of the model, each asked within its
// chunk (the layers split evenly over the p * v chunks, chunk k on stage
// k mod p).
std::vector<Seconds> stage_recompute(Pricer& pricer, const Model& model, const Layout& layout, const KeepTable& keep);

}  // namespace mh::tuner
