// The TCP group store's frames (parallel/store_frame.h): the leader decodes what any host
// that reaches its port sends. Any bytes give a request or an error, and a decoded
// request re-encodes to the same bytes; the same for the responses a rank decodes.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "parallel/store_frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto request = baton::parallel::DecodeStoreRequest(bytes);
  if (request.ok() && baton::parallel::EncodeStoreRequest(*request) != bytes) std::abort();
  auto response = baton::parallel::DecodeStoreResponse(bytes);
  if (response.ok() && baton::parallel::EncodeStoreResponse(*response) != bytes) std::abort();
  return 0;
}
