#include "backends/ucx/internal/peer_process.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
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

// State and start time of `pid` from /proc/<pid>/stat; false when there is no such process.
bool ReadStat(int pid, char& state, std::string& start) {
  const std::string stat = ReadFirstLine(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return false;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(paren + 1), ' ', absl::SkipEmpty());
  // After the name: state (field 3), …, start time (field 22).
  if (fields.size() < 20 || fields[0].empty()) return false;
  state = fields[0][0];
  start = fields[19];
  return true;
}

}  // namespace

std::string ThisProcess() {
  char state = '?';
  std::string start = "0";
  ReadStat(static_cast<int>(::getpid()), state, start);
  return absl::StrCat(Host(), " ", ::getpid(), " ", start);
}

bool OnThisHost(const std::string& identity) {
  static const std::string* host = new std::string(Host());
  std::vector<std::string> fields = absl::StrSplit(identity, ' ');
  return fields.size() == 3 && fields[0] == *host;
}

bool ProcessGone(const std::string& identity) {
  std::vector<std::string> fields = absl::StrSplit(identity, ' ');
  int pid = 0;
  if (!OnThisHost(identity) || !absl::SimpleAtoi(fields[1], &pid) || pid <= 0) return false;
  char state = '?';
  std::string start;
  if (!ReadStat(pid, state, start)) return true;
  return state == 'Z' || state == 'X' || start != fields[2];
}

}  // namespace shardkit::ucx_backend
