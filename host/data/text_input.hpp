// The documents of a text file, as megahost_prepare reads them:
//   file.txt    documents separated by one or more blank lines (lines of
//               spaces, tabs or nothing); a document's lines keep their
//               newlines between them, and a trailing "\r" is dropped
//   file.jsonl  one JSON object per line, the document text under json_key;
//               blank lines and empty texts are skipped
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace mh::data {

// Calls on_document for each document in order. Errors thrown by
// on_document come back prefixed with "path:line: " of the document.
void for_each_document(const std::string& path, const std::string& json_key,
                       const std::function<void(std::string_view)>& on_document);

}  // namespace mh::data
