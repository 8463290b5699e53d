#include "model/load_progress.h"

#include <chrono>
#include <memory>

#include "common/log.h"

namespace baton::model {

std::function<void(uint64_t done, uint64_t total)> LogLoadProgress(std::string what) {
  using Clock = std::chrono::steady_clock;
  struct State {
    Clock::time_point start = Clock::now();
    Clock::time_point last_line{};
  };
  auto state = std::make_shared<State>();
  return [what = std::move(what), state](uint64_t done, uint64_t total) {
    const Clock::time_point now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - state->start).count();
    const bool finished = done >= total;
    if (seconds < 1.0) return;
    if (!finished && now - state->last_line < std::chrono::milliseconds(500)) return;
    state->last_line = now;
    LogInfo("loading %s: %.1f of %.1f MiB (%.0f%%), %.1f MB/s%s", what,
            static_cast<double>(done) / (1 << 20), static_cast<double>(total) / (1 << 20),
            total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
            static_cast<double>(done) / 1e6 / seconds, finished ? ", done" : "");
  };
}

}  // namespace baton::model
