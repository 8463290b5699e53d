// Internal: the shared half of the formats whose calls start at a marker anywhere in the
// output (all but Llama 3 JSON). Text before the earliest marker, or before a suffix that
// may still grow into one, is content at once; at a marker the format reads its call.
#pragma once

#include <string_view>
#include <vector>

#include "toolcall/body_reader.h"
#include "toolcall/format_scanner.h"

namespace baton::toolcall::internal {

class MarkerScanner : public FormatScanner {
 public:
  ScanStep Next(std::string_view pending, bool final) final;

 protected:
  explicit MarkerScanner(std::vector<std::string_view> markers) : markers_(std::move(markers)) {}

  // Reads the markup at the start of r.text(), which begins with one of the markers (or,
  // at the end of the text, a prefix of one). Returns kCalls, or r.Stop() once a reader
  // stopped, or content for markup that read fine but makes no valid call.
  virtual ScanStep ReadCall(BodyReader& r) = 0;

  // The first marker that `text` begins with or that is a prefix of `text`'s prefix (so a
  // partial "<" picks the first marker starting with "<").
  std::string_view MarkerAtStart(std::string_view text) const;

 private:
  std::vector<std::string_view> markers_;
  ScanCache cache_;
};

}  // namespace baton::toolcall::internal
