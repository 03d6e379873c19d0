// File: worker/src/worker_cli.h
//
// The commands of `easyscale-worker` (local, run, k8s, predict, prepare-data)
// with the points where another binary of the same commands adds flags: the
// test worker binary (testing/test_worker_main.cc) adds its lost workers,
// faults and forgotten context fields this way, so the shipped one has none.
//   int main(int argc, char** argv) { return easyscale::WorkerMain(argc, argv, {}); }
#pragma once

#include <functional>

#include "easyscale/common/control_protocol.h"
#include "easyscale/common/flags.h"
#include "easyscale/worker/local_job.h"
#include "easyscale/worker/worker_process.h"

namespace easyscale {

// An empty member adds nothing.
struct WorkerCliExtension {
  // `local`: more flags (FlagSet checks their values); once they are parsed,
  // the job's hooks from them.
  std::function<void(FlagSet&)> local_flags;
  std::function<void(LocalJobOptions&)> local_hooks;
  // `run`: more flags; once they and the assignment are read, the worker's hooks.
  std::function<void(FlagSet&)> run_flags;
  std::function<void(const WorkerAssignment&, WorkerProcessOptions&)> run_hooks;
};

// Runs the command argv[1] (`--help` lists them); returns the exit code.
int WorkerMain(int argc, char** argv, const WorkerCliExtension& extension);

}  // namespace easyscale
