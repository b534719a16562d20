#!/usr/bin/env python3
"""Multi-host over Redis and over the tcp:// store, on one machine: two "hosts" are two anonymous
network namespaces joined by a veth pair (test addresses 192.0.2.1 and 192.0.2.2, RFC 5737, which
exist only inside them). First a real redis-server runs in host A (skipped if not installed) and
each host runs `shardkit launch --nproc 2 --world 4 --rank-offset 0|2 --store
redis://192.0.2.1:PORT -- shardkit shard ...`; then the same with `--store tcp://192.0.2.1:29500`,
served by host A's launcher (host A binds Gloo with SHARDKIT_HOSTNAME, host B with
SHARDKIT_IFNAME); then over tcp:// again with `--backend ucx` (UCX_TLS=tcp,self: each host has a
PID namespace of its own); `shardkit gather` must give back the checkpoint each time.

Nothing is left behind, even if this test is killed: each host is `unshare --net --pid --fork
--kill-child` (its pid namespace dies with it, and every process entered into it with it), the
unshare processes die with this one (PR_SET_PDEATHSIG), and the veth pair lives only inside the
namespaces. Where namespaces cannot be made it records that it skipped, and why, and exits 0
(skip_test: tools/test_summary.py counts it as skipped, not passed)."""

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (BIN, TMP, check, finish, read_safetensors, skip,  # noqa: E402
                                skip_test, write_safetensors)

SEARCH_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/bin:/bin"
ADDRESS = {"a": "192.0.2.1", "b": "192.0.2.2"}
LINK = {"a": "shk-a", "b": "shk-b"}
REDIS_PORT = 6379
TCP_PORT = 29500  # the tcp:// store host A's launcher serves (nothing else is in the namespace)
PR_SET_PDEATHSIG = 1
RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "shardkit")

# Under --config=asan: LeakSanitizer reads /proc/<pid>/task, which inside a fresh pid namespace
# (with the host's /proc mounted) names another process, so it aborts with "Can't open
# /proc/N/task". Leak checking of these same binaries runs in every other asan test; here it is
# turned off, the rest of ASan/UBSan stays on.
if "detect_leaks=1" in os.environ.get("ASAN_OPTIONS", ""):
    os.environ["ASAN_OPTIONS"] = os.environ["ASAN_OPTIONS"].replace("detect_leaks=1",
                                                                    "detect_leaks=0")


def tool(name):
    return shutil.which(name, path=SEARCH_PATH)


def die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def cannot_run(reason):
    skip_test("multi-host", reason)


class Host:
    """An anonymous network + pid + mount namespace, held by `unshare ... sleep`."""

    def __init__(self, name):
        self.name = name
        self.holder = subprocess.Popen(
            # --mount: connect() mounts /sys anew there (see there).
            [tool("unshare"), "--net", "--pid", "--mount", "--fork", "--kill-child", "sleep",
             "3600"],
            preexec_fn=die_with_parent, stderr=subprocess.PIPE)
        self.pid = self.holder.pid  # in the new network namespace (its child is in the pid one)
        self.init = None
        deadline = time.time() + 5
        while self.init is None and time.time() < deadline and self.holder.poll() is None:
            try:
                with open(f"/proc/{self.pid}/task/{self.pid}/children") as f:
                    children = f.read().split()
                self.init = int(children[0]) if children else None
            except OSError:
                pass
            time.sleep(0.01)
        if self.init is None:
            err = self.holder.stderr.read().decode() if self.holder.poll() is not None else ""
            self.close()
            cannot_run(f"cannot create a network namespace with unshare: {err.strip() or 'no child'}")

    def argv(self, args, pid_namespace=True):
        """`args` run inside this host: its network namespace, and its pid namespace (so that
        they die with it) unless they must see this machine's pids."""
        return ([tool("nsenter"), "-t", str(self.init), "-n", "-m"] +
                (["-p"] if pid_namespace else []) + ["--"] + args)

    def run(self, args):
        """A short configuration command (network namespace only: `ip ... netns PID`)."""
        r = subprocess.run(self.argv(args, pid_namespace=False), capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"host {self.name}: {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def spawn(self, args, env=None, **kwargs):
        return subprocess.Popen(self.argv(args), env=env, preexec_fn=die_with_parent,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                **kwargs)

    def close(self):
        if self.holder.poll() is None:
            self.holder.kill()
        self.holder.wait()


def connect(a, b):
    """A veth pair between the hosts, made inside host A and one end moved into host B by PID."""
    ip = tool("ip")
    a.run([ip, "link", "add", LINK["a"], "type", "veth", "peer", "name", LINK["b"], "netns",
           str(b.init)])
    for host in (a, b):
        # No IPv6 link-local address: Gloo binding by interface must find the IPv4 one.
        host.run(["sh", "-c", "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 || true"])
        host.run([ip, "link", "set", "lo", "up"])
        host.run([ip, "addr", "add", ADDRESS[host.name] + "/24", "dev", LINK[host.name]])
        host.run([ip, "link", "set", LINK[host.name], "up"])
        # UCX finds network devices in /sys/class/net, which lists the devices of the namespace
        # that mounted /sys: this machine's, unless mounted anew in the host's own.
        host.run(["mount", "-t", "sysfs", "sysfs", "/sys"])
    # UCX takes only devices that are up and running: wait for both ends' carrier.
    deadline = time.time() + 10
    for host in (a, b):
        state = f"/sys/class/net/{LINK[host.name]}/operstate"
        while host.run(["cat", state]).strip() != "up" and time.time() < deadline:
            time.sleep(0.05)


def start_redis(a):
    server = a.spawn([tool("redis-server"), "--bind", ADDRESS["a"], "--port", str(REDIS_PORT),
                      "--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", TMP])
    deadline = time.time() + 10
    while time.time() < deadline:
        r = subprocess.run(a.argv([tool("redis-cli"), "-h", ADDRESS["a"], "-p", str(REDIS_PORT),
                                   "ping"]), capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return server
        time.sleep(0.05)
    raise RuntimeError("redis-server did not come up in host a")


def shard_across(a, b, store, plan, checkpoint, tensors, backend="gloo"):
    """`shardkit shard` on 4 ranks, 2 per host, through `store`; `gather` checks the result."""
    scheme = store.split(":")[0] + ("" if backend == "gloo" else "-" + backend)
    out = os.path.join(TMP, f"shards-{scheme}")
    bind = {"a": ("SHARDKIT_HOSTNAME", ADDRESS["a"]), "b": ("SHARDKIT_IFNAME", LINK["b"])}
    launchers = {}
    start = time.time()
    for host, offset in ((a, 0), (b, 2)):
        env = dict(os.environ)
        env.pop("SHARDKIT_HOSTNAME", None)
        env.pop("SHARDKIT_IFNAME", None)
        key, value = bind[host.name]
        env[key] = value
        if backend == "ucx":
            # Each host has a PID namespace of its own: UCX's shared memory and CMA find peers
            # by PID, which means another process there, so only TCP (docs/communication.md).
            env["UCX_TLS"] = "tcp,self"
            env["SHARDKIT_PLUGIN_PATH"] = os.path.join(RUNFILES, "backends/ucx")
        launchers[host.name] = host.spawn(
            [BIN, "launch", "--nproc", "2", "--world", "4", "--rank-offset", str(offset),
             "--store", store, "--timeout", "60", "--", BIN, "shard", "--plan", plan,
             "--checkpoint", checkpoint, "--out", out, "--backend", backend], env=env)
    for name, launcher in launchers.items():
        stdout, stderr = launcher.communicate(timeout=120)
        check(launcher.returncode == 0,
              f"{scheme}: host {name}: launcher exit {launcher.returncode}:\n{stdout}{stderr}")
        if name == "a":
            print(stderr, flush=True)
    print(f"{scheme}: sharded across 2 namespaces in {time.time() - start:.2f} s", flush=True)
    for rank in range(4):
        check(os.path.exists(os.path.join(out, f"rank-{rank:05d}.safetensors")),
              f"{scheme}: rank {rank}'s file is missing")
    gathered = os.path.join(TMP, f"gathered-{scheme}.safetensors")
    r = subprocess.run([BIN, "gather", "--in", out, "--out", gathered], capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 0, f"{scheme}: gather: {r.stderr}")
    if r.returncode == 0:
        _, metadata, back = read_safetensors(gathered)
        check(back == {k: (d, s, bytes(x)) for k, (d, s, x) in tensors.items()},
              f"{scheme}: gathered tensors differ from the checkpoint")
        check(metadata == {"run": "multihost"}, f"{scheme}: metadata: {metadata}")


def main():
    for name in ("unshare", "nsenter", "ip"):
        if tool(name) is None:
            cannot_run(f"{name} is not installed")
    if os.geteuid() != 0:
        cannot_run("creating network namespaces needs root")
    blob = bytes((i * 7) & 0xFF for i in range(1024 * 256 * 4))
    tensors = {"w": ("F32", [1024, 256], blob), "b": ("F32", [4], bytes(range(16)))}
    checkpoint = os.path.join(TMP, "model.safetensors")
    write_safetensors(checkpoint, tensors, metadata={"run": "multihost"})
    plan = os.path.join(TMP, "plan.json")
    with open(plan, "w") as f:
        f.write('{"rules": [{"match": "w", "spec": {"type": "chunk", "dim": 0, '
                '"placements": {"ranks": "all"}}}]}')
    hosts = []
    try:
        hosts = [Host("a"), Host("b")]
        a, b = hosts
        try:
            connect(a, b)
        except RuntimeError as e:
            cannot_run(f"cannot connect the namespaces: {e}")
        if tool("redis-server") and tool("redis-cli"):
            start_redis(a)
            shard_across(a, b, f"redis://{ADDRESS['a']}:{REDIS_PORT}", plan, checkpoint, tensors)
        else:
            skip("redis", "redis-server is not installed")
        # No Redis: host A's launcher serves the store itself (it holds rank 0).
        shard_across(a, b, f"tcp://{ADDRESS['a']}:{TCP_PORT}", plan, checkpoint, tensors)
        # The same over UCX (TCP between the hosts, and within each: separate PID namespaces).
        shard_across(a, b, f"tcp://{ADDRESS['a']}:{TCP_PORT + 1}", plan, checkpoint, tensors,
                     backend="ucx")
    finally:
        for host in hosts:
            host.close()
    finish("multi-host")


if __name__ == "__main__":
    main()
