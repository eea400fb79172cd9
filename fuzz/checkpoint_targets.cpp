// Checkpoint fuzzing: metadata.json (the index a loader trusts to find every
// tensor) and a safetensors file's header, the two things a checkpoint
// loader reads before any tensor data.
#include <megahost/error.hpp>

#include <cstdlib>
#include <string_view>
#include <vector>

#include "checkpoint/metadata.hpp"
#include "checkpoint/safetensors.hpp"
#include "checkpoint/slice_cover.hpp"
#include "targets.hpp"

namespace mh::fuzz {

void checkpoint_metadata(Input input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  try {
    const ckpt::Metadata m = ckpt::parse_metadata(text, "metadata.json");
    ckpt::parse_metadata(ckpt::to_json(m).dump(), "metadata.json");  // what it writes, it reads
  } catch (const Error&) {
  }
}

void slice_cover(Input input) {
  if (input.size() < 2) return;
  // Shapes up to 16 x 16 keep the brute-force count cheap; offsets and
  // sizes reach a little past them so slices also stick out.
  const std::array<int64_t, 2> shape{input[0] % 17, input[1] % 17};
  std::vector<ckpt::SliceRef> slices;
  for (size_t at = 2; at + 4 <= input.size() && slices.size() < 64; at += 4) {
    const ckpt::Rect r{input[at] % 20, input[at + 1] % 20, input[at + 2] % 20, input[at + 3] % 20};
    if (r.row + r.rows > shape[0] || r.col + r.cols > shape[1]) continue;  // the parser refuses those first
    slices.push_back({"f", "k" + std::to_string(slices.size()), r});
  }
  std::vector<int> count(size_t(shape[0] * shape[1]));
  for (const auto& s : slices)
    for (int64_t i = s.rect.row; i < s.rect.row + s.rect.rows; ++i)
      for (int64_t j = s.rect.col; j < s.rect.col + s.rect.cols; ++j) ++count[size_t(i * shape[1] + j)];
  bool exact = true;
  for (int c : count) exact = exact && c == 1;
  if (exact != ckpt::cover_problem(shape, slices).empty()) std::abort();
}

void safetensors_header(Input input) {
  const auto bytes = std::as_bytes(input);
  try {
    const safetensors::Header h = safetensors::parse_header(bytes, "rank.safetensors");
    // Every range it accepts lies inside the input: touch its first and last byte.
    [[maybe_unused]] static volatile std::byte sink;
    for (const auto& [key, t] : h.tensors)
      if (t.end > t.begin) sink = bytes[size_t(h.data_start + t.begin)] ^ bytes[size_t(h.data_start + t.end - 1)];
  } catch (const Error&) {
  }
}

}  // namespace mh::fuzz
