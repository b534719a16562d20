// The wire protocol of the tcp:// store (TcpStore client, TcpStoreServer), not part of the API.
//
// Every message, both ways, is a frame: a 4-byte big-endian body length N (1 <= N <= kMaxFrame),
// then N body bytes. A string field is a 4-byte big-endian length and its bytes; an integer is
// 8 bytes big-endian two's complement.
//
//   request  = op:u8 fields...      hello: magic | set: key value | get: key | add: key delta:i64
//                                   | exists: key
//   response = 0:u8 payload...      hello: magic | set: - | get: found:u8 [value] | add: value:i64
//                                   | exists: found:u8
//            | 1:u8 code:u8 message (an error: an absl::StatusCode and its text)
//
// A connection starts with a hello (kMagic, which carries the protocol version). A key is 1 to
// kMaxKey bytes without NUL, a value at most kMaxValue bytes. The server closes a connection whose
// frame is too long, cannot be decoded, or does not start with the hello; it never replies to one.
//
//   std::string frame = EncodeFrame(EncodeSet("rank0/addr", "127.0.0.1:4000"));
//   absl::StatusOr<Request> request = DecodeRequest(body);  // server side
#ifndef SHARDKIT_CORE_STORE_INTERNAL_TCP_WIRE_H_
#define SHARDKIT_CORE_STORE_INTERNAL_TCP_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardkit::internal::tcp_wire {

inline constexpr std::string_view kMagic = "shardkit-tcp-store/1";
inline constexpr size_t kHeaderBytes = 4;
inline constexpr size_t kMaxKey = 4096;
inline constexpr size_t kMaxValue = 16 << 20;
inline constexpr size_t kMaxFrame = kMaxValue + kMaxKey + 64;

enum class Op : uint8_t { kHello = 1, kSet = 2, kGet = 3, kAdd = 4, kExists = 5 };

struct Request {
  Op op = Op::kHello;
  std::string key;    // kHello: the magic
  std::string value;  // kSet
  int64_t delta = 0;  // kAdd
};

// Request bodies (without the frame header).
std::string EncodeHello();
std::string EncodeSet(std::string_view key, std::string_view value);
std::string EncodeGet(std::string_view key);
std::string EncodeAdd(std::string_view key, int64_t delta);
std::string EncodeExists(std::string_view key);

// Errors: kInvalidArgument for an unknown op, a truncated or oversized field, trailing bytes.
[[nodiscard]] absl::StatusOr<Request> DecodeRequest(std::string_view body);

// Response bodies: success with an op-specific payload (built with the Append* helpers), or an
// error carrying `status`'s code and message.
std::string OkResponse(std::string_view payload = {});
std::string ErrorResponse(const absl::Status& status);
void AppendString(std::string* out, std::string_view s);
void AppendInt64(std::string* out, int64_t v);
void AppendBool(std::string* out, bool b);

// A response body taken apart field by field, for the client.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  std::optional<std::string_view> String(size_t max = kMaxFrame);
  std::optional<int64_t> Int64();
  std::optional<uint8_t> Byte();
  bool AtEnd() const { return data_.empty(); }

 private:
  std::string_view data_;
};

// The frame of `body`: its 4-byte length, then the body.
std::string EncodeFrame(std::string_view body);
// The body length a frame header announces (`header` has kHeaderBytes bytes).
uint32_t DecodeLength(std::string_view header);

}  // namespace shardkit::internal::tcp_wire

#endif  // SHARDKIT_CORE_STORE_INTERNAL_TCP_WIRE_H_
