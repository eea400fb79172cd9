#include "data/blend.hpp"

#include <algorithm>

#include <megahost/error.hpp>

#include <charconv>
#include <cmath>

namespace mh::data {
namespace {

// Samples between stored counts: a lookup replays at most this many choices.
constexpr int64_t kBlock = 1024;

[[noreturn]] void bad_blend(std::string_view key, std::string_view text, const std::string& what) {
  throw Error(MH_INVALID_ARGUMENT,
              std::string(key) + " = \"" + std::string(text) + "\": " + what +
                  "; give one dataset prefix, or weights and prefixes: \"0.3 data/a 0.7 data/b\"");
}

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t at = 0; at < text.size();) {
    at = text.find_first_not_of(" \t,", at);
    if (at == std::string_view::npos) break;
    size_t end = std::min(text.find_first_of(" \t,", at), text.size());
    out.push_back(text.substr(at, end - at));
    at = end;
  }
  return out;
}

// Megatron's choice for sample `at`: the part whose count lags its weight
// the most, the first of equals (helpers.cpp, build_blending_indices).
size_t most_lagging(const std::vector<double>& weights, const std::vector<int64_t>& counts, int64_t at) {
  const double position = std::max(static_cast<double>(at), 1.0);
  size_t best = 0;
  double best_error = weights[0] * position - static_cast<double>(counts[0]);
  for (size_t d = 1; d < weights.size(); ++d) {
    double error = weights[d] * position - static_cast<double>(counts[d]);
    if (error > best_error) best_error = error, best = d;
  }
  return best;
}

}  // namespace

std::vector<BlendEntry> parse_blend(std::string_view text, std::string_view key) {
  std::vector<std::string_view> w = words(text);
  if (w.empty()) bad_blend(key, text, "no dataset given");
  if (w.size() == 1) return {{1.0, std::string(w[0])}};
  if (w.size() % 2 != 0) bad_blend(key, text, "weights and prefixes must come in pairs");
  std::vector<BlendEntry> entries;
  double total = 0;
  for (size_t i = 0; i < w.size(); i += 2) {
    double weight = 0;
    auto [end, ec] = std::from_chars(w[i].data(), w[i].data() + w[i].size(), weight);
    if (ec != std::errc() || end != w[i].data() + w[i].size() || !std::isfinite(weight) || weight < 0) {
      // Built piecewise: GCC 12 warns falsely (-Wrestrict) on "'" + std::string.
      std::string what = "'";
      what.append(w[i]).append("' is not a non-negative weight");
      bad_blend(key, text, what);
    }
    // A dataset of weight 0 is left out: Megatron's choice rule could
    // otherwise still pick it on a tie.
    if (weight > 0) entries.push_back({weight, std::string(w[i + 1])});
    total += weight;
  }
  if (total <= 0) bad_blend(key, text, "the weights sum to zero");
  return entries;
}

BlendedSamples::BlendedSamples(std::vector<std::unique_ptr<Samples>> parts, std::vector<double> weights)
    : parts_(std::move(parts)), weights_(std::move(weights)) {
  require(!parts_.empty() && parts_.size() == weights_.size(),
          "BlendedSamples: one weight per part, at least one part", MH_INTERNAL);
  double total = 0;
  for (double w : weights_) total += w;
  for (double& w : weights_) w /= total;
  counts_.emplace_back(parts_.size(), 0);
}

int64_t BlendedSamples::size() const {
  int64_t total = 0;
  for (const auto& part : parts_) total += part->size();
  return total;
}

std::vector<int64_t> BlendedSamples::counts_at_block(int64_t block) const {
  std::lock_guard lock(mu_);
  while (static_cast<int64_t>(counts_.size()) <= block) {
    std::vector<int64_t> counts = counts_.back();
    const int64_t first = (static_cast<int64_t>(counts_.size()) - 1) * kBlock;
    for (int64_t at = first; at < first + kBlock; ++at) ++counts[most_lagging(weights_, counts, at)];
    counts_.push_back(std::move(counts));
  }
  return counts_[static_cast<size_t>(block)];
}

BlendedSamples::Source BlendedSamples::source(int64_t index) const {
  require(index >= 0, "BlendedSamples: negative sample index " + std::to_string(index), MH_INVALID_ARGUMENT);
  if (parts_.size() == 1) return {0, index};
  std::vector<int64_t> counts = counts_at_block(index / kBlock);
  for (int64_t at = index / kBlock * kBlock;; ++at) {
    const size_t d = most_lagging(weights_, counts, at);
    if (at == index) return {d, counts[d]};
    ++counts[d];
  }
}

void BlendedSamples::get(int64_t index, int32_t* out) const {
  const Source s = source(index);
  parts_[s.part]->get(s.index, out);
}

ConcatenatedSamples::ConcatenatedSamples(std::vector<std::unique_ptr<Samples>> parts)
    : parts_(std::move(parts)) {
  for (const auto& part : parts_) size_ += part->size();
}

bool BlendedSamples::masks_loss() const {
  return std::any_of(parts_.begin(), parts_.end(), [](const auto& part) { return part->masks_loss(); });
}

void BlendedSamples::get_loss_mask(int64_t index, const int32_t* tokens, uint8_t* mask) const {
  const Source s = source(index);
  parts_[s.part]->get_loss_mask(s.index, tokens, mask);
}

std::pair<const Samples*, int64_t> ConcatenatedSamples::source(int64_t index) const {
  require(index >= 0, "ConcatenatedSamples: negative sample index " + std::to_string(index), MH_INVALID_ARGUMENT);
  // Past the end it starts over, in the parts' next epochs.
  const int64_t epoch = index / size_;
  int64_t rest = index % size_;
  for (const auto& part : parts_) {
    if (rest < part->size()) return {part.get(), epoch * part->size() + rest};
    rest -= part->size();
  }
  return {};  // unreachable: rest < size_, the parts' sizes added up
}

void ConcatenatedSamples::get(int64_t index, int32_t* out) const {
  const auto [part, at] = source(index);
  part->get(at, out);
}

bool ConcatenatedSamples::masks_loss() const {
  return std::any_of(parts_.begin(), parts_.end(), [](const auto& part) { return part->masks_loss(); });
}

void ConcatenatedSamples::get_loss_mask(int64_t index, const int32_t* tokens, uint8_t* mask) const {
  const auto [part, at] = source(index);
  part->get_loss_mask(at, tokens, mask);
}

}  // namespace mh::data
