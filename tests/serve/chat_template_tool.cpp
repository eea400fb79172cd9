// Renders a chat template for the transformers comparison
// (chat_template_test.py): chat_template_tool TEMPLATE_FILE CONTEXT_JSON
// prints the rendering of the template over the context's keys (messages,
// add_generation_prompt, bos_token, eos_token), or the error after "ERROR: "
// with status 3.
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/chat_template.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: chat_template_tool TEMPLATE_FILE CONTEXT_JSON\n";
    return 2;
  }
  std::ifstream file(argv[1], std::ios::binary);
  std::ostringstream source;
  source << file.rdbuf();
  const nlohmann::json context = nlohmann::json::parse(argv[2]);
  try {
    const mh::data::ChatTemplate t(source.str(), context.value("bos_token", ""), context.value("eos_token", ""));
    std::cout << t.render(context);
  } catch (const mh::data::ChatTemplateError& e) {
    std::cout << "ERROR: " << e.what();
    return 3;
  }
  return 0;
}
