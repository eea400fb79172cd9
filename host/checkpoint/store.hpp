// The checkpoint folder on disk: DIR/step_000000100/ per checkpoint, built
// in DIR/.tmp_step_000000100/ and renamed into place only once every file
// in it is written and synced, then DIR/latest naming it (replaced by
// rename too). A kill at any moment leaves each step_* folder complete or
// absent; temporary folders are never taken for checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/metadata.hpp"
#include "data/mapped_file.hpp"

namespace mh::ckpt {

constexpr const char* kLatestFile = "latest";

std::string step_name(int64_t step);  // "step_000000100"
// DIR/.tmp_<run>_step_...: temporary names carry the run's identity
// (folder_owner.hpp), so a run removes only its own leftovers.
std::string temp_dir(const std::string& dir, int64_t step, const std::string& run);
std::string rank_file(int32_t rank);   // "rank_00003.safetensors"
std::string rank_index(int32_t rank);  // "rank_00003.json": the rank's slices until the commit merges them

// Creates `dir` if needed and checks a file can be made in it; throws
// naming checkpoint.dir and errno.
void check_writable(const std::string& dir);

// Leader, before any rank writes: removes the run's own leftovers of
// interrupted saves (and the untagged names of earlier versions), never
// another name, and creates the step's temporary folder.
void prepare_temp(const std::string& dir, int64_t step, const std::string& run);

// Leader, once every rank wrote its file and index into the temporary
// folder: merges the indexes into metadata.json (with `meta`'s other
// fields), syncs, renames the folder into place, points `latest` at it and
// deletes all but the newest `keep` checkpoints (0 keeps all). Returns the
// metadata as written, index included.
Metadata commit(const std::string& dir, Metadata meta, int32_t world, int64_t keep, const std::string& run);

// Renames a checkpoint folder out of the way (.trash_<run>_step_...) and
// deletes it, so a kill mid-delete leaves no folder that looks like a
// checkpoint with files missing.
void remove_checkpoint(const std::string& path, const std::string& run);

// The complete checkpoints in `dir`, oldest first (folders whose
// metadata.json is there; what is inside is checked when loading).
std::vector<std::string> complete_checkpoints(const std::string& dir);

// The checkpoint `load` names: "auto" is the newest complete one in `dir`
// ("" when there is none: a fresh start); a path is a checkpoint folder or
// a folder of them (its newest). Throws when a path names nothing loadable.
std::string resolve_load(const std::string& load, const std::string& dir);

// Checks a checkpoint file's size and XXH3 against the index (before its
// header is read, so a damaged file is reported as such); throws naming
// the file.
void verify_file(const data::MappedFile& file, const FileEntry& expect);
// The two checks of verify_file, for a reader that hashes as it goes:
// throw naming `path` when the size or the XXH3 differs from the index's.
void check_file_size(const std::string& path, uint64_t bytes, const FileEntry& expect);
void check_file_sum(const std::string& path, uint64_t xxh3, const FileEntry& expect);

// fsync of a folder, so renames inside it are durable.
void sync_dir(const std::string& dir);
// Writes `text` to `path` and fsyncs it.
void write_synced(const std::string& path, const std::string& text);

}  // namespace mh::ckpt
