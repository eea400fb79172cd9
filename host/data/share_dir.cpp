#include "data/share_dir.hpp"

namespace mh {

std::filesystem::path share_dir() {
  namespace fs = std::filesystem;
  // /proc/self/exe is the binary itself with every symlink resolved, so a
  // link to it from elsewhere on PATH still finds its own prefix.
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (error) return fs::path("share") / "megahost";
  return (exe.parent_path().parent_path() / "share" / "megahost").lexically_normal();
}

}  // namespace mh
