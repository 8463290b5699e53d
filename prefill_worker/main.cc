// baton-prefill: a worker in the prefill role. It computes prompts with chunked prefill and
// its prefix cache, writes each layer's K/V into a decode worker's pages over UCX as it is
// computed, and completes the transfer with the first token (docs/disaggregation.md).
#include "worker/worker_main.h"

int main(int argc, char** argv) {
  return baton::worker::RoleWorkerMain(
      "baton-prefill", "prefill",
      "baton-prefill: prefill worker of a disaggregated Baton cluster (internal gRPC API, "
      "health, metrics)",
      argc, argv);
}
