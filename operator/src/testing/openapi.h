// File: operator/src/testing/openapi.h
//
// OpenAPI v3 as kube-apiserver serves it (/openapi/v3 and one document per
// group version), which kubectl reads for `kubectl explain` and to learn that
// the server validates fields itself (the fieldValidation parameter of PATCH),
// so that `kubectl apply` needs no `--validate=false`. EasyScaleJobs get the
// schema of the served CRD with its descriptions; the built-in kinds a
// schema-less object (the test API server checks only the fields it reads).
#pragma once

#include <httplib.h>

namespace easyscale::op::testing {

void InstallOpenApi(httplib::Server& svr);

}  // namespace easyscale::op::testing
