// libFuzzer target for `rightsize ingest sacct` (and `ingest slurm`, which reads the same
// output): sacct --parsable2 text through SacctParser (ingest/sacct.h) in its three ways of
// reading, one per input by its size: a header line or a detected delimiter (no options),
// headerless with the columns `ingest slurm` asks for (kSacctFormat), and a given
// multi-character delimiter. Seeds: corpus/sacct/ (excerpts of test/data/sacct).
#include "fuzz_util.h"
#include "ingest/sacct.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto text = rightsize::fuzz::AsText(data, size);
  // One way of reading per input, chosen by its size (a mutation that grows or shrinks an
  // input reads it the other ways): three parsers per input cost three times as much.
  rightsize::SacctOptions o;
  if (size % 3 == 1) {
    o.delimiter = "|";
    o.columns = rightsize::SacctColumns(rightsize::kSacctFormat);
  } else if (size % 3 == 2) {
    o.delimiter = "~|~";
  }
  rightsize::SacctParser parser(o);
  rightsize::fuzz::FeedLines(parser, text);
  (void)rightsize::NormalizeState(text.substr(0, 64));
  return 0;
}
