// Progress of a long weight load on stderr, through the process log: bytes, share and
// rate, at most twice a second, and only once the load has run for a second (a small
// model loads without a line). For OpenOptions::progress.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace baton::model {

// `what`: the model path, named in each line.
std::function<void(uint64_t done, uint64_t total)> LogLoadProgress(std::string what);

}  // namespace baton::model
