// Nodes and Pods -> NodeGpus for the scheduler, and the GPU gauges.
#include "controller/gpu_inventory.h"

#include <algorithm>

namespace easyscale::op {

std::vector<NodeGpus> BuildNodeGpus(const std::vector<NodePtr>& nodes,
                                    const std::vector<PodPtr>& pods,
                                    const GpusByNodeAndType& unavailable,
                                    const GpusByNodeAndType& planned) {
  std::map<std::pair<std::string, std::string>, NodeGpus> table;
  std::map<std::string, std::vector<std::string>> typesOf;  // node -> its types
  std::map<std::pair<std::string, std::string>, int> heldByPlugin;
  for (const NodePtr& n : nodes) {
    for (const auto& [type, count] : n->inventory.heldByInference) {
      heldByPlugin[{n->name, type}] = count;
    }
    for (const auto& [type, count] : n->inventory.healthy) {
      NodeGpus& g = table[{n->name, type}];
      g.node = n->name;
      g.gpuType = type;
      g.total = count;
      typesOf[n->name].push_back(type);
    }
  }
  for (const PodPtr& p : pods) {
    if (p->role != PodRole::kInference || !p->ClaimsGpus()) continue;
    auto types = typesOf.find(p->node);
    if (types == typesOf.end()) continue;  // not bound to a GPU node yet
    std::string type = p->gpuTypeSelector;
    if (std::find(types->second.begin(), types->second.end(), type) == types->second.end()) {
      type = types->second.front();
    }
    NodeGpus& g = table[{p->node, type}];
    (p->phase == PodPhase::kRunning ? g.inferenceHeld : g.inferencePending) += p->inferenceGpus;
  }
  // The device plugin sees holders the pod list may not show yet (or at all).
  for (const auto& [key, count] : heldByPlugin) {
    auto it = table.find(key);
    if (it != table.end()) it->second.inferenceHeld = std::max(it->second.inferenceHeld, count);
  }
  // A GPU a draining worker still holds goes to the inference pod waiting on
  // that node (it is why the worker drains); any other is not idle yet: no
  // new placement may take it. The placements jobs already hold there are not
  // cut for it: the cycle that ordered the drain may have given that GPU to
  // another job's worker, and counting it for both reads as a lost GPU, whose
  // "preemption" drains another worker, which reads as the next lost GPU.
  for (const auto& [node, byType] : unavailable) {
    for (const auto& [type, count] : byType) {
      auto it = table.find({node, type});
      if (it == table.end()) continue;
      NodeGpus& g = it->second;
      const int earmarked = std::min(count, g.inferencePending);
      g.inferencePending -= earmarked;
      g.inferenceHeld += earmarked;
      int held = 0;  // by the jobs' plans
      if (auto n = planned.find(node); n != planned.end()) {
        if (auto t = n->second.find(type); t != n->second.end()) held = t->second;
      }
      const int kept = std::min(g.total, g.inferenceHeld + g.inferencePending + held);
      g.total = std::max({g.inferenceHeld, g.total - (count - earmarked), kept});
    }
  }
  std::vector<NodeGpus> out;
  out.reserve(table.size());
  for (auto& [key, g] : table) out.push_back(std::move(g));
  return out;
}

std::map<std::string, GpuCounts> CountGpusByType(const std::vector<NodePtr>& nodes,
                                                 const std::vector<PodPtr>& pods) {
  std::map<std::string, GpuCounts> byType;
  std::map<std::string, int> total;
  for (const NodeGpus& n : BuildNodeGpus(nodes, pods, {}, {})) {
    total[n.gpuType] += n.total;
    byType[n.gpuType].inference += n.inferenceHeld;
  }
  for (const PodPtr& p : pods) {
    if (p->role == PodRole::kWorker && p->ClaimsGpus() && !p->node.empty()) {
      ++byType[p->gpuType].training;
    }
  }
  for (auto& [type, c] : byType) c.idle = std::max(0, total[type] - c.inference - c.training);
  return byType;
}

}  // namespace easyscale::op
