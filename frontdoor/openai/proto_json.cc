#include "frontdoor/openai/proto_json.h"

#include "google/protobuf/descriptor.h"

namespace baton::frontdoor {
namespace {

using Json = nlohmann::ordered_json;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

Json Scalar(const Message& m, const Reflection& r, const FieldDescriptor* f) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return r.GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64:
      return r.GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return r.GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return r.GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return r.GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return r.GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return r.GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return r.GetEnum(m, f)->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return r.GetString(m, f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoToJson(r.GetMessage(m, f));
  }
  return nullptr;
}

Json Element(const Message& m, const Reflection& r, const FieldDescriptor* f, int i) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return r.GetRepeatedInt32(m, f, i);
    case FieldDescriptor::CPPTYPE_INT64:
      return r.GetRepeatedInt64(m, f, i);
    case FieldDescriptor::CPPTYPE_UINT32:
      return r.GetRepeatedUInt32(m, f, i);
    case FieldDescriptor::CPPTYPE_UINT64:
      return r.GetRepeatedUInt64(m, f, i);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return r.GetRepeatedDouble(m, f, i);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return r.GetRepeatedFloat(m, f, i);
    case FieldDescriptor::CPPTYPE_BOOL:
      return r.GetRepeatedBool(m, f, i);
    case FieldDescriptor::CPPTYPE_ENUM:
      return r.GetRepeatedEnum(m, f, i)->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return r.GetRepeatedString(m, f, i);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoToJson(r.GetRepeatedMessage(m, f, i));
  }
  return nullptr;
}

}  // namespace

Json ProtoToJson(const Message& message) {
  const auto* d = message.GetDescriptor();
  const Reflection& r = *message.GetReflection();
  Json out = Json::object();
  for (int k = 0; k < d->field_count(); ++k) {
    const FieldDescriptor* f = d->field(k);
    if (f->is_map()) continue;  // none in the messages written this way
    if (!f->is_repeated()) {
      out[f->name()] = Scalar(message, r, f);
      continue;
    }
    Json items = Json::array();
    const int n = r.FieldSize(message, f);
    for (int i = 0; i < n; ++i) items.push_back(Element(message, r, f, i));
    out[f->name()] = std::move(items);
  }
  return out;
}

}  // namespace baton::frontdoor
