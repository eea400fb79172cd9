#include "generate/generate.hpp"

#include <megahost/error.hpp>

#include <glog/logging.h>

#include <algorithm>
#include <iostream>
#include <numeric>

#include "generate/prompts.hpp"
#include "generate/rank_generator.hpp"
#include "run/run.hpp"
#include "run/stop_signals.hpp"

namespace mh::generate {
namespace {

std::string prompts_file(const Config& config, const Options& g) {
  const std::string file = g.get_string("prompts_file");
  return file.empty() ? file : config.resolve(file).string();
}

// The model generates every id of its vocabulary, and each must decode: a
// tokenizer with fewer ids is not the model's.
void check_vocabulary(const Assembly& a, const data::Tokenizer& tokenizer, const ModelVocab& model) {
  const std::string name = a.data.options().get_string("tokenizer");
  require(model.size <= tokenizer.vocab_size(),
          "the model's vocabulary has " + std::to_string(model.size) + " ids (" + model.source + "), the " + name +
              " tokenizer " + std::to_string(tokenizer.vocab_size()) +
              ": the model could generate ids the tokenizer cannot decode; set data.tokenizer (and its files) to the "
              "tokenizer the model was trained with");
}

// Every prompt as token ids; throws naming the prompt that cannot be served.
std::vector<std::vector<int32_t>> tokenized_prompts(const Config& config, const Assembly& a,
                                                    const data::Tokenizer& tokenizer) {
  const Options g = a.generate.options();
  const int64_t seq = a.model.options().get_int("seq_len");
  const ModelVocab vocab = model_vocab(a, config);
  check_vocabulary(a, tokenizer, vocab);
  const std::string name = a.data.options().get_string("tokenizer");
  std::vector<std::vector<int32_t>> out;
  for (const std::string& text : read_prompts(g.get_string("prompt"), prompts_file(config, g))) {
    std::vector<int32_t> ids = tokenizer.encode(text);
    const std::string which = "prompt " + std::to_string(out.size() + 1);
    require(!ids.empty(), which + " is empty: generation continues a text, give it at least one character");
    for (int32_t id : ids)
      require(id < vocab.size, which + " holds token id " + std::to_string(id) + " of the " + name +
                                   " tokenizer, outside the model's vocabulary of " + std::to_string(vocab.size) +
                                   " ids (" + vocab.source + "): the tokenizer is not the model's; set "
                                   "data.tokenizer (and its files) to the one the model was trained with");
    require(int64_t(ids.size()) <= seq, which + " is " + std::to_string(ids.size()) +
                                            " tokens, longer than model.seq_len = " + std::to_string(seq) +
                                            ", the longest context the model has; shorten it");
    out.push_back(std::move(ids));
  }
  return out;
}

Job make_job(const RunSetup& s, const Config& config, const data::Tokenizer& tokenizer) {
  const Options g = s.assembly->generate.options();
  Job job;
  job.prompts = tokenized_prompts(config, *s.assembly, tokenizer);
  job.max_new_tokens = g.get_int("max_new_tokens");
  job.batch = std::min<int64_t>(g.get_int("batch"), int64_t(job.prompts.size()));
  size_t longest = 0;
  for (const auto& p : job.prompts) longest = std::max(longest, p.size());
  job.capacity = std::min<int64_t>(s.dims.seq, int64_t(longest) + job.max_new_tokens);
  job.sampling = Sampling{g.get_double("temperature"), g.get_int("top_k"), g.get_double("top_p"),
                          uint64_t(g.get_int("seed"))};
  job.stop_at_eod = g.get_bool("stop_at_eod");
  job.eod = tokenizer.eod_id();
  job.vocab = s.dims.real_vocab();
  return job;
}

// The memory plan: the `batch` longest prompts prefilled together, then one
// decode step, on the same cache.
Job dry_job(Job job) {
  std::stable_sort(job.prompts.begin(), job.prompts.end(),
                   [](const auto& a, const auto& b) { return a.size() > b.size(); });
  job.prompts.resize(size_t(job.batch));
  job.max_new_tokens = 2;
  job.stop_at_eod = false;
  job.dry = true;
  return job;
}

nlohmann::json request_record(size_t i, const std::vector<int32_t>& prompt, const Outcome& o, bool eod_stop,
                              const std::string& text, uint64_t memory) {
  const double n = double(o.tokens.size());
  return {{"request", i},
          {"prompt_tokens", prompt.size()},
          {"new_tokens", o.tokens.size()},
          {"stopped_at_eod", eod_stop},
          {"text", text},
          {"tokens", o.tokens},
          {"queue_s", o.admitted},
          {"ttft_s", o.first_token - o.admitted},
          {"tpot_s", n > 1 ? (o.last_token - o.first_token) / (n - 1) : 0.0},
          {"tokens_per_s", n / std::max(o.last_token - o.admitted, 1e-9)},
          {"memory_bytes", memory}};
}

void report(const RunSetup& s, const Job& job, const RankResult& lead, const data::Tokenizer& tokenizer) {
  const uint64_t memory = lead.memory.empty() ? 0 : lead.memory[0].total;
  int64_t tokens = 0;
  double end = 0;
  int64_t done = 0;
  for (size_t i = 0; i < lead.outcomes.size(); ++i) {
    const Outcome& o = lead.outcomes[i];
    if (!o.done) continue;  // cut short by a stop signal
    ++done;
    const bool eod_stop = job.stop_at_eod && !o.tokens.empty() && o.tokens.back() == job.eod;
    const std::span<const int32_t> kept(o.tokens.data(), o.tokens.size() - (eod_stop ? 1 : 0));
    const std::string text = data::decode_continuation(tokenizer, job.prompts[i], kept);
    std::cout << tokenizer.decode(job.prompts[i]) << text << "\n";
    s.metrics->write(request_record(i, job.prompts[i], o, eod_stop, text, memory));
    tokens += int64_t(o.tokens.size());
    end = std::max(end, o.last_token);
  }
  std::cout.flush();
  s.metrics->write({{"generate", "summary"}, {"requests", done}, {"new_tokens", tokens},
                    {"seconds", end}, {"tokens_per_s", double(tokens) / std::max(end, 1e-9)}});
  LOG(INFO) << "generated " << tokens << " tokens for " << done << " request(s) in " << end
            << " s (" << double(tokens) / std::max(end, 1e-9) << " tokens/s)";
}

// The completions done are printed; the rest are abandoned, as the run
// cannot resume them.
int stopped(const RunSetup& s, const RankResult& lead) {
  const int signal = stop_signal();
  const auto done = std::count_if(lead.outcomes.begin(), lead.outcomes.end(), [](const Outcome& o) { return o.done; });
  s.metrics->write({{"stopped", stop_signal_name(signal)}, {"requests_done", done}});
  LOG(WARNING) << "received " << stop_signal_name(signal) << ": stopped generating; " << done << " of "
               << lead.outcomes.size() << " completion(s) were done (printed), the rest abandoned";
  return interrupted_status(signal);
}

}  // namespace

void check(const Config& config, const Assembly& a, Diagnostics& diag) {
  const Options g = a.generate.options();
  const bool prompt = !g.get_string("prompt").empty(), file = !g.get_string("prompts_file").empty();
  if (prompt == file) {
    diag.error(config.file(), std::string("[generate] needs exactly one of prompt and prompts_file; ") +
                                  (prompt ? "both are set" : "neither is set"));
    return;
  }
  try {
    tokenized_prompts(config, a, *run_tokenizer(a, config));
  } catch (const std::exception& e) {
    diag.error(config.file(), e.what());
  }
}

int serve(RunSetup& s, const Config& config, const RankRunner& run_ranks) {
  // As in Megatron, decoding does not split the sequence: a KV cache grows
  // one position at a time on every rank.
  require(s.cp == 1, "generation decodes one position at a time, which parallel.context.size = " + std::to_string(s.cp) +
                         " cannot split; set parallel.context.size = 1 (context parallelism is for training and "
                         "--evaluate)");
  require(s.dp == 1, "generation runs on parallel.tensor.size x parallel.pipeline.size = " +
                         std::to_string(s.tp * s.pp) + " ranks, but the world has " +
                         std::to_string(s.comm_info.world_size) + "; launch " + std::to_string(s.tp * s.pp) +
                         " ranks (comm.world_size, or mpirun -np)");
  const auto tokenizer = run_tokenizer(*s.assembly, config);
  const Job job = s.dry_run ? dry_job(make_job(s, config, *tokenizer)) : make_job(s, config, *tokenizer);
  LOG_IF(INFO, s.comm_info.first_rank == 0)
      << "generating for " << job.prompts.size() << " prompt(s), " << job.batch << " at a time, on TP " << s.tp
      << ", PP " << s.pp << "; KV cache of " << job.capacity << " positions per sequence";
  LOG_IF(WARNING, s.comm_info.first_rank == 0 && s.resume_from.empty() && !s.dry_run)
      << "no checkpoint.load: generating from the freshly initialised model (train.seed), not a trained one";
  std::vector<RankResult> results(size_t(s.comm_info.ranks_in_process));
  run_ranks([&](int32_t local) { results[size_t(local)] = generate_rank(s, job, local); });
  if (s.comm_info.first_rank != 0) return 0;
  const RankResult& lead = results[0];
  if (!s.dry_run) report(s, job, lead, *tokenizer);
  else std::cout << memory_table(lead.memory);
  if (lead.stopped) return stopped(s, lead);
  s.metrics->write({{"final", true}, {"memory", to_json(lead.memory)}});
  return 0;
}

}  // namespace mh::generate
