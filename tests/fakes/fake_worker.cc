#include "tests/fakes/fake_worker.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

namespace baton::fakes {

namespace pb = ::baton::internal::v1;

namespace {

void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// The fakes of this process by target, so that a fake Prefill can complete its transfer
// on the decode worker it names.
std::mutex registry_mu;
std::map<std::string, FakeKvTransfer*>& Registry() {
  static auto* registry = new std::map<std::string, FakeKvTransfer*>;
  return *registry;
}

}  // namespace

grpc::Status FakeWorker::Generate(grpc::ServerContext* ctx, const pb::GenerateRequest* req,
                                  grpc::ServerWriter<pb::GenerateResponse>* writer) {
  ++generates;
  {
    std::lock_guard<std::mutex> lock(mu);
    requests.push_back(*req);
  }
  if (!fail.ok()) return fail;
  if (req->await_kv_transfer_ms() > 0 && kv != nullptr) {
    grpc::Status transferred = kv->Await(req->kv_transfer_id(), ctx, req->await_kv_transfer_ms());
    if (!transferred.ok()) {
      if (transferred.error_code() == grpc::StatusCode::CANCELLED) ++cancelled;
      return transferred;
    }
  }
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
  if (prefill_fail.ok()) {
    std::lock_guard<std::mutex> lock(registry_mu);
    auto it = Registry().find(req->decode_worker());
    if (it != Registry().end()) it->second->Complete(req->request().request_id());
  }
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

void FakeKvTransfer::Complete(const std::string& transfer_id) {
  std::lock_guard<std::mutex> lock(mu_);
  completed_.push_back(transfer_id);
  cv_.notify_all();
}

grpc::Status FakeKvTransfer::Await(const std::string& transfer_id, grpc::ServerContext* ctx,
                                   uint32_t wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto has = [&](const std::vector<std::string>& ids) {
      return std::find(ids.begin(), ids.end(), transfer_id) != ids.end();
    };
    if (has(completed_)) return grpc::Status::OK;
    if (has(released_)) return grpc::Status(grpc::StatusCode::ABORTED, "released");
    if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
    if (std::chrono::steady_clock::now() >= deadline) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the transfer never completed");
    }
    cv_.wait_for(lock, std::chrono::milliseconds(2));
  }
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
  worker.kv = &kv;
  std::lock_guard<std::mutex> lock(registry_mu);
  Registry()[target_] = &kv;
}

FakeWorkerServer::~FakeWorkerServer() { Shutdown(); }

void FakeWorkerServer::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    Registry().erase(target_);
  }
  if (server_ == nullptr) return;
  health_.Shutdown();
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
}

}  // namespace baton::fakes
