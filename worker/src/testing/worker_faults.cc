#include "testing/worker_faults.h"

#include <stdexcept>

#ifdef EASYSCALE_WITH_CUDA
#include "testing/illegal_address.h"
#endif

namespace easyscale {

void ForgetEstField(const std::string& field, EstContext& restored, const EstContext& fresh) {
  if (field == "rng") {
    restored.aug_counter = fresh.aug_counter;
    restored.dropout_counter = fresh.dropout_counter;
  } else if (field == "cursor") {
    restored.epoch = fresh.epoch;
    restored.position = fresh.position;
  } else if (field == "bn") {
    restored.buffers = fresh.buffers;
  }
}

void InjectBackendFault(KernelBackend& backend) {
  if (!backend.OnDevice()) throw std::runtime_error("injected fault (test-only)");
#ifdef EASYSCALE_WITH_CUDA  // (only a CUDA build has a device backend)
  const cudaError_t e = InjectIllegalAddress(static_cast<cudaStream_t>(backend.Stream()));
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string("fault injection: ") + cudaGetErrorName(e));
  }
#endif
}

}  // namespace easyscale
