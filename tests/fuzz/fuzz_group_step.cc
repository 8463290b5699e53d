// The worker group's step plan (engine/parallel/group_step.h): a follower decodes what
// arrives on the group's sockets; any bytes give a plan or an error, and a decoded plan
// re-encodes to the same bytes.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "engine/parallel/group_step.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto plan = baton::engine::DecodeGroupStep(baton::engine::StepOp::kForward, bytes);
  if (!plan.ok()) return 0;
  if (baton::engine::EncodeGroupStep(*plan) != bytes) std::abort();
  size_t tokens = 0;
  for (const auto& in : plan->Inputs()) tokens += in.tokens.size();
  if (tokens != plan->tokens.size()) std::abort();
  return 0;
}
