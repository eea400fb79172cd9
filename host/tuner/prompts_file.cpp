#include "tuner/prompts_file.hpp"

#include <megahost/error.hpp>

#include <fstream>
#include <string>

namespace mh {

std::filesystem::path write_prompts_file(const std::filesystem::path& dir, int64_t batch, int64_t tokens,
                                         int64_t waves) {
  const std::filesystem::path file =
      dir / ("prompts_b" + std::to_string(batch) + (waves > 1 ? "_x" + std::to_string(waves) : "") + ".txt");
  std::ofstream out(file);
  for (int64_t line = 0; line < batch * waves; ++line) {
    std::string text(size_t(tokens), ' ');
    // Letters with a space every sixth character, never last (a reader may
    // trim it): text-like, and no character a line break.
    for (int64_t i = 0; i < tokens; ++i)
      if (i % 6 != 5 || i + 1 == tokens) text[size_t(i)] = char('a' + (line * 7 + i * 3) % 26);
    out << text << '\n';
  }
  require(bool(out), "cannot write the tuner's prompts to " + file.string());
  return file;
}

}  // namespace mh
