#include "frontdoor/openai/openai_server.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/strings.h"
#include "dispatch/generation.h"
#include "dispatch/request_trace.h"
#include "frontdoor/openai/capacity_query.h"
#include "frontdoor/openai/inspect_page.h"
#include "frontdoor/openai/request_builder.h"
#include "frontdoor/openai/request_log.h"
#include "frontdoor/openai/tool_call_output.h"
#include "service/api_key.h"
#include "service/http_query.h"
#include "service/metrics.h"

namespace baton::frontdoor {
namespace {

using Clock = std::chrono::steady_clock;
using service::HttpRequest;
using service::HttpResponder;

constexpr std::string_view kJson = "application/json";

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void SetFinish(const dispatch::ChoiceDelta& d, ChoiceOut* c) {
  c->finish_reason = d.finish_reason;
  if (d.stop_token_id) {
    c->stop_token_id = d.stop_token_id;  // an integer, as vLLM writes it
  } else if (!d.stop_reason.empty()) {
    c->stop_reason = d.stop_reason;
  }
}

std::vector<LogprobOut> ToLogprobs(const std::vector<dispatch::TokenLogprob>& in) {
  std::vector<LogprobOut> out;
  out.reserve(in.size());
  for (const dispatch::TokenLogprob& t : in) {
    LogprobOut o;
    o.token_id = t.token_id;
    o.token = t.token;
    o.logprob = t.logprob;
    for (const dispatch::TopLogprob& top : t.top)
      o.top.push_back({top.token_id, top.token, top.logprob});
    out.push_back(std::move(o));
  }
  return out;
}

class Handler {
 public:
  explicit Handler(OpenAiServerContext c) : c_(std::move(c)) {}

  void operator()(const HttpRequest& req, HttpResponder& out) {
    const Clock::time_point arrival = Clock::now();
    const std::string endpoint = EndpointLabel(req.path);
    const int code = Route(req, out, arrival);
    c_.metrics->CountRequest("http", endpoint, StrCat(code));
    c_.metrics->ObserveRequestSeconds(endpoint, SecondsSince(arrival));
  }

 private:
  // Known paths keep their name; the rest share one label so that scanners cannot grow
  // the metric's cardinality.
  static std::string EndpointLabel(const std::string& path) {
    for (const char* known : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health",
                              "/ready", "/metrics", "/inspect", "/inspect/plan"}) {
      if (path == known) return known;
    }
    if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
    return "other";
  }

  bool Draining() const { return c_.drain != nullptr && c_.drain->draining(); }
  bool DrainExpired() const { return c_.drain != nullptr && c_.drain->expired(); }

  static absl::Status DrainingError() {
    return absl::UnavailableError(
        "the router is shutting down (draining after SIGTERM); retry, and the request goes to "
        "another replica");
  }

  // What a request still running when the drain's grace ran out ends with: the reason,
  // instead of the cancellation that stopped its generation.
  static absl::Status GraceExpiredError() {
    return absl::UnavailableError(
        "the router shut down before the request finished: it ran past "
        "--shutdown-grace-seconds; retry it");
  }

  // The client went away, or the drain cancels what it left running.
  uint64_t WatchGeneration(HttpResponder& out, dispatch::Generation* gen) {
    return c_.watcher->Watch([this, &out] { return out.PeerClosed() || DrainExpired(); },
                             [gen] { gen->Cancel(); }, out.PeerFd());
  }

  int SendError(HttpResponder& out, const absl::Status& status) {
    const ApiError e = ToApiError(status);
    // 429 (every worker at its in-flight limit) and 503 (no healthy worker) pass soon.
    if (e.http_status == 429 || e.http_status == 503) {
      out.Send(e.http_status, kJson, ErrorJson(e), {{"Retry-After", "1"}});
    } else {
      out.Send(e.http_status, kJson, ErrorJson(e));
    }
    return e.http_status;
  }

  int Route(const HttpRequest& req, HttpResponder& out, Clock::time_point arrival) {
    const std::string& path = req.path;
    const bool is_get = req.method == "GET" || req.method == "HEAD";  // HEAD: headers only
    const bool is_post = req.method == "POST";
    if (path == "/health") {
      if (!is_get) return MethodNotAllowed(out, "GET");
      out.Send(200, kJson, R"({"status":"ok"})");
      return 200;
    }
    if (path == "/ready") {
      if (!is_get) return MethodNotAllowed(out, "GET");
      if (Draining()) return SendError(out, DrainingError());
      // Whether a route exists, as the health poller (every second) and failed requests
      // see the workers: a router with no worker that can serve is not ready.
      if (!c_.pool->CanRoute()) {
        return SendError(out, absl::UnavailableError(StrCat(
                                  "no healthy worker can serve a request (", c_.pool->size(),
                                  " known); check the workers and baton_router_worker_healthy")));
      }
      out.Send(200, kJson, R"({"status":"ready"})");
      return 200;
    }
    if (path == "/metrics") {
      if (!is_get) return MethodNotAllowed(out, "GET");
      out.Send(200, service::kMetricsContentType, service::RenderMetrics(c_.metrics->registry()));
      return 200;
    }
    if (path == "/inspect" || path.rfind("/inspect/", 0) == 0) return Inspect(req, out, is_get);
    // New work goes to another replica while this one drains; GETs (models) still answer.
    if (is_post && Draining()) return SendError(out, DrainingError());
    if (path.rfind("/v1/", 0) != 0) {
      return SendError(out, absl::NotFoundError(StrCat("no route for ", req.method, " ", path,
                                                       "; see /v1/models, /v1/completions, "
                                                       "/v1/chat/completions")));
    }
    const std::string_view auth = req.Header("authorization");
    if (c_.api_keys->required() && auth.empty()) {
      return SendError(out, absl::UnauthenticatedError(
                                "You didn't provide an API key. Send it in the Authorization "
                                "header as 'Bearer <key>'."));
    }
    const service::Tenant* tenant = c_.api_keys->Find(auth);
    if (tenant == nullptr) {
      return SendError(out, absl::UnauthenticatedError("Incorrect API key provided."));
    }
    if (path == "/v1/models") {
      if (!is_get) return MethodNotAllowed(out, "GET");
      out.Send(200, kJson, ModelListJson({Entry()}));
      return 200;
    }
    if (path.rfind("/v1/models/", 0) == 0) {
      if (!is_get) return MethodNotAllowed(out, "GET");
      const std::string id = path.substr(std::string("/v1/models/").size());
      if (id != c_.model->name()) {
        return SendError(out, absl::NotFoundError(StrCat("The model `", id, "` does not exist.")));
      }
      out.Send(200, kJson, ModelJson(Entry()));
      return 200;
    }
    if (path == "/v1/completions" || path == "/v1/chat/completions") {
      if (!is_post) return MethodNotAllowed(out, "POST");
      const bool chat = path == "/v1/chat/completions";
      absl::StatusOr<OpenAiRequest> parsed = chat ? ParseChatRequest(req.body, c_.limits)
                                                  : ParseCompletionRequest(req.body, c_.limits);
      if (!parsed.ok()) return SendError(out, parsed.status());
      if (parsed->request_id.empty()) {
        parsed->request_id = std::string(req.Header("x-request-id"));
      }
      return Generate(*parsed, *tenant, out, arrival);
    }
    return SendError(out, absl::NotFoundError(StrCat("no route for ", req.method, " ", path)));
  }

  // The request inspector (docs/inspector.md): a static page whose own calls go to /v1/*.
  int Inspect(const HttpRequest& req, HttpResponder& out, bool is_get) {
    if (!c_.enable_inspector) {
      return SendError(out, absl::NotFoundError(
                                "the request inspector is off; start the router with "
                                "--enable-inspector (BATON_ENABLE_INSPECTOR=1) to serve /inspect"));
    }
    if (!is_get) return MethodNotAllowed(out, "GET");
    if (c_.api_keys->Find(req.Header("authorization")) == nullptr) {
      // A browser then asks for the key (as the password) and sends it with the page's own
      // calls too (service::ApiKeys takes Basic credentials).
      out.Send(401, kJson,
               service::OpenAiErrorJson(
                   "The inspector needs the API key: log in with any user name and the key as "
                   "the password, or send 'Authorization: Bearer <key>'."),
               {{"WWW-Authenticate", R"(Basic realm="baton inspector", charset="UTF-8")"}});
      return 401;
    }
    if (req.path == "/inspect") {
      out.Send(200, "text/html; charset=utf-8", std::string(InspectPageHtml()),
               {{"Content-Security-Policy", std::string(kInspectContentSecurityPolicy)},
                {"Cache-Control", "no-store"},
                {"X-Content-Type-Options", "nosniff"},
                {"Referrer-Policy", "no-referrer"}});
      return 200;
    }
    if (req.path == "/inspect/plan") {
      auto plan = CapacityPlanJson(c_.model->worker_info(), service::QueryOf(req.target));
      if (!plan.ok()) return SendError(out, plan.status());
      out.Send(200, kJson, *plan, {{"Cache-Control", "no-store"}});
      return 200;
    }
    return SendError(out, absl::NotFoundError(StrCat("no route for GET ", req.path,
                                                     "; the inspector is at /inspect")));
  }

  int MethodNotAllowed(HttpResponder& out, std::string_view allowed) {
    out.Send(405, kJson, service::OpenAiErrorJson(StrCat("method not allowed; use ", allowed)),
             {{"Allow", std::string(allowed)}});
    return 405;
  }

  ModelEntry Entry() const {
    return ModelEntry{c_.model->name(), c_.model->created(), "baton", c_.model->max_model_len()};
  }

  int Generate(const OpenAiRequest& request, const service::Tenant& tenant, HttpResponder& out,
               Clock::time_point arrival) {
    const bool chat = request.kind == OpenAiRequest::Kind::kChat;
    absl::StatusOr<BuiltRequest> built =
        BuildRequest(request, *c_.model, chat ? "chatcmpl" : "cmpl", tenant);
    if (!built.ok()) return SendError(out, built.status());
    Run run{.request = request,
            .id = built->response_id,
            .created = static_cast<int64_t>(std::time(nullptr)),
            .arrival = arrival};
    run.last_token.assign(request.n, arrival);
    run.choices.resize(request.n);
    for (int i = 0; i < request.n; ++i) run.choices[i].index = i;
    for (int i = 0; i < request.n; ++i) {
      run.tools.push_back(ToolCallOutput::ForRequest(request, c_.model->tool_call_format()));
    }
    run.record.api = "http";
    run.record.request_id = run.id;
    run.record.worker_request_id = built->generation.request_id;
    run.record.timings.tokenize_seconds = built->tokenize_seconds;
    built->generation.arrival = arrival;
    if (built->generation.trace) {
      run.prompt_ids = built->generation.prompt_ids;
      run.params = built->generation.params;
    }
    c_.metrics->running().Increment();
    const int code = request.stream ? Stream(std::move(built->generation), run, out)
                                    : Whole(std::move(built->generation), run, out);
    c_.metrics->running().Decrement();
    if (c_.request_log != nullptr && c_.request_log->enabled()) {
      run.record.status = StrCat(code);
      run.record.prompt_tokens = run.usage.prompt_tokens;
      run.record.cached_tokens = run.usage.cached_tokens;
      run.record.completion_tokens = run.usage.completion_tokens;
      run.record.timings.total_seconds = SecondsSince(arrival);
      c_.request_log->Write(run.record);
    }
    return code;
  }

  struct Run {
    const OpenAiRequest& request;
    std::string id;
    int64_t created;
    Clock::time_point arrival;
    std::vector<Clock::time_point> last_token{};  // per choice, for inter-token latency
    std::vector<ChoiceOut> choices{};             // per choice: whole text (non-streaming)
    UsageOut usage{};
    bool saw_token = false;
    RequestRecord record{};  // the latency breakdown, and the --log-requests line
    // Per choice: how its text becomes content and tool calls; null for plain content.
    std::vector<std::unique_ptr<ToolCallOutput>> tools{};
    // A traced request: what CompleteTrace needs, and the trace from the final delta.
    std::vector<int32_t> prompt_ids{};
    baton::internal::v1::SamplingParams params{};
    std::shared_ptr<const baton::v1::RouteTrace> route{};
    std::shared_ptr<baton::v1::RequestTrace> trace{};
  };

  // A traced request's journey, completed and put beside its usage.
  void FinishTrace(Run& run, bool rerouted) {
    if (run.trace == nullptr) return;
    dispatch::CompleteTrace(
        {.tokenizer = c_.model->tokenizer().get(),
         .model = c_.model->name(),
         .prompt_ids = run.prompt_ids,
         .route = run.route,
         .route_seconds = run.record.timings.route_seconds,
         .rerouted = rerouted,
         .model_info = &c_.model->worker_info(),
         .params = &run.params,
         .tokenize_seconds = run.record.timings.tokenize_seconds,
         .time_to_first_token_seconds = run.record.timings.time_to_first_token_seconds,
         .total_seconds = SecondsSince(run.arrival),
         .queue_seconds = run.record.timings.queue_seconds,
         .cached_tokens = run.usage.cached_tokens,
         .completion_tokens = run.usage.completion_tokens},
        run.trace.get());
    run.usage.trace = run.trace;
  }

  // Where the request was placed, as Pick decided.
  static void NoteRoute(const ::baton::dispatch::Route& route, Run& run) {
    run.record.policy = route.policy;
    run.route = route.explanation;
    run.record.expected_cached_tokens = route.expected_cached_tokens;
    run.record.timings.route_seconds = route.route_seconds;
  }

  // Where it ran in the end (a rerouted request's second route).
  static void NoteWorkers(const dispatch::Generation& gen, Run& run) {
    run.record.worker = gen.route().decode->target();
    if (gen.route().prefill != nullptr) run.record.prefill_worker = gen.route().prefill->target();
    run.record.rerouted = run.record.rerouted || gen.rerouted();
  }

  // The timings the response carries, as of now.
  static RequestTimings TimingsNow(const Run& run) {
    RequestTimings t = run.record.timings;
    t.total_seconds = SecondsSince(run.arrival);
    return t;
  }

  void Observe(Run& run, const dispatch::ChoiceDelta& d) {
    if (!d.token_ids.empty()) {
      // Whole() reads deltas on its own thread, which may wake well after the loop thread
      // read them (on a busy host, after the last step): the token came when it was read.
      const Clock::time_point now = d.received == Clock::time_point() ? Clock::now() : d.received;
      if (!run.saw_token) {
        run.record.timings.time_to_first_token_seconds =
            std::chrono::duration<double>(now - run.arrival).count();
        c_.metrics->ObserveTimeToFirstToken(run.record.timings.time_to_first_token_seconds);
      } else if (run.last_token[d.index] != run.arrival) {
        c_.metrics->ObserveInterTokenSeconds(
            std::chrono::duration<double>(now - run.last_token[d.index]).count());
      }
      run.saw_token = true;
      run.last_token[d.index] = now;
    }
    if (d.finished) {
      if (d.trace != nullptr) run.trace = d.trace;
      // The prompt counts once however many choices share it (OpenAI's usage).
      run.usage.prompt_tokens = d.prompt_tokens;
      run.usage.cached_tokens = std::max(run.usage.cached_tokens, d.cached_tokens);
      run.usage.completion_tokens += d.completion_tokens;
      // Choices run side by side: each phase counts as its slowest choice's.
      RequestTimings& t = run.record.timings;
      t.queue_seconds = std::max(t.queue_seconds, d.queue_seconds);
      t.prefill_seconds = std::max(t.prefill_seconds, d.prefill.seconds);
      t.prefill_queue_seconds = std::max(t.prefill_queue_seconds, d.prefill.queue_seconds);
      t.prefill_compute_seconds = std::max(t.prefill_compute_seconds, d.prefill.compute_seconds);
      t.kv_transfer_seconds = std::max(t.kv_transfer_seconds, d.prefill.kv_transfer_seconds);
    }
  }

  // A worker that cannot be reached is left for another inside Generation, once, while
  // nothing was delivered (dispatch/generation.h).
  int Whole(dispatch::GenerationRequest request, Run& run, HttpResponder& out) {
    absl::StatusOr<::baton::dispatch::Route> route =
        c_.pool->Pick(request.prompt_ids, request.cache_salt, request.session, request.trace);
    if (!route.ok()) return SendError(out, route.status());
    NoteRoute(*route, run);
    absl::StatusOr<std::unique_ptr<dispatch::Generation>> started = dispatch::Generation::Start(
        c_.loops, *std::move(route), c_.model->tokenizer(), std::move(request));
    if (!started.ok()) return SendError(out, started.status());
    dispatch::Generation& gen = **started;
    const uint64_t watch = WatchGeneration(out, &gen);
    dispatch::ChoiceDelta d;
    while (gen.Next(&d)) {
      Observe(run, d);
      ChoiceOut& c = run.choices[d.index];
      c.text += d.text;
      if (run.request.logprobs) {
        c.has_logprobs = true;
        for (LogprobOut& lp : ToLogprobs(d.logprobs)) c.logprobs.push_back(std::move(lp));
      }
      if (d.finished) SetFinish(d, &c);
    }
    c_.watcher->Unwatch(watch);
    for (ChoiceOut& c : run.choices) {
      ToolCallOutput* tools = run.tools[c.index].get();
      if (tools == nullptr) continue;
      ChoiceOut parsed;
      parsed.finish_reason = c.finish_reason;
      tools->Feed(c.text, &parsed);
      tools->Finish(&parsed);
      c.text = std::move(parsed.text);
      c.finish_reason = parsed.finish_reason;
      ToolCallOutput::MergeInto(parsed.tool_calls, &c.tool_calls);
    }
    NoteWorkers(gen, run);
    if (!gen.status().ok()) return Failed(gen.status(), out);
    c_.metrics->ObserveFinished(run.usage.prompt_tokens, run.usage.cached_tokens,
                                run.usage.completion_tokens, SecondsSince(run.arrival),
                                run.record.timings.time_to_first_token_seconds);
    run.usage.timings = TimingsNow(run);
    FinishTrace(run, run.record.rerouted);
    const bool chat = run.request.kind == OpenAiRequest::Kind::kChat;
    const std::string model = c_.model->name();
    out.Send(200, kJson,
             chat ? ChatResponseJson(run.id, run.created, model, run.choices, run.usage)
                  : CompletionResponseJson(run.id, run.created, model, run.choices, run.usage),
             {{"X-Request-Id", run.id}});
    return 200;
  }

  int Failed(const absl::Status& status, HttpResponder& out) {
    if (absl::IsCancelled(status) && DrainExpired() && !out.PeerClosed()) {
      return SendError(out, GraceExpiredError());
    }
    if (out.PeerClosed() || absl::IsCancelled(status)) {
      c_.metrics->CountClientCancel();
      return 499;  // nginx's "client closed request"; nobody is there to read an answer
    }
    return SendError(out, status);
  }

  // What a streamed response shares between the connection's thread and the gRPC
  // threads that deliver deltas.
  struct StreamState {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::string> early;  // events before the response started
    bool started = false;            // events now go straight to the socket
    bool need_flush = false;         // the socket did not take an event at once
    bool client_gone = false;
    bool done = false;
    absl::Status status;
    dispatch::Generation* gen = nullptr;  // set before `started`
    std::vector<bool> role_sent;
    std::vector<int64_t> text_offset;
  };

  // Called with s.mu held.
  std::string EventFor(StreamState& s, Run& run, const dispatch::ChoiceDelta& d) {
    const bool chat = run.request.kind == OpenAiRequest::Kind::kChat;
    Observe(run, d);
    ChoiceOut c;
    c.index = d.index;
    c.has_logprobs = run.request.logprobs.has_value();
    if (c.has_logprobs) c.logprobs = ToLogprobs(d.logprobs);
    c.text_offset = s.text_offset[d.index];
    s.text_offset[d.index] += static_cast<int64_t>(d.text.size());
    if (d.finished) SetFinish(d, &c);
    if (ToolCallOutput* tools = run.tools[d.index].get(); tools != nullptr) {
      tools->Feed(d.text, &c);
      if (d.finished) tools->Finish(&c);
    } else {
      c.text = d.text;
    }
    const bool with_role = chat && !s.role_sent[d.index];
    s.role_sent[d.index] = true;
    return StrCat("data: ",
                  chat ? ChatChunkJson(run.id, run.created, c_.model->name(), c, with_role)
                       : CompletionChunkJson(run.id, run.created, c_.model->name(), c),
                  "\n\n");
  }

  // Called with s.mu held, once the response has started.
  static void Push(StreamState& s, HttpResponder& out, const std::string& event) {
    if (s.client_gone) return;
    switch (out.WriteChunkNoWait(event)) {
      case HttpResponder::NoWait::kSent:
        break;
      case HttpResponder::NoWait::kQueued:
        s.need_flush = true;
        s.cv.notify_all();
        break;
      case HttpResponder::NoWait::kFailed:
        s.client_gone = true;
        s.gen->Cancel();
        break;
    }
  }

  // Each delta is written to the socket on the loop thread that read it from the worker,
  // without waiting (WriteChunkNoWait), so a token crosses no router thread. This thread
  // starts the response, sends what the socket did not take at once, and ends it.
  int Stream(dispatch::GenerationRequest request, Run& run, HttpResponder& out) {
    absl::StatusOr<::baton::dispatch::Route> route =
        c_.pool->Pick(request.prompt_ids, request.cache_salt, request.session, request.trace);
    if (!route.ok()) return SendError(out, route.status());
    NoteRoute(*route, run);
    StreamState s;
    s.role_sent.assign(run.request.n, false);
    s.text_offset.assign(run.request.n, 0);
    dispatch::GenerationCallbacks callbacks;
    callbacks.on_delta = [this, &s, &run, &out](const dispatch::ChoiceDelta& d) {
      std::lock_guard<std::mutex> lock(s.mu);
      std::string event = EventFor(s, run, d);
      if (s.started) {
        Push(s, out, event);
      } else {
        s.early.push_back(std::move(event));
        s.cv.notify_all();
      }
    };
    callbacks.on_done = [&s](const absl::Status& status) {
      std::lock_guard<std::mutex> lock(s.mu);
      s.done = true;
      s.status = status;
      s.cv.notify_all();
    };
    absl::StatusOr<std::unique_ptr<dispatch::Generation>> started = dispatch::Generation::Start(
        c_.loops, *std::move(route), c_.model->tokenizer(), std::move(request), callbacks);
    if (!started.ok()) return SendError(out, started.status());
    dispatch::Generation* gen = started->get();
    const uint64_t watch = WatchGeneration(out, gen);
    const int code = StreamResponse(s, *gen, run, out);
    c_.watcher->Unwatch(watch);
    NoteWorkers(*gen, run);
    return code;
  }

  int StreamResponse(StreamState& s, dispatch::Generation& gen, Run& run, HttpResponder& out) {
    const std::string model = c_.model->name();
    std::unique_lock<std::mutex> lock(s.mu);
    s.cv.wait(lock, [&s] { return !s.early.empty() || s.done; });
    // Nothing is sent before the first delta, so that errors the worker reports at once
    // (a full queue, a bad parameter) still get their HTTP status.
    if (s.early.empty()) {
      const absl::Status status = s.status;
      lock.unlock();
      return Failed(status, out);
    }
    lock.unlock();
    if (!out.StartStream(200, "text/event-stream",
                         {{"Cache-Control", "no-cache"}, {"X-Request-Id", run.id}})) {
      gen.Cancel();
      c_.metrics->CountClientCancel();
      return 499;
    }
    lock.lock();
    s.gen = &gen;
    for (const std::string& event : s.early) Push(s, out, event);
    s.early.clear();
    s.started = true;
    for (;;) {
      s.cv.wait(lock, [&s] { return s.need_flush || s.done; });
      if (!s.need_flush) break;
      s.need_flush = false;
      lock.unlock();
      const bool flushed = out.Flush();
      lock.lock();
      if (!flushed && !s.client_gone) {
        s.client_gone = true;
        gen.Cancel();
      }
    }
    const bool client_gone = s.client_gone;
    absl::Status status = s.status;
    lock.unlock();
    if (absl::IsCancelled(status) && !client_gone && DrainExpired() && !out.PeerClosed()) {
      status = GraceExpiredError();
    }
    if (client_gone) {
      c_.metrics->CountClientCancel();
      return 499;
    }
    if (!status.ok()) {
      if (out.PeerClosed() || absl::IsCancelled(status)) {
        c_.metrics->CountClientCancel();
        return 499;
      }
      // The status line is gone; the error travels as an event, as vLLM sends it.
      out.WriteChunk(StrCat("data: ", ErrorJson(ToApiError(status)), "\n\n"));
      out.WriteChunk("data: [DONE]\n\n");
      out.EndStream();
      return ToApiError(status).http_status;
    }
    c_.metrics->ObserveFinished(run.usage.prompt_tokens, run.usage.cached_tokens,
                                run.usage.completion_tokens, SecondsSince(run.arrival),
                                run.record.timings.time_to_first_token_seconds);
    // A traced request's journey travels in the usage chunk, asked for or not.
    if (run.request.include_usage || run.trace != nullptr) {
      run.usage.timings = TimingsNow(run);
      FinishTrace(run, gen.rerouted());
      out.WriteChunk(
          StrCat("data: ", UsageChunkJson(run.request.kind, run.id, run.created, model, run.usage),
                 "\n\n"));
    }
    out.WriteChunk("data: [DONE]\n\n");
    out.EndStream();
    return 200;
  }

  OpenAiServerContext c_;
};

}  // namespace

std::function<void(const service::HttpRequest&, service::HttpResponder&)> MakeOpenAiHandler(
    OpenAiServerContext context) {
  auto handler = std::make_shared<Handler>(std::move(context));
  return [handler](const service::HttpRequest& req, service::HttpResponder& out) {
    (*handler)(req, out);
  };
}

}  // namespace baton::frontdoor
