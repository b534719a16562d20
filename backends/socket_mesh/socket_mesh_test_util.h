// Helpers of the SocketMesh tests (socket_mesh_test.cc, connect_test.cc): ranks are forked
// processes (testing/multiprocess.h) meshed over 127.0.0.1 through a FileStore.
#ifndef SHARDKIT_BACKENDS_SOCKET_MESH_CONTROL_MESH_TEST_UTIL_H_
#define SHARDKIT_BACKENDS_SOCKET_MESH_CONTROL_MESH_TEST_UTIL_H_

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backends/socket_mesh/socket_mesh.h"
#include "core/store/store.h"

namespace shardkit::socket_mesh_testing {

// 127.0.0.1, port 0.
sockaddr_storage Loopback();

// The smallest message the mesh carries.
using Word = std::array<uint64_t, 2>;
static_assert(sizeof(Word) == SocketMesh::kMinMessage);

// The store of this rank's process (each rank is a forked child), open for the process's life: a
// mesh reads peers' addresses from it whenever it connects them. Null (and a test failure) if it
// does not open.
Store* KeptStore(const std::string& store_url);

// This rank's mesh under the key prefix "test", or null (and a test failure).
std::unique_ptr<SocketMesh> ConnectMesh(const std::string& store_url, int rank, int world);

// ConnectMesh, then connects every peer at once (what Connect did before connections were made on
// demand): for the cases about peers that leave before any exchange.
std::unique_ptr<SocketMesh> ConnectFullMesh(const std::string& store_url, int rank, int world);

// Sends every peer in `peers` the word {rank, peer} and receives theirs, checking it.
absl::Status ExchangeWords(SocketMesh& mesh, int rank, const std::vector<int>& peers,
                           uint64_t call = 0, absl::Duration timeout = absl::Seconds(10));

}  // namespace shardkit::socket_mesh_testing

#endif  // SHARDKIT_BACKENDS_SOCKET_MESH_CONTROL_MESH_TEST_UTIL_H_
