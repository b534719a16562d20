#!/usr/bin/env bash
# `shardkit bench` end to end (not timed): for each strategy, 2 ranks x 1 MiB x 2 repeats print
# exactly one unprefixed JSON line per rank with the contract's keys (then the scaling ones: start-up,
# agreement times, connections; then the device), and a non-source rank
# receives exactly its shard's bytes (512 KiB) per round; the source sends exactly the others'.
# copy moves nothing between ranks: each rank copies its own chunk (512 KiB) on its device.
# reshard (rows to columns over the same 2 ranks) sends each rank's quarter the other holds
# (256 KiB) and receives as much.
set -u
bin="$TEST_SRCDIR/shardkit/integration/shardkit"
export TMPDIR="$TEST_TMPDIR"
failures=0
for strategy in scatter broadcast raw copy reshard; do
  out=$("$bin" bench --nproc 2 --mib 1 --repeats 2 --strategy "$strategy" 2>"$TEST_TMPDIR/err")
  rc=$?
  [ $rc = 0 ] || { echo "FAIL $strategy: exit $rc: $(cat "$TEST_TMPDIR/err")"; failures=$((failures + 1)); continue; }
  python3 - "$strategy" "$out" <<'PY' || failures=$((failures + 1))
import json, sys
strategy, out = sys.argv[1], sys.argv[2]
keys = ["rank", "world", "mib", "strategy", "median_s", "min_s", "baseline_rss_mib",
        "peak_rss_mib", "bytes_sent", "bytes_received", "agree_median_s"]
extra = ["agree_max_s", "check_median_s", "agree_begin_us", "agree_end_us", "connections",
         "startup_s", "device"]
lines = out.splitlines()
assert len(lines) == 2, f"{strategy}: expected 2 lines, got {out!r}"
rows = {}
for line in lines:
    row = json.loads(line)  # unprefixed: each line is JSON by itself
    # The contract's keys in order, then the scaling ones (docs/cli.md).
    assert list(row) == keys + extra, f"{strategy}: keys {list(row)}"
    assert row["startup_s"] > 0 and row["agree_max_s"] >= row["agree_median_s"], row
    # Two ranks: one control connection (agreement, peer watch) and one Gloo pair each; copy
    # never sends, so its Gloo pair (connected on first use) is never made; reshard's rounds add
    # the payload mesh's connection.
    assert row["connections"] == {"copy": 1, "reshard": 3}.get(strategy, 2), row
    assert 0 <= row["agree_end_us"] - row["agree_begin_us"] < 60e6, row
    assert (row["agree_begin_us"] == 0) == (strategy in ("raw", "copy", "reshard")), row
    assert row["device"] == "cpu", row  # Gloo moves host memory
    assert row["world"] == 2 and row["mib"] == 1 and row["strategy"] == strategy, row
    assert 0 < row["min_s"] <= row["median_s"], row
    assert 0 < row["baseline_rss_mib"] <= row["peak_rss_mib"], row
    assert row["agree_median_s"] >= 0, row
    rows[row["rank"]] = row
shard = 512 * 1024
full = 1024 * 1024
if strategy == "reshard":
    for r in (0, 1):
        assert rows[r]["bytes_sent"] == rows[r]["bytes_received"] == shard // 2, rows[r]
    print(f"ok {strategy}")
    sys.exit(0)
expected = full if strategy == "broadcast" else shard
assert rows[1]["bytes_received"] == expected, (strategy, rows[1])
assert rows[1]["bytes_sent"] == 0, rows[1]
if strategy == "copy":  # each rank copies its own chunk; nothing is sent
    assert rows[0]["bytes_sent"] == 0 and rows[0]["bytes_received"] == shard, rows[0]
else:
    assert rows[0]["bytes_sent"] == expected and rows[0]["bytes_received"] == 0, rows[0]
print(f"ok {strategy}")
PY
done
"$bin" bench --nproc 2 --mib 1 --strategy bogus >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: bad strategy must exit 2"; failures=$((failures + 1)); }
[ $failures = 0 ] && echo PASS
exit $failures
