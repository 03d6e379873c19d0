// Scheduling decision time of the inter-job scheduler on a production-sized
// cluster: 1,000 jobs over 10,000 GPUs of 4 types (goal: under 50 ms).
//   scheduler_bench [--repeats N]
// "cold": no job holds anything yet; "steady": every job holds the previous
// decision and inference moves on 10% of the nodes, so some jobs are preempted
// and others grow, as in the operator's normal loop.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "easyscale/operator/scheduler.h"

namespace {

using easyscale::op::ClusterState;
using easyscale::op::InterJobScheduler;
using easyscale::op::JobDemand;
using easyscale::op::NodeGpus;
using easyscale::op::ScheduleResult;

ClusterState MakeCluster(std::mt19937& rng) {
  const std::vector<std::string> types = {"h100", "a100", "v100", "t4"};
  ClusterState c;
  for (int n = 0; n < 1250; ++n) {  // 1,250 nodes x 8 GPUs
    c.nodes.push_back(
        NodeGpus{"node-" + std::to_string(n), types[n % 4], 8, static_cast<int>(rng() % 5), 0});
  }
  const int sizes[] = {1, 2, 4, 8, 16, 32};
  for (int j = 0; j < 1000; ++j) {
    JobDemand d;
    d.key = "team/job-" + std::to_string(j);
    d.maxWorkers = sizes[rng() % 6];
    d.ests = d.maxWorkers * (1 + rng() % 2);
    d.minWorkers = 1 + rng() % std::max(1, d.maxWorkers / 2);
    d.priority = rng() % 10 == 0 ? 1 : 0;
    d.submitOrder = j;
    const double base = 50.0 + rng() % 200;
    d.speed = {{"h100", base * 3.0}, {"a100", base * 2.0}, {"v100", base}, {"t4", base * 0.4}};
    if (rng() % 5 == 0) d.gpuTypes = {"h100", "a100"};
    c.jobs.push_back(d);
  }
  return c;
}

double TimeMs(const InterJobScheduler& s, const ClusterState& c, ScheduleResult* out) {
  const auto t0 = std::chrono::steady_clock::now();
  *out = s.Schedule(c);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void Report(const char* name, std::vector<double> ms, const ScheduleResult& last) {
  std::sort(ms.begin(), ms.end());
  int workers = 0;
  for (const auto& a : last.allocations) {
    for (const auto& p : a.placements) workers += p.workers;
  }
  std::printf(
      "%-7s decisions=%zu median_ms=%.2f p95_ms=%.2f max_ms=%.2f workers=%d preempted=%zu\n", name,
      ms.size(), ms[ms.size() / 2], ms[ms.size() * 95 / 100], ms.back(), workers,
      last.preemptions.size());
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--repeats N]\n", argv[0]);
      return 2;
    }
  }
  std::mt19937 rng(42);
  ClusterState cluster = MakeCluster(rng);
  const InterJobScheduler scheduler(easyscale::op::SchedulerOptions{});
  std::printf("cluster: %zu jobs, %zu nodes, 10000 GPUs of 4 types\n", cluster.jobs.size(),
              cluster.nodes.size());

  std::vector<double> cold;
  ScheduleResult r;
  for (int i = 0; i < repeats; ++i) cold.push_back(TimeMs(scheduler, cluster, &r));
  Report("cold", cold, r);

  std::vector<double> steady;
  for (int i = 0; i < repeats; ++i) {
    for (size_t j = 0; j < cluster.jobs.size(); ++j)
      cluster.jobs[j].current = r.allocations[j].placements;
    for (NodeGpus& n : cluster.nodes) {
      if (rng() % 10 == 0) n.inferenceHeld = static_cast<int>(rng() % 7);
    }
    steady.push_back(TimeMs(scheduler, cluster, &r));
  }
  Report("steady", steady, r);
  return 0;
}
