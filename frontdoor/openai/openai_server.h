// The OpenAI-compatible HTTP API, as one handler for service::HttpServer:
//   POST /v1/completions, POST /v1/chat/completions (streaming with SSE, or not)
//   GET /v1/models, GET /v1/models/{id}
//   GET /health (the router is up), GET /ready (the worker answers), GET /metrics
//   GET /inspect (with enable_inspector): the request inspector's page
// A client that disconnects mid-request cancels it in the worker at once.
#pragma once

#include <memory>

#include <functional>
#include <string>

#include "dispatch/completion_loops.h"
#include "dispatch/router_metrics.h"
#include "dispatch/worker_client.h"
#include "dispatch/worker_pool.h"
#include "frontdoor/openai/openai_protocol.h"
#include "frontdoor/openai/request_log.h"
#include "frontdoor/openai/served_model.h"
#include "service/api_key.h"
#include "service/cancel_watcher.h"
#include "service/drain_state.h"
#include "service/http_request.h"
#include "service/http_responder.h"

namespace baton::frontdoor {

struct OpenAiServerContext {
  ServedModel* model = nullptr;
  dispatch::WorkerPool* pool = nullptr;
  dispatch::RouterMetrics* metrics = nullptr;
  service::CancelWatcher* watcher = nullptr;
  dispatch::CompletionLoops* loops = nullptr;  // where the worker streams run
  ProtocolLimits limits;
  // Without keys no authentication; else /v1/* need "Bearer <key>", whose tenant the
  // request is built for (BuildRequest).
  std::shared_ptr<const service::ApiKeys> api_keys = std::make_shared<service::ApiKeys>();
  RequestLog* request_log = nullptr;  // null: no per-request lines
  // The router's drain (SIGTERM): /ready and new requests answer 503 with Retry-After
  // from its start; once it expires, requests still running end with an error (a stream:
  // an error event and [DONE]) and `watcher` is asked to CheckAll. Null: never drains.
  const service::DrainState* drain = nullptr;
  // GET /inspect: the request inspector's page (docs/inspector.md); 404 when off.
  bool enable_inspector = false;
};

std::function<void(const service::HttpRequest&, service::HttpResponder&)> MakeOpenAiHandler(
    OpenAiServerContext context);

}  // namespace baton::frontdoor
