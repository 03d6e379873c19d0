// easyscale-test-worker (test-only): the commands of easyscale-worker plus the
// flags tests use to break a job on purpose, through the worker's hooks; the
// shipped easyscale-worker has none of them.
//   local --kill-worker-at S    SIGKILL the last worker when step S is reported, once
//   local --fault-worker-at S   the last worker's backend fails in step S, once
//   run --test-fault-at S       this worker's backend fails in step S
//   local|run --test-drop-context-field F   every restored EST context forgets F
#include <optional>
#include <string>
#include <vector>

#include "testing/worker_faults.h"
#include "worker_cli.h"

namespace easyscale {
namespace {

struct TestFlags {
  int64_t kill_worker_at = 0;
  int64_t fault_worker_at = 0;
  int64_t fault_at = -1;
  std::string drop_field = "none";
};

void AddDropFlag(FlagSet& f, TestFlags& t) {
  f.Choice("test-drop-context-field", &t.drop_field,
           "testing: every restored EST context forgets this field", kEstContextFields);
}

// `local`: the runner kills a worker itself and hands the faults to the
// workers it starts (this binary: `worker_binary` is the running program).
void SetLocalHooks(TestFlags& t, LocalJobOptions& o) {
  o.hooks.run_flags = [&t, faulted = false](const WorkerAssignment& w, int64_t from_step) mutable {
    std::vector<std::string> flags = {"--test-drop-context-field", t.drop_field};
    // Only the first attempt at the segment that holds the step gets the fault.
    const bool holds = t.fault_worker_at > 0 && t.fault_worker_at >= from_step &&
                       (w.stopAtStep == 0 || t.fault_worker_at < w.stopAtStep);
    if (holds && !faulted && w.rank == w.worldSize - 1) {
      faulted = true;
      flags.insert(flags.end(), {"--test-fault-at", std::to_string(t.fault_worker_at)});
    }
    return flags;
  };
  o.hooks.kill_after_step = [&t, killed = false](int64_t step,
                                                 int workers) mutable -> std::optional<int> {
    if (t.kill_worker_at <= 0 || killed || step != t.kill_worker_at) return std::nullopt;
    killed = true;
    return workers - 1;
  };
}

void SetRunHooks(const TestFlags& t, const WorkerAssignment& a, WorkerProcessOptions& o) {
  if (t.drop_field != "none") {
    o.hooks.after_restore = [field = t.drop_field](EstContext& restored, const EstContext& fresh) {
      ForgetEstField(field, restored, fresh);
    };
  }
  if (t.fault_at >= 0 && !a.ests.empty()) {
    // In the pass of the worker's first EST.
    o.hooks.before_pass = [step = t.fault_at, est = a.ests.front()](int64_t s, int e,
                                                                    KernelBackend& k) {
      if (s == step && e == est) InjectBackendFault(k);
    };
  }
}

}  // namespace
}  // namespace easyscale

int main(int argc, char** argv) {
  using namespace easyscale;
  TestFlags t;
  WorkerCliExtension extension;
  extension.local_flags = [&t](FlagSet& f) {
    f.Int("kill-worker-at", &t.kill_worker_at,
          "testing: SIGKILL the last worker when this step is reported, once");
    f.Int("fault-worker-at", &t.fault_worker_at,
          "testing: the last worker's backend fails in this step, once (on a GPU, an illegal "
          "address)");
    AddDropFlag(f, t);
  };
  extension.local_hooks = [&t](LocalJobOptions& o) { SetLocalHooks(t, o); };
  extension.run_flags = [&t](FlagSet& f) {
    AddDropFlag(f, t);
    f.Int("test-fault-at", &t.fault_at, "testing: this worker's backend fails in this step");
  };
  extension.run_hooks = [&t](const WorkerAssignment& a, WorkerProcessOptions& o) {
    SetRunHooks(t, a, o);
  };
  return WorkerMain(argc, argv, extension);
}
