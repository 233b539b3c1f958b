// Container logs as the kubelet keeps them on the node, turned back into the text the container
// wrote, for the diagnosis of a failed pod.
//
// Layout: <pod logs>/<namespace>_<pod>_<pod uid>/<container>/<restart>.log, the kubelet's
// rotated files beside it (<restart>.log.<YYYYmmdd-HHMMSS>, later gzipped to .gz), read oldest
// first. Each line is CRI's "<RFC3339Nano time> <stdout|stderr> <P|F>[:tags] <message>": a P
// (partial) line continues in the next one, so the parts are joined; the Docker json-file form
// ({"log":…,"stream":…,"time":…}) is read too. A line in neither form is counted and skipped.
//
// Failure: a log folder or file that cannot be read is an IoError naming it. Pure functions
// apart from the reading; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rightsize {

struct CriLog {
  std::string text;       // what the container wrote, stdout and stderr interleaved in order
  int64_t lines = 0;      // log lines read (a partial line counts once per part)
  int64_t bad_lines = 0;  // neither CRI nor Docker json-file
};

// Parses `content` onto `log`. A partial line left open at the end of `content` stays open in
// `*open_partial` (pass the same string with the next file: a rotation can cut a line in parts)
// and is flushed by FinishCriLog.
void ParseCriLog(std::string_view content, CriLog* log, std::string* open_partial);
void FinishCriLog(CriLog* log, std::string* open_partial);

// The files of one container instance, oldest first: the rotated ones by their timestamp, then
// <restart>.log. When that instance left no file (a restart count the agent did not see), the
// newest instance's. Empty when the folder holds none.
std::vector<std::string> ContainerLogFiles(const std::string& pod_logs_dir,
                                           const std::string& namespace_name,
                                           const std::string& pod, const std::string& pod_uid,
                                           const std::string& container, int restart);

// Reads and parses `files` in order (gzip detected from the content). IoError naming a file
// that cannot be opened or read; NotFound when `files` is empty.
StatusOr<CriLog> ReadCriLogs(const std::vector<std::string>& files);

}  // namespace rightsize
