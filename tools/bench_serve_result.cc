#include "tools/bench_serve_result.h"

namespace baton::tools {

double Tpot(const RequestResult& r) {
  if (r.output_tokens <= 1) return 0.0;
  return (r.e2el_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1);
}

void StreamClock::OnContent(BenchClock::time_point t) {
  const double since_last = std::chrono::duration<double>(t - last_).count();
  if (chunks_ == 0) {
    ttft_s_ = std::chrono::duration<double>(t - start_).count();
  } else {
    itl_s_.push_back(since_last);
  }
  last_ = t;
  ++chunks_;
}

void StreamClock::Finish(BenchClock::time_point end, RequestResult* r) const {
  r->e2el_s = std::chrono::duration<double>(end - start_).count();
  r->ttft_s = chunks_ > 0 ? ttft_s_ : r->e2el_s;
  r->itl_s = itl_s_;
}

}  // namespace baton::tools
