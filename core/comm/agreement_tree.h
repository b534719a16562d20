// The binomial tree the agreement all-gathers over (core/comm/internal/call_agreement.h): rank 0
// is the root, rank r's parent is r without its lowest set bit, its children are r + 2^k for every
// 2^k below that bit (every 2^k < n for the root), and its subtree is the rank range
// [r, SubtreeEnd(r, n)). Public so that tests and benchmarks can say which control connections a
// rank holds.
#ifndef SHARDKIT_CORE_COMM_AGREEMENT_TREE_H_
#define SHARDKIT_CORE_COMM_AGREEMENT_TREE_H_

#include <algorithm>
#include <vector>

namespace shardkit {

// Rank r's parent; -1 for the root.
inline int TreeParent(int r) { return r == 0 ? -1 : r - (r & -r); }

// One past the last rank of r's subtree in a world of n.
inline int SubtreeEnd(int r, int n) { return r == 0 ? n : std::min(r + (r & -r), n); }

// Rank r's children in a world of n, nearest first.
inline std::vector<int> TreeChildren(int r, int n) {
  std::vector<int> children;
  const int span = r == 0 ? n : (r & -r);
  for (int step = 1; step < span && r + step < n; step *= 2) children.push_back(r + step);
  return children;
}

// Rank r's parent and children: the peers of its agreement.
inline std::vector<int> TreePeers(int r, int n) {
  std::vector<int> peers = TreeChildren(r, n);
  if (r != 0) peers.push_back(TreeParent(r));
  return peers;
}

}  // namespace shardkit

#endif  // SHARDKIT_CORE_COMM_AGREEMENT_TREE_H_
