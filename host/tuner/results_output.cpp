#include "tuner/results_output.hpp"

#include <megahost/error.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "tuner/candidate_config.hpp"

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

const char* kCsvHeader =
    "rank,tensor,pipeline,virtual_stages,data,sequence_parallel,micro_batch,recompute,recompute_layers,"
    "step_s_predicted,step_s_measured,tokens_per_s,latency_s,mfu,days,memory_gib,memory_source,reason\n";

std::string csv_row(const MH_TunerResult& r) {
  const MH_Candidate& c = *r.candidate;
  std::ostringstream out;
  out << r.rank << ',' << c.tensor << ',' << c.pipeline << ',' << c.virtual_stages << ',' << c.data << ','
      << (c.sequence_parallel ? "true" : "false") << ',' << c.micro_batch << ',' << c.recompute << ','
      << c.recompute_layers << ',' << num(r.step_seconds, 6) << ',' << num(r.measured_seconds, 6) << ','
      << num(r.tokens_per_s, 1) << ',' << num(r.latency_seconds, 6) << ',' << num(r.mfu, 4) << ','
      << num(r.days, 2) << ',' << num(double(r.memory_bytes) / (1 << 30), 3) << ','
      << (r.memory_measured ? "dry_run" : "model") << ',' << csv_text(r.reason) << '\n';
  return out.str();
}

std::string ranked_line(const MH_TunerResult& r) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%4d  %-34s %9s %9s %11s %6s %9s %9s  %s\n", r.rank, describe_candidate(*r.candidate).c_str(),
                num(r.step_seconds, 4).c_str(), r.measured_seconds > 0 ? num(r.measured_seconds, 4).c_str() : "-",
                num(r.tokens_per_s, 0).c_str(), num(100 * r.mfu, 1).c_str(), gib(r.memory_bytes).c_str(),
                num(r.days, 1).c_str(), r.reason);
  return buf;
}

std::string tables(std::span<const MH_TunerResult> rows, const TunedRun& run) {
  std::ostringstream out;
  out << "tuned " << run.config.file() << " for " << run.shape.world_size << " device(s) of " << run.profile.name << " ("
      << run.profile.device << ")\n\nranked (step s: cost model; measured: real runs; memory per rank from dry runs)\n"
      << "rank  candidate                           step s  measured       tok/s  MFU %  mem GiB      days  note\n";
  size_t ranked = 0, rejected = 0;
  for (const auto& r : rows) (r.verdict == MH_VERDICT_RANKED ? ranked : rejected)++;
  for (size_t i = 0; i < std::min(ranked, kRankedShown); ++i) out << ranked_line(rows[i]);
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

std::string winner_comment(const MH_TunerResult& r, const TunedRun& run) {
  return "# Written by megahost's tuner from " + run.config.file() + " for " + run.profile.name + ":\n# " +
         describe_candidate(*r.candidate) + ", " + num(r.step_seconds, 4) + " s per step predicted" +
         (r.measured_seconds > 0 ? ", " + num(r.measured_seconds, 4) + " s measured" : "") + ", " +
         gib(r.memory_bytes) + " GiB per rank.\n# Run it with: megahost --config " +
         (run.dir / "tuned.toml").string() + "\n\n";
}

}  // namespace

std::string describe_candidate(const MH_Candidate& c) {
  std::string out = "t=" + std::to_string(c.tensor) + " p=" + std::to_string(c.pipeline) + " v=" +
                    std::to_string(c.virtual_stages) + " d=" + std::to_string(c.data) + (c.sequence_parallel ? " sp" : "") +
                    " b=" + std::to_string(c.micro_batch) + " " + c.recompute;
  if (std::string(c.recompute) == "full") out.append("/").append(std::to_string(c.recompute_layers));
  return out;
}

std::string gib(uint64_t bytes) { return num(double(bytes) / (1024.0 * 1024.0 * 1024.0), 2); }

bool write_results(std::span<const MH_TunerResult> rows, const TunedRun& run, std::ostream& human) {
  std::string ranked = kCsvHeader, rejected = kCsvHeader;
  for (const auto& r : rows) (r.verdict == MH_VERDICT_RANKED ? ranked : rejected) += csv_row(r);
  write_file(run.dir / "ranked.csv", ranked);
  write_file(run.dir / "rejected.csv", rejected);
  const std::string text = tables(rows, run);
  write_file(run.dir / "report.txt", text);
  human << text;
  if (rows.empty() || rows.front().verdict != MH_VERDICT_RANKED) {
    human << "\nno candidate fits; nothing to run (see rejected.csv)\n";
    return false;
  }
  write_toml(candidate_config(run.config, run.assembly, *rows.front().candidate, CandidateRun::kFull),
             run.dir / "tuned.toml", winner_comment(rows.front(), run));
  human << "\nbest: " << describe_candidate(*rows.front().candidate) << "\nwrote " << (run.dir / "tuned.toml").string()
        << ", ranked.csv, rejected.csv and report.txt in " << run.dir.string() << "\n";
  return true;
}

}  // namespace mh
