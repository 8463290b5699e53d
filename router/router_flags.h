// The router's command-line flags, shared by `baton-router` and `baton serve`. Each flag
// also reads a BATON_* environment variable; the YAML file of --config comes last.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "common/shutdown_grace.h"
#include "router/router_server.h"
#include "service/internal_auth.h"

namespace baton::router {

struct RouterFlags {
  std::string model;  // where the tokenizer and chat template come from
  std::string tokenizer;
  std::string served_model_name;
  std::vector<std::string> histogram_buckets;  // AddRouterMetricsFlags
  std::string chat_template;     // --chat-template: a Jinja file replacing the model's template
  std::string tool_call_parser;  // --tool-call-parser: empty: from the chat template
  std::string host = "127.0.0.1";
  int port = 8000;
  int grpc_port = 50051;
  int grpc_threads = 1;
  std::string api_key;
  std::string api_key_file;
  // HTTPS and gRPC TLS on the public ports (service/tls_context.h); empty: --tls-cert and
  // --tls-key when those are given, else plaintext.
  std::string public_tls_cert;
  std::string public_tls_key;
  int64_t max_body_bytes = 8 << 20;
  int64_t max_inflight_body_bytes = 64 << 20;
  int max_connections = 1024;
  int max_n = 16;
  int max_stop = 16;
  int max_top_logprobs = 20;
  double worker_wait_seconds = 60;
  // Comma-separated host:port lists (AddWorkerListFlags; `baton serve` fills them itself).
  std::string worker;  // empty: 127.0.0.1:50061, unless decode workers are given
  std::string prefill_workers;
  std::string decode_workers;
  std::string prefill_failover = "retry";
  std::string policy = "baton";
  bool no_kv_events = false;
  double approximate_ttl_seconds = 120;
  int64_t max_inflight_per_worker = 512;
  double health_poll_seconds = 1;
  bool log_requests = false;
  bool enable_inspector = false;
  int64_t max_local_prefill_tokens = 0;
  bool no_decode_with_prefill = false;
  int migration_limit = 1;
  bool parse_special_in_content = false;
  double shutdown_grace_seconds = kDefaultShutdownGraceSeconds;
  // What the router presents to workers (AddWorkerListFlags; `baton serve` sets its own).
  service::InternalAuthFlags internal_auth;
};

// `with_model`: false where the caller defines --model itself (baton serve).
void AddRouterFlags(CLI::App* cmd, RouterFlags* flags, bool with_model);

// --histogram-buckets for `baton-router` (`baton serve` has the workers' flag, and gives
// its values to the router too).
void AddRouterMetricsFlags(CLI::App* cmd, RouterFlags* flags);

// --worker, --prefill-worker, --decode-worker: where `baton-router` sends requests; and
// the credential it presents there (--internal-token-file, --tls-*).
void AddWorkerListFlags(CLI::App* cmd, RouterFlags* flags);

absl::StatusOr<RouterOptions> ToRouterOptions(const RouterFlags& flags);

}  // namespace baton::router
