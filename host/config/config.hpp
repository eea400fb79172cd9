// The run's TOML: loading (a file or the embedded default), command-line
// overrides (`key.path=value`), and validation of a section against a list
// of MH_OptionSpec — the same mechanism for the host's own sections and for
// every plugin's options.
#pragma once

#include <megahost/abi.h>
#include <megahost/options.hpp>

#include <deque>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "checkpoint/model_keys.hpp"
#include "config/diagnostics.hpp"

namespace mh {

class Config {
 public:
  // Parses `path` (or the embedded default when empty) and applies
  // `overrides`; nullopt when the TOML itself is malformed (reported in diag).
  static std::optional<Config> load(const std::string& path, const std::vector<std::string>& overrides,
                                    Diagnostics& diag);

  const toml::table& root() const { return root_; }
  // Replaces a top-level section, e.g. the kernels for a dry run.
  void replace_section(const std::string& name, toml::table section) { root_.insert_or_assign(name, std::move(section)); }
  const std::string& file() const { return file_; }
  // "file:line:col" of a node, or "command line" for an override.
  std::string where(const toml::node& node) const;
  std::string where(const toml::table* section) const;
  // A relative path from the config resolved against the config's folder.
  // Overrides are absolute by then: the command line's paths resolve against
  // the working directory (docs/config.md, "Paths").
  std::filesystem::path resolve(const std::string& path) const;
  // resolve(), keeping "" (unset) as it is.
  std::string resolve_if_set(const std::string& path) const { return path.empty() ? path : resolve(path).string(); }
  // The value of `key` ("data.paths") with its relative paths resolved, if
  // it is a path key (docs/config.md, "Paths"): a weighted list keeps its
  // weights, checkpoint.load keeps "auto", tuner.cluster a profile's name.
  // For a config written elsewhere (the tuner's candidates).
  std::string resolve_key(const std::string& key, const std::string& value) const;

 private:
  // The model checkpoint.load names: a Hugging Face folder's config.json,
  // or a Megahost checkpoint's metadata.json (also through "auto").
  struct SavedModel {
    std::string file;
    std::vector<ckpt::ModelKey> keys;
  };
  std::optional<SavedModel> saved_model(Diagnostics& diag) const;
  // [model] (and the tokenizer in [data]) take the keys the saved model
  // fixes; a key the user set that contradicts one is an error.
  void merge_saved_model(Diagnostics& diag);

  std::string file_;
  bool embedded_ = false;  // the embedded default config, not the user's file
  std::filesystem::path base_dir_;
  toml::table root_;
};

// Owns the values behind an MH_Options view of one validated section.
class OptionValues {
 public:
  OptionValues() = default;
  OptionValues(OptionValues&&) = default;
  OptionValues& operator=(OptionValues&&) = default;

  void add(const MH_OptionSpec& spec, const toml::node& value);
  const MH_Options* view() const;
  Options options() const { return Options(view()); }
  const std::string& section() const { return section_; }
  void set_section(std::string section);

 private:
  const char* keep(std::string text);

  std::string section_;
  std::vector<MH_NamedValue> values_;
  std::deque<std::string> strings_;  // deque: element addresses survive growth and moves
  // Kept current by every change, so that view() writes nothing: rank threads
  // read one assembly's options at once. It points only into values_'s and
  // strings_'s heap storage, which a move hands over unchanged.
  MH_Options raw_{MH_STRUCT_SIZE(MH_Options, section), nullptr, 0, ""};
};

// Validates `section` (may be NULL: every option takes its default) against
// `specs`; `extra_keys` are keys the host handles itself (e.g. "plugin").
// Problems go to diag with file:line:col; the result holds every spec'd
// option, defaults filled in.
OptionValues validate_section(const Config& config, const toml::table* section, const std::string& name,
                              std::span<const MH_OptionSpec> specs, const std::vector<std::string>& extra_keys,
                              Diagnostics& diag);

// validate_section for a table that is not the run's config (the options a
// plugin forwards to a component it creates): `where` names a node (the
// table itself for a missing key) in messages.
OptionValues validate_table(const std::function<std::string(const toml::node*)>& where, const toml::table* section,
                            const std::string& name, std::span<const MH_OptionSpec> specs,
                            const std::vector<std::string>& extra_keys, Diagnostics& diag);

// What is wrong with a spec's default -- not one TOML value, or not of the
// spec's type, range or choices -- as "default '...' ..."; "" when it is sound
// or there is none. Every section without the key would take that default.
std::string default_problem(const MH_OptionSpec& spec);

// The table at a dotted path ("parallel.tensor"), or NULL.
const toml::table* find_table(const toml::table& root, const std::string& dotted);

}  // namespace mh
