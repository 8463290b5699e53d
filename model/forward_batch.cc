#include "model/forward_batch.h"

namespace baton::model {

int64_t PlanLogitRows(std::span<const SequenceInput> batch, std::vector<int64_t>* first_row) {
  first_row->assign(batch.size(), -1);
  int64_t rows = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const int64_t count = static_cast<int64_t>(batch[s].tokens.size());
    int64_t want = 0;
    if (batch[s].logits == LogitsWanted::kAll) want = count;
    if (batch[s].logits == LogitsWanted::kLast) want = count > 0 ? 1 : 0;
    if (want > 0) (*first_row)[s] = rows;
    rows += want;
  }
  return rows;
}

}  // namespace baton::model
