// File: worker/src/param_chunks.h
//
// Element-wise host work over every parameter (decoding the summed gradients,
// the optimizer's update) split over host threads: a large model's 100 M
// values take one core tens of milliseconds a step, while the GPU waits.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "easyscale/worker/backend.h"

namespace easyscale {

// Runs f(param, begin, end) over [begin, end) of each parameter's values,
// every value exactly once: the parameters' values taken as one range, cut
// into contiguous chunks, one thread each (up to kMaxThreads; a single call
// chain on the caller's thread for small models). Only for work whose result
// per value never depends on the others, so the split never changes a bit.
void ForEachParamChunk(const std::vector<Param*>& params,
                       const std::function<void(size_t param, size_t begin, size_t end)>& f);

// The same work queued on backend `k` as parts (part(param, begin, end) says
// what one holds): on a device every whole parameter's part in one call of
// run (the device launches once for many), on the CPU one call of run per
// ForEachParamChunk range.
void ForEachParamBatch(
    KernelBackend& k, const std::vector<Param*>& params,
    const std::function<formulas::ParamPart(size_t param, size_t begin, size_t end)>& part,
    const std::function<void(std::span<const formulas::ParamPart>)>& run);

}  // namespace easyscale
