// libshardkit_backend_abi2.so: a plugin of a future ABI version (2, with a larger struct), for the
// test that the host refuses it after reading only the struct's fixed prefix.
#include "core/comm/backend_plugin.h"

extern "C" __attribute__((visibility("default"))) const ShardkitBackendPlugin*
ShardkitGetBackendPlugin() {
  struct Future {
    ShardkitBackendPlugin v1;
    void* added_in_v2;
  };
  static Future* future = [] {
    auto* f = new Future{};
    f->v1.struct_size = sizeof(Future);
    f->v1.abi_version = 2;
    f->v1.name = "abi2";
    return f;
  }();
  return &future->v1;
}
