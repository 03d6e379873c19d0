// File: operator/src/testing/served_crd.h
//
// The EasyScaleJob CustomResourceDefinition (crds/), as JSON compiled into
// the test API server at build time (embed_crd.py), so that it serves the
// schema the project ships.
#pragma once

#include <string_view>

namespace easyscale::op::testing {

std::string_view ServedCrdJson();

}  // namespace easyscale::op::testing
