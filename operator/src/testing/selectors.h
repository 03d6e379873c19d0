// File: operator/src/testing/selectors.h
//
// Label and field selectors as kube-apiserver parses them:
//   labels: "a=b,c!=d,e in (x,y),f notin (z),g,!h"   (== is the same as =)
//   fields: "metadata.name=x,spec.nodeName!=n"        (only supported fields)
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale::op::testing {

struct Requirement {
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kNotExists };
  std::string key;
  Op op = Op::kEquals;
  std::vector<std::string> values;
};

class Selector {
 public:
  static StatusOr<Selector> ParseLabels(const std::string& text);
  // `supported` lists the field paths this resource can be selected by.
  static StatusOr<Selector> ParseFields(const std::string& text,
                                        const std::vector<std::string>& supported);
  bool Matches(const nlohmann::json& obj) const;
  bool empty() const { return reqs_.empty(); }

 private:
  bool fields_ = false;
  std::vector<Requirement> reqs_;
};

// Field paths kube-apiserver supports for a resource (plural).
std::vector<std::string> SupportedFields(const std::string& plural);

}  // namespace easyscale::op::testing
