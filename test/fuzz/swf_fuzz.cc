// libFuzzer target for `rightsize ingest swf`: Standard Workload Format traces (ingest/swf.h)
// through SwfParser, line by line as IngestFile feeds it (fuzz_util.h). Seeds:
// corpus/swf/ (excerpts of the KTH SP2 trace in test/data/swf and hand-made edge rows).
#include "fuzz_util.h"
#include "ingest/swf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rightsize::SwfParser parser;
  rightsize::fuzz::FeedLines(parser, rightsize::fuzz::AsText(data, size));
  return 0;
}
