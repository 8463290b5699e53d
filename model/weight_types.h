// What a model's matrices are stored as, for the load banner: "q4_K 25, q6_K 5" (the
// count of distinct matrices per type, most common first), as llama.cpp's loader lists
// the types of a Q4_K_M file.
#pragma once

#include <string>

#include "model/model.h"

namespace baton::model {

std::string MatrixTypeSummary(const Weights& weights);

}  // namespace baton::model
