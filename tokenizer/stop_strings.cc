#include "tokenizer/stop_strings.h"

#include <algorithm>
#include <utility>

namespace baton::tokenizer {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops, bool include_stop_in_output)
    : include_stop_(include_stop_in_output) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopStringMatcher::Result StopStringMatcher::Add(std::string_view delta) {
  Result result;
  if (stopped_) {
    result.stopped = true;
    result.matched = matched_;
    return result;
  }
  if (stops_.empty()) {
    result.emit.assign(delta);
    return result;
  }
  const size_t old_held = held_.size();
  held_.append(delta);
  const std::string_view text = held_;

  size_t best_start = std::string_view::npos;
  size_t best_end = std::string_view::npos;
  const std::string* best = nullptr;
  for (const std::string& s : stops_) {
    // held_ had no whole stop, so a match must end inside the delta.
    const size_t from = old_held >= s.size() ? old_held - s.size() + 1 : 0;
    const size_t pos = text.find(s, from);
    if (pos == std::string_view::npos) continue;
    const size_t end = pos + s.size();
    if (best == nullptr || end < best_end || (end == best_end && pos < best_start)) {
      best = &s;
      best_start = pos;
      best_end = end;
    }
  }
  if (best != nullptr) {
    stopped_ = true;
    matched_ = *best;
    result.stopped = true;
    result.matched = matched_;
    result.emit.assign(text.substr(0, include_stop_ ? best_end : best_start));
    held_.clear();
    return result;
  }

  // Hold back the longest tail that is a proper prefix of some stop string: a match can
  // start there and nowhere earlier.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, text.size()); k > hold; --k) {
      if (text.ends_with(std::string_view(s).substr(0, k))) {
        hold = k;
        break;
      }
    }
  }
  result.emit.assign(text.substr(0, text.size() - hold));
  held_.erase(0, text.size() - hold);
  return result;
}

std::string StopStringMatcher::Flush() {
  if (stopped_) return {};
  return std::exchange(held_, {});
}

}  // namespace baton::tokenizer
