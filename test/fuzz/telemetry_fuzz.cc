// libFuzzer target for what `rightsize serve` decodes from the network (docs/api.md,
// POST /api/v1/telemetry): the telemetry batch decoder, the job record reader it calls, and
// the same bytes through gzip first (as `Content-Encoding: gzip` bodies arrive).
//
// The server must never crash, hang or read out of bounds on any body; a crash here is a bug in
// src/, and its input belongs in test/fuzz/corpus/telemetry/ as a regression input (the replay
// driver runs that corpus under ctest). Built two ways (test/fuzz/fuzz.cmake): with clang's
// -fsanitize=fuzzer for real fuzzing, and as a plain library that fuzz_replay.cc drives.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/job.h"
#include "server/telemetry.h"

namespace {

// What the server's cap (max_batch_bytes) would stop; smaller here so the fuzzer stays fast.
constexpr size_t kMaxInflatedBytes = size_t{1} << 20;

// Inflates gzip or zlib data (windowBits 15 + 32: the header decides, as cpp-httplib's
// gzip_decompressor does). False for data that is not compressed or is over the cap.
bool Inflate(std::string_view in, std::string* out) {
  z_stream strm{};
  if (inflateInit2(&strm, 15 + 32) != Z_OK) return false;
  strm.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  strm.avail_in = static_cast<uInt>(in.size());
  char buf[16384];
  int rc = Z_OK;
  while (rc == Z_OK) {
    strm.next_out = reinterpret_cast<Bytef*>(buf);
    strm.avail_out = sizeof buf;
    rc = inflate(&strm, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    out->append(buf, sizeof buf - strm.avail_out);
    if (out->size() > kMaxInflatedBytes) break;
    if (rc == Z_OK && strm.avail_in == 0 && strm.avail_out != 0) break;  // truncated input
  }
  inflateEnd(&strm);
  return rc == Z_STREAM_END;
}

// Everything the server does with a decoded batch short of storing it: the records go back out
// as JSON on the job page (to_json), so a value that decodes must also encode.
void Decode(std::string_view body) {
  auto batch = rightsize::DecodeTelemetry(body);
  if (!batch.ok()) {
    (void)batch.status().message().size();
    return;
  }
  for (const auto& entry : batch->jobs) {
    nlohmann::json j = entry.job;
    (void)j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  for (const auto& r : batch->rejected) (void)(r.path.size() + r.error.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  Decode(body);

  // The job record reader on its own (it also reads `rightsize job --json` documents).
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) {
    auto record = rightsize::JobRecordFromJson(j);
    if (record.ok()) {
      nlohmann::json back = *record;
      (void)back.dump();
    }
  }

  std::string inflated;
  if (Inflate(body, &inflated)) Decode(inflated);
  return 0;
}
