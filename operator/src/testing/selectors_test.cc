#include "testing/selectors.h"

#include <gtest/gtest.h>

namespace easyscale::op::testing {
namespace {

using nlohmann::json;

json Pod(json labels, const std::string& node, const std::string& phase) {
  return {{"metadata", {{"name", "p"}, {"namespace", "ns"}, {"labels", labels}}},
          {"spec", {{"nodeName", node}}},
          {"status", {{"phase", phase}}}};
}

TEST(LabelSelector, EqualityNotEqualSetAndExistence) {
  const json pod = Pod({{"app", "web"}, {"tier", "gold"}}, "n1", "Running");
  auto yes = [&](const std::string& s) {
    StatusOr<Selector> sel = Selector::ParseLabels(s);
    EXPECT_TRUE(sel.ok()) << s << ": " << sel.status();
    return sel.ok() && sel->Matches(pod);
  };
  EXPECT_TRUE(yes(""));
  EXPECT_TRUE(yes("app=web"));
  EXPECT_TRUE(yes("app==web,tier=gold"));
  EXPECT_FALSE(yes("app=db"));
  EXPECT_TRUE(yes("app!=db"));
  EXPECT_TRUE(yes("missing!=x"));  // != matches when the label is absent
  EXPECT_TRUE(yes("tier in (silver, gold)"));
  EXPECT_FALSE(yes("tier notin (gold)"));
  EXPECT_TRUE(yes("app,!missing"));
  EXPECT_FALSE(yes("!app"));
}

TEST(LabelSelector, RejectsMalformed) {
  EXPECT_FALSE(Selector::ParseLabels("a in x").ok());
  EXPECT_FALSE(Selector::ParseLabels("a=b,,c").ok());
}

TEST(FieldSelector, SupportedFieldsOnly) {
  const json pod = Pod(json::object(), "n1", "Pending");
  StatusOr<Selector> s =
      Selector::ParseFields("spec.nodeName=n1,status.phase!=Running", SupportedFields("pods"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->Matches(pod));
  s = Selector::ParseFields("metadata.name=q", SupportedFields("pods"));
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->Matches(pod));
  StatusOr<Selector> bad = Selector::ParseFields("spec.nodeName=n1", SupportedFields("nodes"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("field label not supported: spec.nodeName"),
            std::string::npos);
}

}  // namespace
}  // namespace easyscale::op::testing
