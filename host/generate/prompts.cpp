#include "generate/prompts.hpp"

#include <megahost/error.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/json_limits.hpp"

namespace mh::generate {
namespace {

// A prompts file is read whole; past this it is more likely a dataset given by mistake.
constexpr std::uintmax_t kMaxFileBytes = 256ull << 20;

std::string read_file(const std::string& file) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  require(!ec && std::filesystem::is_regular_file(file),
          "generate.prompts_file = \"" + file + "\" is not a readable file; give a text file with one prompt per "
          "line, or a .jsonl file");
  require(size <= kMaxFileBytes, "generate.prompts_file = \"" + file + "\" is " + std::to_string(size >> 20) +
                                     " MiB, more than the 256 MiB a prompts file may hold; split it");
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  require(in.good() || in.eof(), "generate.prompts_file = \"" + file + "\" could not be read");
  return text.str();
}

struct Line {
  size_t number;  // physical, from 1, blank lines counted: what an editor shows
  std::string text;
};

// The lines that are not empty (a trailing \r dropped).
std::vector<Line> text_lines(std::string_view text) {
  std::vector<Line> lines;
  size_t start = 0;
  for (size_t number = 1; start < text.size(); ++number) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) lines.push_back({number, std::string(line)});
    start = end + 1;
  }
  return lines;
}

std::vector<std::string> texts(const std::vector<Line>& lines) {
  std::vector<std::string> out;
  for (const Line& l : lines) out.push_back(l.text);
  return out;
}

}  // namespace

std::vector<std::string> parse_jsonl_prompts(std::string_view text, const std::string& path) {
  std::vector<std::string> prompts;
  for (const Line& line : text_lines(text)) {
    const std::string where = path + ":" + std::to_string(line.number);
    const nlohmann::json record = parse_json_limited(line.text, where);
    require(record.is_object() && record.contains("prompt") && record["prompt"].is_string(),
            where + ": each line of a .jsonl prompts file must be an object with a string \"prompt\", as "
                    "{\"prompt\": \"Once upon a time\"}");
    prompts.push_back(record["prompt"].get<std::string>());
  }
  return prompts;
}

std::vector<std::string> read_prompts(const std::string& prompt, const std::string& file) {
  if (file.empty()) return {prompt};
  const std::string text = read_file(file);
  std::vector<std::string> prompts = std::filesystem::path(file).extension() == ".jsonl"
                                         ? parse_jsonl_prompts(text, file)
                                         : texts(text_lines(text));
  require(!prompts.empty(), "generate.prompts_file = \"" + file + "\" holds no prompt; give one prompt per line");
  return prompts;
}

}  // namespace mh::generate
