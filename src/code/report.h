// Renders code facts, the memory estimate and advice as text for people and as JSON for
// scripts (the `code` object of rightsize.advise/v1 and of rightsize.predict/v1's gpu_memory).
// Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "code/advice.h"
#include "code/analysis.h"
#include "code/memory_model.h"

namespace rightsize::code {

nlohmann::json FactsJson(const CodeFacts& facts);
nlohmann::json EstimateJson(const MemoryEstimate& estimate);
nlohmann::json AdviceJson(const std::vector<Advice>& advice);

// "  batch size      16       train.py:31  (--batch_size 16 on the command line, …)" lines.
std::string FactsText(const CodeFacts& facts);
// "  weights         0.71 GB  354.8M params × 2 B …  train.py:40" lines, then the range.
std::string EstimateText(const MemoryEstimate& estimate);

}  // namespace rightsize::code
