"""Reproduction of the Warden bug behind go-zookeeper's TestIntegration_NoQuorum failure.

Fixed in commits 5d9219c and 3f779b7: Warden now behaves as ZooKeeper does below; the script stays as a
regression check. What follows describes the behaviour before the fix.

A 3-server ensemble (tickTime=500) on 127.0.0.1; a client with a 4 s session connected to one
server; the two other servers are SIGKILLed, so the client's server is alone without quorum for
8 s (twice the session timeout); one of the killed servers is restarted and, as soon as both
live servers answer `srvr` with a Mode again, a second handle resumes the session (its id and
password) on the client's server. ZooKeeper 3.9.5 gives the session back (SAME): no session expires while
there is no quorum. Warden, when the server left alone is the Raft leader, expires it locally
while alone ("session expired: its client was silent for its whole timeout", "a cleanup was not
proposed; the next leader redoes it") and, once the quorum is back under the same leader and
term, refuses the resume ("refused a session: session 0x... is expired or its password is
wrong"): the client sees its session LOST and gets a new one. With `--survivor follower` (the
client's server is a follower, the leader is killed) Warden keeps the session too.

    .cache/kazoo/venv/bin/python scripts/compat/repro/leader_alone_keeps_sessions.py \
        target/release/warden warden [--survivor leader|follower]
    .cache/kazoo/venv/bin/python scripts/compat/repro/leader_alone_keeps_sessions.py \
        scripts/zookeeper/run.sh zookeeper

Needs kazoo (the kazoo compat suite's venv has it). Prints SAME or LOST; exit status 0 iff SAME.
Every server is started by this script and stopped by PID; the servers' logs are kept in the
printed temporary directory.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from kazoo.client import KazooClient


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def srvr(port):
    try:
        with socket.create_connection(("127.0.0.1", port), 1) as s:
            s.sendall(b"srvr")
            out = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    return out.decode()
                out += chunk
    except OSError:
        return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("kind", choices=("warden", "zookeeper"))
    ap.add_argument("--survivor", choices=("leader", "follower"), default="leader")
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="leader-alone-")
    print("servers' directories and logs in", base)
    ports = {i: (free_port(), free_port(), free_port()) for i in (1, 2, 3)}
    procs = {}

    def start(i):
        d = os.path.join(base, str(i))
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        with open(os.path.join(d, "data", "myid"), "w") as f:
            f.write("%d\n" % i)
        cfg = ["tickTime=500", "initLimit=10", "syncLimit=5", "dataDir=%s/data" % d,
               "clientPort=%d" % ports[i][0], "clientPortAddress=127.0.0.1",
               "4lw.commands.whitelist=*"]
        cfg += ["server.%d=127.0.0.1:%d:%d" % (j, ports[j][1], ports[j][2]) for j in (1, 2, 3)]
        with open(os.path.join(d, "zoo.cfg"), "w") as f:
            f.write("\n".join(cfg) + "\n")
        cfg_path = os.path.join(d, "zoo.cfg")
        cmd = ([args.binary, "server", "--zoo-cfg", cfg_path] if args.kind == "warden"
               else [args.binary, cfg_path])
        log = open(os.path.join(d, "server.log"), "ab")
        procs[i] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    try:
        for i in (1, 2, 3):
            start(i)
        deadline = time.monotonic() + 60
        while True:
            modes = {i: srvr(ports[i][0]) for i in (1, 2, 3)}
            if all("Mode:" in m for m in modes.values()):
                break
            if time.monotonic() > deadline:
                sys.exit("the ensemble did not serve within 60 s")
            time.sleep(0.2)
        mine = [i for i, m in modes.items() if "Mode: %s" % args.survivor in m][0]
        others = [i for i in (1, 2, 3) if i != mine]
        print("client on server %d (%s)" % (mine, args.survivor))
        # The session's owner is a child process, SIGKILLed once the session exists, so that
        # nothing but the second handle below ever touches the session again.
        owner = subprocess.Popen(
            [sys.executable, "-c",
             "import sys, time\n"
             "from kazoo.client import KazooClient\n"
             "zk = KazooClient(hosts=sys.argv[1], timeout=4.0)\n"
             "zk.start(timeout=10)\n"
             "print('%d %s' % (zk.client_id[0], zk.client_id[1].hex()), flush=True)\n"
             "time.sleep(3600)\n",
             "127.0.0.1:%d" % ports[mine][0]],
            stdout=subprocess.PIPE, text=True)
        sid, password = owner.stdout.readline().split()
        sid, password = int(sid), bytes.fromhex(password)
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        print("session 0x%x (its client process SIGKILLed)" % sid)
        for i in others:
            procs[i].send_signal(signal.SIGKILL)
            procs[i].wait()
        print("SIGKILLed servers %s; server %d alone for 8 s" % (others, mine))
        time.sleep(8)
        start(others[0])
        print("restarted server %d" % others[0])
        # As soon as both live servers serve again, a second handle resumes the session (id and
        # password) on the same server: no client backoff in the way, the session's timeout
        # cannot have run out since the quorum came back.
        deadline = time.monotonic() + 60
        while not all("Mode:" in srvr(ports[i][0]) for i in (mine, others[0])):
            if time.monotonic() > deadline:
                sys.exit("the quorum did not come back within 60 s")
            time.sleep(0.05)
        back = time.monotonic()
        print("quorum back: %s" % {i: srvr(ports[i][0]).split("Mode: ")[1].split()[0]
                                   for i in (mine, others[0])})
        zk2 = KazooClient(hosts="127.0.0.1:%d" % ports[mine][0], timeout=4.0,
                          client_id=(sid, password), connection_retry=None)
        try:
            zk2.start(timeout=5)
            now = zk2.client_id[0]
        except Exception as e:  # the resume refused: kazoo reports an expired session
            print("resume failed: %r" % e)
            now = 0
        print("resume took %.1f s after the quorum was back" % (time.monotonic() - back))
        verdict = "SAME" if now == sid else "LOST"
        print("session on resume 0x%x (was 0x%x): %s" % (now, sid, verdict))
        zk2.stop()
        zk2.close()
        return 0 if verdict == "SAME" else 1
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
