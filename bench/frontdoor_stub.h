// A stand-in for a worker (baton.internal.v1.Worker) that generates no tokens, only
// emits them: each Generate streams max_tokens events of one token id each, as fast as
// gRPC takes them or one every `interval`, and records the steady-clock time at which it
// wrote each event in a StampTable. frontdoor_bench puts the router in front of it, so
// that whatever time passes between that write and a client's read is the front door's,
// not an engine's. The stub may run in the bench's process or in one of its own: the
// table is shared memory either way.
//
//   BATON_ASSIGN_OR_RETURN(auto table, StampTable::Create(1, 64));
//   BATON_ASSIGN_OR_RETURN(auto stub, StubWorker::Start({264, 285}, 4096, 1280, table.get()));
//   table->set_interval(std::chrono::milliseconds(2));
//   ... a request with request_id "r1#0" ...
//   BATON_RETURN_IF_ERROR(table->WaitForCalls(1, absl::Seconds(10)));
//   auto writes = table->Stamps(0);  // writes[i]: when event i was written
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/frontdoor_stamps.h"
#include "grpcpp/grpcpp.h"
#include "service/health_service.h"

namespace baton::bench {

class StubWorker {
 public:
  // `token_ids` are cycled through: event i carries token_ids[i % size]. The interval and
  // alignment of each call come from `table`, which must outlive the stub.
  static absl::StatusOr<std::unique_ptr<StubWorker>> Start(std::vector<int32_t> token_ids,
                                                           int64_t max_model_len,
                                                           int32_t vocab_size, StampTable* table);
  ~StubWorker();

  int port() const { return port_; }
  std::string address() const;

  void Shutdown();

 private:
  class Service;
  StubWorker() = default;

  std::vector<int32_t> token_ids_;
  StampTable* table_ = nullptr;
  const Clock::time_point epoch_ = Clock::now();
  std::unique_ptr<Service> service_;
  std::unique_ptr<service::HealthService> health_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace baton::bench
