#include "bench/router_sim_workloads.h"

#include <algorithm>
#include <cmath>

namespace baton::bench {
namespace {

constexpr int32_t kVocab = 49152;

std::vector<int32_t> RandomTokens(int64_t n, std::mt19937_64* rng) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>((*rng)() % kVocab);
  return t;
}

int64_t Uniform(int64_t lo, int64_t hi, std::mt19937_64* rng) {
  return lo + static_cast<int64_t>((*rng)() % static_cast<uint64_t>(hi - lo + 1));
}

double Exponential(double mean, std::mt19937_64* rng) {
  return std::exponential_distribution<double>(1.0 / mean)(*rng);
}

}  // namespace

std::vector<SimPrompt> MakeWorkload(const WorkloadShape& shape, int* max_turns) {
  std::mt19937_64 rng(shape.seed);
  std::vector<SimPrompt> out;
  double t = 0;
  *max_turns = 1;
  if (shape.name == "chat") {
    // Sessions of 2-8 turns (mean 5): requests / 5 sessions. A system prompt of 100-400
    // tokens unique to the session (an assistant persona), messages of 30-300 tokens.
    *max_turns = 8;
    const int sessions = std::max(1, shape.requests / 5);
    for (int s = 0; s < sessions; ++s) {
      t += Exponential(5.0 / shape.rate, &rng);  // each session brings ~5 requests
      SimPrompt p;
      p.arrival = t;
      p.session = s;
      p.tokens = RandomTokens(Uniform(100, 400, &rng) + Uniform(30, 300, &rng), &rng);
      p.output_tokens = Uniform(30, 200, &rng);
      out.push_back(std::move(p));
    }
    return out;
  }
  if (shape.name == "shared") {
    // 64 system prompts of 1000-3000 tokens; prompt k is chosen with weight 1/(k+1)^0.8.
    constexpr int kPrefixes = 64;
    std::vector<std::vector<int32_t>> prefixes;
    std::vector<double> weights;
    for (int k = 0; k < kPrefixes; ++k) {
      prefixes.push_back(RandomTokens(Uniform(1000, 3000, &rng), &rng));
      weights.push_back(1.0 / std::pow(k + 1.0, 0.8));
    }
    std::discrete_distribution<int> pick(weights.begin(), weights.end());
    for (int i = 0; i < shape.requests; ++i) {
      t += Exponential(1.0 / shape.rate, &rng);
      SimPrompt p;
      p.arrival = t;
      p.tokens = prefixes[pick(rng)];
      const auto q = RandomTokens(Uniform(20, 200, &rng), &rng);
      p.tokens.insert(p.tokens.end(), q.begin(), q.end());
      p.output_tokens = Uniform(20, 150, &rng);
      out.push_back(std::move(p));
    }
    return out;
  }
  // random
  for (int i = 0; i < shape.requests; ++i) {
    t += Exponential(1.0 / shape.rate, &rng);
    SimPrompt p;
    p.arrival = t;
    p.tokens = RandomTokens(Uniform(100, 2000, &rng), &rng);
    p.output_tokens = Uniform(20, 200, &rng);
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<int32_t> AnswerTokens(const SimPrompt& p) {
  std::mt19937_64 rng((static_cast<uint64_t>(p.session) << 20) ^ static_cast<uint64_t>(p.turn) ^
                      (p.tokens.size() << 40));
  return RandomTokens(p.output_tokens, &rng);
}

SimPrompt NextTurn(const SimPrompt& prev, const std::vector<int32_t>& answer, int max_turns,
                   uint64_t seed) {
  std::mt19937_64 gen(seed * 0x9e3779b97f4a7c15ULL ^ (static_cast<uint64_t>(prev.session) << 16) ^
                      static_cast<uint64_t>(prev.turn));
  std::mt19937_64* rng = &gen;
  SimPrompt next;
  if (prev.session < 0 || prev.turn + 1 >= max_turns) return next;
  // Sessions end early with probability 1/5 per turn after the second (mean ~5 turns).
  if (prev.turn >= 1 && (*rng)() % 5 == 0) return next;
  next.session = prev.session;
  next.turn = prev.turn + 1;
  next.arrival = Exponential(10.0, rng);  // think time, seconds
  next.tokens = prev.tokens;
  next.tokens.insert(next.tokens.end(), answer.begin(), answer.end());
  const auto msg = RandomTokens(Uniform(30, 300, rng), rng);
  next.tokens.insert(next.tokens.end(), msg.begin(), msg.end());
  next.output_tokens = Uniform(30, 200, rng);
  return next;
}

}  // namespace baton::bench
