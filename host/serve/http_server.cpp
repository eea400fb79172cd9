#include "serve/http_server.hpp"

#include <megahost/error.hpp>

#include <httplib.h>

#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace mh::serve {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = "") {
  send_json(res, status, error_body(status, message, param));
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Server-sent events: one `data:` line per chunk.
bool send_event(httplib::DataSink& sink, const std::string& data) {
  const std::string event = "data: " + data + "\n\n";
  return sink.write(event.data(), event.size());
}

// Streams a request's chunks as they come; false (the client is gone)
// cancels the request, which frees its slots at the next step.
bool stream(const std::shared_ptr<Request>& r, const ResponseIds& ids, const data::Tokenizer& tokenizer,
            httplib::DataSink& sink) {
  StreamCursor cursor;
  uint64_t seen = 0;
  for (;;) {
    const Request::View view = r->wait(seen, 100ms);
    seen = view.version;
    if (!view.error.empty()) {
      send_event(sink, dump(error_body(503, view.error)));
      break;
    }
    for (const json& chunk : stream_chunks(r->ask(), view.choices, cursor, ids, tokenizer))
      if (!send_event(sink, dump(chunk))) return false;
    if (view.done()) {
      if (r->ask().include_usage && !send_event(sink, dump(usage_chunk(r->ask(), view.choices, ids)))) return false;
      break;
    }
    if (!sink.is_writable()) return false;
  }
  if (!send_event(sink, "[DONE]")) return false;
  sink.done();
  return true;
}

// An address as cpp-httplib writes a request's ends: numeric host, port.
std::pair<std::string, int> endpoint(const sockaddr_storage& addr, socklen_t size) {
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), size, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return {"", -1};
  return {host, std::atoi(port)};
}

// cpp-httplib 0.11 (Debian's) gives a handler no way to its connection, so
// a non-streaming request whose client left would hold its slots to its
// end. Its socket is found among the process's descriptors by its two ends:
// the handler runs on the connection's own thread, which keeps the socket
// open until the handler returns. -1 when none matches.
int connection_socket(const httplib::Request& req) {
  std::error_code ec;  // other threads open and close descriptors meanwhile: never throw
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    const int fd = std::atoi(it->path().filename().c_str());
    sockaddr_storage local{}, peer{};
    socklen_t local_size = sizeof local, peer_size = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0)
      continue;
    if (endpoint(local, local_size).second == req.local_port &&
        endpoint(peer, peer_size) == std::pair<std::string, int>{req.remote_addr, req.remote_port})
      return fd;
  }
  return -1;
}

// The client closed its end (or the connection broke): a peek finds the
// end of the stream or an error rather than nothing yet. A client does not
// close its sending side while it waits for an answer, so this is a client gone.
bool client_gone(int fd) {
  if (fd < 0) return false;
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// Answers a request as one JSON body when it is done; a client gone before
// that cancels it, which frees its slots at the next step.
void answer_whole(const std::shared_ptr<Request>& r, const ResponseIds& ids, const data::Tokenizer& tokenizer,
                  const httplib::Request& req, httplib::Response& res) {
  const int fd = connection_socket(req);
  uint64_t seen = 0;
  for (;;) {
    const Request::View view = r->wait(seen, 100ms);
    seen = view.version;
    if (!view.error.empty()) return send_error(res, 503, view.error);
    if (view.done()) return send_json(res, 200, response(r->ask(), view.choices, ids, tokenizer));
    if (client_gone(fd)) {
      r->cancel();
      return send_error(res, 499, "the client closed the connection");  // nobody reads it; counted in /metrics
    }
  }
}

}  // namespace

HttpServer::HttpServer(HttpSettings settings, RequestQueue& queue, ServerMetrics& metrics, ModelText model,
                       ApiLimits limits)
    : settings_(std::move(settings)),
      queue_(queue),
      metrics_(metrics),
      model_(model),
      limits_(limits),
      server_(std::make_unique<httplib::Server>()) {
  routes();
}

HttpServer::~HttpServer() { stop(); }

bool HttpServer::authorized(const std::string& authorization) const {
  return settings_.api_key.empty() || authorization == "Bearer " + settings_.api_key;
}

ResponseIds HttpServer::next_ids(bool chat) {
  char id[32];
  std::snprintf(id, sizeof id, "%s-%016llx", chat ? "chatcmpl" : "cmpl",
                static_cast<unsigned long long>(next_id_.fetch_add(1)));
  return ResponseIds{id, unix_time(), settings_.model_name};
}

void HttpServer::routes() {
  httplib::Server& s = *server_;
  const int threads = settings_.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  const auto timeout = std::chrono::duration<double>(settings_.timeout_s);
  s.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  s.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  s.set_payload_max_length(size_t(64) << 20);
  s.set_logger([this](const httplib::Request&, const httplib::Response& res) { metrics_.request(res.status); });
  s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string message = res.status == 404   ? "no route " + req.method + " " + req.path
                                : res.status == 413 ? "the request body is larger than 64 MiB"
                                                    : "the request failed";
    res.set_content(dump(error_body(res.status, message)), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      message += std::string(": ") + x.what();
    } catch (...) {
    }
    send_error(res, 500, message);
  });
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/health" || req.path == "/metrics" || authorized(req.get_header_value("Authorization")))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, 401, "a valid API key is required: send 'Authorization: Bearer <serve.api_key>'");
    return httplib::Server::HandlerResponse::Handled;
  });

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready_) return send_error(res, 503, "the model is loading");
    send_json(res, 200, {{"status", draining_ ? "draining" : "ok"}});
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.text(), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json model = {{"id", settings_.model_name}, {"object", "model"}, {"created", unix_time()},
                        {"owned_by", "megahost"}, {"max_model_len", limits_.context}};
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
  });
  const auto generation = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      if (!ready_) return send_error(res, 503, "the model is loading; retry when GET /health answers 200");
      if (draining_) return send_error(res, 503, "the server is shutting down");
      const json body = json::parse(req.body, nullptr, false);
      if (body.is_discarded()) return send_error(res, 400, "the request body is not valid JSON");
      std::shared_ptr<Request> r;
      try {
        r = std::make_shared<Request>(chat ? read_chat(body, model_, limits_) : read_completion(body, model_, limits_));
      } catch (const ApiError& e) {
        return send_error(res, e.status, e.what(), e.param);
      }
      if (!queue_.push(r))
        return send_error(res, 429, "the queue is full (serve.max_queue requests wait already); retry later");
      const ResponseIds ids = next_ids(chat);
      if (r->ask().stream) {
        const data::Tokenizer* tokenizer = model_.tokenizer;
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [r, ids, tokenizer](size_t, httplib::DataSink& sink) { return stream(r, ids, *tokenizer, sink); },
            [r](bool success) {
              if (!success) r->cancel();
            });
        return;
      }
      answer_whole(r, ids, *model_.tokenizer, req, res);
    };
  };
  s.Post("/v1/completions", generation(false));
  s.Post("/v1/chat/completions", generation(true));
  // The tokenizer is loaded before the server listens: these answer while the model loads.
  const auto tokenizer_route = [this](bool encode) {
    return [this, encode](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body, nullptr, false);
      if (body.is_discarded()) return send_error(res, 400, "the request body is not valid JSON");
      try {
        send_json(res, 200, encode ? tokenize(body, model_, limits_) : detokenize(body, model_));
      } catch (const ApiError& e) {
        send_error(res, e.status, e.what(), e.param);
      }
    };
  };
  s.Post("/tokenize", tokenizer_route(true));
  s.Post("/detokenize", tokenizer_route(false));
  s.Get("/tokenizer_info", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, tokenizer_info(model_, limits_));
  });
}

int HttpServer::start() {
  // cpp-httplib listens with a backlog of 5, which 32 clients connecting at
  // once overflow (connections reset). The socket it binds is captured as it
  // is made and listened on again with the system's limit.
  socket_t bound = -1;
  server_->set_socket_options([&bound](socket_t sock) {
    httplib::default_socket_options(sock);
    bound = sock;
  });
  int port = settings_.port;
  if (port == 0) port = server_->bind_to_any_port(settings_.host);
  else if (!server_->bind_to_port(settings_.host, port)) port = -1;
  require(port > 0, "serve: cannot listen on " + settings_.host + ":" + std::to_string(settings_.port) +
                        " (in use, or not an address of this machine); pick another serve.host or serve.port");
  server_->set_socket_options(httplib::default_socket_options);  // the capture ends with this call
  require(::listen(bound, SOMAXCONN) == 0, std::string("serve: cannot listen: ") + std::strerror(errno));
  listener_ = std::thread([this] { server_->listen_after_bind(); });
  return port;
}

void HttpServer::stop() {
  if (!listener_.joinable()) return;
  server_->stop();
  listener_.join();
}

}  // namespace mh::serve
