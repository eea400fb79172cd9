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

namespace mh::ckpt {

constexpr const char* kLatestFile = "latest";

std::string step_name(int64_t step);  // "step_000000100"
std::string temp_dir(const std::string& dir, int64_t step);
std::string rank_file(int32_t rank);   // "rank_00003.safetensors"
std::string rank_index(int32_t rank);  // "rank_00003.json": the rank's slices until the commit merges them

// Creates `dir` if needed and checks a file can be made in it; throws
// naming checkpoint.dir and errno.
void check_writable(const std::string& dir);

// Leader, before any rank writes: removes leftovers of interrupted saves
// and creates the step's temporary folder.
void prepare_temp(const std::string& dir, int64_t step);

// Leader, once every rank wrote its file and index into the temporary
// folder: merges the indexes into metadata.json (with `meta`'s other
// fields), syncs, renames the folder into place, points `latest` at it and
// deletes all but the newest `keep` checkpoints (0 keeps all). Returns the
// metadata as written, index included.
Metadata commit(const std::string& dir, Metadata meta, int32_t world, int64_t keep);

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
void verify_file(const std::string& path, const FileEntry& expect);

// fsync of a folder, so renames inside it are durable.
void sync_dir(const std::string& dir);
// Writes `text` to `path` and fsyncs it.
void write_synced(const std::string& path, const std::string& text);

}  // namespace mh::ckpt
