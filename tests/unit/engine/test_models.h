// The bundled model, loaded once per test binary: what the engine's tests run on when
// they need a real model and no test data.
#pragma once

#include <string>
#include <utility>

#include "engine/loaded_model.h"
#include "gtest/gtest.h"

namespace baton::testing {

inline const std::string kBatonTiny = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

inline const engine::LoadedModel& BatonTiny() {
  static const engine::LoadedModel* m = [] {
    absl::StatusOr<engine::LoadedModel> loaded = engine::LoadModel(kBatonTiny);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return new engine::LoadedModel(std::move(*loaded));
  }();
  return *m;
}

}  // namespace baton::testing
