// Loading a checkpoint in one pass over its files. The rectangles wanted
// are queued first; then each file is read once, front to back, in windows
// (safetensors::stream_file): each window is hashed and the parts of the
// queued rectangles in it are copied out while it is in the cache. Cold,
// a load costs one read of the disk; verifying a whole file and then
// copying from it touched its data twice. A file's size is checked before
// it is read, its checksum once it is done: a load that returns copied
// only from files whose whole content matches the index.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/metadata.hpp"

namespace mh::ckpt {

class LoadPass {
 public:
  // `meta` is the checkpoint's metadata (read_metadata(dir)); it must outlive the pass.
  LoadPass(const std::string& dir, const Metadata& meta) : dir_(dir), meta_(meta) {}

  // Queues rectangle `want` of tensor `entry` (named `tensor` in errors)
  // into `out`: want.rows x want.cols floats, row-major, host memory valid
  // until run() returns. Returns the elements of `want` the index's slices
  // cover, known before any file is read.
  int64_t add(const std::string& tensor, const TensorEntry& entry, const Rect& want, float* out);

  // Reads each file a queued rectangle needs once and fills the rectangles.
  // Throws naming the file: its size, its checksum, or a header without the
  // slices the index lists (that one after the whole file is hashed, so
  // damage is reported as a corrupt file, not as the first oddity it
  // causes). After a throw the rectangles hold parts of the checkpoint and
  // must not be used.
  void run();

 private:
  struct Part {
    std::string tensor;
    const SliceRef* slice;
    Rect part, want;  // global coordinates: the part of `want` the slice holds
    float* out;       // `want`'s floats
  };
  class OpenFile;
  void read_file(const OpenFile& file, const FileEntry& expect, const std::vector<Part>& parts) const;

  std::string dir_;
  const Metadata& meta_;
  std::map<std::string, std::vector<Part>> parts_;  // by file, read in name order
};

}  // namespace mh::ckpt
