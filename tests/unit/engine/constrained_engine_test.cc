// Constrained decoding in the engine (docs/structured_outputs.md): with a JSON schema or
// json_object, every finished output of the bundled model (and stories260K, when the test
// data is there) parses and has the schema's shape, whatever the seed; a constrained
// sequence samples the same tokens alone and in a batch, and resumed from any point; a
// schema outside the supported subset is a clear error at Submit.
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/strings.h"
#include "engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/engine/drain_stream.h"

namespace baton::engine {
namespace {

using ::baton::testing::Drain;
using ::baton::testing::Outcome;

using ::testing::HasSubstr;
using Json = nlohmann::json;

const std::string kTiny = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";
const std::string kStories =
    std::string(BATON_TESTDATA_DIR) + "/models/stories260K/stories260K.gguf";

const LoadedModel* Load(const std::string& path) {
  static std::map<std::string, std::unique_ptr<LoadedModel>> cache;
  auto& slot = cache[path];
  if (!slot) {
    absl::StatusOr<LoadedModel> m = LoadModel(path);
    if (!m.ok()) return nullptr;
    slot = std::make_unique<LoadedModel>(std::move(*m));
  }
  return slot.get();
}

EngineOptions Options() {
  EngineOptions o;
  o.threads = 2;
  o.kv_cache_bytes = int64_t{64} << 20;
  o.max_running = 16;
  return o;
}

// A person with a bounded shape: small models finish it well within max_tokens.
constexpr char kPerson[] = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"},
    "role": {"type": "string", "enum": ["admin", "user", "guest"]},
    "active": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3}},
  "required": ["name", "age", "role", "active", "tags"], "additionalProperties": false})";

// The oracle for kPerson: the shape a validator would check, written out.
void ExpectPerson(const std::string& text) {
  const Json doc = Json::parse(text, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << text;
  ASSERT_EQ(doc.size(), 5u) << text;
  EXPECT_TRUE(doc["name"].is_string() && doc["name"].get<std::string>().size() <= 12 * 4) << text;
  EXPECT_TRUE(doc["age"].is_number_integer()) << text;
  const std::set<std::string> roles = {"admin", "user", "guest"};
  EXPECT_TRUE(doc["role"].is_string() && roles.contains(doc["role"].get<std::string>())) << text;
  EXPECT_TRUE(doc["active"].is_boolean()) << text;
  ASSERT_TRUE(doc["tags"].is_array()) << text;
  EXPECT_LE(doc["tags"].size(), 3u) << text;
  for (const Json& t : doc["tags"]) EXPECT_TRUE(t.is_string()) << text;
}

EngineRequest Constrained(const LoadedModel& m, int i, OutputConstraint::Kind kind) {
  EngineRequest r;
  r.id = StrCat("c", i);
  const std::string prompt = "Describe a user as JSON:";
  r.prompt_ids = m.tokenizer.tokenizer->Encode(prompt).value();
  r.params.temperature = 1.0;
  r.params.seed = 1000 + static_cast<uint64_t>(i);
  r.params.max_tokens = 400;
  r.params.constraint.kind = kind;
  if (kind == OutputConstraint::Kind::kJsonSchema) r.params.constraint.json_schema = kPerson;
  return r;
}

class ConstrainedEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  const LoadedModel* Model() {
    const LoadedModel* m = Load(GetParam());
    if (m == nullptr) {
      ADD_FAILURE_AT(__FILE__, __LINE__) << "cannot load " << GetParam();
    }
    return m;
  }
  void SetUp() override {
    if (GetParam() == kStories && !std::filesystem::exists(kStories)) {
      GTEST_SKIP() << "stories260K is not in ../shared/testdata (" << kStories << ")";
    }
  }
};

TEST_P(ConstrainedEngineTest, EveryFinishedOutputHasTheSchemasShape) {
  const LoadedModel* m = Model();
  ASSERT_NE(m, nullptr);
  auto engine = Engine::Create(m, Options());
  ASSERT_TRUE(engine.ok()) << engine.status();
  int finished = 0;
  for (int i = 0; i < 12; ++i) {
    const Outcome o =
        Drain((*engine)->Submit(Constrained(*m, i, OutputConstraint::Kind::kJsonSchema))->get());
    ASSERT_TRUE(o.last.status.ok()) << o.last.status;
    if (o.last.finish_reason != FinishReason::kStop) continue;
    ++finished;
    ExpectPerson(o.text);
  }
  // Bounded strings and arrays: most documents end long before max_tokens.
  EXPECT_GE(finished, 9);
}

TEST_P(ConstrainedEngineTest, JsonObjectOutputsAreObjects) {
  const LoadedModel* m = Model();
  ASSERT_NE(m, nullptr);
  auto engine = Engine::Create(m, Options());
  ASSERT_TRUE(engine.ok());
  for (int i = 0; i < 6; ++i) {
    EngineRequest r = Constrained(*m, i, OutputConstraint::Kind::kJsonObject);
    r.params.max_tokens = 64;
    const Outcome o = Drain((*engine)->Submit(r)->get());
    ASSERT_TRUE(o.last.status.ok()) << o.last.status;
    const std::string text = o.text;
    if (o.last.finish_reason == FinishReason::kStop) {
      EXPECT_TRUE(Json::parse(text, nullptr, false).is_object()) << text;
    } else {
      // Cut by max_tokens: still the start of an object.
      EXPECT_EQ(text.substr(text.find_first_not_of(' '), 1), "{") << text;
    }
  }
}

TEST_P(ConstrainedEngineTest, BatchedResumedAndAloneSampleTheSameTokens) {
  const LoadedModel* m = Model();
  ASSERT_NE(m, nullptr);
  auto engine = Engine::Create(m, Options());
  ASSERT_TRUE(engine.ok());
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 8; ++i) {
    requests.push_back(Constrained(
        *m, i,
        i % 3 == 2 ? OutputConstraint::Kind::kJsonObject : OutputConstraint::Kind::kJsonSchema));
    if (i % 4 == 1) requests.back().params.constraint.kind = OutputConstraint::Kind::kNone;
    requests.back().params.max_tokens = 48;
  }
  std::vector<Outcome> alone;
  for (const EngineRequest& r : requests) alone.push_back(Drain((*engine)->Submit(r)->get()));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (EngineRequest r : requests) {
    r.id += "-batched";
    streams.push_back(*(*engine)->Submit(r));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(Drain(streams[i].get()).ids, alone[i].ids) << requests[i].id;
  }
  // Resumed after k tokens (a migrated or decode-side sequence): the grammar replays them.
  for (size_t i = 0; i < requests.size(); ++i) {
    const size_t k = alone[i].ids.size() / 2;
    EngineRequest resumed = requests[i];
    resumed.id += "-resumed";
    resumed.output_ids.assign(alone[i].ids.begin(), alone[i].ids.begin() + k);
    EXPECT_EQ(Drain((*engine)->Submit(resumed)->get()).ids,
              std::vector<int32_t>(alone[i].ids.begin() + k, alone[i].ids.end()))
        << requests[i].id;
  }
}

TEST_P(ConstrainedEngineTest, GreedyConstrainedIsTheBestAllowedToken) {
  // Temperature 0 with a grammar never takes the backend's raw-logits shortcut.
  const LoadedModel* m = Model();
  ASSERT_NE(m, nullptr);
  auto engine = Engine::Create(m, Options());
  ASSERT_TRUE(engine.ok());
  EngineRequest r = Constrained(*m, 0, OutputConstraint::Kind::kJsonSchema);
  r.params.temperature = 0;
  const Outcome o = Drain((*engine)->Submit(r)->get());
  ASSERT_TRUE(o.last.status.ok());
  if (o.last.finish_reason == FinishReason::kStop) ExpectPerson(o.text);
}

INSTANTIATE_TEST_SUITE_P(Models, ConstrainedEngineTest, ::testing::Values(kTiny, kStories),
                         [](const auto& info) {
                           return info.param == kTiny ? std::string("BatonTiny")
                                                      : std::string("Stories260K");
                         });

TEST(ConstrainedEngineErrors, UnsupportedSchemasAndResumedOutputsOutsideTheGrammar) {
  const LoadedModel* m = Load(kTiny);
  ASSERT_NE(m, nullptr);
  auto engine = Engine::Create(m, Options());
  ASSERT_TRUE(engine.ok());
  EngineRequest r = Constrained(*m, 0, OutputConstraint::Kind::kJsonSchema);
  r.params.constraint.json_schema = R"({"type": "string", "pattern": "^a$"})";
  absl::StatusOr<std::shared_ptr<RequestStream>> refused = (*engine)->Submit(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("pattern"));

  EngineRequest resumed = Constrained(*m, 0, OutputConstraint::Kind::kJsonObject);
  // "x" can start no JSON object.
  resumed.output_ids = m->tokenizer.tokenizer->Encode("x").value();
  absl::StatusOr<std::shared_ptr<RequestStream>> bad = (*engine)->Submit(resumed);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("leaves the request's grammar"));
}

}  // namespace
}  // namespace baton::engine
