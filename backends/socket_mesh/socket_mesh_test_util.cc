#include "backends/socket_mesh/socket_mesh_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "core/store/store_url.h"
#include "gtest/gtest.h"

namespace shardkit::socket_mesh_testing {

sockaddr_storage Loopback() {
  sockaddr_storage address{};
  auto* in = reinterpret_cast<sockaddr_in*>(&address);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

Store* KeptStore(const std::string& store_url) {
  static Store* const store = [&]() -> Store* {
    absl::StatusOr<std::unique_ptr<Store>> opened = OpenStore(store_url);
    EXPECT_TRUE(opened.ok()) << opened.status();
    return opened.ok() ? opened->release() : nullptr;
  }();
  return store;
}

std::unique_ptr<SocketMesh> ConnectMesh(const std::string& store_url, int rank, int world) {
  Store* store = KeptStore(store_url);
  if (store == nullptr) return nullptr;
  absl::StatusOr<std::unique_ptr<SocketMesh>> mesh =
      SocketMesh::Connect(*store, "test", rank, world, Loopback(), absl::Now() + absl::Seconds(10));
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  return mesh.ok() ? *std::move(mesh) : nullptr;
}

std::unique_ptr<SocketMesh> ConnectFullMesh(const std::string& store_url, int rank, int world) {
  std::unique_ptr<SocketMesh> mesh = ConnectMesh(store_url, rank, world);
  if (mesh == nullptr) return nullptr;
  std::vector<int> others;
  for (int peer = 0; peer < world; ++peer) {
    if (peer != rank) others.push_back(peer);
  }
  const absl::Status status = mesh->EnsureConnected(others, absl::Now() + absl::Seconds(10));
  EXPECT_TRUE(status.ok()) << status;
  return status.ok() ? std::move(mesh) : nullptr;
}

absl::Status ExchangeWords(SocketMesh& mesh, int rank, const std::vector<int>& peers, uint64_t call,
                           absl::Duration timeout) {
  std::vector<Word> out(peers.size()), in(peers.size());
  std::vector<SocketMesh::Send> sends;
  std::vector<SocketMesh::Recv> recvs;
  for (size_t i = 0; i < peers.size(); ++i) {
    out[i] = {static_cast<uint64_t>(rank), static_cast<uint64_t>(peers[i])};
    sends.push_back({peers[i], &out[i], sizeof(Word)});
    recvs.push_back({peers[i], &in[i], sizeof(Word)});
  }
  absl::Status status = mesh.Exchange(sends, recvs, absl::Now() + timeout, call);
  for (size_t i = 0; status.ok() && i < peers.size(); ++i) {
    EXPECT_EQ(in[i], (Word{static_cast<uint64_t>(peers[i]), static_cast<uint64_t>(rank)}))
        << "from rank " << peers[i];
  }
  return status;
}

}  // namespace shardkit::socket_mesh_testing
