#include "backends/mpi/internal/requests.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/base/deadline.h"
#include "core/base/rank_text.h"

namespace shardkit::mpi_backend {

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return absl::StrCat("MPI error ", code);
  }
  return absl::StrCat("MPI error ", code, ": ", std::string(text, length));
}

RequestSet::RequestSet(MPI_Comm comm, int tag, size_t max_message)
    : comm_(comm), tag_(tag), max_message_(max_message) {
  SHARDKIT_CHECK(max_message_ > 0 && max_message_ <= kMaxMessageBytes) << max_message_;
}

RequestSet::~RequestSet() {
  SHARDKIT_CHECK(pending() == 0) << "an MPI exchange went away with " << pending()
                                 << " messages pending";
}

absl::Status RequestSet::PostRecv(int peer, void* data, size_t size) {
  return Post(peer, /*recv=*/true, data, size);
}

absl::Status RequestSet::PostSend(int peer, const void* data, size_t size) {
  // MPI_Isend takes a const buffer; one Post for both directions.
  return Post(peer, /*recv=*/false, const_cast<void*>(data), size);
}

absl::Status RequestSet::Post(int peer, bool recv, void* data, size_t size) {
  uint8_t* bytes = static_cast<uint8_t*>(data);
  for (size_t at = 0; at < size; at += max_message_) {
    const int count = static_cast<int>(std::min(max_message_, size - at));
    MPI_Request request = MPI_REQUEST_NULL;
    const int code = recv ? MPI_Irecv(bytes + at, count, MPI_BYTE, peer, tag_, comm_, &request)
                          : MPI_Isend(bytes + at, count, MPI_BYTE, peer, tag_, comm_, &request);
    if (code != MPI_SUCCESS) {
      return absl::InternalError(absl::StrCat(recv ? "MPI_Irecv from" : "MPI_Isend to", " peer ",
                                              peer, ": ", MpiErrorText(code)));
    }
    messages_.push_back({peer, recv, static_cast<size_t>(count)});
    requests_.push_back(request);
  }
  return absl::OkStatus();
}

absl::Status RequestSet::Poll() {
  std::vector<int> indices(requests_.size());
  std::vector<MPI_Status> statuses(requests_.size());
  int completed = 0;
  const int code = MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &completed,
                                indices.data(), statuses.data());
  if (completed == MPI_UNDEFINED) completed = 0;  // no active request left
  for (int i = 0; i < completed; ++i) {
    Message& message = messages_[indices[i]];
    const int error = code == MPI_ERR_IN_STATUS ? statuses[i].MPI_ERROR : MPI_SUCCESS;
    if (error != MPI_SUCCESS) {
      return absl::InternalError(absl::StrCat(message.recv ? "receiving from" : "sending to",
                                              " peer ", message.peer, ": ", MpiErrorText(error)));
    }
    message.done = true;
  }
  if (code != MPI_SUCCESS && code != MPI_ERR_IN_STATUS) {
    return absl::InternalError(absl::StrCat("MPI_Testsome: ", MpiErrorText(code)));
  }
  return absl::OkStatus();
}

absl::Status RequestSet::WaitAll(absl::Time deadline) {
  const absl::Time start = absl::Now();
  PollBackoff backoff;
  while (pending() > 0) {
    if (absl::Status status = Poll(); !status.ok()) return status;
    if (pending() == 0) break;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "timed out after ", absl::FormatDuration(absl::Now() - start), ": ", DescribeProgress()));
    }
    backoff.Pause();
  }
  return absl::OkStatus();
}

size_t RequestSet::pending() const {
  return std::count_if(messages_.begin(), messages_.end(),
                       [](const Message& m) { return !m.done; });
}

std::string RequestSet::DescribeProgress() const {
  // One entry per peer and direction: a transfer cut into several messages counts once.
  std::map<std::pair<int, bool>, std::pair<size_t, size_t>> transfers;  // -> (size, done bytes)
  for (const Message& m : messages_) {
    std::pair<size_t, size_t>& t = transfers[{m.peer, m.recv}];
    t.first += m.size;
    t.second += m.done ? m.size : 0;
  }
  TransferProgress progress;
  for (const auto& [key, t] : transfers) {
    if (key.second) {
      progress.AddRecv(key.first, t.first, t.second);
    } else {
      progress.AddSend(key.first, t.first, t.second);
    }
  }
  return progress.ToString();
}

}  // namespace shardkit::mpi_backend
