// What one engine request produced, read to its end: the tests' way of running a request.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace baton::testing {

struct Outcome {
  std::vector<int32_t> ids;
  std::string text;
  engine::TokenEvent last;  // the final event: finish reason, status, usage, timings
};

inline Outcome Drain(engine::RequestStream* s) {
  Outcome o;
  engine::TokenEvent e;
  while (s->Next(&e)) {
    o.ids.insert(o.ids.end(), e.token_ids.begin(), e.token_ids.end());
    o.text += e.text;
    if (e.finished) o.last = e;
  }
  return o;
}

}  // namespace baton::testing
