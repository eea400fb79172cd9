// Checkpoint fuzzing: metadata.json (the index a loader trusts to find every
// tensor), a safetensors file's header, the two things a checkpoint loader
// reads before any tensor data, and a rank file loaded in one pass.
#include <megahost/error.hpp>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "checkpoint/load_pass.hpp"
#include "checkpoint/metadata.hpp"
#include "checkpoint/safetensors.hpp"
#include "checkpoint/slice_cover.hpp"
#include "checkpoint/tensor_reader.hpp"
#include "scratch.hpp"
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

void checkpoint_rank_file(Input input) {
  const std::string path = scratch_file("rank_00000.safetensors", as_text(input));
  const std::string dir = path.substr(0, path.rfind('/'));
  // The index holds the file's true size and hash, so the load reaches the
  // header and the copies: tensor "t" [4, 6] as two row slices.
  ckpt::Metadata meta;
  meta.files["rank_00000.safetensors"] = {input.size(), safetensors::hex(safetensors::checksum(std::as_bytes(input)))};
  meta.tensors["t"] = ckpt::TensorEntry{{4, 6}, "F32", {{"rank_00000.safetensors", "t:0,0", {0, 0, 2, 6}},
                                                        {"rank_00000.safetensors", "t:2,0", {2, 0, 2, 6}}}};
  const ckpt::TensorEntry& t = meta.tensors.at("t");
  const std::vector<ckpt::Rect> wants = {{0, 0, 4, 6}, {0, 3, 4, 3}, {1, 1, 2, 4}};
  std::vector<std::vector<float>> got;
  ckpt::LoadPass pass(dir, meta);
  for (const ckpt::Rect& want : wants) {
    got.emplace_back(size_t(want.numel()));
    pass.add("t", t, want, got.back().data());
  }
  try {
    pass.run();
  } catch (const Error&) {
    return;
  }
  // What it loads, the random-access reader reads too, bit for bit.
  ckpt::TensorReader reader(dir, meta);
  for (size_t i = 0; i < wants.size(); ++i) {
    std::vector<float> old(got[i].size());
    reader.read("t", t, wants[i], old.data());
    if (std::memcmp(old.data(), got[i].data(), old.size() * sizeof(float)) != 0) std::abort();
  }
}

}  // namespace mh::fuzz
