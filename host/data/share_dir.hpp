// Where megahost's shipped files are: <prefix>/share/megahost, found from the
// running binary's own location (<prefix>/bin/...), so an install works
// wherever its prefix is copied and no source-tree path is compiled in. The
// build tree has the same layout: CMake links build/share/megahost/* to the
// source tree's folders (top-level CMakeLists.txt).
//   configs/   the shipped configs; the embedded default's paths resolve here
//   hardware/  the tuner's hardware profiles
//   data/      the corpus and GPT-2's vocabulary (data/gpt2)
//   examples/  the out-of-tree plugin example
#pragma once
#include <filesystem>

namespace mh {

std::filesystem::path share_dir();

}  // namespace mh
