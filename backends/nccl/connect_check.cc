// A rank program for nccl_launch_test: connects with the SHARDKIT_* environment that
// `shardkit launch` sets, runs one Barrier and prints "connected <backend> <rank>/<size>", or
// prints the error and exits 1. No CUDA call happens before Connect.
#include <iostream>
#include <memory>

#include "core/comm/connect.h"

int main() {
  absl::StatusOr<std::unique_ptr<shardkit::Communicator>> comm = shardkit::ConnectFromEnv();
  absl::Status status = comm.ok() ? (*comm)->Barrier() : comm.status();
  if (!status.ok()) {
    std::cerr << "connect_check: " << status << std::endl;
    return 1;
  }
  std::cout << "connected " << (*comm)->backend() << " " << (*comm)->rank() << "/"
            << (*comm)->world_size() << std::endl;
  return 0;
}
