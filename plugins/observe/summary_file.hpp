// Writes a rank's summary table for the observe plugins: to
// <dir>/<stem>-rank<R>.tsv through a temporary name and a rename (a reader
// never sees half a file), or to the host's log when dir is empty. Uses the
// SDK only.
#pragma once

#include <megahost/plugin.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace mh::observe {

inline void write_summary(const std::string& dir, const std::string& stem, int32_t rank, const std::string& text) {
  if (dir.empty()) {
    mh::log(MH_LOG_INFO, stem + " of rank " + std::to_string(rank) + ":\n" + text);
    return;
  }
  const std::filesystem::path file = std::filesystem::path(dir) / (stem + "-rank" + std::to_string(rank) + ".tsv");
  const std::filesystem::path temp = file.string() + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
    out.close();
    require(bool(out), "cannot write " + temp.string() + " (does the folder exist and may we write there?)",
            MH_INVALID_ARGUMENT);
  }
  std::filesystem::rename(temp, file);
}

}  // namespace mh::observe
