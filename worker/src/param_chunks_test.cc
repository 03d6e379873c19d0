#include "param_chunks.h"

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace easyscale {
namespace {

// Parameters of these sizes, values 0.
std::vector<std::unique_ptr<Param>> MakeParams(const std::vector<int>& sizes) {
  std::vector<std::unique_ptr<Param>> params;
  for (int n : sizes) {
    auto p = std::make_unique<Param>();
    p->value = Tensor({n});
    params.push_back(std::move(p));
  }
  return params;
}

std::vector<Param*> Pointers(const std::vector<std::unique_ptr<Param>>& owned) {
  std::vector<Param*> out;
  for (const auto& p : owned) out.push_back(p.get());
  return out;
}

TEST(ForEachParamChunk, VisitsEveryValueOnceAcrossChunksThatSplitParameters) {
  // 3.3 M values: several threads, chunk edges inside parameters, an empty one.
  const auto owned = MakeParams({1, 1'500'000, 0, 7, 1'800'000, 3});
  const std::vector<Param*> params = Pointers(owned);
  std::mutex mu;
  std::vector<std::pair<size_t, size_t>> calls;
  ForEachParamChunk(params, [&](size_t i, size_t begin, size_t end) {
    for (size_t j = begin; j < end; ++j) params[i]->value.ptr()[j] += 1.0f;
    std::lock_guard<std::mutex> lock(mu);
    calls.emplace_back(i, end - begin);
  });
  for (size_t i = 0; i < params.size(); ++i) {
    for (size_t j = 0; j < params[i]->value.size(); ++j) {
      ASSERT_EQ(params[i]->value.ptr()[j], 1.0f) << "parameter " << i << " value " << j;
    }
  }
  if (std::thread::hardware_concurrency() > 1) {
    EXPECT_GT(calls.size(), params.size() - 1);  // some parameter was split between threads
  }
}

TEST(ForEachParamChunk, SmallModelsRunOnTheCallersThreadOneCallPerParameter) {
  const auto owned = MakeParams({10, 20, 30});
  const std::vector<Param*> params = Pointers(owned);
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<size_t> seen;
  ForEachParamChunk(params, [&](size_t i, size_t begin, size_t end) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0u);
    EXPECT_EQ(end, params[i]->value.size());
    seen.push_back(i);
  });
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2}));
}

TEST(ForEachParamBatch, OnTheCpuEachChunkIsOnePartOfItsParameter) {
  const auto owned = MakeParams({1, 1'500'000, 0, 7, 1'800'000, 3});
  const std::vector<Param*> params = Pointers(owned);
  std::mutex mu;
  size_t values = 0;
  ForEachParamBatch(
      CpuKernelBackend(), params,
      [&](size_t i, size_t begin, size_t end) {
        return formulas::ParamPart{.n = end - begin, .value = params[i]->value.ptr() + begin};
      },
      [&](std::span<const formulas::ParamPart> parts) {
        ASSERT_EQ(parts.size(), 1u);
        for (size_t j = 0; j < parts[0].n; ++j) parts[0].value[j] += 1.0f;
        std::lock_guard<std::mutex> lock(mu);
        values += parts[0].n;
      });
  EXPECT_EQ(values, 3'300'011u);
  for (size_t i = 0; i < params.size(); ++i) {
    for (size_t j = 0; j < params[i]->value.size(); ++j) {
      ASSERT_EQ(params[i]->value.ptr()[j], 1.0f) << "parameter " << i << " value " << j;
    }
  }
}

}  // namespace
}  // namespace easyscale
