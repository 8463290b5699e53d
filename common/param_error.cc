#include "common/param_error.h"

#include "absl/strings/cord.h"

namespace baton {
namespace {

// Debian's Abseil has its own absl::string_view, so spell the key through std::string.
const std::string& ParamKey() {
  static const std::string* const kKey = new std::string("baton.param");
  return *kKey;
}

}  // namespace

absl::Status ParamError(std::string_view param, std::string_view message) {
  return WithParam(absl::InvalidArgumentError(std::string(message)), param);
}

std::string ParamOf(const absl::Status& status) {
  const auto param = status.GetPayload(ParamKey());  // absl::optional in Debian's Abseil
  return param.has_value() ? std::string(*param) : std::string();
}

absl::Status WithParam(absl::Status status, std::string_view param) {
  if (status.ok()) return status;
  if (param.empty()) {
    status.ErasePayload(ParamKey());
  } else {
    status.SetPayload(ParamKey(), absl::Cord(std::string(param)));
  }
  return status;
}

}  // namespace baton
