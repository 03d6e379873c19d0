#include "easyscale/common/sha256.h"

#include <gtest/gtest.h>

namespace easyscale {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(Sha256Hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc", 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  Sha256 h;
  h.Update("a", 1);
  h.Update("bc");
  EXPECT_EQ(h.HexDigest(), Sha256Hex("abc", 3));
}

}  // namespace
}  // namespace easyscale
