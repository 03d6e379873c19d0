// File: easyscale/operator/work_queue.h
//
// client-go's rate-limited work queue for object keys ("ns/name"):
//  - Add dedups: a key queued twice is processed once.
//  - A key being processed is never handed to a second worker; an Add while it
//    is processed marks it dirty and it is queued again on Done.
//  - AddRateLimited re-adds after a per-key exponential backoff
//    (base * 2^failures, capped); Forget resets the key's failures.
//  - An optional WorkQueueMetrics hears what client-go's MetricsProvider
//    hears: each add, each key handed out (with how long it waited since its
//    first add) and each Done (with how long it was worked on).
//   while (auto key = q.Get()) { Status s = Reconcile(*key); ...; q.Done(*key); }
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

namespace easyscale::op {

struct BackoffOptions {
  std::chrono::milliseconds base{5};
  std::chrono::milliseconds max{std::chrono::seconds(60)};
};

// Called with the queue's lock held: implementations must be quick and must
// not call back into the queue. `depth` is the keys added and not handed out
// yet (client-go's depth: a key re-added while it is processed counts).
class WorkQueueMetrics {
 public:
  virtual ~WorkQueueMetrics() = default;
  virtual void Added(size_t depth) = 0;
  virtual void Started(size_t depth, std::chrono::duration<double> queued) = 0;
  virtual void Finished(std::chrono::duration<double> worked) = 0;
};

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;

  // `metrics`, when given, must outlive the queue.
  explicit WorkQueue(BackoffOptions backoff = {}, WorkQueueMetrics* metrics = nullptr);
  ~WorkQueue();

  void Add(const std::string& key);
  void AddAfter(const std::string& key, std::chrono::milliseconds delay);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key);
  // The next key, blocking; nullopt once ShutDown and drained.
  std::optional<std::string> Get();
  void Done(const std::string& key);
  void ShutDown();
  size_t Len();
  // The delay AddRateLimited would use next for `key` (without recording it).
  std::chrono::milliseconds NextBackoff(const std::string& key);

 private:
  void DelayLoop();
  void AddLocked(const std::string& key);

  BackoffOptions backoff_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_;       // queued or to be requeued
  std::set<std::string> processing_;  // handed out, not Done yet
  std::map<std::string, int> failures_;
  WorkQueueMetrics* metrics_;
  std::map<std::string, Clock::time_point> addedAt_;    // dirty keys: their first add
  std::map<std::string, Clock::time_point> startedAt_;  // processing keys
  std::multimap<Clock::time_point, std::string> waiting_;
  std::condition_variable waitingCv_;
  bool shutDown_ = false;
  std::thread delayThread_;
};

}  // namespace easyscale::op
