// Checkpoint fuzzing: metadata.json (the index a loader trusts to find every
// tensor) and a safetensors file's header, the two things a checkpoint
// loader reads before any tensor data.
#include <megahost/error.hpp>

#include <string_view>

#include "checkpoint/metadata.hpp"
#include "checkpoint/safetensors.hpp"
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
