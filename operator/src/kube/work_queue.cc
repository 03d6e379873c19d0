// The queue's dirty/processing sets follow client-go's workqueue.Type.
#include "easyscale/operator/work_queue.h"

#include <algorithm>

namespace easyscale::op {

WorkQueue::WorkQueue(BackoffOptions backoff, WorkQueueMetrics* metrics)
    : backoff_(backoff), metrics_(metrics) {
  delayThread_ = std::thread([this] { DelayLoop(); });
}

WorkQueue::~WorkQueue() {
  ShutDown();
  if (delayThread_.joinable()) delayThread_.join();
}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutDown_ || dirty_.count(key) != 0) return;
  dirty_.insert(key);
  if (metrics_ != nullptr) {
    addedAt_.emplace(key, Clock::now());
    metrics_->Added(dirty_.size());
  }
  if (processing_.count(key) != 0) return;  // queued again by Done
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::milliseconds delay) {
  if (delay <= std::chrono::milliseconds::zero()) return Add(key);
  std::lock_guard<std::mutex> lock(mu_);
  if (shutDown_) return;
  waiting_.emplace(Clock::now() + delay, key);
  waitingCv_.notify_one();
}

std::chrono::milliseconds WorkQueue::NextBackoff(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  const int n = std::min(failures_[key], 30);
  const auto d = backoff_.base * (int64_t{1} << n);
  return std::min<std::chrono::milliseconds>(d, backoff_.max);
}

void WorkQueue::AddRateLimited(const std::string& key) {
  const std::chrono::milliseconds d = NextBackoff(key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++failures_[key];
  }
  AddAfter(key, d);
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.erase(key);
}

int WorkQueue::NumRequeues(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || shutDown_; });
  if (queue_.empty()) return std::nullopt;
  std::string key = queue_.front();
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  if (metrics_ != nullptr) {
    const Clock::time_point now = Clock::now();
    auto added = addedAt_.find(key);
    metrics_->Started(dirty_.size(),
                      added == addedAt_.end() ? Clock::duration::zero() : now - added->second);
    if (added != addedAt_.end()) addedAt_.erase(added);
    startedAt_[key] = now;
  }
  return key;
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  processing_.erase(key);
  if (auto started = startedAt_.find(key); started != startedAt_.end()) {
    metrics_->Finished(Clock::now() - started->second);
    startedAt_.erase(started);
  }
  if (dirty_.count(key) != 0) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::ShutDown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutDown_ = true;
  cv_.notify_all();
  waitingCv_.notify_all();
}

size_t WorkQueue::Len() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void WorkQueue::DelayLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutDown_) {
    if (waiting_.empty()) {
      waitingCv_.wait(lock);
      continue;
    }
    const auto due = waiting_.begin()->first;
    if (Clock::now() < due) {
      waitingCv_.wait_until(lock, due);
      continue;
    }
    const std::string key = waiting_.begin()->second;
    waiting_.erase(waiting_.begin());
    AddLocked(key);
  }
}

}  // namespace easyscale::op
