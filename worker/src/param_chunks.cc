#include "param_chunks.h"

#include <algorithm>
#include <thread>

namespace easyscale {
namespace {

constexpr int kMaxThreads = 8;
// Below this many values a thread costs more than it saves.
constexpr size_t kValuesPerThread = size_t{1} << 19;

// Runs f over the parameters' part of the flattened range [lo, hi).
void RunRange(const std::vector<Param*>& params, size_t lo, size_t hi,
              const std::function<void(size_t, size_t, size_t)>& f) {
  size_t start = 0;  // the flattened index of parameter i's first value
  for (size_t i = 0; i < params.size() && start < hi; ++i) {
    const size_t size = params[i]->value.size(), end = start + size;
    if (size > 0 && end > lo) f(i, std::max(lo, start) - start, std::min(hi, end) - start);
    start = end;
  }
}

}  // namespace

void ForEachParamChunk(const std::vector<Param*>& params,
                       const std::function<void(size_t, size_t, size_t)>& f) {
  size_t total = 0;
  for (const Param* p : params) total += p->value.size();
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads =
      std::clamp<size_t>(total / kValuesPerThread, 1, std::min<size_t>(kMaxThreads, cores));
  if (threads == 1) return RunRange(params, 0, total, f);
  const size_t chunk = (total + threads - 1) / threads;
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) {
    helpers.emplace_back(RunRange, std::cref(params), std::min(total, t * chunk),
                         std::min(total, (t + 1) * chunk), std::cref(f));
  }
  RunRange(params, 0, chunk, f);
  for (std::thread& h : helpers) h.join();
}

void ForEachParamBatch(KernelBackend& k, const std::vector<Param*>& params,
                       const std::function<formulas::ParamPart(size_t, size_t, size_t)>& part,
                       const std::function<void(std::span<const formulas::ParamPart>)>& run) {
  if (!k.OnDevice()) {
    return ForEachParamChunk(params, [&](size_t i, size_t begin, size_t end) {
      const formulas::ParamPart one = part(i, begin, end);
      run({&one, 1});
    });
  }
  std::vector<formulas::ParamPart> parts;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i]->value.size() > 0) parts.push_back(part(i, 0, params[i]->value.size()));
  }
  run(parts);
}

}  // namespace easyscale
