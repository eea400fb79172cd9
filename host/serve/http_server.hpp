// The HTTP side of serving, on cpp-httplib (a thread per connection; a
// stream is a chunked response): OpenAI's routes read into requests for
// the engine's queue, and each answered from the request's progress, as
// one JSON body or as server-sent events ending with `data: [DONE]`.
// Every failure is an OpenAI-style JSON error with its status; none stops
// the server.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "serve/openai_api.hpp"
#include "serve/request_queue.hpp"
#include "serve/server_metrics.hpp"

namespace httplib {
class Server;
}

namespace mh::serve {

struct HttpSettings {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free one
  std::string api_key;
  double timeout_s = 600;
  std::string model_name = "megahost";
  int threads = 8;  // connections served at once
};

class HttpServer {
 public:
  HttpServer(HttpSettings settings, RequestQueue& queue, ServerMetrics& metrics, ModelText model, ApiLimits limits);
  ~HttpServer();

  // Binds and starts listening on a thread; returns the port.
  int start();
  // The model is loaded: requests are taken from now on (503 before).
  void ready() { ready_ = true; }
  // New requests are refused with 503; those accepted are served.
  void drain() { draining_ = true; }
  void stop();

 private:
  void routes();
  bool authorized(const std::string& authorization) const;
  ResponseIds next_ids(bool chat);

  HttpSettings settings_;
  RequestQueue& queue_;
  ServerMetrics& metrics_;
  ModelText model_;
  ApiLimits limits_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  std::atomic<bool> ready_{false}, draining_{false};
  std::atomic<uint64_t> next_id_{0};
};

}  // namespace mh::serve
