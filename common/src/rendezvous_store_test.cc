#include "easyscale/common/rendezvous_store.h"

#include <gtest/gtest.h>

namespace easyscale {
namespace {

TEST(RendezvousStore, HoldsOneGenerationAtATime) {
  RendezvousStore store;
  EXPECT_TRUE(absl::IsFailedPrecondition(store.Put("gen-1/0", "a")));  // no generation yet
  store.SetPrefix("gen-1");
  ASSERT_TRUE(store.Put("gen-1/0", "a").ok());
  EXPECT_EQ(*store.Get("gen-1/0"), "a");
  EXPECT_TRUE(absl::IsNotFound(store.Get("gen-1/1").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(store.Put("gen-10/0", "x")));  // not under "gen-1/"
  EXPECT_TRUE(absl::IsFailedPrecondition(store.Put("gen-1/", "x")));
  store.SetPrefix("gen-2");
  // A worker still in generation 1 learns at once that its keys will never come.
  EXPECT_TRUE(absl::IsFailedPrecondition(store.Get("gen-1/0").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(store.Put("gen-1/0", "late")));
  EXPECT_EQ(store.size(), 0u);
}

TEST(RendezvousStore, IsBounded) {
  RendezvousStore store({.maxKeys = 3, .maxValueBytes = 8});
  store.SetPrefix("g");
  EXPECT_TRUE(absl::IsResourceExhausted(store.Put("g/big", std::string(9, 'x'))));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store.Put("g/" + std::to_string(i), "v").ok());
  EXPECT_TRUE(absl::IsResourceExhausted(store.Put("g/3", "v")));
  EXPECT_TRUE(store.Put("g/2", "w").ok());  // replacing a key takes no room
  EXPECT_EQ(store.size(), 3u);
}

}  // namespace
}  // namespace easyscale
