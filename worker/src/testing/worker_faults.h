// File: worker/src/testing/worker_faults.h (test-only)
//
// What the test worker binary (test_worker_main.cc) does to a worker through
// its hooks (WorkerHooks, est_worker.h): forget one field of every restored
// EST context, to prove that a scale event must carry it, and fail the
// backend as a broken device would, to prove that a failed step loses nothing.
#pragma once

#include <string>
#include <vector>

#include "easyscale/worker/backend.h"
#include "easyscale/worker/est_context.h"

namespace easyscale {

// The fields a scale event carries: rng (the augmentation and dropout
// counters), cursor (epoch and position), bn (the EST's model buffers); none.
inline const std::vector<std::string> kEstContextFields = {"none", "rng", "cursor", "bn"};

// `restored` takes `fresh`'s value of `field` (one of kEstContextFields).
void ForgetEstField(const std::string& field, EstContext& restored, const EstContext& fresh);

// The backend fails: on a device its next kernel writes to an illegal address
// (sticky: the process's CUDA context is unusable after it, as after a real
// device fault, and the next wait reports it); the CPU throws at once.
void InjectBackendFault(KernelBackend& backend);

}  // namespace easyscale
