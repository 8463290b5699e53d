// A running front door: the OpenAI HTTP API and the baton.v1 gRPC API (with
// grpc.health.v1 and reflection) over one worker. `baton-router` and `baton serve` both
// run one of these.
//
//   BATON_ASSIGN_OR_RETURN(auto router, RouterServer::Start(options));
//   ... router->http_port(), router->grpc_port() ...
//   router->Shutdown();
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dispatch/completion_loops.h"
#include "dispatch/router_metrics.h"
#include "dispatch/worker_client.h"
#include "frontdoor/grpc/grpc_api.h"
#include "frontdoor/openai/openai_protocol.h"
#include "frontdoor/openai/request_log.h"
#include "frontdoor/openai/served_model.h"
#include "grpcpp/grpcpp.h"
#include "service/cancel_watcher.h"
#include "service/drain_state.h"
#include "service/health_service.h"
#include "service/http_options.h"
#include "service/http_server.h"
#include "service/tls_context.h"
#include "toolcall/tool_call_format.h"

namespace baton::router {

struct RouterOptions {
  // Workers' internal gRPC addresses, each a comma-separated host:port list: colocated
  // workers, and the two pools of split ones (docs/disaggregation.md).
  std::string worker = "127.0.0.1:50061";
  std::string prefill_workers;
  std::string decode_workers;
  dispatch::PoolOptions pool;                  // placement policy, KV index, failover, health polls
  std::string tokenizer;                       // model directory, .gguf or tokenizer.json
  std::string served_model_name;               // empty: the worker's model id
  std::vector<std::string> histogram_buckets;  // --histogram-buckets NAME=v1,v2,...
  std::string chat_template_file;              // empty: the tokenizer config's chat_template
  // How the model writes tool calls; unset: what the chat template implies, unless
  // no_tool_call_parser (tool calls then stay in the content).
  std::optional<toolcall::Format> tool_call_parser;
  bool no_tool_call_parser = false;
  std::string host = "127.0.0.1";
  int http_port = 8000;   // 0: any free port
  int grpc_port = 50051;  // 0: any free port; -1: no gRPC API
  // Threads (one completion queue each) running the router's gRPC calls: baton.v1
  // Generate, and the worker streams of HTTP requests (dispatch/completion_loops.h).
  int grpc_threads = 1;
  std::string api_key;       // empty: no key of tenant "default"
  std::string api_key_file;  // empty: none (service/api_key.h: lines KEY TENANT [MIN_PRIORITY])
  service::PublicTlsFiles public_tls;              // HTTPS and gRPC TLS; empty: plaintext
  std::string public_tls_flags = "--public-tls-";  // how errors name the files' flags
  frontdoor::ProtocolLimits limits;
  service::HttpServerOptions http;                 // host and port come from above
  absl::Duration worker_wait = absl::Seconds(60);  // for the worker to answer at start-up
  bool log_requests = false;      // one JSON line per request on stdout (RequestLog)
  bool enable_inspector = false;  // GET /inspect (docs/inspector.md)
  // Special tokens' text typed inside chat messages becomes control tokens (the old,
  // injectable behaviour) instead of plain text.
  bool parse_special_in_content = false;
};

class RouterServer {
 public:
  static absl::StatusOr<std::unique_ptr<RouterServer>> Start(const RouterOptions& options);
  ~RouterServer();

  int http_port() const;
  // "https" when the public ports speak TLS, else "http".
  const char* http_scheme() const { return options_.public_tls.enabled() ? "https" : "http"; }
  int grpc_port() const { return grpc_port_; }
  const frontdoor::ServedModel& model() const { return *model_; }
  dispatch::RouterMetrics& metrics() { return metrics_; }

  // The drain on SIGTERM: readiness (gRPC health, /ready) turns NOT_SERVING and new
  // requests of both APIs get 503 / UNAVAILABLE (HTTP connections are still accepted, and
  // closed after each answer) while requests in flight go on for up to `grace`; those
  // left then end with an error saying so (a stream: an error event and [DONE]), given
  // `last_words` to write it before Shutdown closes what remains.
  void Drain(absl::Duration grace, absl::Duration last_words = absl::Seconds(2));

  // Stops accepting, gives open requests `grace` to finish, then cancels them.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

 private:
  RouterServer() = default;

  RouterOptions options_;
  dispatch::RouterMetrics metrics_;
  service::DrainState drain_;  // before the servers whose handlers read it
  std::unique_ptr<dispatch::WorkerPool> pool_;
  std::unique_ptr<frontdoor::ServedModel> model_;
  std::unique_ptr<service::CancelWatcher> watcher_;
  std::unique_ptr<frontdoor::RequestLog> request_log_;
  std::unique_ptr<dispatch::CompletionLoops> loops_;  // outlives the calls of both servers
  std::unique_ptr<service::HttpServer> http_;
  std::unique_ptr<service::HealthService> health_;
  std::unique_ptr<frontdoor::GrpcApi> grpc_api_;  // before grpc_: the server goes first
  std::unique_ptr<grpc::Server> grpc_;
  int grpc_port_ = -1;
};

}  // namespace baton::router
