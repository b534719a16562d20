#include "core/store/internal/tcp_wire.h"

#include "absl/strings/str_cat.h"

namespace shardkit::internal::tcp_wire {
namespace {

void AppendUint32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint64_t ReadBigEndian(std::string_view bytes) {
  uint64_t v = 0;
  for (char c : bytes) v = (v << 8) | static_cast<uint8_t>(c);
  return v;
}

std::string Body(Op op, std::string_view key) {
  std::string body(1, static_cast<char>(op));
  AppendString(&body, key);
  return body;
}

absl::Status Malformed(std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed request: ", absl::string_view(what.data(), what.size())));
}

}  // namespace

void AppendString(std::string* out, std::string_view s) {
  AppendUint32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

void AppendInt64(std::string* out, int64_t v) {
  const auto bits = static_cast<uint64_t>(v);
  AppendUint32(out, static_cast<uint32_t>(bits >> 32));
  AppendUint32(out, static_cast<uint32_t>(bits));
}

void AppendBool(std::string* out, bool b) { out->push_back(b ? 1 : 0); }

std::string EncodeHello() { return Body(Op::kHello, kMagic); }
std::string EncodeGet(std::string_view key) { return Body(Op::kGet, key); }
std::string EncodeExists(std::string_view key) { return Body(Op::kExists, key); }

std::string EncodeSet(std::string_view key, std::string_view value) {
  std::string body = Body(Op::kSet, key);
  AppendString(&body, value);
  return body;
}

std::string EncodeAdd(std::string_view key, int64_t delta) {
  std::string body = Body(Op::kAdd, key);
  AppendInt64(&body, delta);
  return body;
}

std::optional<std::string_view> Reader::String(size_t max) {
  if (data_.size() < 4) return std::nullopt;
  const uint64_t size = ReadBigEndian(data_.substr(0, 4));
  if (size > max || size > data_.size() - 4) return std::nullopt;
  std::string_view s = data_.substr(4, size);
  data_.remove_prefix(4 + size);
  return s;
}

std::optional<int64_t> Reader::Int64() {
  if (data_.size() < 8) return std::nullopt;
  const uint64_t bits = ReadBigEndian(data_.substr(0, 8));
  data_.remove_prefix(8);
  return static_cast<int64_t>(bits);
}

std::optional<uint8_t> Reader::Byte() {
  if (data_.empty()) return std::nullopt;
  const auto b = static_cast<uint8_t>(data_[0]);
  data_.remove_prefix(1);
  return b;
}

absl::StatusOr<Request> DecodeRequest(std::string_view body) {
  Reader reader(body);
  const std::optional<uint8_t> op = reader.Byte();
  if (!op.has_value() || *op < 1 || *op > 5) return Malformed("unknown op");
  Request request;
  request.op = static_cast<Op>(*op);
  const std::optional<std::string_view> key = reader.String(kMaxKey);
  if (!key.has_value()) return Malformed("bad key");
  request.key = std::string(*key);
  if (request.op == Op::kSet) {
    const std::optional<std::string_view> value = reader.String(kMaxValue);
    if (!value.has_value()) return Malformed("bad value");
    request.value = std::string(*value);
  } else if (request.op == Op::kAdd) {
    const std::optional<int64_t> delta = reader.Int64();
    if (!delta.has_value()) return Malformed("bad delta");
    request.delta = *delta;
  }
  if (!reader.AtEnd()) return Malformed("trailing bytes");
  return request;
}

std::string OkResponse(std::string_view payload) {
  std::string body(1, '\0');
  body.append(payload);
  return body;
}

std::string ErrorResponse(const absl::Status& status) {
  std::string body(1, '\1');
  body.push_back(static_cast<char>(static_cast<uint8_t>(status.code())));
  AppendString(&body, std::string_view(status.message().data(), status.message().size()));
  return body;
}

std::string EncodeFrame(std::string_view body) {
  std::string frame;
  frame.reserve(kHeaderBytes + body.size());
  AppendUint32(&frame, static_cast<uint32_t>(body.size()));
  frame.append(body);
  return frame;
}

uint32_t DecodeLength(std::string_view header) {
  return static_cast<uint32_t>(ReadBigEndian(header.substr(0, kHeaderBytes)));
}

}  // namespace shardkit::internal::tcp_wire
