// File: easyscale/worker/collective.h
//
// The collectives one physical worker needs from its peers, behind a narrow
// interface: an int64 sum (exact, so any algorithm gives the same result) and a
// barrier. GlooCollective runs over TCP between the workers' addresses (Gloo
// from Debian's libgloo-dev); workers meet through an HTTP key-value store
// (control_protocol.h: the operator's control endpoint, or `local`'s runner),
// threads of one process through an in-memory store (LocalRendezvous).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "easyscale/common/control_protocol.h"
#include "easyscale/common/status.h"

namespace easyscale {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place element-wise sum over all ranks.
  virtual Status AllreduceSum(std::span<int64_t> data) = 0;
  virtual Status Barrier() = 0;
};

struct CollectiveOptions {
  std::string bind_host = "127.0.0.1";  // this worker's address as peers reach it
  // Rendezvous and every collective call: a peer silent this long is gone.
  std::chrono::milliseconds timeout{60000};
  // The job (namespace/name) and its control token, for the rendezvous store.
  std::string job;
  std::string token;
};

// The collective of a job with one worker: sums are the identity.
std::unique_ptr<Collective> MakeSingleProcessCollective();

// Connects rank `rank` of `size` through the rendezvous store. Size 1 needs no
// peers. Unavailable when the peers do not all turn up within the timeout.
StatusOr<std::unique_ptr<Collective>> ConnectCollective(const Rendezvous& rendezvous, int rank,
                                                        int size, const CollectiveOptions& opts);

// Where threads of one process meet (tests): one per generation, shared.
class LocalRendezvous {
 public:
  LocalRendezvous();
  ~LocalRendezvous();
  StatusOr<std::unique_ptr<Collective>> Connect(int rank, int size, const CollectiveOptions& opts);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The collective for the step's sums, agreed by all ranks over `host`: NCCL
// (one rank per GPU) when every rank runs the cuda backend on a GPU no other
// rank uses and the build has NCCL; else `host` itself (a CPU worker in the
// job, or ranks sharing a GPU, stage through host memory). Sums are exact, so
// both give the same bits. `device` is this rank's GPU ordinal when on_gpu.
StatusOr<std::unique_ptr<Collective>> UseDeviceCollective(std::unique_ptr<Collective> host,
                                                          bool on_gpu, int device);

}  // namespace easyscale
