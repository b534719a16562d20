#!/usr/bin/env bash
# Bazel's --workspace_status_command (.bazelrc): the source revision that goes into shardkit's
# build id (//core/comm:build_id). Only the STABLE_ key below is read; the build id's genrule
# reruns when it changes, and what depends on its output is rebuilt only when the id changes.
#   a git checkout:      the commit, plus "-dirty" when tracked files differ from it
#   no git (a tarball):  "tree-" + a SHA-256 of the sources of core/ and backends/
set -uo pipefail
if revision=$(git rev-parse HEAD 2>/dev/null); then
  [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || revision="$revision-dirty"
else
  revision="tree-$(find core backends -type f \( -name '*.cc' -o -name '*.h' -o -name BUILD.bazel \) \
    -print0 | LC_ALL=C sort -z | xargs -0 cat | sha256sum | cut -c1-16)"
fi
echo "STABLE_SHARDKIT_REVISION $revision"
