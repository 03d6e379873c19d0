// Health from the inventory file: re-read when its content changes, each
// device's `healthy` flag reported both ways.
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "easyscale/common/file_io.h"
#include "easyscale/common/log.h"
#include "easyscale/device_plugin/file_inventory.h"

namespace easyscale::dp {
namespace {

class FileHealthProvider : public HealthProvider {
 public:
  FileHealthProvider(std::string path, std::chrono::milliseconds interval)
      : path_(std::move(path)), interval_(interval) {}
  ~FileHealthProvider() override { Stop(); }

  Status Start(ResourceManager* rm) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (thread_.joinable())
      return absl::FailedPreconditionError("file health provider started twice");
    stopping_ = false;
    thread_ = std::thread([this, rm] { Loop(rm); });
    return absl::OkStatus();
  }

  void Stop() override {
    std::thread t;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      t = std::move(thread_);
    }
    wake_.notify_all();
    if (t.joinable()) t.join();
  }

 private:
  void Loop(ResourceManager* rm) {
    std::string last_text;
    bool reported_unreadable = false;  // log an unreadable file once, not every poll
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (wake_.wait_for(lock, interval_, [&] { return stopping_; })) return;
      }
      auto text = ReadFile(path_, kMaxInventoryFileBytes);
      if (!text.ok()) {
        if (!reported_unreadable) {
          LogError("device-plugin", "inventory file unreadable; health unchanged",
                   {{"path", path_}, {"error", std::string(text.status().message())}});
        }
        reported_unreadable = true;
        continue;
      }
      reported_unreadable = false;
      if (*text == last_text) continue;
      last_text = *text;
      Apply(rm, *text);
    }
  }

  void Apply(ResourceManager* rm, const std::string& text) {
    auto devices = ParseInventory(text, path_);
    if (!devices.ok()) {
      LogError("device-plugin", "inventory file no longer valid; health unchanged",
               {{"error", std::string(devices.status().message())}});
      return;
    }
    std::map<std::string, bool> healthy;
    for (const auto& d : *devices) healthy[d.id] = d.healthy;
    for (const auto& d : rm->Devices()) {
      auto it = healthy.find(d.id);
      if (it == healthy.end()) {
        rm->SetHealth(d.id, false, "removed from the inventory file");
      } else {
        rm->SetHealth(d.id, it->second, "marked unhealthy in the inventory file");
      }
    }
  }

  const std::string path_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<HealthProvider> MakeFileHealthProvider(std::string path,
                                                       std::chrono::milliseconds interval) {
  return std::make_unique<FileHealthProvider>(std::move(path), interval);
}

}  // namespace easyscale::dp
