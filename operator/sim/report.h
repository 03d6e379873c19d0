// File: operator/sim/report.h
//
// The simulator's outputs from the per-policy results of one trace: a table
// for the terminal, a JSON document and an SVG plot of utilisation over time.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "simulator.h"

namespace easyscale::sim {

// Relative utilisation gain of `policy` over static, in percent; NaN when
// either is missing or static used nothing.
double UtilisationGainOverStatic(const std::vector<PolicyResult>& results, Policy policy);

std::string FormatTable(const std::vector<PolicyResult>& results);
// Job completion, makespan, useful GPU time, waste and slowdown per policy.
std::string FormatJobTable(const std::vector<PolicyResult>& results);
nlohmann::json ToJson(const std::vector<PolicyResult>& results, const Trace& trace,
                      const SimOptions& options);
std::string RenderSvg(const std::vector<PolicyResult>& results, const std::string& title);

}  // namespace easyscale::sim
