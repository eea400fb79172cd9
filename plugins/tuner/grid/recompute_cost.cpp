#include "recompute_cost.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

namespace mh::tuner {
namespace {

// A layer forward's price by what it has and whether its output is needed:
// the same ops cost the same.
using Prices = std::map<std::pair<uint32_t, bool>, Seconds>;

bool complete(const LayerKeep& have) {
  return std::all_of(have.begin(), have.end(), [](bool h) { return h; });
}

// One chunk's backward: layers [first, first + count) of `keep`, what each
// has after forward, and the forward ops recomputation runs.
class ChunkRecompute {
 public:
  ChunkRecompute(Pricer& pricer, Prices& prices, const KeepTable& keep, int64_t first, int64_t count, bool first_chunk)
      : pr_(pricer),
        priced_(prices),
        have_(keep.begin() + first, keep.begin() + first + count),
        first_chunk_(first_chunk) {}

  Seconds run() {
    for (int64_t l = int64_t(have_.size()) - 1; l >= 0; --l) before_backward(l);
    return out_;
  }

 private:
  void before_backward(int64_t l) {
    LayerKeep& have = have_[size_t(l)];
    if (complete(have)) return;
    if (!have[kActLayerInput]) {
      if (l == 0) {
        require(first_chunk_, "a chunk's received input is kept; the keep table drops it");
        pr_.embedding_forward();
        out_ += pr_.take();
      } else {
        before_backward(l - 1);
        forward(l - 1, true);
      }
      have[kActLayerInput] = true;
    }
    forward(l, false);
  }

  // Layer l's forward from what it has; it then has everything.
  void forward(int64_t l, bool need_output) {
    LayerKeep& have = have_[size_t(l)];
    const std::pair<uint32_t, bool> key{bits(have), need_output};
    auto [it, fresh] = priced_.try_emplace(key);
    if (fresh) {
      pr_.layer_forward(have, need_output);
      it->second = pr_.take();
    }
    out_ += it->second;
    have.fill(true);
  }

  static uint32_t bits(const LayerKeep& have) {
    uint32_t b = 0;
    for (size_t a = 0; a < have.size(); ++a) b |= uint32_t(have[a]) << a;
    return b;
  }

  Pricer& pr_;
  Prices& priced_;
  KeepTable have_;
  bool first_chunk_;
  Seconds out_;
};

}  // namespace

std::vector<Seconds> stage_recompute(Pricer& pr, const Model& m, const Layout& l, const KeepTable& keep) {
  require(int64_t(keep.size()) == m.layers, "the keep table has " + std::to_string(keep.size()) +
                                                " layers; the model has " + std::to_string(m.layers));
  const int64_t chunks = int64_t(l.p) * l.v, per_chunk = l.layers_per_chunk(m);
  std::vector<Seconds> out(size_t(l.p));
  Prices prices;
  for (int64_t k = 0; k < chunks; ++k)
    out[size_t(k % l.p)] += ChunkRecompute(pr, prices, keep, k * per_chunk, per_chunk, k == 0).run();
  return out;
}

}  // namespace mh::tuner
