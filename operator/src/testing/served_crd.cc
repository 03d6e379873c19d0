// The compiled-in CRD, parsed once.
#include "served_crd.h"

namespace easyscale::op::testing {

using nlohmann::json;

const json& ServedCrdVersion(const Resource& r) {
  static const json crd = json::parse(ServedCrdJson(), nullptr, false);
  static const json none;
  if (!crd.is_object() || crd["spec"].value("group", "") != r.group ||
      crd["spec"]["names"].value("plural", "") != r.plural) {
    return none;
  }
  for (const json& v : crd["spec"]["versions"]) {
    if (v.value("name", "") == r.version) return v;
  }
  return none;
}

}  // namespace easyscale::op::testing
