// File: operator/src/testing/table.h
//
// Table answers (meta.k8s.io Table), what `kubectl get` asks for first: for
// EasyScaleJobs, the Name column and the served CRD's additionalPrinterColumns
// evaluated on each object, as kube-apiserver does for custom resources. Other
// kinds are answered as plain JSON, which kubectl also accepts.
//   std::optional<TableFormat> t = TableFormatFor(r, req.get_header_value("Accept"),
//   includeObject); if (t) body = t->Convert(list["items"], list["metadata"]);
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "easyscale/common/status.h"
#include "object_store.h"

namespace easyscale::op::testing {

class TableFormat {
 public:
  // A Table of `objects` (an array); `listMeta` is the list's metadata.
  nlohmann::json Convert(const nlohmann::json& objects, const nlohmann::json& listMeta) const;

 private:
  friend StatusOr<std::optional<TableFormat>> TableFormatFor(const ResourceInfo& r,
                                                             const std::string& accept,
                                                             const std::string& includeObject);
  std::string apiVersion;  // meta.k8s.io/v1 or v1beta1, as asked for
  std::string includeObject;
  nlohmann::json columns;  // additionalPrinterColumns
};

// The Table format to answer in: nullopt when `accept` does not ask for a
// Table or `r` has no printer columns; an error (400) for an includeObject
// that is not None, Metadata or Object.
StatusOr<std::optional<TableFormat>> TableFormatFor(const ResourceInfo& r,
                                                    const std::string& accept,
                                                    const std::string& includeObject);

}  // namespace easyscale::op::testing
