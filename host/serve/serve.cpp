#include "serve/serve.hpp"

#include <megahost/error.hpp>

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>
#include <optional>

#include "convert/hf_folder.hpp"
#include "run/run.hpp"
#include "run/stop_signals.hpp"
#include "data/chat_template.hpp"
#include "serve/engine_loop.hpp"
#include "serve/http_server.hpp"

namespace mh::serve {
namespace {

// serve.chat_template, else a tokenizer_config.json beside
// data.tokenizer_file or in the Hugging Face folder loaded; "" if none.
std::string chat_template_file(const Config& config, const Assembly& a) {
  const std::string given = a.serve.options().get_string("chat_template");
  if (!given.empty()) return config.resolve(given).string();
  std::vector<std::filesystem::path> places;
  const std::string tokenizer_file = a.data.options().get_string("tokenizer_file");
  if (!tokenizer_file.empty()) places.push_back(config.resolve(tokenizer_file).parent_path());
  const std::string load = a.checkpoint.options().get_string("load");
  if (!load.empty() && load != "auto" && convert::is_hf_folder(load)) places.emplace_back(load);
  for (const auto& dir : places)
    if (std::filesystem::exists(dir / "tokenizer_config.json")) {
      const std::filesystem::path file = dir / "tokenizer_config.json";
      const nlohmann::json j = nlohmann::json::parse(std::ifstream(file), nullptr, false);
      if (j.is_object() && j.contains("chat_template")) return file.string();
    }
  return "";
}

std::optional<data::ChatTemplate> load_chat_template(const Config& config, const Assembly& a) {
  const std::string file = chat_template_file(config, a);
  if (file.empty()) return std::nullopt;
  try {
    return data::ChatTemplate::from_file(file);
  } catch (const data::ChatTemplateError& e) {
    throw Error(MH_INVALID_ARGUMENT, file + ": its chat template cannot be read: " + e.what() +
                                         "; fix it or point serve.chat_template at another");
  }
}

// Tests hold the server in its loading state to see what clients get then:
// MEGAHOST_SERVE_HOLD_LOADING names a file whose creation ends the loading
// (a stop signal ends it too). Unset, this is one getenv.
void hold_loading() {
  const char* file = std::getenv("MEGAHOST_SERVE_HOLD_LOADING");
  if (file == nullptr) return;
  LOG(INFO) << "MEGAHOST_SERVE_HOLD_LOADING: loading until " << file << " exists";
  while (!std::filesystem::exists(file) && stop_signal() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

struct Settings {
  HttpSettings http;
  ApiLimits limits;
  generate::BatchShape shape;
  LeadSettings lead;
  int64_t max_queue = 0;
};

Settings settings(const RunSetup& s, const Options& o, const data::Tokenizer& tokenizer) {
  Settings out;
  const int64_t batch = o.get_int("max_batch"), queue = o.get_int("max_queue");
  out.http = HttpSettings{o.get_string("host"),
                          int(o.get_int("port")),
                          o.get_string("api_key"),
                          o.get_double("timeout_s"),
                          o.get_string("model_name"),
                          int(std::min<int64_t>(batch + queue + 8, 1024))};
  out.limits = ApiLimits{s.dims.seq, o.get_int("max_new_tokens"), batch};
  out.shape = generate::BatchShape{batch, s.dims.seq, o.get_int("prefill_chunk"), tokenizer.vocab_size()};
  out.lead = LeadSettings{o.get_double("timeout_s"), tokenizer.eod_id()};
  out.max_queue = queue;
  return out;
}

}  // namespace

void check(const Config& config, const Assembly& a, Diagnostics& diag) {
  if (find_table(config.root(), "generate") != nullptr)
    diag.error(config.where(find_table(config.root(), "serve")),
               "a config has [generate] (prompts from a file) or [serve] (prompts from HTTP clients), not both; "
               "remove one");
  try {
    load_chat_template(config, a);
  } catch (const std::exception& e) {
    diag.error(config.file(), e.what());
  }
}

int serve(RunSetup& s, const Config& config, const RankRunner& run_ranks) {
  // As in Megatron, decoding does not split the sequence: a KV cache grows
  // one position at a time on every rank.
  require(s.cp == 1, "serving decodes one position at a time, which parallel.context.size = " + std::to_string(s.cp) +
                         " cannot split; set parallel.context.size = 1 (context parallelism is for training and "
                         "--evaluate)");
  require(s.dp == 1, "serving runs on parallel.tensor.size x parallel.pipeline.size = " +
                         std::to_string(s.tp * s.pp) + " ranks, but the world has " +
                         std::to_string(s.comm_info.world_size) + "; launch " + std::to_string(s.tp * s.pp) +
                         " ranks (comm.world_size, or mpirun -np)");
  require(!s.dry_run, "--dry_run of a [serve] config: dry-run the same model with [generate] and generate.batch = "
                      "serve.max_batch to see its memory");
  const auto tokenizer = run_tokenizer(*s.assembly, config);
  const std::optional<data::ChatTemplate> chat = load_chat_template(config, *s.assembly);
  const Settings set = settings(s, s.assembly->serve.options(), *tokenizer);
  const bool lead_process = s.comm_info.first_rank == 0;
  RequestQueue queue(set.max_queue);
  ServerMetrics metrics;
  std::optional<HttpServer> http;
  if (lead_process) {
    http.emplace(set.http, queue, metrics, ModelText{tokenizer.get(), chat ? &*chat : nullptr, tokenizer->eod_id()},
                 set.limits);
    const int port = http->start();
    std::cout << "serving " << set.http.model_name << " on http://" << set.http.host << ":" << port << std::endl;
    LOG(INFO) << "serving on TP " << s.tp << ", PP " << s.pp << ": " << set.shape.slots << " sequences of "
              << set.shape.capacity << " positions; loading the model";
  }
  LOG_IF(WARNING, lead_process && s.resume_from.empty())
      << "no checkpoint.load: serving the freshly initialised model (train.seed), not a trained one";
  StopSignals signals;
  std::atomic<bool> stopping{false};
  const auto draining = [&] {
    if (stop_signal() != 0 && !stopping.exchange(true)) {
      LOG(INFO) << "stop signal: serving the requests accepted, then exiting";
      http->drain();
      queue.close();
    }
    return stopping.load();
  };
  run_ranks([&](int32_t local) {
    generate::StepBatch batch(s, set.shape, local);
    if (batch.rank() != 0) return serve_rank(batch, nullptr, draining);
    Lead lead(queue, metrics, *tokenizer, set.lead, set.shape.slots);
    hold_loading();
    http->ready();
    LOG(INFO) << "the model is loaded; taking requests";
    try {
      serve_rank(batch, &lead, draining);
    } catch (const std::exception& e) {
      lead.fail_all(std::string("the engine failed: ") + e.what());
      throw;
    }
  });
  if (http) http->stop();
  return 0;
}

}  // namespace mh::serve
