// From a parsed client request (OpenAI JSON, or baton.v1 gRPC converted to the same
// struct) to what the worker runs: prompt ids through the chat template or the
// tokenizer, the context-length check, and the sampling parameters.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "dispatch/generation.h"
#include "frontdoor/openai/openai_protocol.h"
#include "frontdoor/openai/served_model.h"
#include "service/api_key.h"

namespace baton::frontdoor {

struct BuiltRequest {
  // generation.request_id is the router's own, unique among requests in flight: the id
  // the workers see ("cmpl-<32 hex>", then "." and the client's id when it chose one).
  // Clients choose response_id, and two of them may choose the same.
  dispatch::GenerationRequest generation;
  std::string response_id;      // the client's request_id, else generation.request_id
  double tokenize_seconds = 0;  // chat template and tokenization
};

// Errors are InvalidArgument (naming the parameter) or NotFound (an unknown model).
// `id_prefix` starts generated request ids ("cmpl", "chatcmpl"). The request runs in
// `tenant`'s cache namespace (the client's cache_salt only narrows it) and at no higher
// priority than its ceiling.
absl::StatusOr<BuiltRequest> BuildRequest(const OpenAiRequest& request, const ServedModel& model,
                                          const std::string& id_prefix,
                                          const service::Tenant& tenant = service::Tenant{});

// The prompt must leave room for one token, and prompt + max_tokens must fit `context`.
// Returns the max_tokens to send: the request's, or the rest of the context when unset.
// Errors name the parameter: "prompt" or "messages" for the input, or the field that
// max_tokens came from.
absl::StatusOr<int64_t> FitToContext(int64_t context, int64_t prompt_tokens,
                                     const OpenAiRequest& request);

// A traced request's bounds (dispatch/request_trace.h): n = 1, the prompt and max_tokens
// within their limits. Errors name the parameter.
absl::Status CheckTraceBounds(const OpenAiRequest& request, int64_t prompt_tokens);

// A fresh id: "<prefix>-" and 32 hex digits.
std::string NewRequestId(const std::string& prefix);

}  // namespace baton::frontdoor
