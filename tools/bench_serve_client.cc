#include "tools/bench_serve_client.h"

#include <utility>

namespace baton::tools {

RequestResult BenchClient::Send(const BenchPrompt& prompt) {
  RequestResult out;
  Post([&] {
    Start(prompt, [&](RequestResult r) {
      out = std::move(r);
      Stop();
    });
  });
  Run();
  return out;
}

}  // namespace baton::tools
