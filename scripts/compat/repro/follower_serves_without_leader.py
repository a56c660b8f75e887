"""Reproduction of the Warden behaviour behind go-zookeeper's TestIntegration_DNSHostProviderReconnect

Fixed in commits 5d9219c and 3aba12e: Warden now behaves as ZooKeeper does below; the script stays as a
regression check. What follows describes the behaviour before the fix.
failing now and then ("dnshostprovider_test.go:170: Create returned error: zk: connection closed").

A 3-server ensemble (tickTime=500) on 127.0.0.1; a client with a session on the leader; the
leader is SIGKILLed, and at once a second handle resumes that session (id and password) on a
follower and creates a znode, without retrying on ConnectionLoss (go-zookeeper does not retry a
request that was in flight when its connection closed).

ZooKeeper 3.9.5: the follower drops its clients and refuses them as soon as its connection to
the leader breaks, until a new leader is elected; the resume waits for that (~0.9 s here) and
the create succeeds. Warden: the follower still serves for up to an election timeout after the
leader's process is gone; it accepts the resume at once, forwards the create, finds the leader
unreachable ("forward channel to the leader closed: Connection refused"), closes the client's
connection ("closing connections with writes in flight: the channel to the leader closed") and
the create fails with ConnectionLoss.

    .cache/kazoo/venv/bin/python scripts/compat/repro/follower_serves_without_leader.py \
        target/release/warden warden
    .cache/kazoo/venv/bin/python scripts/compat/repro/follower_serves_without_leader.py \
        scripts/zookeeper/run.sh zookeeper

Prints OK or ConnectionLoss; exit status 0 iff the create succeeded. Every server is started by
this script and stopped by PID; their logs stay in the printed temporary directory.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

from kazoo.client import KazooClient

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from leader_alone_keeps_sessions import free_port, srvr  # noqa: E402


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("warden", "zookeeper"):
        sys.exit("usage: %s BINARY warden|zookeeper" % sys.argv[0])
    binary, kind = sys.argv[1], sys.argv[2]
    base = tempfile.mkdtemp(prefix="follower-serves-")
    print("servers' directories and logs in", base)
    ports = {i: (free_port(), free_port(), free_port()) for i in (1, 2, 3)}
    procs = {}
    try:
        for i in (1, 2, 3):
            d = os.path.join(base, str(i))
            os.makedirs(os.path.join(d, "data"))
            with open(os.path.join(d, "data", "myid"), "w") as f:
                f.write("%d\n" % i)
            cfg = ["tickTime=500", "initLimit=10", "syncLimit=5", "dataDir=%s/data" % d,
                   "clientPort=%d" % ports[i][0], "clientPortAddress=127.0.0.1",
                   "4lw.commands.whitelist=*"]
            cfg += ["server.%d=127.0.0.1:%d:%d" % (j, ports[j][1], ports[j][2]) for j in (1, 2, 3)]
            cfg_path = os.path.join(d, "zoo.cfg")
            with open(cfg_path, "w") as f:
                f.write("\n".join(cfg) + "\n")
            cmd = ([binary, "server", "--zoo-cfg", cfg_path] if kind == "warden"
                   else [binary, cfg_path])
            log = open(os.path.join(d, "server.log"), "ab")
            procs[i] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not all("Mode:" in srvr(ports[i][0]) for i in (1, 2, 3)):
            if time.monotonic() > deadline:
                sys.exit("the ensemble did not serve within 60 s")
            time.sleep(0.2)
        modes = {i: srvr(ports[i][0]).split("Mode: ")[1].split()[0] for i in (1, 2, 3)}
        leader = [i for i in modes if modes[i] == "leader"][0]
        follower = [i for i in modes if modes[i] != "leader"][0]

        zk = KazooClient(hosts="127.0.0.1:%d" % ports[leader][0], timeout=10.0)
        zk.start(timeout=10)
        zk.create("/before", b"x")
        client_id = zk.client_id
        procs[leader].send_signal(signal.SIGKILL)
        procs[leader].wait()
        t0 = time.monotonic()
        print("leader %d SIGKILLed; the session resumes on follower %d at once" % (leader, follower))
        zk2 = KazooClient(hosts="127.0.0.1:%d" % ports[follower][0], timeout=10.0,
                          client_id=client_id, command_retry=None)
        zk2.start(timeout=20)
        print("resumed after %.2f s (same session: %s)"
              % (time.monotonic() - t0, zk2.client_id[0] == client_id[0]))
        try:
            zk2.create("/after", b"y")
            verdict = "OK"
        except Exception as e:  # ConnectionLoss when the follower drops the connection
            verdict = repr(e)
        print("create: %s after %.2f s" % (verdict, time.monotonic() - t0))
        zk2.stop()
        zk2.close()
        zk.stop()
        zk.close()
        return 0 if verdict == "OK" else 1
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


if __name__ == "__main__":
    sys.exit(main())
