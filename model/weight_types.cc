#include "model/weight_types.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "common/strings.h"

namespace baton::model {

std::string MatrixTypeSummary(const Weights& weights) {
  std::set<const void*> seen;  // a tied head is the embedding: one matrix
  std::map<std::string, int> counts;
  auto add = [&](const cpu::MatrixRef& m) {
    if (m.data == nullptr || !seen.insert(m.data).second) return;
    ++counts[cpu::DTypeName(m.dtype)];
  };
  add(weights.embedding);
  for (const LayerWeights& l : weights.layers) {
    for (const Linear* lin : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) add(lin->weight);
  }
  add(weights.lm_head);
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [name, n] : sorted) out += baton::StrCat(out.empty() ? "" : ", ", name, " ", n);
  return out;
}

}  // namespace baton::model
