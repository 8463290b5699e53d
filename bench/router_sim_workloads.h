// The routing simulator's workloads (docs/perf/routing.md): synthetic token ids shaped like
// three kinds of traffic.
//
//   - chat: sessions of several turns; each turn's prompt is the whole conversation so
//     far (earlier prompts and answers) plus a new user message, and it is sent when the
//     previous answer is complete, after a think time.
//   - shared: a few long system prompts (popularity Zipf-like), each followed by a short
//     question of its own.
//   - random: prompts that share nothing.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace baton::bench {

struct SimPrompt {
  double arrival = 0;  // seconds; for a later chat turn, the think time after the last answer
  std::vector<int32_t> tokens;
  int64_t output_tokens = 0;
  int session = -1;  // chat only
  int turn = 0;
};

struct WorkloadShape {
  std::string name;  // chat, shared, random
  int requests = 2000;
  double rate = 10;  // new prompts (chat: new sessions x turns) per second
  uint64_t seed = 1;
};

// The open-loop prompts of a workload in arrival order. For chat these are every
// session's first turns; later turns come from NextTurn.
std::vector<SimPrompt> MakeWorkload(const WorkloadShape& shape, int* max_turns);

// A chat session's next turn after `prev` answered with `answer`; empty tokens when the
// session is over. Depends only on the seed, the session and the turn, so that every
// policy replays the same conversations.
SimPrompt NextTurn(const SimPrompt& prev, const std::vector<int32_t>& answer, int max_turns,
                   uint64_t seed);

// The answer a prompt gets: deterministic ids, so that a chat's next prompt repeats them.
std::vector<int32_t> AnswerTokens(const SimPrompt& p);

}  // namespace baton::bench
