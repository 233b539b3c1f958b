// libFuzzer target for `rightsize diagnose`'s log scanner (diagnose/log_scan.h): a job's log is
// input too, and a bad one (binary, invalid UTF-8, colours, huge lines) must be counted, never
// crash. ScanLogText (the path of files and pipes too) and CleanLogText. Seeds: corpus/log_scan/
// (excerpts of test/data/failures logs).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "diagnose/log_scan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // One scan per input: small blocks (lines straddle blocks, long lines are searched in
  // pieces) for inputs of even size, the defaults for odd.
  rightsize::ScanOptions options;
  if (size % 2 == 0) {
    options.block_bytes = 4096;
    options.keep_first = 2;
    options.keep_last = 2;
    options.tail_lines = 3;
  }
  auto scan = rightsize::ScanLogText(text, "fuzz.log", options);
  for (const auto& hit : scan.hits) (void)(hit.text.size() + hit.facts.size());
  (void)rightsize::CleanLogText(text, 40).size();
  (void)rightsize::CleanLogText(text).size();
  return 0;
}
