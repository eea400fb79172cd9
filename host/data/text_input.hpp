// The documents of a text file, as megahost_prepare reads them:
//   file.txt    documents separated by one or more blank lines (lines of
//               spaces, tabs or nothing); a document's lines keep their
//               newlines between them, and a trailing "\r" is dropped
//   file.jsonl  one JSON object per line, a text under each of json_keys;
//               blank lines are skipped
// Reading and parsing are apart so that prepare's workers parse JSON in
// parallel: the reader only cuts lines, parse_document reads a .jsonl line. A
// line that is not such an object (invalid UTF-8, a lone UTF-16 surrogate
// escape, malformed JSON, a missing key) becomes a document with a problem,
// so the caller can stop or skip it and go on.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace mh::data {

struct Document {
  int64_t line = 0;                // where it starts, from 1
  std::string json;                // a .jsonl line, until parse_document
  std::vector<std::string> texts;  // one per json key; a .txt document has one
  std::string problem;             // "path:line: what is wrong"; empty when readable
};

class DocumentReader {
 public:
  // Throws mh::Error when the file cannot be opened or is neither .txt nor .jsonl.
  explicit DocumentReader(const std::string& path);

  // Reads the next document into `document` (for .jsonl its line, to be
  // given to parse_document); false at the end of the file.
  bool next(Document& document);
  int64_t bytes_read() const { return bytes_read_; }

 private:
  bool next_txt(Document& document);
  bool next_jsonl(Document& document);
  bool next_line(std::string& line);

  std::string path_;
  bool jsonl_;
  std::ifstream in_;
  int64_t line_number_ = 0;
  int64_t bytes_read_ = 0;
};

// Fills document.texts with the string under each key of its .jsonl line,
// or document.problem ("path:line: ...") when it has none. Does nothing to a
// .txt document.
void parse_document(Document& document, const std::vector<std::string>& json_keys, const std::string& path);

// The offset of the first byte that breaks UTF-8 (overlong forms,
// surrogates and code points past U+10FFFF included), or -1.
int64_t invalid_utf8_at(std::string_view text);

}  // namespace mh::data
