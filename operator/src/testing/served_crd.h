// File: operator/src/testing/served_crd.h
//
// The EasyScaleJob CustomResourceDefinition (crds/), as JSON compiled into
// the test API server at build time (embed_crd.py), so that it serves the
// schema and printer columns the project ships.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "easyscale/operator/kube_client.h"

namespace easyscale::op::testing {

// The CRD's text (written by embed_crd.py).
std::string_view ServedCrdJson();

// The CRD's spec.versions entry for `r` (its schema, printer columns); null
// when `r` is not the CRD's resource or version.
const nlohmann::json& ServedCrdVersion(const Resource& r);

}  // namespace easyscale::op::testing
