// The prompts an inference candidate serves: `batch` lines of `tokens`
// characters each, which the byte tokenizer reads as `tokens` tokens (a
// BPE tokenizer as fewer). The lines differ, so no two requests share a
// prefix, as a server's would not.
#pragma once

#include <cstdint>
#include <filesystem>

namespace mh {

// Writes dir/prompts_b<batch>.txt (again, the same, if it exists) and
// returns its path; with waves > 1, prompts_b<batch>_x<waves>.txt of
// waves * batch lines, which a generate run of that batch serves as
// `waves` batches one after the other (the measured runs' repeats).
std::filesystem::path write_prompts_file(const std::filesystem::path& dir, int64_t batch, int64_t tokens,
                                         int64_t waves = 1);

}  // namespace mh
