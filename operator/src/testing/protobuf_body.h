// File: operator/src/testing/protobuf_body.h
//
// Request bodies that Go clients send as protobuf
// (application/vnd.kubernetes.protobuf: "k8s\0", then a runtime.Unknown
// wrapping the object), read into JSON. Only the kind that the tools we test
// with send this way: Helm stores its releases in Secrets. Any other kind, or
// a field the reader does not know, is an error the server answers 415.
//   StatusOr<nlohmann::json> secret = ReadProtobufBody(req.body);
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "easyscale/common/status.h"

namespace easyscale::op::testing {

StatusOr<nlohmann::json> ReadProtobufBody(std::string_view body);

}  // namespace easyscale::op::testing
