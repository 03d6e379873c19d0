#include "testing/worker_faults.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace easyscale {
namespace {

EstContext Trained() {
  EstContext c = InitialEstContext(3, {Tensor({2})});
  c.aug_counter = 7;
  c.dropout_counter = 9;
  c.epoch = 2;
  c.position = 40;
  c.buffers[0].data = {1.5f, -2.0f};
  return c;
}

TEST(ForgetEstField, ResetsOnlyTheNamedField) {
  const EstContext fresh = InitialEstContext(3, {Tensor({2})});
  EstContext rng = Trained(), cursor = Trained(), bn = Trained(), none = Trained();
  ForgetEstField("rng", rng, fresh);
  ForgetEstField("cursor", cursor, fresh);
  ForgetEstField("bn", bn, fresh);
  ForgetEstField("none", none, fresh);
  EXPECT_EQ(rng.aug_counter, fresh.aug_counter);
  EXPECT_EQ(rng.dropout_counter, fresh.dropout_counter);
  EXPECT_EQ(rng.position, 40u);
  EXPECT_EQ(cursor.epoch, fresh.epoch);
  EXPECT_EQ(cursor.position, fresh.position);
  EXPECT_EQ(cursor.aug_counter, 7u);
  EXPECT_EQ(bn.buffers[0].data, fresh.buffers[0].data);
  EXPECT_EQ(bn.epoch, 2u);
  EXPECT_EQ(none.aug_counter, 7u);
  EXPECT_EQ(none.position, 40u);
  EXPECT_EQ(none.buffers[0].data, (std::vector<float>{1.5f, -2.0f}));
}

TEST(InjectBackendFault, TheCpuBackendThrowsAtOnce) {
  EXPECT_THROW(InjectBackendFault(CpuKernelBackend()), std::runtime_error);
}

}  // namespace
}  // namespace easyscale
