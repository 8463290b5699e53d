#include "toolcall/marker_scanner.h"

#include <algorithm>

namespace baton::toolcall::internal {

ScanStep MarkerScanner::Next(std::string_view pending, bool final) {
  size_t candidate = FindMarkerCandidate(pending, markers_);
  if (candidate > 0) return ScanStep::Content(candidate);
  BodyReader reader(pending, final, &cache_);
  ScanStep step = ReadCall(reader);
  if (step.kind != ScanStep::Kind::kNeedMore) cache_.Clear();
  return step;
}

std::string_view MarkerScanner::MarkerAtStart(std::string_view text) const {
  for (std::string_view marker : markers_) {
    size_t n = std::min(marker.size(), text.size());
    if (text.substr(0, n) == marker.substr(0, n)) return marker;
  }
  return markers_.front();
}

}  // namespace baton::toolcall::internal
