// A baton.v1 request as the client sent it: the bytes of a raw gRPC method, parsed here
// rather than by gRPC, so that a message protobuf refuses becomes the client's error
// (INVALID_ARGUMENT naming the field) instead of gRPC's INTERNAL "Unable to parse request".
// The one refusal a well-formed client can cause is a string field that is not UTF-8
// (protobuf's proto3 rule); the field is found by walking the wire bytes against the
// message's descriptor.
//
//   BATON_RETURN_IF_ERROR(ParseWireMessage(raw_request, &request));   // GenerateRequest
//   BATON_RETURN_IF_ERROR(SerializeWireMessage(response, &raw_response));
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace baton::frontdoor {

absl::Status ParseWireMessage(const grpc::ByteBuffer& bytes, google::protobuf::Message* out);
absl::Status SerializeWireMessage(const google::protobuf::Message& message, grpc::ByteBuffer* out);

// The path ("chat.messages[0].content") of the first string field in `wire` whose bytes are
// not UTF-8, or "" when there is none (or the bytes are not a message of this type).
std::string FirstNonUtf8Field(std::string_view wire, const google::protobuf::Descriptor& type);

}  // namespace baton::frontdoor
