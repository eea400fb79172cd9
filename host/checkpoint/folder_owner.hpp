// A checkpoint folder belongs to one run. The run's identity is recorded in
// DIR/megahost_run.json when it first claims the folder, and a run that
// resumes from the folder (checkpoint.load = "auto", or a checkpoint in it)
// carries the identity on; a fresh run into a folder that holds another
// run's checkpoints is refused unless checkpoint.overwrite is set, since it
// would replace their step folders and `latest`, and a later "auto" would
// resume whichever step is newest. While a run may save, its leader holds
// an advisory lock (flock) on DIR/megahost.lock, so two runs never
// interleave their saves. Temporary names in the folder carry the identity
// (.tmp_<run>_..., .trash_<run>_...), so a run cleans up only its own.
#pragma once

#include <optional>
#include <string>

namespace mh::ckpt {

constexpr const char* kOwnerFile = "megahost_run.json";
constexpr const char* kLockFile = "megahost.lock";

// The identity recorded in `dir`, or nullopt when none is (a new folder, or
// one written before identities).
std::optional<std::string> folder_run(const std::string& dir);

// The lock a run's leader holds on its checkpoint folder for as long as the
// run may save there (the process's lifetime: the system releases a flock
// when its holder ends, however it ends).
class FolderLock {
 public:
  // Takes the lock; throws naming the folder and, when known, the process
  // holding it.
  explicit FolderLock(const std::string& dir);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

// The leader, before step 1, holding the folder's lock: decides whether
// this run may save into `dir` and returns its identity. `resume_from` is
// the checkpoint the run loads ("" for none); `auto_load` tells "auto".
// Refuses (mh::Error naming checkpoint.dir, the other run and the choices)
// a fresh run into a folder holding checkpoints; with `overwrite` it takes
// the folder, deleting the other run's checkpoints.
std::string claim_folder(const std::string& dir, const std::string& resume_from, bool auto_load, bool overwrite);

}  // namespace mh::ckpt
