// File: tests/deploy/shapes_fixture.h
//
// A gtest fixture holding the object shapes with the EasyScaleJob CRD added.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "test_support.h"

namespace easyscale::deploytest {

class ShapesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto shapes = LoadShapesWithCrd();
    ASSERT_TRUE(shapes.ok()) << shapes.status();
    shapes_ = std::make_unique<ObjectShapes>(std::move(*shapes));
  }

  std::unique_ptr<ObjectShapes> shapes_;
};

}  // namespace easyscale::deploytest
