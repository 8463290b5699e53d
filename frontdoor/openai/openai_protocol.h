// The OpenAI JSON layer of the front door, in one include: request parsing and validation
// (openai_request.h), response and chunk formatting (openai_response.h), errors and their
// HTTP envelope (openai_error.h), and the JSON helpers they share (openai_json.h). It knows
// no HTTP and no engine: the HTTP layer passes bodies in and writes the strings out.
#pragma once

#include "frontdoor/openai/openai_error.h"     // IWYU pragma: export
#include "frontdoor/openai/openai_json.h"      // IWYU pragma: export
#include "frontdoor/openai/openai_request.h"   // IWYU pragma: export
#include "frontdoor/openai/openai_response.h"  // IWYU pragma: export
