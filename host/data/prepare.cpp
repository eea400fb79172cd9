#include "data/prepare.hpp"

#include "data/indexed_dataset.hpp"
#include "data/loss_mask.hpp"
#include "data/sft_input.hpp"
#include "data/text_input.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include "run/stop_signals.hpp"

namespace mh::data {
namespace {

// Documents tokenized between two writes: enough to keep every worker busy.
constexpr size_t kBatchDocuments = 4096;
constexpr int64_t kBatchBytes = 16 << 20;
// More threads than any machine has cores gain nothing, and each costs a
// stack: a larger --workers is a typo.
constexpr int kMaxWorkers = 1024;

struct Tokenized {
  std::vector<std::vector<int32_t>> ids;  // per key
  std::vector<int32_t> mask;              // sft: the loss mask of ids[0]
  std::string problem;
};

// Runs `work` on `workers` threads, this one included, and rethrows the
// first exception any of them threw (one escaping a thread would terminate).
// A thread that cannot be started (a memory or process limit) is an error
// naming --workers, after the started ones are joined.
void run_workers(int workers, const std::function<void()>& work) {
  std::mutex mu;
  std::exception_ptr first;
  const auto guarded = [&] {
    try {
      work();
    } catch (...) {
      std::lock_guard lock(mu);
      if (!first) first = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  try {
    for (int w = 1; w < workers; ++w) threads.emplace_back(guarded);
  } catch (const std::exception& e) {  // std::system_error, or std::bad_alloc for the thread's state
    const size_t started = threads.size() + 1;
    for (auto& t : threads) t.join();
    const auto* system = dynamic_cast<const std::system_error*>(&e);
    throw Error(MH_RESOURCE_EXHAUSTED, "--workers " + std::to_string(workers) + ": could start only " +
                                           std::to_string(started) + " thread(s): " +
                                           (system != nullptr ? system->code().message() : "out of memory") +
                                           " (a memory or process limit); give --workers " +
                                           std::to_string(started) + " or fewer");
  }
  guarded();
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

// An sft line's segments tokenized together, each token masked as the
// segments it holds (tokenize_segments); the EOD that ends the document is
// trained on, as the end of the response.
Tokenized tokenize_sft(const Document& d, const Tokenizer& tokenizer, const PrepareOptions& o) {
  Tokenized t;
  t.ids.emplace_back();
  try {
    SftTokens tokens = tokenize_segments(read_sft_line(d.json, o.chat), tokenizer);
    t.ids[0] = std::move(tokens.ids);
    t.mask = std::move(tokens.mask);
    if (o.append_eod && !t.ids[0].empty()) {
      t.ids[0].push_back(tokenizer.eod_id());
      t.mask.push_back(1);
    }
  } catch (const Error& e) {
    t.problem = o.input + ":" + std::to_string(d.line) + ": " + e.what();
  }
  return t;
}

// Parses and tokenizes the batch on `workers` threads, each taking the next
// document.
std::vector<Tokenized> tokenize(std::vector<Document>& batch, const Tokenizer& tokenizer, const PrepareOptions& o) {
  std::vector<Tokenized> out(batch.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < batch.size(); i = next++) {
      if (stop_signal() != 0) return;  // the batch is abandoned whole
      Document& d = batch[i];
      if (o.sft) {
        out[i] = tokenize_sft(d, tokenizer, o);
        continue;
      }
      parse_document(d, o.json_keys, o.input);
      if (!d.problem.empty()) {
        out[i].problem = d.problem;
        continue;
      }
      try {
        for (const std::string& text : d.texts) {
          std::vector<int32_t> ids = text.empty() ? std::vector<int32_t>{} : tokenizer.encode(text);
          if (o.append_eod && !text.empty()) ids.push_back(tokenizer.eod_id());
          out[i].ids.push_back(std::move(ids));
        }
      } catch (const Error& e) {
        out[i].problem = o.input + ":" + std::to_string(d.line) + ": " + e.what();
      }
    }
  };
  run_workers(o.workers, work);
  return out;
}

std::vector<std::unique_ptr<IndexedDatasetWriter>> open_writers(const PrepareOptions& o, TokenDType dtype) {
  std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
  if (o.sft) {
    writers.push_back(std::make_unique<IndexedDatasetWriter>(o.output_prefix, dtype));
    return writers;
  }
  for (const std::string& key : o.json_keys) {
    const std::string prefix = o.json_keys.size() == 1 ? o.output_prefix : o.output_prefix + "_" + key;
    writers.push_back(std::make_unique<IndexedDatasetWriter>(prefix, dtype));
  }
  return writers;
}

}  // namespace

PrepareReport prepare(const PrepareOptions& o, const Tokenizer& tokenizer, const OnProgress& on_progress) {
  require(o.workers >= 1 && o.workers <= kMaxWorkers, "--workers must be 1 to " + std::to_string(kMaxWorkers) +
                                                         " (threads; one per core is enough), got " +
                                                         std::to_string(o.workers));
  require(o.sft || !o.json_keys.empty(), "--json_keys names no key; give at least one, e.g. text");
  require(!o.sft || o.input.ends_with(".jsonl"),
          "input " + o.input + ": --format=sft reads a .jsonl file (one prompt/completion or messages object a line)");
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  DocumentReader reader(o.input);
  auto writers = open_writers(o, dtype_for_vocab(tokenizer.vocab_size()));
  std::unique_ptr<IndexedDatasetWriter> mask_writer;
  if (o.sft) mask_writer = std::make_unique<IndexedDatasetWriter>(loss_mask_prefix(o.output_prefix), TokenDType::kUint8);
  PrepareReport report;
  double reported = 0;
  for (bool more = true; more;) {
    std::vector<Document> batch;
    const int64_t batch_start = reader.bytes_read();
    Document d;
    while (batch.size() < kBatchDocuments && reader.bytes_read() - batch_start < kBatchBytes &&
           (more = reader.next(d))) {
      batch.push_back(std::move(d));
    }
    std::vector<Tokenized> tokenized = tokenize(batch, tokenizer, o);
    stop_if_signalled("tokenizing " + o.input + " after " + std::to_string(report.documents) + " document(s), " +
                      std::to_string(report.bytes_read) + " bytes read; nothing was written (" + o.output_prefix +
                      " is as it was)");
    for (Tokenized& t : tokenized) {
      if (!t.problem.empty()) {
        require(o.skip_bad_documents, t.problem);
        if (report.skipped++ == 0) report.first_skipped = t.problem;
        continue;
      }
      for (size_t k = 0; k < writers.size(); ++k) {
        if (t.ids[k].empty()) continue;  // an empty text is no document
        writers[k]->add_document(t.ids[k]);
        report.tokens += static_cast<int64_t>(t.ids[k].size());
      }
      if (mask_writer && !t.mask.empty()) {
        mask_writer->add_document(t.mask);
        report.trained += std::count(t.mask.begin(), t.mask.end(), 1);
      }
    }
    report.documents = writers[0]->document_count();
    report.bytes_read = reader.bytes_read();
    report.seconds = elapsed();
    if (on_progress && report.seconds - reported >= 1.0) on_progress(report), reported = report.seconds;
  }
  for (auto& w : writers) w->finish();
  if (mask_writer) mask_writer->finish();
  report.seconds = elapsed();
  return report;
}

}  // namespace mh::data
