#include "router/router_server.h"

#include <chrono>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "router/grpc_api.h"
#include "router/openai_server.h"

namespace baton::router {

absl::StatusOr<std::unique_ptr<RouterServer>> RouterServer::Start(const RouterOptions& options) {
  std::unique_ptr<RouterServer> r(new RouterServer());
  r->options_ = options;
  BATON_ASSIGN_OR_RETURN(
      r->pool_, WorkerPool::Create(options.worker, options.prefill_workers, options.decode_workers,
                                   options.pool, &r->metrics_));
  BATON_ASSIGN_OR_RETURN(r->model_, ServedModel::Load(options.tokenizer, options.served_model_name,
                                                      r->pool_->primary(), options.worker_wait));
  r->pool_->Start(r->model_->worker_info().model_id(), r->model_->worker_info().block_size());
  r->watcher_ = std::make_unique<service::CancelWatcher>();
  r->request_log_ = std::make_unique<RequestLog>(options.log_requests);

  OpenAiServerContext http_context;
  http_context.model = r->model_.get();
  http_context.pool = r->pool_.get();
  http_context.metrics = &r->metrics_;
  http_context.watcher = r->watcher_.get();
  http_context.limits = options.limits;
  http_context.api_key = options.api_key;
  http_context.request_log = r->request_log_.get();
  service::HttpServerOptions http = options.http;
  http.host = options.host;
  http.port = options.http_port;
  BATON_ASSIGN_OR_RETURN(r->http_,
                         service::HttpServer::Start(http, MakeOpenAiHandler(http_context)));

  if (options.grpc_port >= 0) {
    GrpcApiContext grpc_context;
    grpc_context.model = r->model_.get();
    grpc_context.pool = r->pool_.get();
    grpc_context.metrics = &r->metrics_;
    grpc_context.limits = options.limits;
    grpc_context.api_key = options.api_key;
    grpc_context.request_log = r->request_log_.get();
    r->grpc_api_ = std::make_unique<GrpcApi>(grpc_context, options.grpc_generate_threads);
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    const std::string address = StrCat(options.host, ":", options.grpc_port);
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &r->grpc_port_);
    r->grpc_api_->Register(builder);
    // Requests are bounded by the HTTP body limit; gRPC gets the same bound.
    builder.SetMaxReceiveMessageSize(static_cast<int>(options.http.max_body_bytes));
    r->grpc_ = builder.BuildAndStart();
    if (r->grpc_ == nullptr || r->grpc_port_ == 0) {
      return absl::UnavailableError(StrCat("cannot listen for gRPC on ", address,
                                           "; is the port in use? Pick another with --grpc-port"));
    }
    r->grpc_api_->Start();
    r->grpc_->GetHealthCheckService()->SetServingStatus("baton.v1.Baton", true);
  }
  return r;
}

RouterServer::~RouterServer() { Shutdown(absl::ZeroDuration()); }

int RouterServer::http_port() const { return http_->port(); }

void RouterServer::Shutdown(absl::Duration grace) {
  if (grpc_ != nullptr) {
    grpc_->GetHealthCheckService()->Shutdown();
    grpc_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
    grpc_api_->Stop();
    grpc_.reset();
  }
  if (http_ != nullptr) {
    http_->Shutdown(grace);
    http_.reset();
  }
  watcher_.reset();
}

}  // namespace baton::router
