#include "tools/bench_serve_grpc_client.h"

#include <algorithm>
#include <chrono>

#include "common/strings.h"
#include "grpcpp/grpcpp.h"

namespace baton::tools {
namespace {

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

}  // namespace

baton::v1::GenerateRequest BuildGenerateRequest(const RequestOptions& options,
                                                const BenchPrompt& prompt) {
  baton::v1::GenerateRequest req;
  req.set_model(options.model);
  if (options.send_token_ids && !prompt.token_ids.empty()) {
    req.mutable_token_ids()->mutable_ids()->Add(prompt.token_ids.begin(), prompt.token_ids.end());
  } else {
    req.set_text(prompt.text);
  }
  req.mutable_sampling()->set_temperature(options.temperature);
  req.mutable_stop()->set_max_tokens(prompt.output_len);
  req.mutable_stop()->set_ignore_eos(options.ignore_eos);
  return req;
}

GrpcBenchClient::GrpcBenchClient(GrpcClientOptions options) : options_(std::move(options)) {
  const int channels = std::max(1, options_.channels);
  for (int i = 0; i < channels; ++i) {
    grpc::ChannelArguments args;
    // Without a private subchannel pool, channels to one target share one connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(-1);
    stubs_.push_back(baton::v1::Baton::NewStub(
        grpc::CreateCustomChannel(options_.target, grpc::InsecureChannelCredentials(), args)));
  }
}

RequestResult GrpcBenchClient::Send(const BenchPrompt& prompt) {
  RequestResult result;
  result.prompt_len = prompt.prompt_len;
  const baton::v1::GenerateRequest req = BuildGenerateRequest(options_.request, prompt);
  baton::v1::Baton::Stub& stub = *stubs_[next_stub_++ % stubs_.size()];

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(
                           std::chrono::duration<double>(options_.request.timeout_s)));
  if (!options_.request.api_key.empty()) {
    context.AddMetadata("authorization", StrCat("Bearer ", options_.request.api_key));
  }
  const BenchClock::time_point start = BenchClock::now();
  StreamClock clock(start);
  std::unique_ptr<grpc::ClientReader<baton::v1::GenerateResponse>> reader =
      stub.Generate(&context, req);
  baton::v1::GenerateResponse response;
  int64_t token_ids = 0;
  bool finished = false;
  int64_t completion_tokens = -1;
  while (reader->Read(&response)) {
    const BenchClock::time_point t = BenchClock::now();
    if (response.token_ids_size() > 0 || !response.text().empty()) clock.OnContent(t);
    token_ids += response.token_ids_size();
    if (response.has_usage()) {
      // proto3 cannot tell 0 from unset; no real prompt has 0 tokens.
      if (response.usage().prompt_tokens() > 0)
        result.prompt_tokens = response.usage().prompt_tokens();
      result.cached_tokens = response.usage().cached_tokens();
      completion_tokens = response.usage().completion_tokens();
    }
    if (response.finished()) finished = true;
  }
  const grpc::Status status = reader->Finish();
  const BenchClock::time_point end = BenchClock::now();
  clock.Finish(end, &result);
  if (!status.ok()) {
    result.error = StrCat("gRPC ", CodeName(status.error_code()), ": ", status.error_message());
    return result;
  }
  if (!finished) {
    result.error = "the stream ended without a finished response";
    return result;
  }
  // Usage is authoritative; without it, the ids streamed, and without ids, the messages
  // that carried text.
  if (completion_tokens > 0 || (completion_tokens == 0 && token_ids == 0)) {
    result.output_tokens = completion_tokens;
  } else {
    result.output_tokens = token_ids > 0 ? token_ids : clock.content_chunks();
  }
  result.success = true;
  return result;
}

}  // namespace baton::tools
