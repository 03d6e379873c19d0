#include "allocation.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace easyscale::dp {
namespace {

struct Candidate {
  const GpuDevice* device;
  std::string group() const { return absl::StrCat(device->type, "/", device->numa_node); }
};

// Appends candidates accepted by `want` until `out` has `size` entries.
template <typename Pred>
void Fill(const std::vector<Candidate>& candidates, size_t size, std::vector<std::string>* out,
          Pred want) {
  for (const auto& c : candidates) {
    if (out->size() >= size) return;
    if (!want(c)) continue;
    if (std::find(out->begin(), out->end(), c.device->id) == out->end()) {
      out->push_back(c.device->id);
    }
  }
}

}  // namespace

StatusOr<std::vector<std::string>> PreferredAllocation(const std::vector<GpuDevice>& inventory,
                                                       const std::vector<std::string>& available,
                                                       const std::vector<std::string>& must_include,
                                                       int size) {
  if (size <= 0)
    return absl::InvalidArgumentError(absl::StrCat("allocation_size must be >= 1, got ", size));
  if (static_cast<size_t>(size) > available.size()) {
    return absl::InvalidArgumentError(absl::StrCat("allocation_size ", size, " exceeds the ",
                                                   available.size(), " available devices"));
  }
  if (must_include.size() > static_cast<size_t>(size)) {
    return absl::InvalidArgumentError("more must-include devices than allocation_size");
  }
  std::vector<Candidate> candidates;
  for (const auto& id : available) {
    auto it = std::find_if(inventory.begin(), inventory.end(),
                           [&](const GpuDevice& d) { return d.id == id; });
    if (it == inventory.end())
      return absl::InvalidArgumentError("unknown device ID \"" + id + "\"");
    candidates.push_back({&*it});
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.device->index < b.device->index;
  });
  const std::set<std::string> available_set(available.begin(), available.end());
  std::vector<std::string> chosen;
  for (const auto& id : must_include) {
    if (!available_set.count(id)) {
      return absl::InvalidArgumentError("must-include device \"" + id + "\" is not available");
    }
    if (std::find(chosen.begin(), chosen.end(), id) == chosen.end()) chosen.push_back(id);
  }
  std::map<std::string, size_t> group_size;
  for (const auto& c : candidates) ++group_size[c.group()];
  const size_t want = static_cast<size_t>(size);
  const size_t missing = want - chosen.size();

  std::string group;  // the (type, NUMA) group to fill from first
  std::string type;   // the type to fill from next
  if (!chosen.empty()) {
    const Candidate first{&*std::find_if(inventory.begin(), inventory.end(),
                                         [&](const GpuDevice& d) { return d.id == chosen[0]; })};
    group = first.group();
    type = first.device->type;
  } else {
    size_t best = SIZE_MAX;
    for (const auto& c : candidates) {  // index order: ties go to the lowest index
      const size_t n = group_size[c.group()];
      if (n >= missing && n < best) {
        best = n;
        group = c.group();
        type = c.device->type;
      }
    }
    if (group.empty() && !candidates.empty()) {
      std::map<std::string, size_t> type_size;
      for (const auto& c : candidates) ++type_size[c.device->type];
      for (const auto& c : candidates) {
        if (type_size[c.device->type] >= missing) {
          type = c.device->type;
          break;
        }
      }
    }
  }
  Fill(candidates, want, &chosen, [&](const Candidate& c) { return c.group() == group; });
  Fill(candidates, want, &chosen, [&](const Candidate& c) { return c.device->type == type; });
  Fill(candidates, want, &chosen, [](const Candidate&) { return true; });
  return chosen;
}

ContainerAllocation BuildAllocation(const std::vector<GpuDevice>& devices,
                                    const std::vector<std::string>& control_device_paths) {
  ContainerAllocation out;
  std::vector<std::string> uuids;
  std::vector<std::string> ids;
  std::set<std::string> types;
  for (const auto& d : devices) {
    uuids.push_back(d.uuid);
    ids.push_back(d.id);
    types.insert(d.type);
    for (const auto& p : d.device_paths) out.devices.push_back({p, "rw"});
  }
  for (const auto& p : control_device_paths) out.devices.push_back({p, "rw"});
  const std::string uuid_list = absl::StrJoin(uuids, ",");
  out.envs["NVIDIA_VISIBLE_DEVICES"] = uuid_list;
  out.envs["CUDA_VISIBLE_DEVICES"] = uuid_list;
  out.envs["EASYSCALE_GPU_TYPE"] = types.size() == 1 ? *types.begin() : absl::StrJoin(types, ",");
  out.annotations["easyscale.io/gpu-ids"] = absl::StrJoin(ids, ",");
  out.annotations["easyscale.io/gpu-uuids"] = uuid_list;
  return out;
}

}  // namespace easyscale::dp
