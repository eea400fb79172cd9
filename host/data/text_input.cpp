#include "data/text_input.hpp"

#include <megahost/error.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

namespace mh::data {
namespace {

using OnDocument = std::function<void(std::string_view)>;

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

// Runs on_document, naming where the document started in what it throws.
void deliver(const std::string& path, int line, std::string_view text,
             const OnDocument& on_document) {
  try {
    on_document(text);
  } catch (const Error& e) {
    throw Error(e.code(), path + ":" + std::to_string(line) + ": " + e.what());
  }
}

void read_txt(const std::string& path, std::ifstream& in, const OnDocument& on_document) {
  std::string line, document;
  int first_line = 0;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (is_blank(line)) {
      if (!document.empty()) deliver(path, first_line, document, on_document);
      document.clear();
      continue;
    }
    if (document.empty()) {
      first_line = number;
    } else {
      document += '\n';
    }
    document += line;
  }
  if (!document.empty()) deliver(path, first_line, document, on_document);
}

std::string json_text(const std::string& path, int number, const std::string& line,
                      const std::string& json_key) {
  const std::string where = path + ":" + std::to_string(number) + ": ";
  nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  require(object.is_object(), where + "not a JSON object; a .jsonl file holds one object per line");
  auto it = object.find(json_key);
  require(it != object.end() && it->is_string(),
          where + "no string under key \"" + json_key + "\"; choose the key with --json_key");
  return it->get<std::string>();
}

void read_jsonl(const std::string& path, std::ifstream& in, const std::string& json_key,
                const OnDocument& on_document) {
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (is_blank(line) || line == "\r") continue;
    std::string text = json_text(path, number, line, json_key);
    if (!text.empty()) deliver(path, number, text, on_document);
  }
}

}  // namespace

void for_each_document(const std::string& path, const std::string& json_key,
                       const OnDocument& on_document) {
  const bool jsonl = path.ends_with(".jsonl");
  require(jsonl || path.ends_with(".txt"),
          "input " + path +
              ": name it .txt (documents separated by blank lines) or .jsonl "
              "(one JSON object per line)");
  std::ifstream in(path, std::ios::binary);
  require(in.is_open(), "cannot open input " + path, MH_NOT_FOUND);
  if (jsonl) {
    read_jsonl(path, in, json_key, on_document);
  } else {
    read_txt(path, in, on_document);
  }
  require(!in.bad(), "error while reading " + path, MH_UNAVAILABLE);
}

}  // namespace mh::data
