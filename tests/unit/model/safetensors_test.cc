#include "model/safetensors.h"

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "modelgen/safetensors_writer.h"

namespace baton::model {
namespace {

using modelgen::SafetensorsWriter;

using ::testing::HasSubstr;

// A file from literal header JSON and `data_size` zero bytes of data. The header is
// padded with spaces so that the data starts 8-byte aligned, as real writers do.
std::string Raw(std::string header, size_t data_size) {
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data_size, '\0');
}

std::string Floats(std::initializer_list<float> values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

absl::Status ParseStatus(const std::string& bytes) {
  return SafetensorsFile::Parse(bytes, "test.safetensors").status();
}

TEST(SafetensorsTest, ReadsWhatTheWriterWrites) {
  SafetensorsWriter w;
  w.SetMetadata("format", "pt");
  w.AddTensorBytes("a", cpu::DType::kF32, {2, 2}, Floats({1, 2, 3, 4}));
  w.AddTensorBytes("b", cpu::DType::kBF16, {3}, std::string("\x80\x3f\x00\x40\x40\x40", 6));
  w.AddTensorBytes("c", cpu::DType::kF16, {1, 1, 1, 1}, std::string("\x00\x3c", 2));
  w.AddTensorBytes("scalar", cpu::DType::kF32, {}, Floats({7}));
  w.AddTensorBytes("empty", cpu::DType::kF32, {0, 5}, "");
  absl::StatusOr<std::string> bytes = w.WriteString();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<SafetensorsFile> f = SafetensorsFile::Parse(*bytes, "test");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors().size(), 5u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const SafetensorsTensor* a = f->Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, cpu::DType::kF32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(a->data, Floats({1, 2, 3, 4}));
  EXPECT_EQ(f->Find("b")->dtype, cpu::DType::kBF16);
  EXPECT_EQ(f->Find("b")->data.size(), 6u);
  EXPECT_EQ(f->Find("c")->dtype, cpu::DType::kF16);
  EXPECT_TRUE(f->Find("scalar")->shape.empty());
  EXPECT_EQ(f->Find("scalar")->data, Floats({7}));
  EXPECT_EQ(f->Find("empty")->data.size(), 0u);
  EXPECT_EQ(f->Find("missing"), nullptr);
  // The data starts 8-byte aligned.
  EXPECT_EQ((a->data.data() - bytes->data()) % 8, 0);
}

TEST(SafetensorsTest, EveryTruncationIsACleanError) {
  SafetensorsWriter w;
  w.AddTensorBytes("x", cpu::DType::kF32, {4}, Floats({1, 2, 3, 4}));
  w.AddTensorBytes("y", cpu::DType::kF32, {2}, Floats({5, 6}));
  const std::string bytes = *w.WriteString();
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    absl::Status s = ParseStatus(bytes.substr(0, cut));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "cut at " << cut;
    EXPECT_THAT(s.message(), HasSubstr("test.safetensors")) << "cut at " << cut;
  }
  EXPECT_TRUE(ParseStatus(bytes).ok());
}

TEST(SafetensorsTest, HeaderLengthIsBounded) {
  std::string bytes(16, '\0');
  uint64_t n = uint64_t{1} << 40;
  std::memcpy(bytes.data(), &n, 8);
  EXPECT_THAT(ParseStatus(bytes).message(), HasSubstr("exceeds the limit"));
  n = 9;  // one more than the 8 bytes that follow
  std::memcpy(bytes.data(), &n, 8);
  EXPECT_THAT(ParseStatus(bytes).message(), HasSubstr("truncated"));
  n = 0;
  std::memcpy(bytes.data(), &n, 8);
  EXPECT_THAT(ParseStatus(bytes).message(), HasSubstr("empty"));
  EXPECT_THAT(ParseStatus("abc").message(), HasSubstr("too short"));
}

TEST(SafetensorsTest, RefusesBadHeaders) {
  struct Case {
    const char* header;
    size_t data;
    const char* message;
  };
  const Case cases[] = {
      {"not json", 0, "not valid JSON"},
      {"[1, 2]", 0, "not a JSON object"},
      {R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 1000]}})", 8, "outside"},
      {R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 4]}})", 8, "outside"},
      {R"({"t": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 8]}})", 16, "need 4 x 4"},
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
           "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
       24, "overlap"},
      {R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})", 8, "not aligned"},
      {R"({"t": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8,
       "tensor 't' has dtype 'I64', which is not supported"},
      {R"({"t": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", 4, "'dtype'"},
      {R"({"t": {"dtype": "F32", "shape": [1, 1, 1, 1, 1], "data_offsets": [0, 4]}})", 4,
       "rank 5 exceeds"},
      {R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, "shape[0]"},
      {R"({"t": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 4]}})", 4, "shape[0]"},
      {R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 4]}})",
       4, "overflows"},
      {R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4, "data_offsets"},
      {R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, -4]}})", 4, "data_offsets"},
      {R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})", 4, "'shape'"},
      {R"({"t": [1]})", 4, "not a JSON object"},
      {R"({"__metadata__": {"a": 1}})", 0, "__metadata__ 'a' is not a string"},
      {R"({"__metadata__": [1]})", 0, "__metadata__ is not a JSON object"},
  };
  for (const Case& c : cases) {
    absl::Status s = ParseStatus(Raw(c.header, c.data));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.header;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.header;
  }
}

TEST(SafetensorsTest, EmptyTensorsDoNotOverlap) {
  EXPECT_TRUE(ParseStatus(Raw(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},
                                  "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                              8))
                  .ok());
}

TEST(SafetensorsTest, TensorLimit) {
  SafetensorsLimits limits;
  limits.max_tensors = 1;
  const std::string bytes = Raw(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                    "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                                8);
  EXPECT_THAT(SafetensorsFile::Parse(bytes, "t", limits).status().message(),
              HasSubstr("the limit is 1"));
}

TEST(SafetensorsIndexTest, ReadsShards) {
  absl::StatusOr<SafetensorsIndex> index = ParseSafetensorsIndex(
      R"({"metadata": {"total_size": 12}, "weight_map": {"a": "m-2.safetensors",
          "b": "m-1.safetensors", "c": "m-2.safetensors"}})",
      "index.json");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->shards, (std::vector<std::string>{"m-1.safetensors", "m-2.safetensors"}));
  EXPECT_EQ(index->weight_map.at("a"), "m-2.safetensors");
}

TEST(SafetensorsIndexTest, RefusesPathsOutsideTheDirectory) {
  for (const char* shard : {"../evil.safetensors", "sub/x.safetensors", "/etc/passwd", "..", ".",
                            "", "a\\\\b.safetensors"}) {
    const std::string json =
        std::string(R"({"weight_map": {"model.norm.weight": ")") + shard + "\"}}";
    absl::Status s = ParseSafetensorsIndex(json, "index.json").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << shard;
    EXPECT_THAT(s.message(), HasSubstr("not a plain file name")) << shard;
    EXPECT_THAT(s.message(), HasSubstr("model.norm.weight")) << shard;
  }
  // A NUL inside the name would cut the path short when opened.
  EXPECT_FALSE(
      ParseSafetensorsIndex(R"({"weight_map": {"a": "x\u0000/../y"}})", "index.json").ok());
}

TEST(SafetensorsIndexTest, RefusesMalformedIndexes) {
  EXPECT_THAT(ParseSafetensorsIndex("{", "i").status().message(), HasSubstr("not a JSON object"));
  EXPECT_THAT(ParseSafetensorsIndex("{}", "i").status().message(), HasSubstr("weight_map"));
  EXPECT_THAT(ParseSafetensorsIndex(R"({"weight_map": {}})", "i").status().message(),
              HasSubstr("empty"));
  EXPECT_THAT(ParseSafetensorsIndex(R"({"weight_map": {"a": 1}})", "i").status().message(),
              HasSubstr("weight_map['a'] is not a string"));
}

}  // namespace
}  // namespace baton::model
