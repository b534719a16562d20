// Whether this binary is built with a sanitizer (--config=asan or --config=tsan), for tests whose
// time or memory bounds only hold without one.
//
//   if (!testing::kSanitized) EXPECT_LT(rss_growth, kMaxRssGrowth);
#ifndef SHARDKIT_TESTING_SANITIZERS_H_
#define SHARDKIT_TESTING_SANITIZERS_H_

namespace shardkit::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace shardkit::testing

#endif  // SHARDKIT_TESTING_SANITIZERS_H_
