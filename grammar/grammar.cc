#include "grammar/grammar.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace baton::grammar {
namespace {

using Kind = Grammar::Kind;
using Alt = std::vector<Grammar::Element>;

std::string ByteSetText(const ByteSet& s) {
  int count = 0;
  for (int b = 0; b < 256; ++b) count += s.Has(static_cast<uint8_t>(b));
  auto show = [](int b) {
    if (b >= 0x21 && b < 0x7f && b != '\\' && b != ']' && b != '"' && b != '-') {
      return std::string(1, static_cast<char>(b));
    }
    return absl::StrFormat("\\x%02x", b);
  };
  if (count == 1) {
    for (int b = 0; b < 256; ++b) {
      if (s.Has(static_cast<uint8_t>(b))) return absl::StrCat("\"", show(b), "\"");
    }
  }
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!s.Has(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.Has(static_cast<uint8_t>(e + 1))) ++e;
    absl::StrAppend(&out, show(b));
    if (e > b) absl::StrAppend(&out, "-", show(e));
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::ToString() const {
  std::string out;
  for (int32_t r = 0; r < num_rules(); ++r) {
    absl::StrAppend(&out, names_[r], " ::=");
    bool first = true;
    for (int32_t start : rule_alts_[r]) {
      absl::StrAppend(&out, first ? " " : " | ");
      first = false;
      if (elements_[start].kind == Kind::kEnd) absl::StrAppend(&out, "\"\"");
      for (int32_t p = start; elements_[p].kind != Kind::kEnd; ++p) {
        if (p != start) out += ' ';
        const Element& e = elements_[p];
        out += e.kind == Kind::kRule ? names_[e.rule] : ByteSetText(e.bytes);
      }
    }
    out += '\n';
  }
  return out;
}

std::vector<GrammarBuilder::Symbol> GrammarBuilder::Literal(std::string_view text) {
  std::vector<Symbol> out;
  out.reserve(text.size());
  for (char c : text) out.push_back(Byte(static_cast<uint8_t>(c)));
  return out;
}

int32_t GrammarBuilder::AddRule(std::string name) {
  names_.push_back(std::move(name));
  rules_.emplace_back();
  return static_cast<int32_t>(rules_.size()) - 1;
}

void GrammarBuilder::AddAlternative(int32_t rule, std::vector<Symbol> symbols) {
  rules_[rule].push_back(std::move(symbols));
}

absl::StatusOr<std::shared_ptr<const Grammar>> GrammarBuilder::Build(int32_t root) && {
  const size_t n = rules_.size();
  if (root < 0 || static_cast<size_t>(root) >= n) {
    return absl::InvalidArgumentError("grammar: root rule out of range");
  }
  for (auto& alts : rules_) {
    for (auto& alt : alts) {
      for (auto& s : alt) {
        if (s.kind == Kind::kRule && (s.rule < 0 || static_cast<size_t>(s.rule) >= n)) {
          return absl::InvalidArgumentError("grammar: rule reference out of range");
        }
      }
    }
  }
  // Productive rules (some alternative derives a finite string), to a fixpoint.
  std::vector<char> productive(n, 0);
  auto alt_productive = [&](const Alt& alt) {
    for (const auto& s : alt) {
      if (s.kind == Kind::kBytes ? s.bytes.Empty() : !productive[s.rule]) return false;
    }
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (productive[r]) continue;
      for (const auto& alt : rules_[r]) {
        if (alt_productive(alt)) {
          productive[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  if (!productive[root]) {
    return absl::InvalidArgumentError(
        "schema: accepts no document (an unsatisfiable constraint or a $ref cycle)");
  }
  // A matcher stack that reached an unproductive alternative could never finish, so the
  // mask would allow a dead end: drop them.
  for (auto& alts : rules_) {
    std::erase_if(alts, [&](const Alt& alt) { return !alt_productive(alt); });
  }
  // Nullable rules, then left recursion through nullable prefixes.
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rules_[r]) {
        bool all = true;
        for (const auto& s : alt) all = all && s.kind == Kind::kRule && nullable[s.rule];
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<int32_t>> left(n);  // rules reachable before any byte
  for (size_t r = 0; r < n; ++r) {
    for (const auto& alt : rules_[r]) {
      for (const auto& s : alt) {
        if (s.kind != Kind::kRule) break;
        left[r].push_back(s.rule);
        if (!nullable[s.rule]) break;
      }
    }
  }
  std::vector<char> color(n, 0);  // 0 new, 1 on the DFS stack, 2 done
  for (size_t start = 0; start < n; ++start) {
    if (color[start]) continue;
    std::vector<std::pair<int32_t, size_t>> dfs = {{static_cast<int32_t>(start), 0}};
    color[start] = 1;
    while (!dfs.empty()) {
      auto& [r, i] = dfs.back();
      if (i == left[r].size()) {
        color[r] = 2;
        dfs.pop_back();
        continue;
      }
      const int32_t s = left[r][i++];
      if (color[s] == 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", names_[s],
                         "' refers to itself before consuming any input (a $ref or anyOf cycle)"));
      }
      if (color[s] == 0) {
        color[s] = 1;
        dfs.push_back({s, 0});
      }
    }
  }
  auto g = std::shared_ptr<Grammar>(new Grammar());
  g->root_ = root;
  g->names_ = std::move(names_);
  g->rule_alts_.resize(n);
  for (size_t r = 0; r < n; ++r) {
    for (const auto& alt : rules_[r]) {
      g->rule_alts_[r].push_back(static_cast<int32_t>(g->elements_.size()));
      for (const auto& s : alt) {
        g->elements_.push_back(s);
        g->rule_of_.push_back(static_cast<int32_t>(r));
      }
      g->elements_.push_back(Grammar::Element{});
      g->rule_of_.push_back(static_cast<int32_t>(r));
    }
  }
  // Return sites: direct ones, then closed over tail references (a reference that ends
  // its alternative returns wherever its own rule returns).
  std::vector<std::vector<int32_t>> direct(n);
  std::vector<std::vector<int32_t>> tail_callers(n);
  for (int32_t pos = 0; pos < g->num_positions(); ++pos) {
    const Grammar::Element& e = g->elements_[pos];
    if (e.kind != Kind::kRule) continue;
    if (g->elements_[pos + 1].kind == Kind::kEnd) {
      tail_callers[e.rule].push_back(g->rule_of_[pos]);
    } else {
      direct[e.rule].push_back(pos + 1);
    }
  }
  g->returns_.resize(n);
  g->returns_known_.assign(n, 1);
  g->may_end_.assign(n, 0);
  std::vector<uint32_t> seen(n, 0);
  for (size_t r = 0; r < n; ++r) {
    std::vector<int32_t> todo = {static_cast<int32_t>(r)};
    seen[r] = static_cast<uint32_t>(r) + 1;
    auto& out = g->returns_[r];
    while (!todo.empty()) {
      const int32_t t = todo.back();
      todo.pop_back();
      if (t == root) g->may_end_[r] = 1;
      out.insert(out.end(), direct[t].begin(), direct[t].end());
      for (int32_t c : tail_callers[t]) {
        if (seen[c] != r + 1) {
          seen[c] = static_cast<uint32_t>(r) + 1;
          todo.push_back(c);
        }
      }
      if (out.size() > Grammar::kMaxReturns) {
        g->returns_known_[r] = 0;
        out.clear();
        break;
      }
    }
  }
  return std::shared_ptr<const Grammar>(std::move(g));
}

}  // namespace baton::grammar
