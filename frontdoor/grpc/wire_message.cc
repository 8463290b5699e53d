#include "frontdoor/grpc/wire_message.h"

#include <map>
#include <vector>

#include "common/strings.h"
#include "common/utf8.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"

namespace baton::frontdoor {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

// Bounds the walk on hostile nesting; the requests nest three deep.
constexpr int kMaxDepth = 16;

std::string Walk(std::string_view wire, const Descriptor& type, const std::string& prefix,
                 int depth) {
  if (depth > kMaxDepth) return "";
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()),
                                            static_cast<int>(wire.size()));
  std::map<int, int> seen;  // field number -> occurrences, for repeated fields' indices
  for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
    const FieldDescriptor* f = type.FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    const bool delimited =
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    const bool string = f != nullptr && f->type() == FieldDescriptor::TYPE_STRING;
    const bool message = f != nullptr && f->type() == FieldDescriptor::TYPE_MESSAGE;
    if (!delimited || (!string && !message)) {
      if (!WireFormatLite::SkipField(&in, tag)) return "";
      continue;
    }
    uint32_t length = 0;
    std::string bytes;
    if (!in.ReadVarint32(&length) || !in.ReadString(&bytes, static_cast<int>(length))) return "";
    std::string path = prefix.empty() ? f->name() : StrCat(prefix, ".", f->name());
    if (f->is_repeated()) path = StrCat(path, "[", seen[f->number()]++, "]");
    if (string && !IsValidUtf8(bytes)) return path;
    if (message) {
      std::string inner = Walk(bytes, *f->message_type(), path, depth + 1);
      if (!inner.empty()) return inner;
    }
  }
  return "";
}

}  // namespace

std::string FirstNonUtf8Field(std::string_view wire, const Descriptor& type) {
  return Walk(wire, type, "", 0);
}

absl::Status ParseWireMessage(const grpc::ByteBuffer& bytes, google::protobuf::Message* out) {
  grpc::ByteBuffer copy(bytes);  // the reader consumes its buffer
  grpc::ProtoBufferReader reader(&copy);
  if (out->ParseFromZeroCopyStream(&reader)) return absl::OkStatus();
  std::vector<grpc::Slice> slices;
  std::string wire;
  if (bytes.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  const std::string field = FirstNonUtf8Field(wire, *out->GetDescriptor());
  if (!field.empty()) {
    return absl::InvalidArgumentError(
        StrCat("'", field, "' is not valid UTF-8; every string field of the request must be"));
  }
  return absl::InvalidArgumentError(
      StrCat("the request is not a valid ", out->GetDescriptor()->full_name(), " message"));
}

absl::Status SerializeWireMessage(const google::protobuf::Message& message, grpc::ByteBuffer* out) {
  out->Clear();  // the writer needs an empty buffer; a call reuses its own
  bool own = false;
  const grpc::Status s =
      grpc::SerializationTraits<google::protobuf::Message>::Serialize(message, out, &own);
  if (!s.ok()) return absl::InternalError(StrCat("serializing the response: ", s.error_message()));
  return absl::OkStatus();
}

}  // namespace baton::frontdoor
