#include "integration/formats/pickle/pickle_writer.h"

#include <string>
#include <utility>

namespace shardkit::pickle {
namespace {

std::string LittleEndian(uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

// LONG1's bytes: the shortest little-endian two's complement of `value`.
std::string LongBytes(int64_t value) {
  std::string out = LittleEndian(static_cast<uint64_t>(value), 8);
  while (out.size() > 1) {
    const auto last = static_cast<uint8_t>(out.back());
    const auto before = static_cast<uint8_t>(out[out.size() - 2]);
    const bool redundant =
        (last == 0x00 && (before & 0x80) == 0) || (last == 0xff && (before & 0x80) != 0);
    if (!redundant) break;
    out.pop_back();
  }
  return out;
}

}  // namespace

PickleWriter::PickleWriter() : out_("\x80\x02") {}

void PickleWriter::Put() {
  const uint32_t index = next_memo_++;
  out_ += index < 256 ? "q" + LittleEndian(index, 1) : "r" + LittleEndian(index, 4);
}

void PickleWriter::Memoize(std::string key) {
  memo_.try_emplace(std::move(key), next_memo_);  // a key memoized again keeps its first entry
  Put();
}

bool PickleWriter::Fetch(const std::string& key) {
  auto it = memo_.find(key);
  if (it == memo_.end()) return false;
  out_ += it->second < 256 ? "h" + LittleEndian(it->second, 1) : "j" + LittleEndian(it->second, 4);
  return true;
}

void PickleWriter::Global(std::string_view module, std::string_view name) {
  std::string key = "global " + std::string(module) + "." + std::string(name);
  if (Fetch(key)) return;
  out_ += "c" + std::string(module) + "\n" + std::string(name) + "\n";
  Memoize(std::move(key));
}

void PickleWriter::Str(std::string_view text) {
  out_ += "X" + LittleEndian(text.size(), 4);
  out_ += text;
}

void PickleWriter::MemoStr(std::string_view text) {
  std::string key = "str " + std::string(text);
  if (Fetch(key)) return;
  Str(text);
  Memoize(std::move(key));
}

void PickleWriter::Int(int64_t value) {
  if (value >= 0 && value <= 0xff) {
    out_ += "K" + LittleEndian(value, 1);
  } else if (value >= 0 && value <= 0xffff) {
    out_ += "M" + LittleEndian(value, 2);
  } else if (value >= INT32_MIN && value <= INT32_MAX) {
    out_ += "J" + LittleEndian(static_cast<uint32_t>(value), 4);
  } else {
    const std::string bytes = LongBytes(value);
    out_ += "\x8a" + LittleEndian(bytes.size(), 1) + bytes;
  }
}

void PickleWriter::BeginTuple(size_t n) {
  if (n > 3) out_ += '(';
}

void PickleWriter::EndTuple(size_t n) {
  constexpr char kSmall[] = {')', '\x85', '\x86', '\x87'};
  out_ += n <= 3 ? kSmall[n] : 't';
}

void PickleWriter::IntTuple(const Shape& values) {
  BeginTuple(values.size());
  for (int64_t value : values) Int(value);
  EndTuple(values.size());
  if (!values.empty()) Put();
}

void PickleWriter::Size(const Shape& shape) {
  Global("torch", "Size");
  out_ += "(";
  for (int64_t dim : shape) Int(dim);
  out_ += "t\x85R";
}

void PickleWriter::BeginDataclass(std::string_view module, std::string_view name,
                                  std::string_view memo_key) {
  Global(module, name);
  out_ += ")\x81";
  if (!memo_key.empty()) Memoize(std::string(memo_key));
  out_ += "}(";
}

void PickleWriter::Get(std::string_view key) {
  if (!Fetch(std::string(key))) out_ += "<no memo entry " + std::string(key) + ">";
}

}  // namespace shardkit::pickle
