#include "easyscale/common/est_assignment.h"

#include <gtest/gtest.h>

namespace easyscale {
namespace {

TEST(EstAssignment, ContiguousUneven) {
  auto a = AssignContiguous(8, 3);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->workers, (std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}, {6, 7}}));
  EXPECT_TRUE(ValidateAssignment(*a).ok());
  EXPECT_EQ(a->OwnerOf(6), 2);
  EXPECT_FALSE(AssignContiguous(2, 3).ok());
  EXPECT_FALSE(AssignContiguous(2, 0).ok());
}

TEST(EstAssignment, BySpeedBalancesStepTime) {
  // A worker three times faster gets three times the ESTs.
  auto a = AssignBySpeed(8, {3.0, 1.0});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->workers[0].size(), 6u);
  EXPECT_EQ(a->workers[1].size(), 2u);
  auto equal = AssignBySpeed(8, {1.0, 1.0, 1.0});
  EXPECT_EQ(equal->workers, AssignContiguous(8, 3)->workers);
  EXPECT_FALSE(AssignBySpeed(4, {1.0, 0.0}).ok());
}

TEST(EstAssignment, ValidationAndJson) {
  EstAssignment bad{4, {{0, 1}, {1, 2, 3}}};
  EXPECT_FALSE(ValidateAssignment(bad).ok());
  EstAssignment missing{4, {{0, 1}, {2}}};
  EXPECT_FALSE(ValidateAssignment(missing).ok());
  auto a = AssignContiguous(5, 2);
  auto parsed = ParseEstAssignment(ToJson(*a), "status.assignment");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, *a);
  auto broken = ParseEstAssignment({{"totalEsts", 2}, {"workers", {{0}, {0}}}}, "x");
  EXPECT_FALSE(broken.ok());
}

}  // namespace
}  // namespace easyscale
