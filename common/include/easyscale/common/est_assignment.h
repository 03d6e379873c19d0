// File: easyscale/common/est_assignment.h
//
// Which physical worker runs which EasyScaleThreads (ESTs). A job has a fixed
// number of ESTs; an assignment gives each worker rank a non-empty, sorted set,
// and every EST exactly one worker. The trained bits never depend on it: only
// the step time does.
//   EstAssignment a = AssignContiguous(8, 3);  // {0,1,2} {3,4,5} {6,7}
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale {

// The most ESTs a job has and worker processes a generation has (the control
// protocol refuses more).
inline constexpr int kMaxTotalEsts = 1 << 20;
inline constexpr int kMaxWorldSize = 1 << 16;

struct EstAssignment {
  int totalEsts = 0;
  std::vector<std::vector<int>> workers;  // workers[rank] = EST ids, ascending

  int worldSize() const { return static_cast<int>(workers.size()); }
  // Rank that hosts `est`, or -1.
  int OwnerOf(int est) const;
  bool operator==(const EstAssignment&) const = default;
};

// Contiguous blocks, the first (ests % workers) ranks one EST more.
// Requires 1 <= workers <= ests.
StatusOr<EstAssignment> AssignContiguous(int ests, int workers);

// Minimises the step time max_i(count_i / speed_i) with at least one EST per
// worker; ESTs stay contiguous in rank order. Ties go to the lower rank, so the
// result is a pure function of its inputs.
StatusOr<EstAssignment> AssignBySpeed(int ests, const std::vector<double>& speeds);

// Each EST in [0, totalEsts) exactly once, no empty worker, ids ascending.
Status ValidateAssignment(const EstAssignment& a);

nlohmann::json ToJson(const EstAssignment& a);
StatusOr<EstAssignment> ParseEstAssignment(const nlohmann::json& j, const std::string& path);

}  // namespace easyscale
