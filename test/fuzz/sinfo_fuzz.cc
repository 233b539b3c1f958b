// libFuzzer target for `rightsize ingest sinfo`: sinfo output (ingest/sinfo.h, ParseSinfo),
// the partitions kept as cluster metadata and read back (PartitionMeta, PartitionsFromMeta),
// and the text `ingest sinfo` prints. Seeds: corpus/sinfo/.
#include "fuzz_util.h"
#include "ingest/sinfo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = rightsize::ParseSinfo(rightsize::fuzz::AsText(data, size), "fuzz.txt");
  if (!parts.ok()) return 0;
  auto meta = rightsize::PartitionMeta(*parts);
  auto back = rightsize::PartitionsFromMeta(meta);
  (void)rightsize::PartitionsText("c", back).size();
  return 0;
}
