// Incremental stop-string matching on detokenized text. Text arrives in deltas (one per
// token); a stop string split across deltas is still caught and never reaches the client.
//
//   StopStringMatcher matcher(params.stop, params.include_stop_str_in_output);
//   for (...) {
//     StopStringMatcher::Result r = matcher.Add(detok.Add(id).value());
//     Send(r.emit);
//     if (r.stopped) break;          // finish_reason "stop", stop_reason r.matched
//   }
//   Send(matcher.Flush());           // at max_tokens or EOS: the held-back tail
//
// Matching is on bytes. The stop that wins is the first to be complete in the text (the
// earliest end; on a tie, the earliest start), which is the only rule that does not
// depend on how the text was split into deltas.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace baton::tokenizer {

class StopStringMatcher {
 public:
  // Empty strings in `stops` are ignored (ValidateSamplingParams rejects them).
  StopStringMatcher(std::vector<std::string> stops, bool include_stop_in_output);

  struct Result {
    std::string emit;      // text that is now final, to send
    bool stopped = false;  // a stop string matched; this and later calls emit nothing more
    std::string matched;   // the stop string that matched
  };

  // Appends `delta` and returns what can be sent: everything except the longest tail that
  // could still be the start of a stop string, or on a match the text before the stop
  // (and the stop itself when include_stop_in_output).
  Result Add(std::string_view delta);

  // Ends the text: returns the held-back tail, or nothing after a stop.
  std::string Flush();

  bool stopped() const { return stopped_; }
  // Bytes held back because they may begin a stop string.
  size_t held_bytes() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  bool include_stop_;
  bool stopped_ = false;
  std::string matched_;
  std::string held_;  // never contains a whole stop string
};

}  // namespace baton::tokenizer
