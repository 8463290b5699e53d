// baton-decode: a worker in the decode role. It reserves pages for prompts that prefill
// workers compute, receives their K/V over UCX, and decodes the sequences in its
// continuous batch (docs/disaggregation.md). It can still prefill a prompt itself, which
// the router falls back to when a prefill worker fails.
#include "worker/worker_main.h"

int main(int argc, char** argv) {
  return baton::worker::RoleWorkerMain(
      "baton-decode", "decode",
      "baton-decode: decode worker of a disaggregated Baton cluster (internal gRPC API, KV "
      "transfer service, health, metrics)",
      argc, argv);
}
