#include "backends/ucx/internal/peer_process.h"

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardkit::ucx_backend {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string Host() {
  char ns[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  const std::string boot = ReadFirstLine("/proc/sys/kernel/random/boot_id");
  return absl::StrCat(boot.empty() ? "unknown" : boot, "/", n > 0 ? std::string(ns, n) : "pid:?");
}

// The kernel's PF_EXITING, in the flags of /proc/<pid>/stat: set when a process begins to exit
// (before its memory goes, which is when a CMA read of it starts failing), long before it is a
// zombie.
constexpr uint64_t kExiting = 0x4;

// State, kernel flags and start time of `pid` from /proc/<pid>/stat; false when there is no such
// process.
bool ReadStat(int pid, char& state, uint64_t& flags, std::string& start) {
  const std::string stat = ReadFirstLine(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return false;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(paren + 1), ' ', absl::SkipEmpty());
  // After the name: state (field 3), …, flags (field 9), …, start time (field 22).
  if (fields.size() < 20 || fields[0].empty()) return false;
  state = fields[0][0];
  if (!absl::SimpleAtoi(fields[6], &flags)) flags = 0;
  start = fields[19];
  return true;
}

// An identity's fields: host, PID, start time.
struct Identity {
  std::string host;
  int pid = 0;
  std::string start;
};

std::optional<Identity> Parse(const std::string& identity) {
  std::vector<std::string> fields = absl::StrSplit(identity, ' ');
  Identity parsed;
  if (fields.size() != 3 || !absl::SimpleAtoi(fields[1], &parsed.pid) || parsed.pid <= 0) {
    return std::nullopt;
  }
  parsed.host = std::move(fields[0]);
  parsed.start = std::move(fields[2]);
  return parsed;
}

const std::string& ThisHost() {
  static const std::string* host = new std::string(Host());
  return *host;
}

}  // namespace

std::string ThisProcess() {
  char state = '?';
  uint64_t flags = 0;
  std::string start = "0";
  ReadStat(static_cast<int>(::getpid()), state, flags, start);
  return absl::StrCat(Host(), " ", ::getpid(), " ", start);
}

bool OnThisHost(const std::string& identity) {
  const std::optional<Identity> parsed = Parse(identity);
  return parsed.has_value() && parsed->host == ThisHost();
}

bool ProcessGone(const std::string& identity) {
  const std::optional<Identity> parsed = Parse(identity);
  if (!parsed.has_value() || parsed->host != ThisHost()) return false;
  char state = '?';
  uint64_t flags = 0;
  std::string start;
  if (!ReadStat(parsed->pid, state, flags, start)) return true;
  return state == 'Z' || state == 'X' || (flags & kExiting) != 0 || start != parsed->start;
}

}  // namespace shardkit::ucx_backend
