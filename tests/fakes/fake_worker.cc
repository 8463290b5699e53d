#include "tests/fakes/fake_worker.h"

#include <chrono>
#include <thread>

namespace baton::fakes {

namespace pb = ::baton::internal::v1;

namespace {
void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
}  // namespace

grpc::Status FakeWorker::Generate(grpc::ServerContext* ctx, const pb::GenerateRequest* req,
                                  grpc::ServerWriter<pb::GenerateResponse>* writer) {
  ++generates;
  {
    std::lock_guard<std::mutex> lock(mu);
    requests.push_back(*req);
  }
  if (!fail.ok()) return fail;
  for (size_t i = 0; i < script.size(); ++i) {
    if (fail_after >= 0 && static_cast<int>(i) == fail_after) return fail_after_status;
    pb::GenerateResponse out;
    out.add_token_ids(script[i]);
    const bool last = i + 1 == script.size() && !hang;
    if (i == 0 || last) {
      out.mutable_usage()->set_prompt_tokens(req->prompt_ids_size());
      out.mutable_usage()->set_cached_tokens(16);
    }
    if (last) {
      out.set_finished(true);
      out.set_finish_reason(finish_reason);
      out.mutable_usage()->set_completion_tokens(static_cast<int64_t>(script.size()));
    }
    if (!writer->Write(out) || ctx->IsCancelled()) {
      ++cancelled;
      return grpc::Status::CANCELLED;
    }
    Sleep(2);  // a router that stops early gets the chance to cancel before the end
  }
  if (hang) {
    while (!ctx->IsCancelled()) Sleep(2);
    ++cancelled;
    return grpc::Status::CANCELLED;
  }
  return grpc::Status::OK;
}

grpc::Status FakeWorker::Prefill(grpc::ServerContext* ctx, const pb::PrefillRequest* req,
                                 pb::PrefillResponse*) {
  {
    std::lock_guard<std::mutex> lock(mu);
    prefill_requests.push_back(*req);
  }
  ++prefills;
  while (prefill_hang && !ctx->IsCancelled()) Sleep(2);
  return prefill_fail;
}

grpc::Status FakeWorker::GetModelInfo(grpc::ServerContext*, const pb::GetModelInfoRequest*,
                                      pb::GetModelInfoResponse* out) {
  out->set_model_id(model_id);
  out->set_architecture("llama");
  out->set_max_model_len(512);
  out->set_vocab_size(vocab_size);
  out->set_block_size(block_size);
  out->set_block_hash_spec_version(1);
  return grpc::Status::OK;
}

int FakeWorker::WaitFor(const std::atomic<int>& counter, int at_least, int seconds) {
  for (int i = 0; i < seconds * 200 && counter.load() < at_least; ++i) Sleep(5);
  return counter.load();
}

grpc::Status FakeKvTransfer::Release(grpc::ServerContext*, const pb::ReleaseRequest* req,
                                     pb::ReleaseResponse*) {
  std::lock_guard<std::mutex> lock(mu_);
  released_.push_back(req->request_id());
  cv_.notify_all();
  return grpc::Status::OK;
}

std::vector<std::string> FakeKvTransfer::WaitForRelease(int seconds, size_t count) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::seconds(seconds), [&] { return released_.size() >= count; });
  return released_;
}

FakeWorkerServer::FakeWorkerServer() {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&worker);
  builder.RegisterService(&kv);
  builder.RegisterService(&health_);
  server_ = builder.BuildAndStart();
  target_ = "127.0.0.1:" + std::to_string(port);
}

FakeWorkerServer::~FakeWorkerServer() { Shutdown(); }

void FakeWorkerServer::Shutdown() {
  if (server_ == nullptr) return;
  health_.Shutdown();
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
}

}  // namespace baton::fakes
