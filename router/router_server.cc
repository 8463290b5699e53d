#include "router/router_server.h"

#include <chrono>
#include <utility>

#include "common/host_port.h"
#include "common/secret_token.h"
#include "common/status.h"
#include "common/strings.h"
#include "dispatch/completion_loops.h"
#include "frontdoor/grpc/grpc_api.h"
#include "frontdoor/openai/openai_server.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "service/histogram_buckets.h"

namespace baton::router {

absl::StatusOr<std::unique_ptr<RouterServer>> RouterServer::Start(const RouterOptions& options) {
  std::unique_ptr<RouterServer> r(new RouterServer());
  r->options_ = options;
  // Tenants' cache namespaces are keyed by the cluster token when there is one, so that
  // every router of the cluster, and this one after a restart, gives a tenant the same
  // namespace; else by a secret of this process alone.
  const std::string& token = options.pool.auth->token();
  BATON_ASSIGN_OR_RETURN(std::shared_ptr<const service::ApiKeys> api_keys,
                         service::ApiKeys::Create(options.api_key, options.api_key_file,
                                                  token.empty() ? RandomToken() : token));
  BATON_ASSIGN_OR_RETURN(const service::HistogramBuckets buckets,
                         service::HistogramBuckets::Parse(options.histogram_buckets));
  BATON_ASSIGN_OR_RETURN(
      r->pool_, dispatch::WorkerPool::Create(options.worker, options.prefill_workers,
                                             options.decode_workers, options.pool, &r->metrics_));
  BATON_ASSIGN_OR_RETURN(
      r->model_,
      frontdoor::ServedModel::Load(options.tokenizer, options.served_model_name,
                                   r->pool_->primary(), options.worker_wait,
                                   options.parse_special_in_content, options.chat_template_file));
  if (options.tool_call_parser) r->model_->set_tool_call_format(options.tool_call_parser);
  if (options.no_tool_call_parser) r->model_->set_tool_call_format(std::nullopt);
  r->pool_->Start(r->model_->worker_info().model_id(), r->model_->worker_info().block_size());
  // Before either API listens: every request finds its latency series.
  r->metrics_.SetModel(r->model_->name(), buckets);
  r->watcher_ = std::make_unique<service::CancelWatcher>();
  r->request_log_ = std::make_unique<frontdoor::RequestLog>(options.log_requests);

  // One bound on the request bytes held at once, for both APIs.
  auto bodies = std::make_shared<service::ByteBudget>(options.http.max_inflight_body_bytes);
  // The loops come first: the HTTP API's worker streams run on them too.
  if (options.grpc_port >= 0) {
    frontdoor::GrpcApiContext grpc_context;
    grpc_context.model = r->model_.get();
    grpc_context.pool = r->pool_.get();
    grpc_context.metrics = &r->metrics_;
    grpc_context.limits = options.limits;
    grpc_context.api_keys = api_keys;
    grpc_context.request_log = r->request_log_.get();
    grpc_context.bodies = bodies;
    grpc_context.drain = &r->drain_;
    r->grpc_api_ = std::make_unique<frontdoor::GrpcApi>(grpc_context);
    r->health_ =
        std::make_unique<service::HealthService>(std::vector<std::string>{"", "baton.v1.Baton"});
    // Ours instead (service/health_service.h): gRPC's is a callback service.
    grpc::EnableDefaultHealthCheckService(false);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    const std::string address = HostPort(options.host, options.grpc_port);
    std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
    if (options.public_tls.enabled()) {
      BATON_ASSIGN_OR_RETURN(
          credentials, service::ServerTlsCredentials(options.public_tls, options.public_tls_flags));
    }
    builder.AddListeningPort(address, credentials, &r->grpc_port_);
    r->grpc_api_->Register(builder);
    builder.RegisterService(r->health_.get());
    r->loops_ = dispatch::CompletionLoops::AddTo(builder, options.grpc_threads);
    // Requests are bounded by the HTTP body limit; gRPC gets the same bound.
    builder.SetMaxReceiveMessageSize(static_cast<int>(options.http.max_body_bytes));
    r->grpc_ = builder.BuildAndStart();
    if (r->grpc_ == nullptr || r->grpc_port_ == 0) {
      return absl::UnavailableError(StrCat("cannot listen for gRPC on ", address,
                                           "; is the port in use? Pick another with --grpc-port"));
    }
    r->loops_->Start();
    r->grpc_api_->Start(r->loops_.get());
  } else {
    r->loops_ = dispatch::CompletionLoops::Create(options.grpc_threads);
  }

  frontdoor::OpenAiServerContext http_context;
  http_context.model = r->model_.get();
  http_context.pool = r->pool_.get();
  http_context.metrics = &r->metrics_;
  http_context.watcher = r->watcher_.get();
  http_context.loops = r->loops_.get();
  http_context.limits = options.limits;
  http_context.api_keys = api_keys;
  http_context.request_log = r->request_log_.get();
  http_context.enable_inspector = options.enable_inspector;
  http_context.drain = &r->drain_;
  service::HttpServerOptions http = options.http;
  if (options.public_tls.enabled()) {
    BATON_ASSIGN_OR_RETURN(http.tls,
                           service::ServerTlsContext(options.public_tls, options.public_tls_flags));
  }
  http.host = options.host;
  http.port = options.http_port;
  http.bodies = bodies;
  BATON_ASSIGN_OR_RETURN(r->http_,
                         service::HttpServer::Start(http, MakeOpenAiHandler(http_context)));
  return r;
}

RouterServer::~RouterServer() { Shutdown(absl::ZeroDuration()); }

int RouterServer::http_port() const { return http_->port(); }

void RouterServer::Drain(absl::Duration grace, absl::Duration last_words) {
  drain_.Begin();
  if (health_ != nullptr) health_->Shutdown();  // NOT_SERVING first, as /ready
  if (http_ != nullptr) http_->BeginDrain();
  // Requests of both APIs count in baton_router_requests_running until they have answered.
  const absl::Time deadline = absl::Now() + grace;
  while (metrics_.running().Value() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (metrics_.running().Value() > 0) {
    // Cancels the generations left; their handlers answer with why (an HTTP stream: an
    // error event and [DONE]) within `last_words`, after which the sockets close.
    drain_.Expire();
    watcher_->CheckAll();
  }
  Shutdown(last_words);
}

void RouterServer::Shutdown(absl::Duration grace) {
  if (grpc_ != nullptr) {
    health_->Shutdown();
    grpc_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
    grpc_api_->Stop();
  }
  if (http_ != nullptr) {
    http_->Shutdown(grace);
    http_.reset();
  }
  // No call of either API is left to start an operation on the queues.
  if (loops_ != nullptr) loops_->Shutdown();
  grpc_.reset();
  watcher_.reset();
}

}  // namespace baton::router
