// File: worker/src/param_chunks.h
//
// Element-wise host work over every parameter (decoding the summed gradients,
// the optimizer's update) split over host threads: a large model's 100 M
// values take one core tens of milliseconds a step, while the GPU waits.
#pragma once

#include <cstddef>
#include <functional>
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

// The same work queued on backend `k`: on a device one call per whole
// parameter (the device spreads each launch), on the CPU ForEachParamChunk.
void ForEachParamRange(KernelBackend& k, const std::vector<Param*>& params,
                       const std::function<void(size_t param, size_t begin, size_t end)>& f);

}  // namespace easyscale
