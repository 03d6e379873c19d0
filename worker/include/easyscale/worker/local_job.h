// File: easyscale/worker/local_job.h
//
// `easyscale-worker local`: runs a whole elastic job on this machine. For each
// segment of the schedule it starts P worker processes (`easyscale-worker run`),
// which meet over loopback through Gloo, train to the segment's end and hand
// their ESTs over through a checkpoint; the next segment's processes restore
// them. A worker that dies (e.g. SIGKILL) makes the segment restart from the
// last checkpoint. With certificate_every K it prints, after every K-th step,
// `certificate step=N digest=<64 hex>` (control_protocol.h Certificate), once
// per step even when a restart trains it again. The last line printed is
// `digest: <64 hex>`. The workers
// die with the runner, and the checkpoint folder belongs to one run at a time
// (<dir>/LOCK): a second run on it fails at once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "easyscale/common/control_protocol.h"
#include "easyscale/common/job_spec.h"
#include "easyscale/common/status.h"

namespace easyscale {

struct ScheduleEntry {
  int64_t step = 0;
  int workers = 1;
  bool operator==(const ScheduleEntry&) const = default;
};

// "STEP:P[,STEP:P...]": steps strictly increasing from 0, each below `steps`,
// 1 <= P <= ests. Errors quote the offending entry.
StatusOr<std::vector<ScheduleEntry>> ParseSchedule(const std::string& text, int ests,
                                                   int64_t steps);

// Points where a caller steps into the job (e.g. the test worker binary's
// lost workers and faults); an empty one does nothing.
struct LocalJobHooks {
  // Flags added to the `run` command of worker `w` of the segment that starts
  // at `from_step` (worker_binary must take them); called for every start.
  std::function<std::vector<std::string>(const WorkerAssignment& w, int64_t from_step)> run_flags;
  // On each step rank 0 reports (`step` steps done) with the segment's worker
  // count: the rank it names is SIGKILLed.
  std::function<std::optional<int>(int64_t step, int workers)> kill_after_step;
};

struct LocalJobOptions {
  TrainingArgs args;
  int ests = 8;
  std::vector<ScheduleEntry> schedule;
  std::string backend = "cpu";  // cpu | cuda | mixed
  std::string digits_file;      // the embedded digits (--dataset mnist without --data)
  std::string checkpoint_dir;   // empty: a temporary folder, removed at the end
  OutputSpec output;            // where rank 0 writes the trained model
  std::string worker_binary;    // this program
  int max_restarts = 3;
  int64_t certificate_every = 0;  // certify every this many steps; 0 = never
  // Polled while workers run; true stops them (SIGTERM, then SIGKILL after a
  // grace) and ends the run with Cancelled.
  std::function<bool()> stop_requested;
  LocalJobHooks hooks;
};

struct LocalJobResult {
  std::string digest;
  double test_accuracy = 0.0;
  int restarts = 0;
  OutputDigests output;  // the model files written at the end (options.output.path)
  std::vector<Certificate> certificates;    // in step order
  std::vector<double> scale_event_seconds;  // from "stopping" to the first resumed step
  std::vector<double> step_seconds;         // rank 0's wall time between steps
};

StatusOr<LocalJobResult> RunLocalJob(const LocalJobOptions& options);

}  // namespace easyscale
