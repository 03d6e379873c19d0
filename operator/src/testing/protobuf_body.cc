// The protobuf wire format, and the messages of a Secret in it.
#include "protobuf_body.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"

namespace easyscale::op::testing {
namespace {

using nlohmann::json;

// One message's fields, in order.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : rest_(bytes) {}
  bool done() const { return rest_.empty(); }

  // The next field's number and wire type (0 varint, 1 fixed64, 2 bytes, 5 fixed32).
  Status Next(uint32_t* field, uint32_t* wireType) {
    uint64_t key = 0;
    ES_RETURN_IF_ERROR(Varint(&key));
    *field = static_cast<uint32_t>(key >> 3);
    *wireType = static_cast<uint32_t>(key & 7);
    return absl::OkStatus();
  }
  Status Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (rest_.empty()) return Truncated();
      const uint8_t b = static_cast<uint8_t>(rest_.front());
      rest_.remove_prefix(1);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return absl::OkStatus();
    }
    return absl::FailedPreconditionError("protobuf body: a varint is longer than 10 bytes");
  }
  Status Bytes(std::string_view* out) {
    uint64_t n = 0;
    ES_RETURN_IF_ERROR(Varint(&n));
    if (n > rest_.size()) return Truncated();
    *out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return absl::OkStatus();
  }
  // A length-delimited field (strings, bytes, messages); anything else is an error.
  Status LengthDelimited(uint32_t wireType, std::string_view* out) {
    if (wireType != 2) {
      return absl::FailedPreconditionError(
          absl::StrCat("protobuf body: wire type ", wireType, " where bytes were expected"));
    }
    return Bytes(out);
  }

 private:
  static Status Truncated() { return absl::FailedPreconditionError("protobuf body: truncated"); }
  std::string_view rest_;
};

Status UnknownField(const char* message, uint32_t field) {
  return absl::FailedPreconditionError(absl::StrCat("protobuf body: field ", field, " of ", message,
                                                    " is not read by the test API server"));
}

// A map entry (key 1, value 2) into `out`; bytes values as base64, as JSON has them.
Status ReadMapEntry(std::string_view entry, bool base64, json& out) {
  WireReader r(entry);
  std::string_view key, value;
  while (!r.done()) {
    uint32_t field = 0, type = 0;
    ES_RETURN_IF_ERROR(r.Next(&field, &type));
    if (field != 1 && field != 2) return UnknownField("a map entry", field);
    ES_RETURN_IF_ERROR(r.LengthDelimited(type, field == 1 ? &key : &value));
  }
  const std::string v(value);
  out[std::string(key)] = base64 ? absl::Base64Escape(v) : v;
  return absl::OkStatus();
}

// metav1.ObjectMeta: the fields a client sets; creationTimestamp (always
// present, zero from a client) and selfLink are the server's and dropped.
StatusOr<json> ReadObjectMeta(std::string_view bytes) {
  json meta = json::object();
  WireReader r(bytes);
  while (!r.done()) {
    uint32_t field = 0, type = 0;
    ES_RETURN_IF_ERROR(r.Next(&field, &type));
    static constexpr const char* kStrings[] = {nullptr, "name", "generateName",   "namespace",
                                               nullptr, "uid",  "resourceVersion"};
    std::string_view value;
    if (field == 7) {
      uint64_t generation = 0;
      ES_RETURN_IF_ERROR(r.Varint(&generation));
      meta["generation"] = static_cast<int64_t>(generation);
      continue;
    }
    if (field > 14 || (field >= 9 && field <= 10) || field == 13) {
      return UnknownField("ObjectMeta", field);
    }
    ES_RETURN_IF_ERROR(r.LengthDelimited(type, &value));
    if (field <= 6 && kStrings[field] != nullptr) meta[kStrings[field]] = std::string(value);
    if (field == 11) ES_RETURN_IF_ERROR(ReadMapEntry(value, false, meta["labels"]));
    if (field == 12) ES_RETURN_IF_ERROR(ReadMapEntry(value, false, meta["annotations"]));
    if (field == 14) meta["finalizers"].push_back(std::string(value));
  }
  return meta;
}

// core/v1 Secret: metadata 1, data 2, type 3, stringData 4, immutable 5.
StatusOr<json> ReadSecret(std::string_view bytes) {
  json secret = {{"apiVersion", "v1"}, {"kind", "Secret"}};
  WireReader r(bytes);
  while (!r.done()) {
    uint32_t field = 0, type = 0;
    ES_RETURN_IF_ERROR(r.Next(&field, &type));
    if (field == 5) {
      uint64_t immutable = 0;
      ES_RETURN_IF_ERROR(r.Varint(&immutable));
      secret["immutable"] = immutable != 0;
      continue;
    }
    if (field < 1 || field > 4) return UnknownField("Secret", field);
    std::string_view value;
    ES_RETURN_IF_ERROR(r.LengthDelimited(type, &value));
    if (field == 1) {
      ES_ASSIGN_OR_RETURN(secret["metadata"], ReadObjectMeta(value));
    }
    if (field == 2) ES_RETURN_IF_ERROR(ReadMapEntry(value, true, secret["data"]));
    if (field == 3) secret["type"] = std::string(value);
    if (field == 4) ES_RETURN_IF_ERROR(ReadMapEntry(value, false, secret["stringData"]));
  }
  return secret;
}

}  // namespace

StatusOr<json> ReadProtobufBody(std::string_view body) {
  constexpr std::string_view kMagic("k8s\0", 4);
  if (body.substr(0, 4) != kMagic) {
    return absl::FailedPreconditionError("protobuf body: no k8s\\0 prefix");
  }
  // runtime.Unknown: typeMeta 1 (apiVersion 1, kind 2), raw 2, contentEncoding 3, contentType 4.
  WireReader unknown(body.substr(4));
  std::string apiVersion, kind;
  std::string_view raw;
  while (!unknown.done()) {
    uint32_t field = 0, type = 0;
    ES_RETURN_IF_ERROR(unknown.Next(&field, &type));
    std::string_view value;
    ES_RETURN_IF_ERROR(unknown.LengthDelimited(type, &value));
    if (field == 1) {
      WireReader typeMeta(value);
      while (!typeMeta.done()) {
        uint32_t f = 0, t = 0;
        std::string_view v;
        ES_RETURN_IF_ERROR(typeMeta.Next(&f, &t));
        ES_RETURN_IF_ERROR(typeMeta.LengthDelimited(t, &v));
        if (f == 1) apiVersion = std::string(v);
        if (f == 2) kind = std::string(v);
      }
    } else if (field == 2) {
      raw = value;
    } else if (!value.empty()) {
      return absl::FailedPreconditionError("protobuf body: encoded content is not read");
    }
  }
  if (apiVersion != "v1" || kind != "Secret") {
    return absl::FailedPreconditionError(absl::StrCat("protobuf body: ", apiVersion, " ", kind,
                                                      " is not read (only v1 Secret); send JSON"));
  }
  return ReadSecret(raw);
}

}  // namespace easyscale::op::testing
