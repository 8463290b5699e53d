// Where the files Baton ships sit relative to the running binary, so that an installed
// tree (`cmake --install build/release --prefix DIR`) works wherever DIR is moved:
//
//   DIR/bin/baton
//   DIR/share/baton/models/baton-tiny        <- DefaultModelPath() for DIR/bin/baton
//
// A binary run from the build tree (build/<preset>/bin) gets the source tree's
// models/baton-tiny instead, so `build/release/bin/baton serve` needs no install step.
#pragma once

#include <string>

namespace baton {

// The bundled model (a Hugging Face directory) for a binary in `bin_dir`: the source
// tree's when `bin_dir` is the build tree's bin/ this was compiled in, else
// `bin_dir`/../share/baton/models/baton-tiny (whether or not it exists: opening it names
// the path that is missing).
std::string DefaultModelPathFor(const std::string& bin_dir);

// DefaultModelPathFor the directory of the running binary (/proc/self/exe).
std::string DefaultModelPath();

}  // namespace baton
