// The behaviour every Store implementation must show, as a parameterised GoogleTest suite.
// An implementation's test instantiates it with a factory that makes a fresh, empty store:
//
//   INSTANTIATE_TEST_SUITE_P(File, StoreContractTest,
//                            ::testing::Values(StoreFactory{"file", &MakeFileStore}),
//                            StoreFactoryName);
//
// The factory returns a shared store; two calls on the same test must give independent stores.
#ifndef SHARDKIT_CORE_STORE_STORE_CONTRACT_TEST_H_
#define SHARDKIT_CORE_STORE_STORE_CONTRACT_TEST_H_

#include <memory>
#include <ostream>
#include <string>

#include "core/store/store.h"
#include "gtest/gtest.h"

namespace shardkit::testing {

struct StoreFactory {
  std::string name;
  std::shared_ptr<Store> (*make)();
};

inline void PrintTo(const StoreFactory& factory, std::ostream* os) { *os << factory.name; }

inline std::string StoreFactoryName(const ::testing::TestParamInfo<StoreFactory>& info) {
  return info.param.name;
}

class StoreContractTest : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    store_ = GetParam().make();
    if (store_ == nullptr) GTEST_SKIP() << "store " << GetParam().name << " is not available";
  }
  std::shared_ptr<Store> store_;
};

}  // namespace shardkit::testing

#endif  // SHARDKIT_CORE_STORE_STORE_CONTRACT_TEST_H_
