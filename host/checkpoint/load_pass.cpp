#include "checkpoint/load_pass.hpp"

#include <megahost/error.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <span>

#include "checkpoint/safetensors.hpp"
#include "checkpoint/store.hpp"
#include "data/regular_file.hpp"

namespace mh::ckpt {
namespace {

// File bytes [at, at + bytes) go to `dst`.
struct Copy {
  uint64_t at, bytes;
  std::byte* dst;
};

// The byte ranges of `part` in a file whose header is `h`: one per row, or
// one for all rows when both the slice's rows and `want`'s are exactly the
// part's (a resume on its own layout, a row split).
void add_copies(const safetensors::Header& h, const std::string& path, const std::string& tensor, const SliceRef& s,
                const Rect& part, const Rect& want, float* out, std::vector<Copy>& copies) {
  const auto it = h.tensors.find(s.key);
  require(it != h.tensors.end(), path + ": no tensor '" + s.key + "' in the file, though the index lists it there",
          MH_NOT_FOUND);
  const safetensors::TensorInfo& info = it->second;
  require(info.dtype == "F32" && info.shape == std::vector<int64_t>{s.rect.rows, s.rect.cols},
          path + ": tensor '" + s.key + "' is not the F32 [" + std::to_string(s.rect.rows) + ", " +
              std::to_string(s.rect.cols) + "] slice of '" + tensor + "' the index describes");
  const uint64_t base = h.data_start + info.begin;
  auto src = [&](int64_t row) {
    return base + uint64_t((row - s.rect.row) * s.rect.cols + (part.col - s.rect.col)) * sizeof(float);
  };
  auto dst = [&](int64_t row) {
    return reinterpret_cast<std::byte*>(out + (row - want.row) * want.cols + (part.col - want.col));
  };
  if (part.cols == s.rect.cols && part.cols == want.cols) {
    copies.push_back({src(part.row), uint64_t(part.numel()) * sizeof(float), dst(part.row)});
    return;
  }
  for (int64_t r = part.row; r < part.row + part.rows; ++r)
    copies.push_back({src(r), uint64_t(part.cols) * sizeof(float), dst(r)});
}

// Copies what of `copies` (sorted by offset, from `first` on) lies in the
// window at `at`; returns the first copy not finished by its end.
size_t copy_window(const std::vector<Copy>& copies, size_t first, uint64_t at, std::span<const std::byte> window) {
  const uint64_t end = at + window.size();
  for (size_t i = first; i < copies.size() && copies[i].at < end; ++i) {
    const Copy& c = copies[i];
    const uint64_t lo = std::max(c.at, at), hi = std::min(c.at + c.bytes, end);
    if (lo < hi) std::memcpy(c.dst + (lo - c.at), window.data() + (lo - at), hi - lo);
  }
  while (first < copies.size() && copies[first].at + copies[first].bytes <= end) ++first;
  return first;
}

}  // namespace

int64_t LoadPass::add(const std::string& tensor, const TensorEntry& entry, const Rect& want, float* out) {
  int64_t covered = 0;
  for (const SliceRef& s : entry.slices) {
    Rect part;
    if (!intersect(s.rect, want, part)) continue;
    parts_[s.file].push_back(Part{tensor, &s, part, want, out});
    covered += part.numel();
  }
  return covered;
}

// A file of the checkpoint, open for reading, its size checked.
class LoadPass::OpenFile {
 public:
  OpenFile(const std::string& path, const FileEntry& expect)
      : path_(path), fd_(data::open_regular_file(path, "the checkpoint is incomplete; load an earlier one")) {
    struct stat st {};
    require(::fstat(fd_, &st) == 0, "cannot read " + path + ": " + std::strerror(errno), MH_UNAVAILABLE);
    check_file_size(path, uint64_t(st.st_size), expect);
  }
  ~OpenFile() { ::close(fd_); }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  std::string path_;
  int fd_;
};

void LoadPass::run() {
  // Every file is opened and its size checked before any is read: a missing
  // or truncated file fails the load with nothing copied.
  std::vector<std::unique_ptr<OpenFile>> files;
  for (const auto& [name, parts] : parts_) files.push_back(std::make_unique<OpenFile>(dir_ + "/" + name, meta_.files.at(name)));
  size_t i = 0;
  for (const auto& [name, parts] : parts_) read_file(*files[i++], meta_.files.at(name), parts);
}

void LoadPass::read_file(const OpenFile& file, const FileEntry& expect, const std::vector<Part>& parts) const {
  const std::string& path = file.path();
  // A header the index does not agree with is reported once the file is
  // hashed: a corrupt file is named as such. Until then nothing is copied.
  std::vector<Copy> copies;
  std::exception_ptr unusable;
  try {
    const safetensors::Header h = safetensors::read_header(file.fd(), expect.bytes, path);
    for (const Part& p : parts) add_copies(h, path, p.tensor, *p.slice, p.part, p.want, p.out, copies);
    std::sort(copies.begin(), copies.end(), [](const Copy& a, const Copy& b) { return a.at < b.at; });
  } catch (const Error&) {
    unusable = std::current_exception();
    copies.clear();
  }
  size_t first = 0;
  const uint64_t sum = safetensors::stream_file(file.fd(), expect.bytes, path, [&](uint64_t at, std::span<const std::byte> window) {
    first = copy_window(copies, first, at, window);
  });
  check_file_sum(path, sum, expect);
  if (unusable) std::rethrow_exception(unusable);
}

}  // namespace mh::ckpt
