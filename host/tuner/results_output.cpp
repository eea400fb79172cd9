#include "tuner/results_output.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tuner/candidate_config.hpp"
#include "tuner/prompts_file.hpp"

namespace mh {
namespace fs = std::filesystem;
namespace {

constexpr size_t kRankedShown = 15;

std::string num(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string csv_text(std::string s) {
  for (char& c : s)
    if (c == '"') c = '\'';
  return "\"" + s + "\"";
}

// "true", "false", or "" when the tuner leaves the config's value.
const char* data_choice(const MH_Candidate& c, int32_t MH_Candidate::*field) {
  if (!names_data_choices(c)) return "";
  return c.*field != 0 ? "true" : "false";
}

bool generates(const MH_Candidate& c) { return c.workload == MH_WORKLOAD_INFERENCE; }

// The comm type the candidate names, or "" where the config's stands.
std::string context_comm_text(const MH_Candidate& c) {
  const char* comm = candidate_context_comm(c);
  return comm != nullptr ? comm : "";
}

const char* kTrainCsvHeader =
    "rank,tensor,pipeline,virtual_stages,data,sequence_parallel,micro_batch,recompute,recompute_layers,"
    "step_s_predicted,step_s_measured,tokens_per_s_predicted,latency_s,mfu,days,memory_gib,memory_source,reason,"
    "distributed_optimizer,overlap_param_gather,tokens_per_s_measured,measured_spread,context,expert,context_comm\n";

const char* kGenerateCsvHeader =
    "rank,tensor,pipeline,batch,ttft_s_predicted,ttft_s_measured,tpot_s_predicted,tpot_s_measured,"
    "tokens_per_s_predicted,latency_s,memory_gib,memory_source,reason,tokens_per_s_measured,measured_spread\n";

// Tokens per second as the cost model predicts them, and as the run
// measured them (0 when not measured): the tuner's own figure is the
// measured one where there is one, so the predicted one is recovered.
double predicted_tokens_per_s(const MH_TunerResult& r, const TunedRun& run) {
  if (!generates(*r.candidate)) {
    if (r.step_seconds <= 0) return 0;
    return r.tokens_per_s * (r.measured_seconds > 0 ? r.measured_seconds : r.step_seconds) / r.step_seconds;
  }
  const double out = double(run.needs.output_tokens);
  const double latency = r.ttft_seconds + out * r.tpot_seconds;
  return latency > 0 ? double(r.candidate->micro_batch) * out / latency : 0;
}

double measured_tokens_per_s(const MH_TunerResult& r, const TunedRun& run) {
  if (!generates(*r.candidate)) return r.measured_seconds > 0 ? r.tokens_per_s : 0;
  const double out = double(run.needs.output_tokens);
  const double latency = r.measured_ttft_seconds + out * r.measured_tpot_seconds;
  return r.measured_ttft_seconds > 0 ? double(r.candidate->micro_batch) * out / latency : 0;
}

const Spread* spread_of(const MH_TunerResult& r, const MeasuredSpreads& spreads) {
  const auto it = spreads.find(describe_candidate(*r.candidate));
  return it == spreads.end() ? nullptr : &it->second;
}

// "±4.2%": half the interquartile range of the measurements over their median.
std::string spread_text(const MH_TunerResult& r, const TunedRun& run) {
  const Spread* s = spread_of(r, run.spreads);
  return s == nullptr ? "-" : "±" + num(100 * s->relative(), 1) + "%";
}

std::string memory_source(const MH_TunerResult& r) { return r.memory_measured ? "dry_run" : "model"; }

std::string csv_spread(const MH_TunerResult& r, const TunedRun& run) {
  const Spread* s = spread_of(r, run.spreads);
  return s == nullptr ? "" : num(s->relative(), 4);
}

std::string generate_csv_row(const MH_TunerResult& r, const TunedRun& run) {
  const MH_Candidate& c = *r.candidate;
  std::ostringstream out;
  out << r.rank << ',' << c.tensor << ',' << c.pipeline << ',' << c.micro_batch << ',' << num(r.ttft_seconds, 6) << ','
      << num(r.measured_ttft_seconds, 6) << ',' << num(r.tpot_seconds, 6) << ',' << num(r.measured_tpot_seconds, 6)
      << ',' << num(predicted_tokens_per_s(r, run), 1) << ',' << num(r.latency_seconds, 6) << ','
      << num(double(r.memory_bytes) / (1 << 30), 3) << ',' << memory_source(r) << ',' << csv_text(r.reason) << ','
      << num(measured_tokens_per_s(r, run), 1) << ',' << csv_spread(r, run) << '\n';
  return out.str();
}

std::string csv_row(const MH_TunerResult& r, const TunedRun& run) {
  const MH_Candidate& c = *r.candidate;
  if (generates(c)) return generate_csv_row(r, run);
  std::ostringstream out;
  out << r.rank << ',' << c.tensor << ',' << c.pipeline << ',' << c.virtual_stages << ',' << c.data << ','
      << (c.sequence_parallel ? "true" : "false") << ',' << c.micro_batch << ',' << c.recompute << ','
      << c.recompute_layers << ',' << num(r.step_seconds, 6) << ',' << num(r.measured_seconds, 6) << ','
      << num(predicted_tokens_per_s(r, run), 1) << ',' << num(r.latency_seconds, 6) << ',' << num(r.mfu, 4) << ','
      << num(r.days, 2) << ',' << num(double(r.memory_bytes) / (1 << 30), 3) << ','
      << memory_source(r) << ',' << csv_text(r.reason) << ','
      << data_choice(c, &MH_Candidate::distributed_optimizer) << ',' << data_choice(c, &MH_Candidate::overlap_param_gather)
      << ',' << num(measured_tokens_per_s(r, run), 1) << ',' << csv_spread(r, run) << ',' << candidate_context(c) << ','
      << candidate_expert(c) << ',' << context_comm_text(c) << '\n';
  return out.str();
}

std::string measured_or_dash(double v, int digits) { return v > 0 ? num(v, digits) : "-"; }

std::string tokens_text(double v) { return v > 0 ? num(v, 0) : "-"; }

std::string generate_line(const MH_TunerResult& r, const TunedRun& run) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%4d  %-20s %9s %9s %9s %9s %7s %10s %10s %9s  %s\n", r.rank,
                describe_candidate(*r.candidate).c_str(), num(r.ttft_seconds, 4).c_str(),
                measured_or_dash(r.measured_ttft_seconds, 4).c_str(), num(1e3 * r.tpot_seconds, 3).c_str(),
                measured_or_dash(1e3 * r.measured_tpot_seconds, 3).c_str(), spread_text(r, run).c_str(),
                tokens_text(predicted_tokens_per_s(r, run)).c_str(), tokens_text(measured_tokens_per_s(r, run)).c_str(),
                gib(r.memory_bytes).c_str(), r.reason);
  return buf;
}

std::string ranked_line(const MH_TunerResult& r, const TunedRun& run) {
  if (generates(*r.candidate)) return generate_line(r, run);
  char buf[512];
  std::snprintf(buf, sizeof buf, "%4d  %-46s %9s %9s %7s %10s %10s %9s %9s  %s\n", r.rank,
                describe_candidate(*r.candidate).c_str(), num(r.step_seconds, 4).c_str(),
                measured_or_dash(r.measured_seconds, 4).c_str(), spread_text(r, run).c_str(),
                tokens_text(predicted_tokens_per_s(r, run)).c_str(), tokens_text(measured_tokens_per_s(r, run)).c_str(),
                gib(r.memory_bytes).c_str(), num(r.days, 1).c_str(), r.reason);
  return buf;
}

std::string tables(std::span<const MH_TunerResult> rows, const TunedRun& run) {
  std::ostringstream out;
  out << "tuned " << run.config.file() << " for " << run.shape.world_size << " device(s) of " << run.profile.name << " ("
      << run.profile.device << ")\n\n";
  if (!rows.empty() && generates(*rows.front().candidate))
    out << "ranked (generating " << run.needs.output_tokens << " tokens after " << run.needs.prompt_tokens
        << "-token prompts; predicted: cost model; measured: medians of " << kMeasuredBatches
        << " batches after a warm-up, ± half their latencies' interquartile range; memory per rank from dry runs)\n"
        << "rank  candidate               TTFT s  measured   TPOT ms  measured  spread tok/s pred tok/s meas   mem GiB  note\n";
  else
    out << "ranked (step s: cost model; measured: median of the steps after the first, ± half their interquartile "
           "range; days from the measured step where measured; memory per rank from dry runs)\n"
        << "rank  candidate                                       step s  measured  spread tok/s pred tok/s meas   mem GiB      days  note\n";
  size_t ranked = 0, rejected = 0;
  for (const auto& r : rows) (r.verdict == MH_VERDICT_RANKED ? ranked : rejected)++;
  for (size_t i = 0; i < std::min(ranked, kRankedShown); ++i) out << ranked_line(rows[i], run);
  if (ranked > kRankedShown) out << "      ... " << ranked - kRankedShown << " more in ranked.csv\n";
  out << "\nrejected (" << rejected << ")\n";
  for (const auto& r : rows)
    if (r.verdict == MH_VERDICT_REJECTED) out << "      " << describe_candidate(*r.candidate) << "  " << r.reason << "\n";
  return out.str();
}

void write_file(const fs::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
  require(bool(out), "writing " + file.string() + " failed");
}

// How to start the tuned run: thread ranks in one process on a CPU; one
// process per device, under mpirun or Slurm, on a device cluster.
std::string launch_lines(const TunedRun& run, int32_t world) {
  const std::string config = (run.dir / "tuned.toml").string(), binary = run.binary.string();
  if (run.profile.shared_device) return binary + " --config " + config + "\n";
  const int32_t per_node = std::min(world, run.devices_per_node);
  const int32_t nodes = (world + per_node - 1) / per_node;
  return "mpirun -np " + std::to_string(world) + " --npernode " + std::to_string(per_node) + " " + binary +
         " --config " + config + "\nsrun --nodes " + std::to_string(nodes) + " --ntasks-per-node " +
         std::to_string(per_node) + " --gpus-per-node " + std::to_string(per_node) + " " + binary + " --config " +
         config + "\n";
}

// The winner's figures: its step time, or its generation's times.
std::string winner_figures(const MH_TunerResult& r) {
  if (!generates(*r.candidate))
    return num(r.step_seconds, 4) + " s per step predicted" +
           (r.measured_seconds > 0 ? ", " + num(r.measured_seconds, 4) + " s measured" : "");
  std::string out = "time to first token " + num(r.ttft_seconds, 4) + " s and " + num(1e3 * r.tpot_seconds, 3) +
                    " ms per output token predicted";
  if (r.measured_ttft_seconds > 0)
    out += ", " + num(r.measured_ttft_seconds, 4) + " s and " + num(1e3 * r.measured_tpot_seconds, 3) + " ms measured";
  return out;
}

std::string winner_comment(const MH_TunerResult& r, const TunedRun& run, const std::string& launch) {
  std::string lines;
  for (size_t at = 0, end; (end = launch.find('\n', at)) != std::string::npos; at = end + 1)
    lines += "#   " + launch.substr(at, end - at) + "\n";
  return "# Written by megahost's tuner from " + run.config.file() + " for " + run.profile.name + ":\n# " +
         describe_candidate(*r.candidate) + ", " + winner_figures(r) + ", " + gib(r.memory_bytes) +
         " GiB per rank.\n# Run it with:\n" + lines + "\n";
}

// The winner as a run: training; a server when the config has [serve];
// else generation keeping the config's own [generate] prompt when it has one.
toml::table tuned_config(const MH_Candidate& best, const TunedRun& run) {
  if (!generates(best)) {
    toml::table tuned = candidate_config(run.config, run.assembly, best, CandidateRun::kFull, run.profile);
    resolve_output_paths(run.config, tuned);
    return tuned;
  }
  if (run.assembly.serves) return serve_config(run.config, run.assembly, best, run.profile);
  const GenerateRequest request{write_prompts_file(run.dir, best.micro_batch, run.needs.prompt_tokens),
                                run.needs.output_tokens, true};
  return generate_config(run.config, run.assembly, best, run.profile, request);
}

// Why nothing was ranked: every candidate that passed the layout checks
// either failed its dry run or does not fit.
std::string nothing_ranked(std::span<const MH_TunerResult> rows) {
  size_t failed = 0, other = 0;
  std::string first;
  for (const auto& r : rows) {
    if (std::string(r.reason).rfind("dry run failed", 0) == 0) {
      if (failed++ == 0) first = r.reason;
    } else if (std::string(r.reason).rfind("OOM", 0) == 0) {
      ++other;
    }
  }
  if (failed > 0 && other == 0)
    return "\nthe dry runs failed (" + std::to_string(failed) + " of " + std::to_string(rows.size()) +
           " candidates): no candidate's memory is known, so none was ranked; the first: " + first +
           "\nfix that and tune again (rejected.csv has every reason)\n";
  return "\nno candidate fits; nothing to run (see rejected.csv" +
         (failed > 0 ? ", where " + std::to_string(failed) + " dry run(s) failed" : std::string()) + ")\n";
}

}  // namespace

std::string describe_candidate(const MH_Candidate& c) {
  if (generates(c))
    return "t=" + std::to_string(c.tensor) + " p=" + std::to_string(c.pipeline) + " batch=" + std::to_string(c.micro_batch);
  std::string out = "t=" + std::to_string(c.tensor) + " p=" + std::to_string(c.pipeline) + " v=" +
                    std::to_string(c.virtual_stages) + " d=" + std::to_string(c.data) + (c.sequence_parallel ? " sp" : "") +
                    " b=" + std::to_string(c.micro_batch) + " " + c.recompute;
  if (std::string(c.recompute) == "full") out.append("/").append(std::to_string(c.recompute_layers));
  if (names_data_choices(c) && c.distributed_optimizer) out += c.overlap_param_gather ? " distopt+gather" : " distopt";
  if (candidate_context(c) > 1) {
    out += " cp=" + std::to_string(candidate_context(c));
    if (const std::string comm = context_comm_text(c); !comm.empty()) out += "/" + comm;
  }
  if (candidate_expert(c) > 1) out += " ep=" + std::to_string(candidate_expert(c));
  return out;
}

std::string gib(uint64_t bytes) { return num(double(bytes) / (1024.0 * 1024.0 * 1024.0), 2); }

size_t declared_winner(std::span<const MH_TunerResult> rows, const TunedRun& run) {
  if (rows.empty() || rows.front().verdict != MH_VERDICT_RANKED) return 0;
  const Spread* best = spread_of(rows.front(), run.spreads);
  if (best == nullptr) return 0;  // nothing measured: measured rows rank first
  const toml::table* tuner = find_table(run.config.root(), "tuner");
  const bool throughput = tuner != nullptr && (*tuner)["goal"].value_or(std::string()) == "inference_throughput";
  // The cost model's order: lower predicted time first, or higher predicted
  // tokens per second for the inference throughput goal.
  auto predicted = [&](const MH_TunerResult& r) {
    if (!generates(*r.candidate)) return r.step_seconds;
    return throughput ? -predicted_tokens_per_s(r, run)
                      : r.ttft_seconds + double(run.needs.output_tokens) * r.tpot_seconds;
  };
  size_t pick = 0;
  for (size_t i = 1; i < rows.size() && rows[i].verdict == MH_VERDICT_RANKED; ++i) {
    const Spread* other = spread_of(rows[i], run.spreads);
    if (other != nullptr && !separated(*best, *other) && predicted(rows[i]) < predicted(rows[pick])) pick = i;
  }
  return pick;
}

bool write_results(std::span<const MH_TunerResult> rows, const TunedRun& run, std::ostream& human) {
  const char* header = !rows.empty() && generates(*rows.front().candidate) ? kGenerateCsvHeader : kTrainCsvHeader;
  std::string ranked = header, rejected = header;
  for (const auto& r : rows) (r.verdict == MH_VERDICT_RANKED ? ranked : rejected) += csv_row(r, run);
  write_file(run.dir / "ranked.csv", ranked);
  write_file(run.dir / "rejected.csv", rejected);
  const std::string text = tables(rows, run);
  write_file(run.dir / "report.txt", text);
  human << text;
  if (rows.empty() || rows.front().verdict != MH_VERDICT_RANKED) {
    human << nothing_ranked(rows);
    return false;
  }
  const size_t winner = declared_winner(rows, run);
  const MH_Candidate& best = *rows[winner].candidate;
  const std::string launch = launch_lines(run, candidate_world(best));
  write_toml(tuned_config(best, run), run.dir / "tuned.toml", winner_comment(rows[winner], run, launch));
  human << "\nbest: " << describe_candidate(best);
  if (winner != 0)
    human << " -- the measurements do not separate " << describe_candidate(*rows.front().candidate)
          << ", measured fastest, from it (their medians are closer than their spreads), so the cost model's "
             "choice among those measured alike is declared";
  human << "\nwrote " << (run.dir / "tuned.toml").string() << ", ranked.csv, rejected.csv and report.txt in "
        << run.dir.string() << "\nlaunch with:\n" << launch;
  return true;
}

}  // namespace mh
