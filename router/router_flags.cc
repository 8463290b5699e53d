#include "router/router_flags.h"

#include "common/status.h"
#include "common/strings.h"
#include "toolcall/tool_call_format.h"

namespace baton::router {

void AddRouterFlags(CLI::App* cmd, RouterFlags* f, bool with_model) {
  if (with_model) {
    cmd->add_option("model,--model", f->model,
                    "The served model's directory or .gguf (its tokenizer and chat template)")
        ->required()
        ->envname("BATON_MODEL");
  }
  cmd->add_option("--tokenizer", f->tokenizer, "Tokenizer to use instead of --model's")
      ->envname("BATON_TOKENIZER");
  cmd->add_option("--chat-template", f->chat_template,
                  "A Jinja chat template file, for models that ship none (or to replace "
                  "theirs)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tool-call-parser", f->tool_call_parser,
                  "How the model writes tool calls: hermes, llama3_json, mistral, functionary, "
                  "command_r, deepseek_r1, firefunction, or none (default: what the chat "
                  "template renders)")
      ->envname("BATON_TOOL_CALL_PARSER");
  cmd->add_option("--served-model-name", f->served_model_name,
                  "Model name clients use (default: the worker's model name)")
      ->envname("BATON_SERVED_MODEL_NAME");
  cmd->add_option("--host", f->host, "Address the HTTP and gRPC APIs listen on")
      ->envname("BATON_HOST");
  cmd->add_option("--port", f->port, "HTTP port of the OpenAI-compatible API (0: any free port)")
      ->envname("BATON_PORT")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--grpc-port", f->grpc_port,
                  "Port of the baton.v1 gRPC API (0: any free port; -1: off)")
      ->envname("BATON_GRPC_PORT")
      ->check(CLI::Range(-1, 65535));
  cmd->add_option("--grpc-threads", f->grpc_threads,
                  "Threads that run the router's gRPC calls: Generate, and the worker streams of "
                  "HTTP requests (each owns one completion queue)")
      ->envname("BATON_GRPC_THREADS")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--api-key", f->api_key,
                  "Require 'Authorization: Bearer <key>' on /v1/* and gRPC calls")
      ->envname("BATON_API_KEY");
  cmd->add_option("--api-key-file", f->api_key_file,
                  "API keys of several tenants, one 'KEY TENANT [MIN_PRIORITY]' per line: each "
                  "tenant gets its own prefix-cache namespace and a priority ceiling")
      ->envname("BATON_API_KEY_FILE");
  cmd->add_option("--public-tls-cert", f->public_tls_cert,
                  "PEM certificate chain for HTTPS on --port and TLS on --grpc-port (default: "
                  "--tls-cert when given; else plaintext)")
      ->envname("BATON_PUBLIC_TLS_CERT");
  cmd->add_option("--public-tls-key", f->public_tls_key,
                  "PEM private key of --public-tls-cert (default: --tls-key when given)")
      ->envname("BATON_PUBLIC_TLS_KEY");
  cmd->add_option("--max-body-bytes", f->max_body_bytes, "Largest request body (413 above)")
      ->envname("BATON_MAX_BODY_BYTES")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 30));
  cmd->add_option("--max-inflight-body-bytes", f->max_inflight_body_bytes,
                  "Request bodies the router holds at once, over all requests in flight (429 "
                  "with Retry-After above; 0: no bound)")
      ->envname("BATON_MAX_INFLIGHT_BODY_BYTES")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--max-connections", f->max_connections,
                  "Open HTTP connections at once (503 above)")
      ->envname("BATON_MAX_CONNECTIONS")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--max-n", f->max_n, "Largest 'n' (choices per request)")
      ->envname("BATON_MAX_N")
      ->check(CLI::Range(1, 128));
  cmd->add_option("--max-stop", f->max_stop, "Most stop strings (and stop ids) per request")
      ->envname("BATON_MAX_STOP")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--max-logprobs", f->max_top_logprobs, "Largest 'logprobs'/'top_logprobs'")
      ->envname("BATON_MAX_LOGPROBS")
      ->check(CLI::Range(0, 100));
  cmd->add_option("--worker-wait-seconds", f->worker_wait_seconds,
                  "How long to wait at start-up for the worker to answer")
      ->envname("BATON_WORKER_WAIT_SECONDS")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--prefill-failover", f->prefill_failover,
                  "When a prefill worker fails: retry (once on another prefill worker, then "
                  "on the decode worker), local (on the decode worker), none (fail)")
      ->envname("BATON_PREFILL_FAILOVER")
      ->check(CLI::IsMember({"retry", "local", "none"}));
  cmd->add_option("--policy", f->policy,
                  "Where requests go: baton (cache-aware cost, the default), round_robin, "
                  "least_loaded, power_of_two, sglang_cache_aware (docs/routing.md)")
      ->envname("BATON_POLICY")
      ->check(CLI::IsMember(routing::RoutingPolicyNames()));
  cmd->add_flag("--no-kv-events", f->no_kv_events,
                "Do not follow the workers' KV event streams; the KV index then remembers what "
                "it sent where (approximate)")
      ->envname("BATON_NO_KV_EVENTS");
  cmd->add_option("--approximate-ttl-seconds", f->approximate_ttl_seconds,
                  "With --no-kv-events: how long the index assumes a worker keeps a prompt")
      ->envname("BATON_APPROXIMATE_TTL_SECONDS")
      ->check(CLI::Range(1.0, 86400.0));
  cmd->add_option("--max-inflight-per-worker", f->max_inflight_per_worker,
                  "Requests in flight on one worker beyond which the router answers 429 with "
                  "Retry-After (0: no limit)")
      ->envname("BATON_MAX_INFLIGHT_PER_WORKER")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--health-poll-seconds", f->health_poll_seconds,
                  "How often every worker's health and KV usage are polled")
      ->envname("BATON_HEALTH_POLL_SECONDS")
      ->check(CLI::Range(0.05, 3600.0));
  cmd->add_option("--max-local-prefill-tokens", f->max_local_prefill_tokens,
                  "Split workers: prompts of at most this many tokens are computed by the decode "
                  "worker itself, skipping the prefill worker (0: never)")
      ->envname("BATON_MAX_LOCAL_PREFILL_TOKENS")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--migration-limit", f->migration_limit,
                  "How many times a stream whose worker becomes unreachable mid-stream is "
                  "continued on another worker from the tokens it had generated (0: the "
                  "stream ends with the error)")
      ->envname("BATON_MIGRATION_LIMIT")
      ->check(CLI::Range(0, 16));
  cmd->add_flag("--no-decode-with-prefill", f->no_decode_with_prefill,
                "Split workers: open the decode stream only once the Prefill call answered "
                "(one router round trip later), for decode workers older than this router")
      ->envname("BATON_NO_DECODE_WITH_PREFILL");
  AddShutdownGraceFlag(cmd, &f->shutdown_grace_seconds);
  cmd->add_flag("--log-requests", f->log_requests,
                "Log one JSON line per request on stdout: its workers, expected and actual "
                "cached tokens, and where its time went (docs/routing.md)")
      ->envname("BATON_LOG_REQUESTS");
  cmd->add_flag("--enable-inspector", f->enable_inspector,
                "Serve the request inspector at /inspect: a page that runs a traced request and "
                "draws its journey (docs/inspector.md); behind the API key when one is set")
      ->envname("BATON_ENABLE_INSPECTOR");
  cmd->add_flag("--parse-special-in-content", f->parse_special_in_content,
                "Read special tokens' text typed inside chat messages ('<|im_end|>') as control "
                "tokens, as older servers did; by default it is plain text, so a message "
                "cannot close its turn or open a system turn")
      ->envname("BATON_PARSE_SPECIAL_IN_CONTENT");
}

void AddRouterMetricsFlags(CLI::App* cmd, RouterFlags* f) {
  cmd->add_option("--histogram-buckets", f->histogram_buckets,
                  "NAME=v1,v2,...: the upper bounds of the histogram baton_NAME instead of "
                  "vLLM's defaults (repeatable; docs/operations.md lists the names)")
      ->envname("BATON_HISTOGRAM_BUCKETS")
      ->delimiter(' ');
}

void AddWorkerListFlags(CLI::App* cmd, RouterFlags* f) {
  cmd->add_option("--worker", f->worker,
                  "Colocated workers' internal gRPC addresses (host:port, comma-separated; "
                  "dns:HOST:PORT for every address a name such as a Kubernetes headless "
                  "Service resolves to, re-resolved every 10 s; default 127.0.0.1:50061 "
                  "unless --decode-worker is given)")
      ->envname("BATON_WORKER");
  cmd->add_option("--prefill-worker", f->prefill_workers,
                  "Prefill workers (baton-prefill), comma-separated host:port or dns:HOST:PORT")
      ->envname("BATON_PREFILL_WORKERS");
  cmd->add_option("--decode-worker", f->decode_workers,
                  "Decode workers (baton-decode), comma-separated host:port or dns:HOST:PORT; "
                  "with these and "
                  "without --worker, only split workers serve")
      ->envname("BATON_DECODE_WORKERS");
  service::AddInternalAuthFlags(cmd, &f->internal_auth, /*serves=*/false);
}

absl::StatusOr<RouterOptions> ToRouterOptions(const RouterFlags& f) {
  RouterOptions o;
  o.tokenizer = f.tokenizer.empty() ? f.model : f.tokenizer;
  if (o.tokenizer.empty()) {
    return absl::InvalidArgumentError("give --model (or --tokenizer) so the router can tokenize");
  }
  o.served_model_name = f.served_model_name;
  o.histogram_buckets = f.histogram_buckets;
  o.chat_template_file = f.chat_template;
  if (!f.tool_call_parser.empty() && f.tool_call_parser != "none") {
    BATON_ASSIGN_OR_RETURN(toolcall::Format format, toolcall::FormatByName(f.tool_call_parser));
    o.tool_call_parser = format;
  }
  o.no_tool_call_parser = f.tool_call_parser == "none";
  o.host = f.host;
  o.http_port = f.port;
  o.grpc_port = f.grpc_port;
  o.grpc_threads = f.grpc_threads;
  o.api_key = f.api_key;
  o.api_key_file = f.api_key_file;
  const bool own_tls = !f.public_tls_cert.empty() || !f.public_tls_key.empty();
  o.public_tls.cert = own_tls ? f.public_tls_cert : f.internal_auth.tls_cert;
  o.public_tls.key = own_tls ? f.public_tls_key : f.internal_auth.tls_key;
  o.public_tls_flags = own_tls ? "--public-tls-" : "--tls-";
  o.http.max_body_bytes = static_cast<size_t>(f.max_body_bytes);
  o.http.max_connections = f.max_connections;
  o.http.max_inflight_body_bytes = static_cast<size_t>(f.max_inflight_body_bytes);
  o.limits.max_n = f.max_n;
  o.limits.max_stop = f.max_stop;
  o.limits.max_top_logprobs = f.max_top_logprobs;
  o.worker_wait = absl::Seconds(f.worker_wait_seconds);
  o.worker = f.worker;
  o.prefill_workers = f.prefill_workers;
  o.decode_workers = f.decode_workers;
  if (o.worker.empty() && o.decode_workers.empty()) o.worker = "127.0.0.1:50061";
  BATON_ASSIGN_OR_RETURN(o.pool.auth, service::InternalAuth::Load(f.internal_auth));
  BATON_ASSIGN_OR_RETURN(o.pool.failover, dispatch::ParsePrefillFailover(f.prefill_failover));
  o.pool.policy = f.policy;
  o.pool.kv_events = !f.no_kv_events;
  o.pool.approximate_ttl = absl::Seconds(f.approximate_ttl_seconds);
  o.pool.max_inflight_per_worker = f.max_inflight_per_worker;
  o.pool.poll_interval = absl::Seconds(f.health_poll_seconds);
  o.log_requests = f.log_requests;
  o.enable_inspector = f.enable_inspector;
  o.parse_special_in_content = f.parse_special_in_content;
  o.pool.max_local_prefill_tokens = f.max_local_prefill_tokens;
  o.pool.decode_with_prefill = !f.no_decode_with_prefill;
  o.pool.migration_limit = f.migration_limit;
  return o;
}

}  // namespace baton::router
