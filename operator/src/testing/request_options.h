// File: operator/src/testing/request_options.h
//
// What a request asks for besides its target, read from the query (and a
// DELETE's body) as kube-apiserver reads it; a value it would refuse is an
// error (FailedPrecondition: 400) that names the parameter.
//   StatusOr<std::optional<bool>> watch = BoolParam(req, "watch");   // watch=True works
#pragma once

#include <httplib.h>

#include <optional>
#include <string>

#include "easyscale/common/status.h"
#include "object_store.h"

namespace easyscale::op::testing {

// A boolean parameter as Go's strconv.ParseBool reads it (1 t T TRUE true
// True, 0 f F FALSE false False); nullopt when absent.
StatusOr<std::optional<bool>> BoolParam(const httplib::Request& req, const std::string& name);

// dryRun (only "All" exists) and fieldValidation (Ignore, Warn, Strict;
// absent: the store's default).
StatusOr<WriteOptions> WriteOptionsOf(const httplib::Request& req);

// metav1.DeleteOptions from the body and the query (the query wins):
// gracePeriodSeconds, propagationPolicy (or the legacy orphanDependents); a
// dryRun in the body sets `w`'s.
StatusOr<DeleteOptions> DeleteOptionsOf(const httplib::Request& req, WriteOptions* w);
// The same from a DeleteOptions object (an Eviction's deleteOptions) and the query.
StatusOr<DeleteOptions> DeleteOptionsIn(const nlohmann::json& body, const httplib::Request& req,
                                        WriteOptions* w);

}  // namespace easyscale::op::testing
