// RequestSet: the non-blocking point-to-point messages of one MPI backend exchange, posted with
// MPI_Irecv/MPI_Isend and polled with MPI_Testsome until they complete or a deadline passes.
// Internal to //backends/mpi.
//
//   RequestSet requests(comm, tag);
//   SHARDKIT_RETURN_IF_ERROR(requests.PostRecv(peer, data, size));
//   absl::Status status = requests.WaitAll(deadline);
//   if (!status.ok() && requests.pending() > 0) { /* MPI may still write: abort the job */ }
//
// A transfer larger than `max_message` bytes goes as several messages of at most that size (MPI
// counts are ints); both sides cut it the same way, and MPI matches messages between one pair
// with one tag in order. Not thread-safe; one set per exchange.
#ifndef SHARDKIT_BACKENDS_MPI_INTERNAL_REQUESTS_H_
#define SHARDKIT_BACKENDS_MPI_INTERNAL_REQUESTS_H_

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace shardkit::mpi_backend {

// 1 GiB: below INT_MAX bytes, so every message's count fits MPI's int.
inline constexpr size_t kMaxMessageBytes = size_t{1} << 30;

// "MPI_ERR_TRUNCATE: message truncated" for an MPI error code.
std::string MpiErrorText(int code);

class RequestSet {
 public:
  RequestSet(MPI_Comm comm, int tag, size_t max_message = kMaxMessageBytes);
  RequestSet(const RequestSet&) = delete;
  RequestSet& operator=(const RequestSet&) = delete;
  // Precondition: nothing pending (a set with pending requests must not go away: the caller
  // aborts the job instead, since MPI may still read or write the buffers).
  ~RequestSet();

  // Start receiving `size` bytes from / sending them to `peer` (a rank of comm). The buffers must
  // stay valid until WaitAll succeeds. Errors: kInternal with MPI's error text.
  [[nodiscard]] absl::Status PostRecv(int peer, void* data, size_t size);
  [[nodiscard]] absl::Status PostSend(int peer, const void* data, size_t size);

  // Polls every posted message until all have completed. Yields at first, then sleeps up to
  // 1 ms between polls. Errors: kDeadlineExceeded naming the peers not heard from and the sends
  // not confirmed; kInternal with MPI's error text (a truncated receive, a broken transport).
  [[nodiscard]] absl::Status WaitAll(absl::Time deadline);

  // Messages posted and not completed.
  size_t pending() const;

  // "not heard from rank 2, sends to rank 3 not confirmed (received 0 of 8 bytes, …)".
  std::string DescribeProgress() const;

 private:
  struct Message {
    int peer;
    bool recv;
    size_t size;
    bool done = false;
  };

  absl::Status Post(int peer, bool recv, void* data, size_t size);
  // One MPI_Testsome; records what completed. Errors: kInternal.
  absl::Status Poll();

  const MPI_Comm comm_;
  const int tag_;
  const size_t max_message_;
  std::vector<Message> messages_;
  std::vector<MPI_Request> requests_;  // [i] belongs to messages_[i]; MPI_REQUEST_NULL when done
};

}  // namespace shardkit::mpi_backend

#endif  // SHARDKIT_BACKENDS_MPI_INTERNAL_REQUESTS_H_
