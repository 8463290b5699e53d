#include "common/gguf_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/mapped_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::gguf {
namespace {

using ::testing::HasSubstr;

// Writes GGUF bytes the way gguf-py does, so each test states its file in a few lines.
class Builder {
 public:
  explicit Builder(uint32_t version = 3) : version_(version) {}

  template <typename T>
  static void Put(std::string& out, T v) {
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    out.append(buf, sizeof(T));
  }
  static void PutStr(std::string& out, std::string_view s) {
    Put<uint64_t>(out, s.size());
    out.append(s);
  }

  template <typename T>
  Builder& Scalar(std::string_view key, ValueType type, T v) {
    Key(key, type);
    Put<T>(kvs_, v);
    return *this;
  }
  Builder& String(std::string_view key, std::string_view s) {
    Key(key, ValueType::kString);
    PutStr(kvs_, s);
    return *this;
  }
  Builder& StringArray(std::string_view key, const std::vector<std::string>& items) {
    std::string elems;
    for (const std::string& s : items) PutStr(elems, s);
    return Array(key, ValueType::kString, items.size(), elems);
  }
  template <typename T>
  Builder& NumArray(std::string_view key, ValueType elem, const std::vector<T>& items) {
    std::string elems;
    for (T v : items) Put<T>(elems, v);
    return Array(key, elem, items.size(), elems);
  }
  // `elems` is the encoded elements; `count` may lie, to build hostile files.
  Builder& Array(std::string_view key, ValueType elem, uint64_t count, std::string_view elems) {
    Key(key, ValueType::kArray);
    kvs_ += ArrayBody(elem, count, elems);
    return *this;
  }
  static std::string ArrayBody(ValueType elem, uint64_t count, std::string_view elems) {
    std::string out;
    Put<uint32_t>(out, static_cast<uint32_t>(elem));
    Put<uint64_t>(out, count);
    out.append(elems);
    return out;
  }
  // Appends a raw value of any (even invalid) type id.
  Builder& Raw(std::string_view key, uint32_t type, std::string_view value) {
    Key(key, static_cast<ValueType>(type));
    kvs_.append(value);
    return *this;
  }
  Builder& Tensor(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type,
                  uint64_t offset) {
    PutStr(tensors_, name);
    Put<uint32_t>(tensors_, dims.size());
    for (uint64_t d : dims) Put<uint64_t>(tensors_, d);
    Put<uint32_t>(tensors_, type);
    Put<uint64_t>(tensors_, offset);
    ++n_tensors_;
    return *this;
  }

  // Header, metadata, tensor infos, padding to `alignment`, then `data`.
  std::string Build(std::string_view data = "", uint64_t alignment = 32) const {
    std::string out = "GGUF";
    Put<uint32_t>(out, version_);
    Put<uint64_t>(out, n_tensors_);
    Put<uint64_t>(out, n_kv_);
    out += kvs_;
    out += tensors_;
    if (!data.empty()) {
      out.append((alignment - out.size() % alignment) % alignment, '\0');
      out.append(data);
    }
    return out;
  }

 private:
  void Key(std::string_view key, ValueType type) {
    PutStr(kvs_, key);
    Put<uint32_t>(kvs_, static_cast<uint32_t>(type));
    ++n_kv_;
  }

  uint32_t version_;
  std::string kvs_, tensors_;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
};

std::string Header(std::string_view magic, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  std::string out(magic);
  Builder::Put<uint32_t>(out, version);
  Builder::Put<uint64_t>(out, n_tensors);
  Builder::Put<uint64_t>(out, n_kv);
  return out;
}

constexpr uint32_t kF32 = 0, kF16 = 1, kQ8_0 = 8;

Builder AllTypes() {
  Builder b;
  b.Scalar<uint8_t>("u8", ValueType::kUint8, 200)
      .Scalar<int8_t>("i8", ValueType::kInt8, -5)
      .Scalar<uint16_t>("u16", ValueType::kUint16, 60000)
      .Scalar<int16_t>("i16", ValueType::kInt16, -300)
      .Scalar<uint32_t>("u32", ValueType::kUint32, 4000000000u)
      .Scalar<int32_t>("i32", ValueType::kInt32, -2000000000)
      .Scalar<float>("f32", ValueType::kFloat32, 1.5f)
      .Scalar<uint8_t>("bool", ValueType::kBool, 1)
      .String("str", "hello")
      .Scalar<uint64_t>("u64", ValueType::kUint64, (uint64_t{1} << 63) + 5)
      .Scalar<int64_t>("i64", ValueType::kInt64, -(int64_t{1} << 40))
      .Scalar<double>("f64", ValueType::kFloat64, 3.25)
      .StringArray("tokens", {"a", "", std::string("\xff\0b", 3), "<|end|>"})
      .NumArray<float>("scores", ValueType::kFloat32, {0.5f, -1.0f})
      .NumArray<int32_t>("types", ValueType::kInt32, {1, -2, 3});
  return b;
}

// A file with every value type and two tensors whose data ends exactly at end of file.
std::string FullFile() {
  Builder b = AllTypes();
  b.Tensor("token_embd.weight", {4, 2}, kF32, 0).Tensor("blk.0.q", {64}, kQ8_0, 32);
  return b.Build(std::string(32 + 2 * 34, '\x11'));
}

TEST(GgufFile, RoundTripsEveryScalarType) {
  const std::string bytes = AllTypes().Build();
  absl::StatusOr<File> f = File::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(*f->GetUint("u8"), 200u);
  EXPECT_EQ(*f->GetInt("i8"), -5);
  EXPECT_EQ(*f->GetUint("u16"), 60000u);
  EXPECT_EQ(*f->GetInt("i16"), -300);
  EXPECT_EQ(*f->GetUint("u32"), 4000000000u);
  EXPECT_EQ(*f->GetInt("i32"), -2000000000);
  EXPECT_EQ(*f->GetFloat("f32"), 1.5);
  EXPECT_EQ(*f->GetBool("bool"), true);
  EXPECT_EQ(*f->GetString("str"), "hello");
  EXPECT_EQ(*f->GetUint("u64"), (uint64_t{1} << 63) + 5);
  EXPECT_EQ(*f->GetInt("i64"), -(int64_t{1} << 40));
  EXPECT_EQ(*f->GetFloat("f64"), 3.25);
  EXPECT_EQ(*f->GetFloat("i32"), -2000000000.0);
  EXPECT_EQ(*f->GetInt("u32"), 4000000000);
  EXPECT_EQ(f->TypeOf("u16"), ValueType::kUint16);
  EXPECT_EQ(f->TypeOf("tokens"), ValueType::kArray);
  EXPECT_TRUE(f->Has("f64"));
  EXPECT_FALSE(f->Has("nope"));
  EXPECT_THAT(f->Keys(),
              ::testing::ElementsAre("u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str",
                                     "u64", "i64", "f64", "tokens", "scores", "types"));
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  EXPECT_GE(f->data_offset(), bytes.size());
}

TEST(GgufFile, RoundTripsArrays) {
  const std::string bytes = AllTypes().Build();
  absl::StatusOr<File> f = File::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT(*f->GetStringArray("tokens"),
              ::testing::ElementsAre("a", "", std::string_view("\xff\0b", 3), "<|end|>"));
  EXPECT_THAT(*f->GetFloatArray("scores"), ::testing::ElementsAre(0.5f, -1.0f));
  EXPECT_THAT(*f->GetIntArray("types"), ::testing::ElementsAre(1, -2, 3));
  EXPECT_EQ(*f->ArrayElementType("types"), ValueType::kInt32);
  EXPECT_EQ(*f->ArrayLength("tokens"), 4u);
  // The string views point into the caller's bytes: nothing was copied.
  std::string_view first = (*f->GetStringArray("tokens"))[0];
  EXPECT_TRUE(first.data() >= bytes.data() && first.data() < bytes.data() + bytes.size());
}

TEST(GgufFile, IntArraysOfEveryWidth) {
  Builder b;
  b.NumArray<uint8_t>("u8", ValueType::kUint8, {0, 255})
      .NumArray<int8_t>("i8", ValueType::kInt8, {-128, 127})
      .NumArray<uint16_t>("u16", ValueType::kUint16, {65535})
      .NumArray<int16_t>("i16", ValueType::kInt16, {-32768})
      .NumArray<uint32_t>("u32", ValueType::kUint32, {4294967295u})
      .NumArray<int64_t>("i64", ValueType::kInt64, {std::numeric_limits<int64_t>::min()})
      .NumArray<uint64_t>("u64", ValueType::kUint64, {7, uint64_t{1} << 63})
      .NumArray<int32_t>("empty", ValueType::kInt32, {});
  const std::string bytes = b.Build();
  absl::StatusOr<File> f = File::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT(*f->GetIntArray("u8"), ::testing::ElementsAre(0, 255));
  EXPECT_THAT(*f->GetIntArray("i8"), ::testing::ElementsAre(-128, 127));
  EXPECT_THAT(*f->GetIntArray("u16"), ::testing::ElementsAre(65535));
  EXPECT_THAT(*f->GetIntArray("i16"), ::testing::ElementsAre(-32768));
  EXPECT_THAT(*f->GetIntArray("u32"), ::testing::ElementsAre(4294967295));
  EXPECT_THAT(*f->GetIntArray("i64"), ::testing::ElementsAre(std::numeric_limits<int64_t>::min()));
  EXPECT_TRUE(f->GetIntArray("empty")->empty());
  absl::StatusOr<std::vector<int64_t>> big = f->GetIntArray("u64");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.status().message(), HasSubstr("element #1"));
}

TEST(GgufFile, GettersReportMissingKeysAndWrongTypes) {
  const std::string bytes = AllTypes().Build();
  absl::StatusOr<File> f = File::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->GetString("absent").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(f->GetStringArray("absent").status().code(), absl::StatusCode::kNotFound);

  absl::Status s = f->GetString("u8").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'u8'"));
  EXPECT_THAT(s.message(), HasSubstr("uint8"));
  EXPECT_THAT(f->GetUint("i8").status().message(), HasSubstr("negative"));
  EXPECT_THAT(f->GetInt("u64").status().message(), HasSubstr("int64"));
  EXPECT_EQ(f->GetUint("str").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetFloat("bool").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetBool("u8").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f->GetStringArray("scores").status().message(), HasSubstr("array of float32"));
  EXPECT_EQ(f->GetFloatArray("types").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetIntArray("tokens").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetStringArray("str").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->ArrayLength("str").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GgufFile, NestedArraysUpToDepthTwo) {
  std::string inner = Builder::ArrayBody(ValueType::kInt32, 1, std::string("\x07\0\0\0", 4));
  Builder ok;
  ok.Array("nested", ValueType::kArray, 2, inner + inner);
  const std::string bytes = ok.Build();
  absl::StatusOr<File> f = File::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f->ArrayElementType("nested"), ValueType::kArray);
  EXPECT_EQ(*f->ArrayLength("nested"), 2u);
  EXPECT_EQ(f->GetIntArray("nested").status().code(), absl::StatusCode::kInvalidArgument);

  Builder deep;
  deep.Array("deep", ValueType::kArray, 1, Builder::ArrayBody(ValueType::kArray, 1, inner));
  const std::string deep_bytes = deep.Build();
  absl::Status s = File::Parse(deep_bytes).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("nested"));
}

TEST(GgufFile, TensorsAndDataOffset) {
  const std::string bytes = FullFile();
  absl::StatusOr<File> f = File::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorInfo& t = f->tensors()[0];
  EXPECT_EQ(t.name, "token_embd.weight");
  EXPECT_THAT(t.dims, ::testing::ElementsAre(4, 2));
  EXPECT_EQ(t.type, kF32);
  EXPECT_EQ(t.offset, 0u);
  EXPECT_EQ(t.nbytes, 32u);
  EXPECT_EQ(f->tensors()[1].nbytes, 68u);  // two Q8_0 blocks of 34 bytes
  EXPECT_EQ(f->FindTensor("blk.0.q"), &f->tensors()[1]);
  EXPECT_EQ(f->FindTensor("nope"), nullptr);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  EXPECT_EQ(f->data_offset() + 32 + 2 * 34, bytes.size());
}

TEST(GgufFile, HonoursGeneralAlignment) {
  Builder b;
  b.Scalar<uint32_t>("general.alignment", ValueType::kUint32, 64).Tensor("w", {16}, kF32, 0);
  const std::string bytes = b.Build(std::string(64, 'x'), 64);
  absl::StatusOr<File> f = File::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);

  for (uint32_t bad : {0u, 3u, 48u}) {
    Builder c;
    c.Scalar<uint32_t>("general.alignment", ValueType::kUint32, bad);
    const std::string bad_bytes = c.Build();
    EXPECT_THAT(File::Parse(bad_bytes).status().message(), HasSubstr("power of two")) << bad;
  }
  Builder s;
  s.String("general.alignment", "32");
  const std::string str_bytes = s.Build();
  EXPECT_THAT(File::Parse(str_bytes).status().message(), HasSubstr("general.alignment"));
}

TEST(GgufFile, AcceptsVersion2) {
  Builder b(2);
  b.String("general.architecture", "llama");
  const std::string bytes = b.Build();
  absl::StatusOr<File> f = File::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->version(), 2u);
}

void ExpectInvalid(std::string_view bytes, std::string_view substr, const Limits& limits = {}) {
  absl::Status s = File::Parse(bytes, limits).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr(substr));
}

TEST(GgufFile, RejectsBadHeaders) {
  ExpectInvalid("", "too short");
  ExpectInvalid("GGU", "too short");
  ExpectInvalid(Header("GGML", 3, 0, 0), "magic");
  ExpectInvalid(Header("GGUF", 1, 0, 0), "version 1");
  ExpectInvalid(Header("GGUF", 4, 0, 0), "unsupported version 4");
  ExpectInvalid(Header("GGUF", 0x03000000, 0, 0), "big-endian");
  ExpectInvalid(Header("GGUF", 3, 0, 0).substr(0, 12), "tensor count needs 8 bytes");
  ExpectInvalid(Header("GGUF", 3, 0, 0).substr(0, 16), "metadata count needs 8 bytes");
}

TEST(GgufFile, HugeCountsFailFast) {
  const uint64_t huge = uint64_t{1} << 60;
  ExpectInvalid(Header("GGUF", 3, 0, huge), "metadata count 1152921504606846976 exceeds");
  ExpectInvalid(Header("GGUF", 3, huge, 0), "tensor count 1152921504606846976 exceeds");
  ExpectInvalid(Header("GGUF", 3, 0, 1000), "exceed the bytes left in the file");

  Builder a;
  a.String("general.name", "x").Array("tokenizer.ggml.tokens", ValueType::kString, 99999999, "");
  ExpectInvalid(a.Build(),
                "gguf: metadata key #1 ('tokenizer.ggml.tokens'): array length 99999999 "
                "exceeds the bytes left in the file (0)");
  Builder a2;
  a2.Array("x", ValueType::kUint64, huge, std::string(64, '\0'));
  ExpectInvalid(a2.Build(), "exceeds the bytes left in the file (64)");

  std::string str_len;
  Builder::Put<uint64_t>(str_len, huge);
  Builder s;
  s.Raw("k", static_cast<uint32_t>(ValueType::kString), str_len);
  ExpectInvalid(s.Build(),
                "string length 1152921504606846976 exceeds the bytes left in the file (0)");
  Builder elem;
  elem.Array("toks", ValueType::kString, 2, std::string("\1\0\0\0\0\0\0\0a", 9) + str_len);
  ExpectInvalid(elem.Build(), "('toks'): element #1: string length");

  Builder k;
  k.String(std::string(1000, 'k'), "v");
  ExpectInvalid(k.Build(), "key length 1000 exceeds the limit (100 bytes)",
                Limits{.max_string_bytes = 100});
  ExpectInvalid(AllTypes().Build(), "array length 4 exceeds the limit (3)",
                Limits{.max_array_len = 3});
  ExpectInvalid(AllTypes().Build(), "metadata count 15 exceeds the limit (10)",
                Limits{.max_kv = 10});
}

TEST(GgufFile, RejectsMalformedMetadata) {
  Builder dup;
  dup.String("a", "1").String("b", "2").String("a", "3");
  ExpectInvalid(dup.Build(),
                "metadata key #2 ('a'): duplicate key (first seen as metadata key #0)");
  Builder type;
  type.Raw("weird", 13, "");
  ExpectInvalid(type.Build(), "('weird'): unknown value type 13");
  Builder elem;
  elem.Array("weird", static_cast<ValueType>(99), 0, "");
  ExpectInvalid(elem.Build(), "unknown array element type 99");
  Builder boolean;
  boolean.Raw("flag", static_cast<uint32_t>(ValueType::kBool), "\x02");
  ExpectInvalid(boolean.Build(), "bool value 2");
  Builder key;
  key.Raw(std::string_view("bad\0key\n", 8), 99, "");
  ExpectInvalid(key.Build(), "('bad\\x00key\\n')");
}

TEST(GgufFile, RejectsMalformedTensors) {
  const std::string data(256, '\0');
  auto with = [&](auto add, std::string_view d) {
    Builder b;
    add(b);
    return b.Build(d);
  };
  ExpectInvalid(with([](Builder& b) { b.Tensor("t", {4}, kF32, 8); }, data),
                "('t'): offset 8 is not a multiple of the alignment (32)");
  ExpectInvalid(with([](Builder& b) { b.Tensor("t", {4}, kF32, 256); }, data),
                "lies outside the data section (256 bytes)");
  ExpectInvalid(with([](Builder& b) { b.Tensor("t", {65}, kF32, 0); }, data),
                "data [0, +260) lies outside");
  ExpectInvalid(with(
                    [](Builder& b) {
                      b.Tensor("t", {1, 2, 3, 4, 5}, kF32, 0);
                    },
                    data),
                "n_dims 5 exceeds the limit (4)");
  ExpectInvalid(with(
                    [](Builder& b) {
                      b.Tensor("t", {uint64_t{1} << 32, uint64_t{1} << 32}, kF32, 0);
                    },
                    data),
                "dims overflow int64 at dim 1");
  ExpectInvalid(with([](Builder& b) { b.Tensor("t", {uint64_t{1} << 63}, kF32, 0); }, data),
                "dims overflow int64 at dim 0");
  ExpectInvalid(with([](Builder& b) { b.Tensor("t", {4}, 4, 0); }, data),
                "unknown ggml tensor type 4");
  ExpectInvalid(with([](Builder& b) { b.Tensor("t", {33}, kQ8_0, 0); }, data),
                "dim 0 (33) is not a multiple of the block size (32)");
  ExpectInvalid(
      with([](Builder& b) { b.Tensor("t", {4}, kF32, 0).Tensor("t", {4}, kF32, 32); }, data),
      "tensor #1 ('t'): duplicate tensor name");
  // Tensors but no data section at all.
  ExpectInvalid(with([](Builder& b) { b.Tensor("t", {4}, kF32, 0); }, ""), "data");
}

// A tensor whose type id was corrupted to a wider type grows over the next one: "a" was
// f16 (64 bytes at 0, then "b" at 64) and now claims f32 (128 bytes). Loaded, "a" would
// read "b"'s bytes as its own.
std::string OverlappingFile() {
  Builder b;
  b.Tensor("a", {32}, kF32, 0).Tensor("b", {32}, kF16, 64);
  return b.Build(std::string(128, '\0'));
}

TEST(GgufFile, RejectsOverlappingTensors) {
  ExpectInvalid(OverlappingFile(),
                "gguf: tensor #1 ('b'): data [64, +64) overlaps tensor #0 ('a') data [0, +128)");

  const std::string data(256, '\0');
  auto parse = [&](auto add) {
    Builder b;
    add(b);
    return File::Parse(b.Build(data)).status();
  };
  // Listed out of order: found by offset, named in file order.
  EXPECT_THAT(parse([](Builder& b) {
                b.Tensor("late", {8}, kF32, 32).Tensor("early", {16}, kF32, 0);
              }).message(),
              HasSubstr("tensor #1 ('early'): data [0, +64) overlaps tensor #0 ('late') data "
                        "[32, +32)"));
  // One inside another.
  EXPECT_THAT(parse([](Builder& b) {
                b.Tensor("big", {48}, kF32, 0).Tensor("inner", {8}, kF32, 64);
              }).message(),
              HasSubstr("tensor #1 ('inner'): data [64, +32) overlaps tensor #0 ('big') data "
                        "[0, +192)"));
  // The same range twice.
  EXPECT_THAT(
      parse([](Builder& b) { b.Tensor("x", {8}, kF32, 32).Tensor("y", {8}, kF32, 32); }).message(),
      HasSubstr("tensor #1 ('y'): data [32, +32) overlaps tensor #0 ('x') data [32, +32)"));

  // Back to back is fine, and an empty tensor owns no bytes, so it may sit anywhere.
  absl::StatusOr<File> ok = File::Parse([&] {
    Builder b;
    b.Tensor("a", {8}, kF32, 0).Tensor("b", {8}, kF32, 32).Tensor("empty", {0, 4}, kF32, 32);
    return b.Build(data);
  }());
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST(GgufFile, EveryTruncationIsAnError) {
  const std::string bytes = FullFile();
  ASSERT_TRUE(File::Parse(bytes).ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    // A fresh copy of exactly n bytes, so ASan sees any read past the end.
    const std::string prefix = bytes.substr(0, n);
    absl::Status s = File::Parse(prefix).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "prefix of " << n << " bytes";
  }
}

TEST(GgufFile, CorruptingAnyByteNeverCrashes) {
  const std::string bytes = FullFile();
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (char v : {'\0', '\x01', '\x7f', '\xff'}) {
      std::string copy = bytes;
      copy[i] = v;
      absl::StatusOr<File> f = File::Parse(copy);
      if (!f.ok()) continue;
      for (std::string_view key : f->Keys()) {
        (void)f->GetStringArray(key);
        (void)f->GetIntArray(key);
        (void)f->GetFloatArray(key);
        (void)f->GetFloat(key);
        (void)f->GetString(key);
      }
    }
  }
}

TEST(GgufFile, LargeVocabularyLoads) {
  std::vector<std::string> tokens;
  for (int i = 0; i < 150000; ++i) tokens.push_back("tok" + std::to_string(i));
  Builder b;
  b.StringArray("tokenizer.ggml.tokens", tokens);
  const std::string bytes = b.Build();
  absl::StatusOr<File> f = File::Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<std::vector<std::string_view>> got = f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 150000u);
  EXPECT_EQ((*got)[149999], "tok149999");
}

std::string TestData(const char* rel) { return std::string(BATON_TESTDATA_DIR) + "/" + rel; }

TEST(GgufFile, ParsesGpt2Vocab) {
  const std::string path = TestData("tokenizers/gguf/ggml-vocab-gpt-2.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "testdata absent: " << path;
  absl::StatusOr<MappedFile> mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  absl::StatusOr<File> f = File::Parse(mapped->view());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "gpt2");
  absl::StatusOr<std::vector<std::string_view>> tokens = f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 50257u);
  EXPECT_EQ((*tokens)[0], "!");
  absl::StatusOr<std::vector<std::string_view>> merges = f->GetStringArray("tokenizer.ggml.merges");
  ASSERT_TRUE(merges.ok()) << merges.status();
  EXPECT_FALSE(merges->empty());
}

TEST(GgufFile, ParsesStories260K) {
  const std::string path = TestData("models/stories260K/stories260K.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "testdata absent: " << path;
  absl::StatusOr<MappedFile> mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  absl::StatusOr<File> f = File::Parse(mapped->view());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_FALSE(f->tensors().empty());
  const TensorInfo* embd = f->FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  ASSERT_EQ(embd->dims.size(), 2u);
  // token_embd is [n_embd, n_vocab] in ggml order.
  EXPECT_EQ(embd->dims[0], *f->GetUint("llama.embedding_length"));
  EXPECT_LE(f->data_offset() + embd->offset + embd->nbytes, mapped->size());
  EXPECT_EQ(*f->ArrayLength("tokenizer.ggml.tokens"), embd->dims[1]);
}

TEST(GgufFile, ParsesEveryVocabInTestdata) {
  const std::string dir = TestData("tokenizers/gguf");
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "testdata absent: " << dir;
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    absl::StatusOr<MappedFile> mapped = MappedFile::Open(entry.path().string());
    ASSERT_TRUE(mapped.ok()) << mapped.status();
    absl::StatusOr<File> f = File::Parse(mapped->view());
    ASSERT_TRUE(f.ok()) << entry.path() << ": " << f.status();
    absl::StatusOr<std::vector<std::string_view>> tokens =
        f->GetStringArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok()) << entry.path() << ": " << tokens.status();
    EXPECT_GT(tokens->size(), 1000u) << entry.path();
    ++parsed;
  }
  EXPECT_GT(parsed, 0);
}

// Regenerates the fuzz seeds: run with --gtest_also_run_disabled_tests.
TEST(GgufFile, DISABLED_WriteFuzzSeeds) {
  const std::string dir = std::string(BATON_SOURCE_DIR) + "/tests/fuzz/corpus/gguf";
  std::filesystem::create_directories(dir);
  auto write = [&](const char* name, const std::string& bytes) {
    ASSERT_LT(bytes.size(), 4096u);
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
  };
  write("all_types.gguf", AllTypes().Build());
  write("tensors.gguf", FullFile());
  Builder v2(2);
  v2.String("tokenizer.ggml.model", "gpt2")
      .StringArray("tokenizer.ggml.tokens", {"a", "b", "ab", "<eos>"})
      .StringArray("tokenizer.ggml.merges", {"a b"})
      .NumArray<int32_t>("tokenizer.ggml.token_type", ValueType::kInt32, {1, 1, 1, 3})
      .Scalar<uint32_t>("tokenizer.ggml.eos_token_id", ValueType::kUint32, 3);
  write("vocab_v2.gguf", v2.Build());
  std::string inner = Builder::ArrayBody(ValueType::kInt8, 2, "\1\2");
  Builder nested;
  nested.Scalar<uint32_t>("general.alignment", ValueType::kUint32, 64)
      .Array("nested", ValueType::kArray, 2, inner + inner)
      .Tensor("w", {32, 2}, kQ8_0, 0);
  write("nested_aligned.gguf", nested.Build(std::string(68, '\x22'), 64));
  write("overlapping_tensors.gguf", OverlappingFile());
}

}  // namespace
}  // namespace baton::gguf
