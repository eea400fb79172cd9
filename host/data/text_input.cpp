#include "data/text_input.hpp"

#include <unistd.h>

#include "data/regular_file.hpp"

#include <megahost/error.hpp>
#include <nlohmann/json.hpp>

namespace mh::data {
namespace {

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// The length of the valid UTF-8 character at text[at], or 0.
size_t utf8_character(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return 1;
  size_t length = lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
                  : lead >= 0xF0 && lead <= 0xF4                                    ? 4
                                                                                    : 0;
  if (length == 0 || at + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i)
    if ((byte(at + i) & 0xC0) != 0x80) return 0;
  // The second byte's range rules out overlong forms, surrogates and > U+10FFFF.
  const unsigned char second = byte(at + 1);
  if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) ||
      (lead == 0xF0 && second < 0x90) || (lead == 0xF4 && second > 0x8F)) {
    return 0;
  }
  return length;
}

std::string json_problem(const std::string& parse_error) {
  if (parse_error.find("surrogate") != std::string::npos) {
    return "a \\u escape is a lone UTF-16 surrogate (D800-DFFF without its pair), which is no "
           "character; fix the writer of the file or pass --skip_bad_documents";
  }
  return "not a JSON object (" + parse_error +
         "); a .jsonl file holds one object per line";
}

}  // namespace

int64_t invalid_utf8_at(std::string_view text) {
  for (size_t at = 0; at < text.size();) {
    const size_t length = utf8_character(text, at);
    if (length == 0) return static_cast<int64_t>(at);
    at += length;
  }
  return -1;
}

DocumentReader::DocumentReader(const std::string& path) : path_(path), jsonl_(path.ends_with(".jsonl")) {
  require(jsonl_ || path.ends_with(".txt"),
          "input " + path +
              ": name it .txt (documents separated by blank lines) or .jsonl "
              "(one JSON object per line)");
  // By its type first: a directory opens as a stream that fails on its
  // first read ("error while reading"), a FIFO would wait for a writer.
  ::close(open_regular_file(path, "--input takes a .txt or .jsonl file of documents"));
  in_.open(path, std::ios::binary);
  require(in_.is_open(), "cannot open input " + path, MH_NOT_FOUND);
}

bool DocumentReader::next_line(std::string& line) {
  if (!std::getline(in_, line)) {
    require(!in_.bad(), "error while reading " + path_, MH_UNAVAILABLE);
    return false;
  }
  ++line_number_;
  bytes_read_ += static_cast<int64_t>(line.size()) + 1;
  return true;
}

bool DocumentReader::next(Document& document) {
  document = Document{};
  return jsonl_ ? next_jsonl(document) : next_txt(document);
}

bool DocumentReader::next_txt(Document& document) {
  std::string line, text;
  while (next_line(line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (is_blank(line)) {
      if (text.empty()) continue;
      break;
    }
    if (text.empty()) {
      document.line = line_number_;
    } else {
      text += '\n';
    }
    text += line;
  }
  if (text.empty()) return false;
  document.texts.push_back(std::move(text));
  return true;
}

bool DocumentReader::next_jsonl(Document& document) {
  do {
    if (!next_line(document.json)) return false;
  } while (is_blank(document.json));
  document.line = line_number_;
  return true;
}

void parse_document(Document& document, const std::vector<std::string>& json_keys, const std::string& path) {
  if (document.json.empty()) return;
  const std::string line = std::move(document.json);
  document.json.clear();
  const std::string where = path + ":" + std::to_string(document.line) + ": ";
  if (int64_t bad = invalid_utf8_at(line); bad >= 0) {
    document.problem = where + "not valid UTF-8 at byte " + std::to_string(bad) +
                       " of the line; convert the file to UTF-8 or pass --skip_bad_documents";
    return;
  }
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number past double
    document.problem = where + json_problem(e.what());
    return;
  }
  if (!object.is_object()) {
    document.problem = where + "not a JSON object; a .jsonl file holds one object per line";
    return;
  }
  for (const std::string& key : json_keys) {
    auto it = object.find(key);
    if (it == object.end() || !it->is_string()) {
      document.problem = where + "no string under key \"" + key + "\"; choose the keys with --json_keys";
      return;
    }
    document.texts.push_back(it->get<std::string>());
  }
}

}  // namespace mh::data
