#include "tools/trace_command.h"

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "common/strings.h"
#include "nlohmann/json.hpp"
#include "tools/bench_serve_sse.h"
#include "tools/http_call.h"
#include "tools/trace_render.h"

namespace baton::tools {
namespace {

using Json = nlohmann::json;

struct TraceFlags {
  std::string url = "http://127.0.0.1:8000";
  std::string prompt;
  std::string model;
  std::string api_key;
  bool chat = false;
  std::string system;
  int64_t max_tokens = 32;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<int64_t> seed;
  bool ignore_eos = false;
  bool json = false;
  double timeout_s = 600;
};

// A traced response is at most kMaxTraceJsonBytes (16 MiB) of trace and the text.
constexpr size_t kMaxResponseBytes = size_t{64} << 20;

Json RequestBody(const TraceFlags& f, const std::string& model) {
  Json body = {{"model", model}, {"max_tokens", f.max_tokens}, {"stream", false}, {"trace", true}};
  if (f.chat) {
    Json messages = Json::array();
    if (!f.system.empty()) messages.push_back({{"role", "system"}, {"content", f.system}});
    messages.push_back({{"role", "user"}, {"content", f.prompt}});
    body["messages"] = std::move(messages);
  } else {
    body["prompt"] = f.prompt;
  }
  if (f.temperature) body["temperature"] = *f.temperature;
  if (f.top_p) body["top_p"] = *f.top_p;
  if (f.top_k) body["top_k"] = *f.top_k;
  if (f.seed) body["seed"] = *f.seed;
  if (f.ignore_eos) body["ignore_eos"] = true;
  return body;
}

// The response reduced to what a trace reader needs: {"text", "finish_reason", "usage",
// "trace"}.
absl::StatusOr<Json> Reduce(const Json& response, bool chat) {
  try {
    const Json& choice = response.at("choices").at(0);
    Json out;
    out["text"] = chat ? choice.at("message").value("content", std::string())
                       : choice.at("text").get<std::string>();
    out["finish_reason"] = choice.value("finish_reason", std::string());
    out["usage"] = response.at("usage");
    out["trace"] = response.at("trace");
    return out;
  } catch (const std::exception& e) {
    return absl::InternalError(
        StrCat("the response has no choice, usage or trace (", e.what(),
               "); is the server a Baton router new enough to trace requests?"));
  }
}

absl::Status Run(const TraceFlags& f) {
  BATON_ASSIGN_OR_RETURN(HttpUrl url, ParseHttpUrl(f.url, "--url"));
  std::string model = f.model;
  if (model.empty()) {
    BATON_ASSIGN_OR_RETURN(model, FetchFirstModel(url, f.api_key, f.timeout_s));
  }
  const std::string path = f.chat ? "/v1/chat/completions" : "/v1/completions";
  HttpCallOptions post;
  post.method = "POST";
  post.path = path;
  post.body = RequestBody(f, model).dump();
  post.api_key = f.api_key;
  post.timeout_s = f.timeout_s;
  post.max_body_bytes = kMaxResponseBytes;
  post.user_agent = "baton-trace";
  BATON_ASSIGN_OR_RETURN(HttpReply reply, HttpCall(url, post));
  if (reply.status != 200) {
    return absl::FailedPreconditionError(StrCat("POST ", f.url, path, ": HTTP ", reply.status, ": ",
                                                ErrorMessageFromBody(reply.body)));
  }
  const Json response = Json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  if (response.is_discarded()) {
    return absl::InternalError(
        StrCat("POST ", f.url, path, " answered with a body that is not JSON"));
  }
  BATON_ASSIGN_OR_RETURN(Json result, Reduce(response, f.chat));
  if (f.json) {
    std::cout << result.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  } else {
    std::cout << RenderTrace(result);
  }
  return absl::OkStatus();
}

}  // namespace

void AddTraceCommand(CLI::App& app) {
  auto f = std::make_shared<TraceFlags>();
  CLI::App* cmd = app.add_subcommand(
      "trace",
      "Send one traced request to a running Baton router and print its journey: tokens, the "
      "routing decision, prefill chunks and KV transfer, every decode step with the sampler's "
      "alternatives, KV bytes against the weights, and the totals (docs/inspector.md)");
  cmd->add_option("prompt", f->prompt, "The prompt (with --chat: the user message)")->required();
  cmd->add_option("--url", f->url, "The router's HTTP address");
  cmd->add_option("--model", f->model,
                  "The model to ask for (default: the first the router lists)");
  cmd->add_option("--api-key", f->api_key, "Sent as 'Authorization: Bearer KEY'");
  cmd->add_flag("--chat", f->chat,
                "Send a chat completion; the trace shows the chat template's rendering");
  cmd->add_option("--system", f->system, "With --chat, a system message first");
  cmd->add_option("--max-tokens", f->max_tokens,
                  "Tokens to generate (traced requests: at most 2048)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", f->temperature, "Sampling temperature (default: the server's)");
  cmd->add_option("--top-p", f->top_p, "Nucleus sampling threshold (default: the server's)");
  cmd->add_option("--top-k", f->top_k, "Sample among the k most likely (default: the server's)");
  cmd->add_option("--seed", f->seed, "Sampling seed, for a reproducible run");
  cmd->add_flag(
      "--ignore-eos", f->ignore_eos,
      "Generate --max-tokens tokens even past the end-of-sequence token (vLLM's ignore_eos)");
  cmd->add_flag(
      "--json", f->json,
      "Print one JSON object {text, finish_reason, usage, trace} instead of the timeline");
  cmd->add_option("--timeout", f->timeout_s, "Seconds to wait for the whole response")
      ->check(CLI::PositiveNumber);
  cmd->callback([f] {
    absl::Status status = Run(*f);
    if (!status.ok()) {
      std::cerr << "baton trace: " << status.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace baton::tools
