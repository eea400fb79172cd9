#include "config/config.hpp"

#include <functional>

#include <megahost/error.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "checkpoint/model_keys.hpp"
#include "checkpoint/store.hpp"
#include "convert/hf_config.hpp"
#include "convert/hf_folder.hpp"
#include "embedded_default_config.hpp"
#include "config/model_preset.hpp"
#include "config/toml_nesting.hpp"
#include "data/share_dir.hpp"

namespace mh {
namespace fs = std::filesystem;
namespace {

std::vector<std::string> split_dotted(const std::string& key) {
  std::vector<std::string> parts;
  std::stringstream in(key);
  std::string part;
  while (std::getline(in, part, '.')) parts.push_back(part);
  return parts;
}

// A value as TOML would read it ("4", "true", "\"x\"", "1e-3"); anything
// that does not parse is taken as a bare string, so `data.tokenizer=byte`
// needs no quotes.
toml::node_view<toml::node> parsed_value(const std::string& text, toml::table& holder) {
  if (first_nesting_beyond(text, kMaxTomlNesting)) {
    holder = toml::table{{"v", text}};
    return holder["v"];
  }
  try {
    holder = toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
    holder = toml::table{{"v", text}};
  }
  return holder["v"];
}

// The host keys that name files or folders. One rule for all (docs/config.md,
// "Paths"): a relative path written in a config file resolves against that
// file's folder (Config::resolve), one given on the command line against the
// working directory, so an override is made absolute as it is applied.
enum class PathKind { kPath, kWeightedList, kPathOrAuto, kProfileFile };
const std::map<std::string, PathKind, std::less<>> kPathKeys = {
    {"data.path", PathKind::kPath},
    {"data.paths", PathKind::kWeightedList},
    {"data.train_paths", PathKind::kWeightedList},
    {"data.valid_paths", PathKind::kWeightedList},
    {"data.test_paths", PathKind::kWeightedList},
    {"data.vocab_file", PathKind::kPath},
    {"data.merges_file", PathKind::kPath},
    {"data.tokenizer_file", PathKind::kPath},
    {"output.metrics", PathKind::kPath},
    {"output.tensorboard_dir", PathKind::kPath},
    {"output.dir", PathKind::kPath},
    {"checkpoint.dir", PathKind::kPath},
    {"checkpoint.load", PathKind::kPathOrAuto},
    {"generate.prompts_file", PathKind::kPath},
    {"peft.base", PathKind::kPath},
    {"serve.chat_template", PathKind::kPath},
    {"tuner.cluster", PathKind::kProfileFile},
};

std::string absolute(const std::string& path, const fs::path& base) {
  return path.empty() || fs::path(path).is_absolute() ? path : (base / path).string();
}

// "0.3 a 0.7 b" or "a" (data::parse_blend's forms): the weights stay, every
// prefix becomes absolute. A malformed list is left for the parser to report.
std::string absolute_weighted_list(const std::string& list, const fs::path& base) {
  std::istringstream in(list);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  if (words.size() == 1) return absolute(words[0], base);
  std::string out;
  for (size_t i = 0; i < words.size(); ++i)
    out += (i == 0 ? "" : " ") + (i % 2 == 1 ? absolute(words[i], base) : words[i]);
  return out;
}

// `value` of `key` with its relative paths made absolute against `base`, if
// `key` is a path key; anything else as it is.
std::string absolute_paths_of(const std::string& key, const std::string& value, const fs::path& base) {
  auto it = kPathKeys.find(key);
  if (it == kPathKeys.end()) return value;
  switch (it->second) {
    case PathKind::kPath: return absolute(value, base);
    case PathKind::kWeightedList: return absolute_weighted_list(value, base);
    case PathKind::kPathOrAuto: return value == "auto" ? value : absolute(value, base);
    case PathKind::kProfileFile: return fs::path(value).extension() == ".toml" ? absolute(value, base) : value;
  }
  return value;
}

void apply_override(toml::table& root, const std::string& item, Diagnostics& diag) {
  auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0) {
    diag.error("command line", "override '" + item + "' is not of the form section.key=value");
    return;
  }
  std::vector<std::string> path = split_dotted(item.substr(0, eq));
  if (path.size() > kMaxTomlNesting) {
    diag.error("command line", "override '" + item.substr(0, 40) + "...': a key of " + std::to_string(path.size()) +
                                   " dotted parts; a run config's keys have a few");
    return;
  }
  toml::table* table = &root;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    toml::node* next = table->get(path[i]);
    if (next == nullptr) next = table->insert(path[i], toml::table{}).first->second.as_table();
    if (!next->is_table()) {
      diag.error("command line", "override '" + item + "': '" + path[i] + "' is not a section");
      return;
    }
    table = next->as_table();
  }
  toml::table holder;
  auto value = parsed_value(item.substr(eq + 1), holder);
  if (value.is_string()) {
    std::string key;
    for (const auto& part : path) key += (key.empty() ? "" : ".") + part;
    table->insert_or_assign(path.back(), absolute_paths_of(key, *value.value<std::string>(), fs::current_path()));
    return;
  }
  table->insert_or_assign(path.back(), *value.node());
}

std::string type_name(int32_t type) {
  switch (type) {
    case MH_VALUE_BOOL: return "a boolean";
    case MH_VALUE_INT: return "an integer";
    case MH_VALUE_DOUBLE: return "a number";
    default: return "a string";
  }
}

bool has_type(const toml::node& node, int32_t type) {
  switch (type) {
    case MH_VALUE_BOOL: return node.is_boolean();
    case MH_VALUE_INT: return node.is_integer();
    case MH_VALUE_DOUBLE: return node.is_number();
    default: return node.is_string();
  }
}

std::vector<std::string> split_choices(const char* choices) {
  std::vector<std::string> out;
  std::stringstream in(choices);
  std::string c;
  while (std::getline(in, c, '|')) out.push_back(c);
  return out;
}

std::string format_number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// Returns "" when the value satisfies the spec's range and choices.
std::string value_problem(const MH_OptionSpec& spec, const toml::node& node) {
  if (spec.type == MH_VALUE_INT || spec.type == MH_VALUE_DOUBLE) {
    double v = node.is_integer() ? double(*node.value<int64_t>()) : *node.value<double>();
    // NaN passes every comparison and infinity every lower bound.
    if (!std::isfinite(v)) return "must be a finite number, got " + format_number(v);
    if ((spec.flags & MH_OPTION_HAS_MIN) && v < spec.min)
      return "must be >= " + format_number(spec.min) + ", got " + format_number(v);
    if ((spec.flags & MH_OPTION_HAS_MAX) && v > spec.max)
      return "must be <= " + format_number(spec.max) + ", got " + format_number(v);
  }
  if (spec.type == MH_VALUE_STRING && spec.choices != nullptr) {
    std::string v = *node.value<std::string>();
    std::vector<std::string> choices = split_choices(spec.choices);
    for (const auto& c : choices)
      if (c == v) return "";
    std::string hint = did_you_mean(v, choices);
    return "'" + v + "' is not one of " + std::string(spec.choices) + (hint.empty() ? "" : "; " + hint);
  }
  return "";
}

std::vector<std::string> known_keys(std::span<const MH_OptionSpec> specs, const std::vector<std::string>& extra) {
  std::vector<std::string> keys = extra;
  for (const auto& s : specs) keys.emplace_back(s.name);
  return keys;
}

// What kind of file system object a path is, for a message that says why it
// cannot be read as a config.
std::string not_regular(fs::file_type type) {
  switch (type) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO (reading it could wait forever)";
    case fs::file_type::character:
    case fs::file_type::block: return "a device";
    case fs::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

// The config's text. Only a regular file is read: a directory or a device
// would read as empty or endless TOML and train on defaults, a FIFO hangs.
std::optional<std::string> read_config_file(const std::string& path, Diagnostics& diag) {
  const std::string fix = "; --config takes a TOML file";
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    diag.error(path, std::string("cannot read the config: ") + std::strerror(errno) + fix);
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    diag.error(path, "the config is " + not_regular(fs::status(path).type()) + fix);
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    diag.error(path, std::string("cannot read the config: ") + std::strerror(errno) + fix);
    return std::nullopt;
  }
  return text.str();
}

}  // namespace

std::optional<Config> Config::load(const std::string& path, const std::vector<std::string>& overrides,
                                   Diagnostics& diag) {
  Config config;
  std::string text = kEmbeddedDefaultConfig;
  config.file_ = "<embedded default config>";
  // The embedded default resolves its paths as if it were the shipped configs/default.toml.
  config.base_dir_ = share_dir() / "configs";
  config.embedded_ = path.empty();
  if (!path.empty()) {
    config.file_ = path;
    config.base_dir_ = fs::absolute(path).parent_path();
    std::optional<std::string> read = read_config_file(path, diag);
    if (!read) return std::nullopt;
    text = std::move(*read);
  }
  if (auto at = first_nesting_beyond(text, kMaxTomlNesting)) {
    diag.error(config.file_ + ":" + std::to_string(at->line) + ":" + std::to_string(at->column),
               "nested more than " + std::to_string(kMaxTomlNesting) +
                   " levels deep (tables, arrays, dotted-key parts); a run config needs a few");
    return std::nullopt;
  }
  try {
    config.root_ = toml::parse(text, config.file_);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    std::string where = config.file_ + (at.line > 0 ? ":" + std::to_string(at.line) + ":" + std::to_string(at.column) : "");
    diag.error(where, "malformed TOML: " + std::string(e.description()));
    return std::nullopt;
  }
  for (const auto& item : overrides) apply_override(config.root_, item, diag);
  // The saved model's keys first: they are as set as the user's.
  config.merge_saved_model(diag);
  apply_arch_preset(config.root_);
  return config;
}

namespace {

void insert_value(toml::table& table, const std::string& key, const nlohmann::json& v) {
  if (v.is_boolean()) table.insert_or_assign(key, v.get<bool>());
  else if (v.is_number_integer()) table.insert_or_assign(key, v.get<int64_t>());
  else if (v.is_number()) table.insert_or_assign(key, v.get<double>());
  else table.insert_or_assign(key, v.get<std::string>());
}

// Whether the user's value says what the saved model says, under the key's
// rule. Numbers that are not integers compare as the float the engine
// computes with: 1e-5 agrees with a recorded 9.999999747378752e-06.
bool agrees(const toml::node& node, const ckpt::ModelKey& k, const Config& config) {
  const nlohmann::json& v = k.value;
  if (v.is_boolean()) return node.is_boolean() && *node.value<bool>() == v.get<bool>();
  if (v.is_string() && k.path)
    return node.is_string() && config.resolve(*node.value<std::string>()).lexically_normal() ==
                                   fs::path(v.get<std::string>()).lexically_normal();
  if (v.is_string()) return node.is_string() && *node.value<std::string>() == v.get<std::string>();
  if (!node.is_number()) return false;
  if (k.zero_means_this && node.is_integer() && *node.value<int64_t>() == 0) return true;
  if (node.is_integer() && v.is_number_integer()) {
    const int64_t mine = *node.value<int64_t>(), theirs = v.get<int64_t>();
    return k.rule == ckpt::ModelKey::kAtMost ? mine <= theirs : mine == theirs;
  }
  const double mine = node.is_integer() ? double(*node.value<int64_t>()) : *node.value<double>();
  if (k.rule == ckpt::ModelKey::kAtMost) return mine <= v.get<double>();
  return float(mine) == float(v.get<double>());
}

// A value as the user wrote it: numbers in their shortest round-trip form
// (1e-06, not 9.9999999999999995e-07), strings quoted as JSON quotes them.
std::string node_text(const toml::node& node) {
  if (node.is_floating_point()) return nlohmann::json(*node.value<double>()).dump();
  if (node.is_string()) return nlohmann::json(*node.value<std::string>()).dump();
  std::ostringstream out;
  out << toml::node_view<const toml::node>(&node);
  return out.str();
}

toml::table* section_table(toml::table& root, const std::string& name) {
  toml::node* section = root.get(name);
  if (section == nullptr) section = root.insert(name, toml::table{}).first->second.as_table();
  return section->as_table();  // NULL when not a table: validating the section reports it
}

}  // namespace

// The model comes from checkpoint.load, or for a run that starts LoRA
// adapters from nothing, from the base they adapt (peft.base).
std::optional<Config::SavedModel> Config::saved_model(Diagnostics& diag) const {
  const char* key = "checkpoint.load";
  const toml::node* load = root_.at_path(key).node();
  const toml::node* base = root_.at_path("peft.base").node();
  if ((load == nullptr || (load->is_string() && load->value<std::string>()->empty())) && base != nullptr)
    load = base, key = "peft.base";
  if (load == nullptr || !load->is_string()) return std::nullopt;
  const std::string value = *load->value<std::string>();
  if (value.empty()) return std::nullopt;
  const toml::node* dir = root_.at_path("checkpoint.dir").node();
  const std::string folder = dir != nullptr && dir->is_string() && !dir->value<std::string>()->empty()
                                 ? resolve(*dir->value<std::string>()).string()
                                 : "";
  try {
    if (value != "auto" && convert::is_hf_folder(resolve(value).string())) {
      const std::string hf = resolve(value).string();
      std::vector<ckpt::ModelKey> keys = convert::model_keys(convert::read_hf_config(hf));
      // The folder's tokenizer and its file come as a pair, or not at all
      // where the user named a tokenizer.
      const toml::node* tokenizer = root_.at_path("data.tokenizer").node();
      if (tokenizer == nullptr || (embedded_ && tokenizer->source().begin.line > 0)) {
        for (ckpt::ModelKey& k : convert::sentencepiece_tokenizer_keys(hf)) keys.push_back(std::move(k));
      }
      return SavedModel{hf + "/" + convert::kConfigFile, keys};
    }
    // A folder that holds no checkpoint yet, or none at all, is the run's to report.
    std::error_code ec;
    const std::string path = value == "auto" ? folder : resolve(value).string();
    if (path.empty() || !fs::exists(path, ec)) return std::nullopt;
    const std::string checkpoint = ckpt::resolve_load(value == "auto" ? "auto" : path, folder);
    if (checkpoint.empty()) return std::nullopt;
    try {
      return SavedModel{checkpoint + "/" + ckpt::kMetadataFile, ckpt::model_keys(ckpt::read_metadata(checkpoint))};
    } catch (const Error&) {
      return std::nullopt;  // a damaged checkpoint fails the load, which names what is wrong with it
    }
  } catch (const Error& e) {
    diag.error(where(*load), key + (": " + std::string(e.what())));
    return std::nullopt;
  }
}

void Config::merge_saved_model(Diagnostics& diag) {
  const std::optional<SavedModel> saved = saved_model(diag);
  if (!saved) return;
  for (const ckpt::ModelKey& k : saved->keys) {
    toml::table* section = section_table(root_, k.section);
    if (section == nullptr) continue;
    const toml::node* mine = section->get(k.key);
    // The embedded default's own model is no choice of the user's.
    if (mine == nullptr || (embedded_ && mine->source().begin.line > 0)) {
      insert_value(*section, k.key, k.value);
      continue;
    }
    if (k.rule == ckpt::ModelKey::kDefault || agrees(*mine, k, *this)) continue;
    diag.error(where(*mine), k.section + "." + k.key + " = " + node_text(*mine) + " but " + saved->file + " has " +
                                 k.field + " = " + k.field_value.dump() +
                                 (k.rule == ckpt::ModelKey::kAtMost ? " (at most that)" : "") + "; remove " + k.section +
                                 "." + k.key + " to take the model's value");
  }
}

std::string Config::where(const toml::node& node) const {
  const auto& at = node.source().begin;
  if (at.line == 0) return "command line";
  return file_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column);
}

std::string Config::where(const toml::table* section) const {
  return section != nullptr ? where(*section) : file_;
}

fs::path Config::resolve(const std::string& path) const {
  fs::path p(path);
  return p.is_absolute() ? p : base_dir_ / p;
}

std::string Config::resolve_key(const std::string& key, const std::string& value) const {
  return absolute_paths_of(key, value, base_dir_);
}

const char* OptionValues::keep(std::string text) {
  strings_.push_back(std::move(text));
  return strings_.back().c_str();
}

void OptionValues::add(const MH_OptionSpec& spec, const toml::node& node) {
  MH_NamedValue v{};
  v.name = keep(spec.name);
  v.type = spec.type;
  switch (spec.type) {
    case MH_VALUE_BOOL: v.value.b = *node.value<bool>() ? 1 : 0; break;
    case MH_VALUE_INT: v.value.i = *node.value<int64_t>(); break;
    case MH_VALUE_DOUBLE: v.value.d = *node.value<double>(); break;
    default: v.value.s = keep(*node.value<std::string>()); break;
  }
  values_.push_back(v);
  raw_.values = values_.data();
  raw_.count = values_.size();
}

void OptionValues::set_section(std::string section) {
  section_ = std::move(section);
  raw_.section = keep(section_);
}

const MH_Options* OptionValues::view() const { return &raw_; }

std::string default_problem(const MH_OptionSpec& spec) {
  if (spec.default_value == nullptr) return "";
  const std::string text = spec.default_value, quoted = "default '" + text + "' ";
  toml::table holder;
  if (first_nesting_beyond(text, kMaxTomlNesting)) return quoted + "nests too deep to be an option's value";
  try {
    holder = toml::parse("v = " + text);
  } catch (const toml::parse_error& e) {
    return quoted + "is not a TOML value (" + std::string(e.description()) + ")";
  }
  if (holder.size() != 1) return quoted + "is more than one TOML value";
  if (!has_type(*holder.get("v"), spec.type)) return quoted + "is not " + type_name(spec.type);
  std::string problem = value_problem(spec, *holder.get("v"));
  return problem.empty() ? "" : "default '" + text + "': " + problem;
}

const toml::table* find_table(const toml::table& root, const std::string& dotted) {
  const toml::table* table = &root;
  for (const auto& part : split_dotted(dotted)) {
    const toml::node* next = table->get(part);
    if (next == nullptr || !next->is_table()) return nullptr;
    table = next->as_table();
  }
  return table;
}

namespace {

// A number or boolean where text is expected is most often a list of one
// (tuner.tensor = 2): say how to write it.
std::string wrong_type(const std::string& key, const MH_OptionSpec& spec, const toml::node& node) {
  std::string out = "'" + key + "' must be " + type_name(spec.type);
  if (spec.type == MH_VALUE_STRING && (node.is_number() || node.is_boolean())) {
    std::ostringstream value;
    value << toml::node_view<const toml::node>(&node);
    out += "; quote it: " + key + " = \"" + value.str() + "\"";
  }
  return out;
}

}  // namespace

OptionValues validate_section(const Config& config, const toml::table* section, const std::string& name,
                              std::span<const MH_OptionSpec> specs, const std::vector<std::string>& extra_keys,
                              Diagnostics& diag) {
  const auto where = [&](const toml::node* node) {
    return node == section ? config.where(section) : config.where(*node);
  };
  return validate_table(where, section, name, specs, extra_keys, diag);
}

OptionValues validate_table(const std::function<std::string(const toml::node*)>& where, const toml::table* section,
                            const std::string& name, std::span<const MH_OptionSpec> specs,
                            const std::vector<std::string>& extra_keys, Diagnostics& diag) {
  OptionValues values;
  values.set_section(name);
  if (section != nullptr) {
    std::vector<std::string> keys = known_keys(specs, extra_keys);
    for (const auto& [key, node] : *section) {
      if (std::find(keys.begin(), keys.end(), key.str()) != keys.end()) continue;
      std::string hint = did_you_mean(key.str(), keys);
      diag.error(where(&node), "unknown key '" + name + "." + std::string(key.str()) + "'" +
                                         (hint.empty() ? "" : "; " + hint));
    }
  }
  for (const auto& spec : specs) {
    const toml::node* node = section != nullptr ? section->get(spec.name) : nullptr;
    std::string key = name + "." + spec.name;
    toml::table holder;
    if (node == nullptr) {
      if (spec.default_value == nullptr) {
        diag.error(where(section), "missing required key '" + key + "' (" + (spec.doc ? spec.doc : "") + ")");
        continue;
      }
      holder = toml::parse(std::string("v = ") + spec.default_value);
      node = holder.get("v");
    } else if (!has_type(*node, spec.type)) {
      diag.error(where(node), wrong_type(key, spec, *node));
      continue;
    } else if (std::string problem = value_problem(spec, *node); !problem.empty()) {
      diag.error(where(node), "'" + key + "' " + problem);
      continue;
    }
    if (spec.type == MH_VALUE_DOUBLE && node->is_integer()) {
      holder = toml::table{{"v", double(*node->value<int64_t>())}};
      node = holder.get("v");
    }
    values.add(spec, *node);
  }
  return values;
}

}  // namespace mh
