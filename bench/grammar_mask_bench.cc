// Constrained decoding's per-step cost (docs/structured_outputs.md): FillMask + Accept for
// a nested JSON schema over Llama 3's 128k vocabulary, stepping a ~600-byte document
// tokenized greedily (longest allowed token each step).
//
//   grammar_mask_bench [--tokenizer path/to/tokenizer.json] [--warm-passes 20]
//                      [--document courier|pickup] [--prebuilt [--prebuilt-runs 5]]
//                      [--table-profile]
//
// Reports p50/p99/max per step for: cold (a new TokenGrammar whose position tables and
// state masks are built on first use, during the steps), prebuilt (a new TokenGrammar
// whose tables were all built first, as the engine's GrammarCache does before it schedules
// a new schema's first request: that request's steps), warm (the same TokenGrammar again:
// state masks cached), and tables-only (FillMaskUncached: every state mask recomputed, the
// cost of a state never seen before). Issue 28's goal is a p99 under 50 us per step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "CLI/CLI.hpp"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/token_grammar.h"
#include "grammar/token_vocab.h"
#include "tests/unit/grammar/hf_vocab.h"

namespace baton::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kSchema = R"({
  "type": "object",
  "properties": {
    "order_id": {"type": "string", "format": "uuid"},
    "customer": {"type": "object", "properties": {
      "name": {"type": "string"}, "email": {"type": "string"},
      "tier": {"enum": ["free", "pro", "enterprise"]}},
      "required": ["name", "email", "tier"], "additionalProperties": false},
    "items": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
      "sku": {"type": "string"}, "quantity": {"type": "integer",
        "minimum": 1, "maximum": 9007199254740991}, "price": {"type": "number"},
      "gift": {"type": "boolean"}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
      "required": ["sku", "quantity", "price", "gift", "note"], "additionalProperties": false}},
    "status": {"enum": ["pending", "shipped", "delivered"]},
    "created": {"type": "string", "format": "date-time"},
    "shipping": {"anyOf": [
      {"type": "object", "properties": {"method": {"const": "courier"},
        "eta_days": {"type": "integer", "minimum": 0, "maximum": 365}},
        "required": ["method", "eta_days"]},
      {"type": "object", "properties": {"method": {"const": "pickup"},
        "store": {"type": "string", "maxLength": 40}}, "required": ["method", "store"]}]},
    "tags": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["order_id", "customer", "items", "status", "created", "shipping", "tags"],
  "additionalProperties": false
})";

// One line, as the grammar allows (whitespace is nothing or one space): an order up to its
// shipping, then shipped by courier, or to a store (`--document pickup`), whose "store" is
// a string with maxLength 40: a chain of bounded-length rules, one table per count.
#define BATON_ORDER_HEAD                                                              \
  R"({"order_id": "3f2b8c1e-9a4d-4e7b-8f21-6c0d5e9a7b13", "customer": {"name":)"      \
  R"( "Ada Lovelace", "email": "ada@example.com", "tier": "enterprise"},)"            \
  R"( "items": [{"sku": "BK-1843-NOTES", "quantity": 2, "price": 19.99,)"             \
  R"( "gift": false, "note": null}, {"sku": "PEN-FOUNTAIN", "quantity": 1,)"          \
  R"( "price": 120.5, "gift": true, "note":)"                                         \
  R"( "Wrap it in blue paper, please."}, {"sku": "INK-BLACK", "quantity": 3,)"        \
  R"( "price": 7, "gift": false, "note": "Extra cartridges"}], "status": "shipped",)" \
  R"( "created": "2024-06-01T09:30:00Z", "shipping": {"method": )"
constexpr const char* kDocument = BATON_ORDER_HEAD
    R"("courier", "eta_days": 3}, "tags": ["priority", "fragile", "analytical-engine"]})";
constexpr const char* kPickupDocument = BATON_ORDER_HEAD
    R"("pickup", "store": "Baker Street 221b, London \u00e9"}, "tags": ["priority", "fragile"]})";
#undef BATON_ORDER_HEAD

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct Summary {
  double p50, p99, max, mean;
};

Summary Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
  return {at(0.5), at(0.99), v.back(), sum / v.size()};
}

void Print(const char* name, const Summary& s, size_t n) {
  std::printf("%-12s steps %5zu  p50 %9.1f us  p99 %9.1f us  max %9.1f us  mean %8.1f us\n", name,
              n, s.p50, s.p99, s.max, s.mean);
}

// Greedy tokenization: the longest token the grammar allows that the text starts with.
// Uses Accept on copies only, so it warms no cache.
std::vector<int32_t> Tokenize(std::shared_ptr<const grammar::TokenGrammar> tg,
                              const std::string& text) {
  std::unordered_map<std::string, int32_t> ids;
  const auto& vocab = tg->vocab();
  for (int32_t id : vocab.sorted) ids.emplace(vocab.token_bytes[id], id);
  grammar::GrammarMatcher m(tg);
  std::vector<int32_t> out;
  for (size_t at = 0; at < text.size();) {
    int32_t pick = -1;
    for (size_t len = std::min(vocab.max_token_bytes, text.size() - at); len > 0 && pick < 0;
         --len) {
      auto it = ids.find(text.substr(at, len));
      if (it == ids.end()) continue;
      grammar::GrammarMatcher copy = m;
      if (copy.Accept(it->second).ok()) pick = it->second;
    }
    if (pick < 0) return {};
    (void)m.Accept(pick);
    out.push_back(pick);
    at += vocab.token_bytes[pick].size();
  }
  return out;
}

// One pass over the tokens; per-step microseconds of FillMask (or FillMaskUncached) + Accept.
bool Pass(std::shared_ptr<const grammar::TokenGrammar> tg, const std::vector<int32_t>& tokens,
          bool uncached, std::vector<double>* times) {
  grammar::GrammarMatcher m(tg);
  std::vector<uint32_t> mask(tg->mask_words());
  for (int32_t t : tokens) {
    const auto t0 = Clock::now();
    if (uncached) {
      m.FillMaskUncached(mask);
    } else {
      m.FillMask(mask);
    }
    const bool ok = m.Accept(t).ok();
    times->push_back(Us(Clock::now() - t0));
    if (!ok || !((mask[t >> 5] >> (t & 31)) & 1)) {
      std::fprintf(stderr, "token %d not allowed by the mask\n", t);
      return false;
    }
  }
  return m.CanEnd();
}

// Every position table of `g` built once, timed: where a cold schema's time goes.
void ProfileTables(const grammar::Grammar& g, const grammar::TokenVocab& vocab) {
  struct Row {
    double us;
    int32_t pos;
    size_t accepted, uncertain, tails;
  };
  std::vector<Row> rows;
  std::unordered_map<std::string, int> distinct;
  double total = 0;
  for (int32_t pos = 0; pos < g.num_positions(); ++pos) {
    if (g.element(pos).kind != grammar::Grammar::Kind::kBytes) continue;
    const auto t0 = Clock::now();
    auto table = grammar::BuildPositionTable(g, vocab, pos);
    const double us = Us(Clock::now() - t0);
    total += us;
    size_t accepted = table->accepted_ids.size();
    for (uint32_t w : table->accepted_bits) accepted += __builtin_popcount(w);
    const size_t tails = table->tails == nullptr ? 0 : table->tails->token_bytes.size();
    rows.push_back({us, pos, accepted, table->uncertain_ids.size(), tails});
    std::string key;
    std::vector<uint32_t> bits(table->accepted_bits);
    if (bits.empty()) bits.assign((vocab.size() + 31) / 32, 0);
    for (int32_t id : table->accepted_ids) bits[id >> 5] |= uint32_t{1} << (id & 31);
    key.append(reinterpret_cast<const char*>(bits.data()), bits.size() * 4);
    key.append(reinterpret_cast<const char*>(table->uncertain_ids.data()),
               table->uncertain_ids.size() * 4);
    ++distinct[key];
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.us > b.us; });
  int buckets[4] = {};
  for (const Row& r : rows) ++buckets[r.us < 100 ? 0 : r.us < 1000 ? 1 : r.us < 10000 ? 2 : 3];
  std::printf(
      "tables: %zu built in %.1f ms, %zu distinct; <0.1 ms %d, <1 ms %d, <10 ms %d, >=10 ms "
      "%d\n",
      rows.size(), total / 1000, distinct.size(), buckets[0], buckets[1], buckets[2], buckets[3]);
  for (size_t i = 0; i < std::min<size_t>(rows.size(), 10); ++i) {
    std::printf("  pos %5d  %8.1f us  accepted %6zu  uncertain %5zu  tails %5zu\n", rows[i].pos,
                rows[i].us, rows[i].accepted, rows[i].uncertain, rows[i].tails);
  }
}

int Main(int argc, char** argv) {
  CLI::App app{"FillMask + Accept per step for a nested JSON schema over a 128k vocabulary"};
  std::string tokenizer = std::string(BATON_TESTDATA_DIR) + "/tokenizers/hf/llama3/tokenizer.json";
  int warm_passes = 20;
  bool prebuilt = false;
  int prebuilt_runs = 5;
  bool profile = false;
  std::string document = "courier";
  app.add_option("--tokenizer", tokenizer, "Byte-level BPE tokenizer.json (Llama 3's)");
  app.add_flag("--prebuilt", prebuilt,
               "Also time first requests on new grammars whose every position table is built "
               "first (the engine's way; a third of a second each on Llama 3's vocabulary)");
  app.add_option("--prebuilt-runs", prebuilt_runs, "How many new grammars --prebuilt times")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--document", document,
                 "courier: shipped by courier; pickup: to a store, whose name is a string "
                 "with maxLength 40")
      ->check(CLI::IsMember({"courier", "pickup"}))
      ->capture_default_str();
  app.add_flag("--table-profile", profile,
               "Build every position table once and print where the time goes");
  app.add_option("--warm-passes", warm_passes, "Passes over the document on the warm grammar")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (!prebuilt) prebuilt_runs = 0;

  std::printf("cpu: %s\n", CpuModel().c_str());
  grammar::testing::HfVocab hf;
  auto t0 = Clock::now();
  if (!grammar::testing::LoadHfVocab(tokenizer, &hf)) {
    std::printf("skipped: no byte-level vocabulary at %s\n", tokenizer.c_str());
    return 0;
  }
  auto vocab = grammar::MakeTokenVocab(std::move(hf.bytes), std::move(hf.special));
  if (!vocab.ok()) {
    std::fprintf(stderr, "%s\n", std::string(vocab.status().message()).c_str());
    return 1;
  }
  std::printf("vocab: %d tokens (%zu in the trie), loaded and sorted in %.1f ms\n",
              (*vocab)->size(), (*vocab)->sorted.size(), Us(Clock::now() - t0) / 1000);

  constexpr int kCompiles = 50;
  t0 = Clock::now();
  std::shared_ptr<const grammar::Grammar> g;
  for (int i = 0; i < kCompiles; ++i) {
    auto compiled = grammar::CompileJsonSchema(kSchema);
    if (!compiled.ok()) {
      std::fprintf(stderr, "%s\n", std::string(compiled.status().message()).c_str());
      return 1;
    }
    g = *compiled;
  }
  std::printf("schema compile: %.1f us (%d rules, %d positions)\n",
              Us(Clock::now() - t0) / kCompiles, g->num_rules(), g->num_positions());
  t0 = Clock::now();
  auto tg = *grammar::TokenGrammar::Create(g, *vocab);
  std::printf("TokenGrammar::Create: %.1f us\n", Us(Clock::now() - t0));

  const std::vector<int32_t> tokens = Tokenize(*grammar::TokenGrammar::Create(g, *vocab),
                                               document == "pickup" ? kPickupDocument : kDocument);
  if (tokens.empty()) {
    std::fprintf(stderr, "the document does not tokenize inside the grammar\n");
    return 1;
  }
  std::printf("document %s: %zu tokens\n", document.c_str(), tokens.size());

  if (profile) {
    ProfileTables(*g, **vocab);
    return 0;
  }
  std::vector<double> cold, warm, tables;
  t0 = Clock::now();
  if (!Pass(tg, tokens, false, &cold)) return 1;
  const double cold_total = Us(Clock::now() - t0);
  for (int i = 0; i < warm_passes; ++i) {
    if (!Pass(tg, tokens, false, &warm)) return 1;
  }
  for (int i = 0; i < std::max(1, warm_passes / 4); ++i) {
    if (!Pass(tg, tokens, true, &tables)) return 1;
  }
  Print("cold", Summarize(cold), cold.size());
  if (prebuilt_runs > 0) {
    // New TokenGrammars whose position tables are built up front (what xgrammar's compile
    // step pays for, and what the engine's GrammarCache does before a new schema's request
    // is scheduled): each one's first request, step by step.
    std::vector<double> first, build_ms;
    size_t built = 0, bytes = 0;
    for (int run = 0; run < prebuilt_runs; ++run) {
      auto fresh = *grammar::TokenGrammar::Create(g, *vocab);
      t0 = Clock::now();
      fresh->BuildAllTables();
      build_ms.push_back(Us(Clock::now() - t0) / 1000);
      built = fresh->tables_built();
      bytes = fresh->table_bytes();
      if (!Pass(fresh, tokens, false, &first)) return 1;
    }
    Print("prebuilt", Summarize(first), first.size());
    const Summary b = Summarize(build_ms);
    std::printf(
        "prebuilt: every position table built up front in %.1f ms median, %.1f max (%zu tables, "
        "%.1f MB, %d grammars)\n",
        b.p50, b.max, built, bytes / 1e6, prebuilt_runs);
  }
  Print("warm", Summarize(warm), warm.size());
  Print("tables-only", Summarize(tables), tables.size());
  std::printf(
      "cold pass total %.1f ms; %zu position tables built (%.1f MB); state cache %zu hits, %zu "
      "misses\n",
      cold_total / 1000, tg->tables_built(), tg->table_bytes() / 1e6, tg->masks().hits(),
      tg->masks().misses());
  return 0;
}

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) { return baton::bench::Main(argc, argv); }
