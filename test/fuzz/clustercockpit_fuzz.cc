// libFuzzer target for `rightsize ingest clustercockpit`: ClusterCockpit job tables as CSV
// (ingest/clustercockpit.h, libcsv underneath), line by line as IngestFile feeds them
// (fuzz_util.h). Seeds: corpus/clustercockpit/ (both header variants, quoted multi-line fields).
#include "fuzz_util.h"
#include "ingest/clustercockpit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rightsize::ClusterCockpitParser parser;
  rightsize::fuzz::FeedLines(parser, rightsize::fuzz::AsText(data, size));
  return 0;
}
