#include "easyscale/device_plugin/node_inventory.h"

namespace easyscale::dp {
namespace {

std::optional<std::string> HolderOf(const std::map<std::string, std::string>& holders,
                                    const GpuDevice& d) {
  for (const auto& key : {d.id, d.uuid}) {
    auto it = holders.find(key);
    if (it != holders.end()) return it->second;
  }
  return std::nullopt;
}

}  // namespace

std::vector<NodeGpu> JoinHolders(const std::vector<GpuDevice>& devices,
                                 const DeviceHolders& holders) {
  std::vector<NodeGpu> out;
  for (const auto& d : devices) {
    out.push_back({d, HolderOf(holders.inference, d), HolderOf(holders.training, d)});
  }
  return out;
}

}  // namespace easyscale::dp
