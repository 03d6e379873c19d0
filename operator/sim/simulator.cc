#include "simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "baselines.h"
#include "easyscale/operator/scheduler.h"

namespace easyscale::sim {

const char* PolicyName(Policy p) {
  switch (p) {
    case Policy::kEasyScale:
      return "easyscale";
    case Policy::kHomogeneous:
      return "homogeneous";
    case Policy::kStatic:
      return "static";
    case Policy::kPaper:
      return "paper";
    case Policy::kPaperHomogeneous:
      return "paper-homogeneous";
    case Policy::kYarnCs:
      return "yarn-cs";
  }
  return "?";
}

StatusOr<Policy> ParsePolicy(const std::string& name) {
  for (Policy p : {Policy::kEasyScale, Policy::kHomogeneous, Policy::kStatic, Policy::kPaper,
                   Policy::kPaperHomogeneous, Policy::kYarnCs}) {
    if (name == PolicyName(p)) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown policy '", name,
                   "' (known: easyscale, homogeneous, static, paper, paper-homogeneous, yarn-cs)"));
}

Summary Summarise(std::vector<double> v) {
  Summary s;
  s.count = static_cast<int>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0.0;
  for (double x : v) sum += x;
  s.mean = sum / v.size();
  // Nearest-rank percentiles.
  auto rank = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * v.size())) - 1)];
  };
  s.p50 = rank(0.5);
  s.p95 = rank(0.95);
  return s;
}

void GpuTime::Add(const GpuTime& o) {
  allocated += o.allocated;
  useful += o.useful;
  idleInStep += o.idleInStep;
  paused += o.paused;
}

namespace {

// The scheduler's view of a trace job that holds nothing yet.
op::JobDemand Demand(const TraceJob& t) {
  op::JobDemand d;
  d.key = t.name;
  d.ests = t.ests;
  d.minWorkers = t.minWorkers;
  d.maxWorkers = t.maxWorkers;
  d.priority = t.priority;
  d.gpuTypes = t.gpuTypes;
  d.speed = t.speed;
  return d;
}

}  // namespace

double AloneSeconds(const Trace& trace, const TraceJob& job, const SimOptions& options) {
  const op::JobDemand d = Demand(job);
  const op::SchedulerOptions o;
  std::map<std::string, int> gpus;
  for (const TraceNode& n : trace.nodes) gpus[n.gpuType] += n.gpus;
  double best = 0.0;
  for (const auto& [type, n] : gpus) {
    if (!job.preferredGpu.empty() && type != job.preferredGpu) continue;
    if (!job.gpuTypes.empty() &&
        std::find(job.gpuTypes.begin(), job.gpuTypes.end(), type) == job.gpuTypes.end()) {
      continue;
    }
    best = std::max(best, op::PredictThroughput(d, {{"", type, std::min(n, job.maxWorkers)}}, o));
  }
  return best > 0.0 ? options.rescalePause + job.workSamples / best
                    : std::numeric_limits<double>::infinity();
}

namespace {

struct NodeState {
  int total = 0;
  int demand = 0;   // inference wants
  int granted = 0;  // inference holds
  int training = 0;
};

struct JobState {
  double remaining = 0.0;
  double tp = 0.0;
  std::vector<op::Placement> placements;
  std::vector<op::GpuTypeUse> use;  // of the placements, per type
  int reconfigurations = 0;
  std::map<std::string, GpuTime> gpuTime;
  double start = -1.0, finish = -1.0, resumeAt = 0.0;
};

class Replay {
 public:
  Replay(const Trace& t, Policy p, const SimOptions& o) : trace_(t), policy_(p), opt_(o) {
    sched_.homogeneous = p == Policy::kHomogeneous || p == Policy::kStatic;
    sched_.preemptForInference = p == Policy::kEasyScale || p == Policy::kHomogeneous;
    sched_.reclaimForPriority = sched_.preemptForInference;
    for (size_t i = 0; i < t.nodes.size(); ++i) {
      nodeIndex_[t.nodes[i].name] = static_cast<int>(i);
      nodes_.push_back(NodeState{t.nodes[i].gpus, 0, 0, 0});
    }
    jobs_.resize(t.jobs.size());
    for (size_t i = 0; i < t.jobs.size(); ++i) jobs_[i].remaining = t.jobs[i].workSamples;
    result_.policy = p;
    result_.horizon = t.horizon;
    result_.totalGpus = t.TotalGpus();
    result_.jobsSubmitted = static_cast<int>(t.jobs.size());
    bucket_ = t.horizon / std::max(1, o.seriesPoints);
    result_.utilisationSeries.assign(std::max(1, o.seriesPoints), 0.0);
    result_.inferenceSeries = result_.utilisationSeries;
  }

  PolicyResult Run() {
    while (now_ < trace_.horizon) {
      const double next = std::max(now_, NextEventTime());
      Advance(next);
      if (now_ >= trace_.horizon) break;
      ApplyEvents();
      if (urgent_ || (dirty_ && now_ >= lastDecision_ + opt_.tick - 1e-9)) Decide();
    }
    return Finish();
  }

 private:
  double NextEventTime() const {
    double next = trace_.horizon;
    if (nextInference_ < trace_.inference.size()) {
      next = std::min(next, trace_.inference[nextInference_].time);
    }
    if (nextArrival_ < trace_.jobs.size()) next = std::min(next, trace_.jobs[nextArrival_].submit);
    for (int j : active_) {
      const JobState& s = jobs_[j];
      if (s.tp > 0.0) next = std::min(next, std::max(now_, s.resumeAt) + s.remaining / s.tp);
    }
    if (dirty_) next = std::min(next, std::max(now_, lastDecision_ + opt_.tick));
    return next;
  }

  // Integrates the metrics and the jobs' progress over [now_, to).
  void Advance(double to) {
    const double dt = to - now_;
    if (dt > 0.0) {
      long demand = 0, granted = 0, training = 0;
      for (const NodeState& n : nodes_) {
        demand += n.demand;
        granted += n.granted;
        training += n.training;
      }
      busyIntegral_ += (granted + training) * dt;
      trainingIntegral_ += training * dt;
      inferenceIntegral_ += granted * dt;
      demandIntegral_ += demand * dt;
      result_.inferenceWaitGpuSeconds += (demand - granted) * dt;
      AddToSeries(now_, to, static_cast<double>(granted + training), &result_.utilisationSeries);
      AddToSeries(now_, to, static_cast<double>(granted), &result_.inferenceSeries);
      for (int j : active_) {
        JobState& s = jobs_[j];
        const double running = std::clamp(to - std::max(now_, s.resumeAt), 0.0, dt);
        for (const op::GpuTypeUse& u : s.use) {
          GpuTime& g = s.gpuTime[u.gpuType];
          g.allocated += u.workers * dt;
          g.paused += u.workers * (dt - running);
          g.useful += u.workers * u.usefulFraction * running;
          g.idleInStep += u.workers * (1.0 - u.usefulFraction) * running;
        }
        if (s.tp <= 0.0 || running <= 0.0) continue;
        const double done = std::min(s.remaining, s.tp * running);
        s.remaining -= done;
        result_.trainedSamples += done;
      }
    }
    now_ = to;
  }

  void AddToSeries(double from, double to, double busy, std::vector<double>* out) {
    std::vector<double>& series = *out;
    for (double t = from; t < to;) {
      const size_t b = std::min(series.size() - 1, static_cast<size_t>(t / bucket_));
      const double end = std::min(to, (b + 1) * bucket_);
      series[b] += busy * (std::max(end, t) - t);
      if (end <= t) break;
      t = end;
    }
  }

  void ApplyEvents() {
    for (;
         nextInference_ < trace_.inference.size() && trace_.inference[nextInference_].time <= now_;
         ++nextInference_) {
      const InferenceLevel& l = trace_.inference[nextInference_];
      nodes_[nodeIndex_.at(l.node)].demand = l.gpus;
      dirty_ = true;
    }
    for (; nextArrival_ < trace_.jobs.size() && trace_.jobs[nextArrival_].submit <= now_;
         ++nextArrival_) {
      active_.push_back(static_cast<int>(nextArrival_));
      dirty_ = true;
    }
    for (size_t k = 0; k < active_.size();) {
      JobState& s = jobs_[active_[k]];
      if (s.tp > 0.0 && s.remaining <= 1e-9 * trace_.jobs[active_[k]].workSamples + 1e-6) {
        s.finish = now_;
        SetPlacements(&s, {});
        s.use.clear();
        active_.erase(active_.begin() + k);
        dirty_ = true;
      } else {
        ++k;
      }
    }
    GrantInference();
  }

  // Inference takes what training leaves; elastic policies preempt for the rest.
  void GrantInference() {
    for (NodeState& n : nodes_) {
      n.granted = std::min(n.demand, n.total - n.training);
      if (n.granted < n.demand && sched_.preemptForInference) urgent_ = true;
    }
  }

  void SetPlacements(JobState* s, std::vector<op::Placement> placements) {
    for (const op::Placement& p : s->placements)
      nodes_[nodeIndex_.at(p.node)].training -= p.workers;
    s->placements = std::move(placements);
    for (const op::Placement& p : s->placements)
      nodes_[nodeIndex_.at(p.node)].training += p.workers;
  }

  void Decide() {
    op::ClusterState c;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const NodeState& n = nodes_[i];
      c.nodes.push_back(op::NodeGpus{trace_.nodes[i].name, trace_.nodes[i].gpuType, n.total,
                                     n.granted, n.demand - n.granted});
    }
    const bool keepPreferred = policy_ != Policy::kEasyScale && policy_ != Policy::kPaper;
    for (int j : active_) {
      const TraceJob& t = trace_.jobs[j];
      op::JobDemand d = Demand(t);
      if (policy_ == Policy::kStatic) d.minWorkers = t.maxWorkers;
      if (keepPreferred && !t.preferredGpu.empty()) d.gpuTypes = {t.preferredGpu};
      d.current = jobs_[j].placements;
      d.submitOrder = j;
      c.jobs.push_back(std::move(d));
    }
    const auto t0 = std::chrono::steady_clock::now();
    op::ScheduleResult r;
    switch (policy_) {
      case Policy::kPaper:
      case Policy::kPaperHomogeneous:
        r = PaperPolicy(c, sched_);
        break;
      case Policy::kYarnCs:
        r = YarnCs(c, sched_);
        break;
      default:
        r = op::InterJobScheduler(sched_).Schedule(c);
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    decisionMs_.push_back(ms);
    result_.decisionMaxMs = std::max(result_.decisionMaxMs, ms);

    for (const op::Preemption& p : r.preemptions) {
      ++result_.preemptionEvents;
      result_.preemptedWorkers += p.workers;
      // Inference waits one mini-batch while the worker checkpoints.
      result_.inferenceWaitGpuSeconds += p.workers * opt_.preemptLatency;
    }
    for (size_t k = 0; k < active_.size(); ++k) {
      JobState& s = jobs_[active_[k]];
      const op::JobAllocation& a = r.allocations[k];
      if (a.placements == s.placements) continue;
      if (!s.placements.empty()) {
        ++result_.reconfigurations;
        ++s.reconfigurations;
      }
      SetPlacements(&s, a.placements);
      s.use = op::PredictGpuUse(c.jobs[k], a.placements, sched_);
      s.tp = a.throughput;
      if (!a.placements.empty()) {
        if (s.start < 0.0) s.start = now_;
        s.resumeAt = now_ + opt_.rescalePause;
      }
    }
    urgent_ = false;
    GrantInference();
    urgent_ = false;  // what is still missing waits for training (static) or has no GPU at all
    lastDecision_ = now_;
    dirty_ = false;
  }

  PolicyResult Finish() {
    const double capacity = static_cast<double>(result_.totalGpus) * trace_.horizon;
    result_.utilisation = busyIntegral_ / capacity;
    result_.trainingShare = trainingIntegral_ / capacity;
    result_.inferenceShare = inferenceIntegral_ / capacity;
    result_.inferenceWaitFraction =
        demandIntegral_ > 0.0 ? result_.inferenceWaitGpuSeconds / demandIntegral_ : 0.0;
    for (double& u : result_.utilisationSeries) u /= result_.totalGpus * bucket_;
    for (double& u : result_.inferenceSeries) u /= result_.totalGpus * bucket_;
    std::vector<double> completion, queueing;
    for (size_t j = 0; j < jobs_.size(); ++j) {
      const double submit = trace_.jobs[j].submit;
      if (jobs_[j].start >= 0.0) queueing.push_back(jobs_[j].start - submit);
      if (jobs_[j].finish >= 0.0) completion.push_back(jobs_[j].finish - submit);
    }
    result_.jobsStarted = static_cast<int>(queueing.size());
    result_.jobsCompleted = static_cast<int>(completion.size());
    result_.completionSeconds = Summarise(completion);
    result_.queueingSeconds = Summarise(queueing);
    result_.decisions = static_cast<int>(decisionMs_.size());
    result_.decisionMs = Summarise(decisionMs_);
    std::vector<double> slowdowns;
    for (size_t j = 0; j < jobs_.size(); ++j) {
      const JobState& s = jobs_[j];
      JobOutcome o;
      o.name = trace_.jobs[j].name;
      o.aloneJct = AloneSeconds(trace_, trace_.jobs[j], opt_);
      o.reconfigurations = s.reconfigurations;
      for (const auto& [type, g] : s.gpuTime) {
        o.gpuTime.Add(g);
        result_.gpuTimeByType[type].Add(g);
      }
      result_.gpuTime.Add(o.gpuTime);
      if (s.finish >= 0.0) {
        o.jct = s.finish - trace_.jobs[j].submit;
        o.slowdown = o.jct / o.aloneJct;
        slowdowns.push_back(o.slowdown);
        result_.makespan = std::max(result_.makespan, s.finish);
      }
      result_.jobs.push_back(std::move(o));
    }
    result_.slowdown = Summarise(slowdowns);
    if (result_.makespan > 0.0) {
      result_.usefulUtilisation = result_.gpuTime.useful / (result_.totalGpus * result_.makespan);
    }
    if (result_.gpuTime.allocated > 0.0) {
      result_.wasteFraction = result_.gpuTime.idleInStep / result_.gpuTime.allocated;
    }
    return result_;
  }

  const Trace& trace_;
  const Policy policy_;
  const SimOptions opt_;
  op::SchedulerOptions sched_;
  std::unordered_map<std::string, int> nodeIndex_;
  std::vector<NodeState> nodes_;
  std::vector<JobState> jobs_;
  std::vector<int> active_;  // arrived, unfinished, in arrival order
  size_t nextInference_ = 0, nextArrival_ = 0;
  double now_ = 0.0;
  double lastDecision_ = -std::numeric_limits<double>::infinity();
  bool dirty_ = true, urgent_ = false;
  double bucket_ = 1.0;
  double busyIntegral_ = 0.0, trainingIntegral_ = 0.0, inferenceIntegral_ = 0.0,
         demandIntegral_ = 0.0;
  std::vector<double> decisionMs_;
  PolicyResult result_;
};

}  // namespace

PolicyResult Simulate(const Trace& trace, Policy policy, const SimOptions& options) {
  return Replay(trace, policy, options).Run();
}

}  // namespace easyscale::sim
