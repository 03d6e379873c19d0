// Parses and evaluates label and field selectors.
#include "selectors.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace easyscale::op::testing {
namespace {

using nlohmann::json;

// Splits on commas that are not inside parentheses.
std::vector<std::string> SplitTopLevel(const std::string& text) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

std::string Trim(absl::string_view s) { return std::string(absl::StripAsciiWhitespace(s)); }

// Looks a dotted path up in an object; labels are one level under metadata.labels.
bool Lookup(const json& obj, const std::string& path, std::string* out) {
  const json* cur = &obj;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (!cur->is_object()) return false;
    auto it = cur->find(std::string(part));
    if (it == cur->end()) return false;
    cur = &*it;
  }
  if (cur->is_string()) {
    *out = cur->get<std::string>();
    return true;
  }
  if (cur->is_null()) return false;
  *out = cur->dump();
  return true;
}

}  // namespace

std::vector<std::string> SupportedFields(const std::string& plural) {
  std::vector<std::string> f = {"metadata.name", "metadata.namespace"};
  if (plural == "pods") {
    f.insert(f.end(), {"spec.nodeName", "status.phase"});
  } else if (plural == "events") {
    f.insert(f.end(), {"involvedObject.kind", "involvedObject.name", "involvedObject.namespace",
                       "involvedObject.uid", "reason", "type"});
  }
  return f;
}

StatusOr<Selector> Selector::ParseLabels(const std::string& text) {
  Selector s;
  if (Trim(text).empty()) return s;
  for (const std::string& raw : SplitTopLevel(text)) {
    const std::string part = Trim(raw);
    Requirement r;
    size_t pos;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          absl::StrCat("unable to parse requirement \"", part, "\": ", why));
    };
    if (part.empty()) return bad("empty requirement");
    if ((pos = part.find(" notin ")) != std::string::npos ||
        (pos = part.find(" in ")) != std::string::npos) {
      const bool notin = part.compare(pos, 7, " notin ") == 0;
      r.key = Trim(part.substr(0, pos));
      std::string set = Trim(part.substr(pos + (notin ? 7 : 4)));
      if (set.size() < 2 || set.front() != '(' || set.back() != ')') {
        return bad("values must be in parentheses");
      }
      for (absl::string_view v : absl::StrSplit(set.substr(1, set.size() - 2), ',')) {
        r.values.push_back(Trim(v));
      }
      r.op = notin ? Requirement::Op::kNotIn : Requirement::Op::kIn;
    } else if ((pos = part.find("!=")) != std::string::npos) {
      r.key = Trim(part.substr(0, pos));
      r.values = {Trim(part.substr(pos + 2))};
      r.op = Requirement::Op::kNotEquals;
    } else if ((pos = part.find('=')) != std::string::npos) {
      const size_t len = part.compare(pos, 2, "==") == 0 ? 2 : 1;
      r.key = Trim(part.substr(0, pos));
      r.values = {Trim(part.substr(pos + len))};
      r.op = Requirement::Op::kEquals;
    } else if (part[0] == '!') {
      r.key = Trim(part.substr(1));
      r.op = Requirement::Op::kNotExists;
    } else {
      r.key = part;
      r.op = Requirement::Op::kExists;
    }
    if (r.key.empty() || r.key.find_first_of(" ()") != std::string::npos) {
      return bad("invalid key");
    }
    s.reqs_.push_back(std::move(r));
  }
  return s;
}

StatusOr<Selector> Selector::ParseFields(const std::string& text,
                                         const std::vector<std::string>& supported) {
  Selector s;
  s.fields_ = true;
  if (Trim(text).empty()) return s;
  for (absl::string_view raw : absl::StrSplit(text, ',')) {
    const std::string part = Trim(raw);
    Requirement r;
    size_t pos;
    if ((pos = part.find("!=")) != std::string::npos) {
      r.op = Requirement::Op::kNotEquals;
      r.key = Trim(part.substr(0, pos));
      r.values = {Trim(part.substr(pos + 2))};
    } else if ((pos = part.find('=')) != std::string::npos) {
      const size_t len = part.compare(pos, 2, "==") == 0 ? 2 : 1;
      r.key = Trim(part.substr(0, pos));
      r.values = {Trim(part.substr(pos + len))};
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid field selector \"", part, "\": needs = or !="));
    }
    if (std::find(supported.begin(), supported.end(), r.key) == supported.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("field label not supported: ", r.key,
                       " (supported: ", absl::StrJoin(supported, ", "), ")"));
    }
    s.reqs_.push_back(std::move(r));
  }
  return s;
}

bool Selector::Matches(const json& obj) const {
  for (const Requirement& r : reqs_) {
    std::string value;
    bool has;
    if (fields_) {
      has = Lookup(obj, r.key, &value);
      if (!has) value.clear(), has = true;  // absent fields compare as ""
    } else {
      const json labels = obj.contains("metadata") ? obj["metadata"].value("labels", json::object())
                                                   : json::object();
      has = labels.contains(r.key) && labels[r.key].is_string();
      if (has) value = labels[r.key].get<std::string>();
    }
    const bool inSet = has && std::find(r.values.begin(), r.values.end(), value) != r.values.end();
    switch (r.op) {
      case Requirement::Op::kEquals:
      case Requirement::Op::kIn:
        if (!inSet) return false;
        break;
      case Requirement::Op::kNotEquals:
      case Requirement::Op::kNotIn:
        if (inSet) return false;
        break;
      case Requirement::Op::kExists:
        if (!has) return false;
        break;
      case Requirement::Op::kNotExists:
        if (has) return false;
        break;
    }
  }
  return true;
}

}  // namespace easyscale::op::testing
