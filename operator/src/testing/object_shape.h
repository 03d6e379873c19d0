// File: operator/src/testing/object_shape.h
//
// The JSON types of the fields the test API server itself reads (metadata,
// a pod's containers and node, a Secret's data, ...). kube-apiserver decodes
// a body into typed structs and answers 400 when a field has the wrong JSON
// type; checking the same fields before storing keeps every later read of a
// stored object from meeting a type it does not expect.
//   Status s = CheckObjectShape(kPods, body);  // FailedPrecondition (400) names the field
#pragma once

#include <nlohmann/json.hpp>

#include "easyscale/common/status.h"
#include "easyscale/operator/kube_client.h"

namespace easyscale::op::testing {

Status CheckObjectShape(const Resource& r, const nlohmann::json& obj);

}  // namespace easyscale::op::testing
