#!/usr/bin/env python3
"""Golden-vector driver for kazoo 2.11.0, run through capture_proxy.py by capture.sh.

    kazoo_driver.py --proxy 127.0.0.1:P --direct 127.0.0.1:Z --control C

Runs in the venv capture.sh makes (kazoo==2.11.0). Every step states the outcome it expects;
any other outcome exits with status 1.

Verified here: kazoo 2.11.0 has no setWatches (101/105) at all. On a lost connection it drops its
watchers (calling each with a NONE event) and after reconnecting to the same session it re-sends
only its auth (xid -4); kazoo_reconnect.txt shows this.
"""

import argparse
import logging
import queue
import socket
import sys
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NoNodeError, NodeExistsError, NotEmptyError
from kazoo.security import make_digest_acl, OPEN_ACL_UNSAFE

WAIT = 15.0


class Control:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.f = self.s.makefile("r")

    def cmd(self, line):
        line = line.replace("\n", " ").replace("\r", " ")
        self.s.sendall((line + "\n").encode())
        resp = self.f.readline().strip()
        if not resp.startswith("OK"):
            raise SystemExit("control: %r -> %r" % (line, resp))
        return resp


class Driver:
    def __init__(self, args):
        self.args = args
        self.ctl = Control(args.control)

    def comment(self, s):
        print("  " + s, flush=True)
        self.ctl.cmd("COMMENT " + s)

    def scenario(self, name, *description):
        print("== " + name, flush=True)
        self.ctl.cmd("SCENARIO " + name)
        self.comment("client: kazoo 2.11.0 (python %d.%d)" % sys.version_info[:2])
        for d in description:
            self.comment(d)

    def end(self):
        self.ctl.cmd("WAIT_CLOSED 15")
        self.ctl.cmd("END")

    def step(self, desc, fn, expect=None):
        self.comment("step: " + desc)
        try:
            v = fn()
        except Exception as e:  # noqa: BLE001 - we check the type below
            if expect is None or not isinstance(e, expect):
                raise SystemExit("FAIL %s: unexpected %r" % (desc, e))
            self.comment("result: error %s" % type(e).__name__)
            return None
        if expect is not None:
            raise SystemExit("FAIL %s: succeeded, expected %s" % (desc, expect.__name__))
        self.comment("result: %s" % (show(v),))
        return v

    def client(self, hosts, timeout=10.0):
        states = queue.Queue()
        zk = KazooClient(hosts=hosts, timeout=timeout, connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 0.5})
        zk.add_listener(lambda st: states.put(st))
        zk.start(timeout=WAIT)
        return zk, states

    @staticmethod
    def await_state(states, want):
        deadline = time.monotonic() + WAIT
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit("FAIL: state %s not reached" % want)
            try:
                st = states.get(timeout=left)
            except queue.Empty:
                continue
            if st == want:
                return

    def event(self, events, typ, path):
        try:
            ev = events.get(timeout=WAIT)
        except queue.Empty:
            raise SystemExit("FAIL: no %s event for %s" % (typ, path))
        if ev.type != typ or ev.path != path:
            raise SystemExit("FAIL: event %r, wanted %s %s" % (ev, typ, path))
        self.comment("event: %s %s" % (ev.type, ev.path))

    # ------------------------------------------------------------------ scenarios
    def basic(self):
        self.scenario(
            "kazoo_basic",
            "scenario: kazoo's handshake (45 bytes, readOnly byte present), create / create2 (include_data),",
            "get/set/exists/get_children(include_data -> getChildren2), watches, transaction (multi), auth, ACLs, sync")
        self.comment("connect: timeout=10.0")
        zk, states = self.client(self.args.proxy)
        self.comment("connected: sessionId=%#x" % zk.client_id[0])
        events = queue.Queue()
        self.step('create /kz "hello"', lambda: zk.create("/kz", b"hello"))
        self.step("create /kz/c2 include_data=True (create2, opcode 15)", lambda: zk.create("/kz/c2", b"c2", include_data=True))
        self.step("create /kz/es- ephemeral sequential", lambda: zk.create("/kz/es-", b"", ephemeral=True, sequence=True))
        self.step("create /kz again -> NodeExists", lambda: zk.create("/kz", b""), NodeExistsError)
        self.step("get /kz", lambda: zk.get("/kz"))
        self.step("get /kz/missing -> NoNode", lambda: zk.get("/kz/missing"), NoNodeError)
        self.step('set /kz "world" version=0', lambda: zk.set("/kz", b"world", version=0))
        self.step("set /kz version=0 again -> BadVersion", lambda: zk.set("/kz", b"x", version=0), BadVersionError)
        self.step("exists /kz", lambda: zk.exists("/kz"))
        self.step("exists /kz/w with watch (miss)", lambda: zk.exists("/kz/w", watch=events.put))
        self.step("create /kz/w (fires NodeCreated)", lambda: zk.create("/kz/w", b""))
        self.event(events, "CREATED", "/kz/w")
        self.step("get /kz/w with watch", lambda: zk.get("/kz/w", watch=events.put))
        self.step("set /kz/w (fires NodeDataChanged)", lambda: zk.set("/kz/w", b"1"))
        self.event(events, "CHANGED", "/kz/w")
        self.step("get_children /kz with watch (getChildren 8)", lambda: sorted(zk.get_children("/kz", watch=events.put)))
        self.step("delete /kz/w (fires NodeChildrenChanged)", lambda: zk.delete("/kz/w"))
        self.event(events, "CHILD", "/kz")
        self.step("get_children /kz include_data=True (getChildren2 12)", lambda: zk.get_children("/kz", include_data=True))

        def txn():
            t = zk.transaction()
            t.create("/kz/t", b"t")
            t.set_data("/kz/t", b"t1", version=0)
            t.check("/kz/t", 1)
            t.delete("/kz/t")
            return t.commit()

        self.step("transaction [create, set_data, check, delete] (multi 14)", txn)

        def bad_txn():
            t = zk.transaction()
            t.create("/kz/t2", b"")
            t.check("/kz", 99)
            return t.commit()

        self.step("transaction [create /kz/t2, check /kz v99] (fails: per-op results returned, no exception)", bad_txn)
        self.step("add_auth digest kazoo:pw (xid -4)", lambda: zk.add_auth("digest", "kazoo:pw"))
        acl = make_digest_acl("kazoo", "pw", all=True)
        self.step("create /kz/acl with [digest kazoo ALL]", lambda: zk.create("/kz/acl", b"", acl=[acl]))
        self.step("get_acls /kz/acl", lambda: zk.get_acls("/kz/acl"))
        self.step("set_acls /kz/acl [world anyone ALL] version=0", lambda: zk.set_acls("/kz/acl", OPEN_ACL_UNSAFE, version=0))
        self.step("sync /kz", lambda: zk.sync("/kz"))
        self.step("delete /kz -> NotEmpty", lambda: zk.delete("/kz"), NotEmptyError)
        self.step("delete /kz recursive=True (getChildren + deletes)", lambda: zk.delete("/kz", recursive=True))
        self.comment("step: stop + close (closeSession)")
        zk.stop()
        zk.close()
        self.end()

    def reconnect(self):
        self.scenario(
            "kazoo_reconnect",
            "scenario: a connection cut while kazoo holds watches and auth. kazoo reconnects to the same session",
            "(ConnectRequest with sessionId/passwd/lastZxidSeen), re-sends auth (xid -4) but sends NO setWatches:",
            "kazoo 2.11.0 drops its watchers on connection loss, so changes made meanwhile fire nothing")
        self.comment("connect: timeout=10.0")
        zk, states = self.client(self.args.proxy)
        other, _ = self.client(self.args.direct)
        self.comment("connected: sessionId=%#x" % zk.client_id[0])
        events = queue.Queue()
        self.step("add_auth digest kazoo:pw", lambda: zk.add_auth("digest", "kazoo:pw"))
        self.step("create /kzr", lambda: zk.create("/kzr", b"a"))
        self.step("get /kzr with watch", lambda: zk.get("/kzr", watch=events.put))
        self.step("exists /kzr/new with watch (miss)", lambda: zk.exists("/kzr/new", watch=events.put))
        self.comment("proxy: PAUSE, CUT; another client (not recorded) sets /kzr and creates /kzr/new; RESUME")
        self.ctl.cmd("PAUSE")
        self.ctl.cmd("CUT")
        self.await_state(states, KazooState.SUSPENDED)
        other.set("/kzr", b"changed")
        other.create("/kzr/new", b"")
        self.ctl.cmd("RESUME")
        self.await_state(states, KazooState.CONNECTED)
        self.comment("reconnected")
        time.sleep(1.0)
        got = []
        while not events.empty():
            ev = events.get()
            got.append("%s %s %s" % (ev.type, ev.state, ev.path))
        self.comment("watcher calls seen by kazoo (local, on connection loss): %s" % got)
        self.step("get /kzr", lambda: zk.get("/kzr"))
        self.comment("step: stop + close (closeSession)")
        zk.stop()
        zk.close()
        other.stop()
        other.close()
        self.end()


def show(v):
    if isinstance(v, tuple) and len(v) == 2 and hasattr(v[1], "czxid"):
        return "%r %s" % (v[0], show(v[1]))
    if hasattr(v, "czxid"):
        return ("ZnodeStat{czxid=%#x mzxid=%#x version=%d cversion=%d aversion=%d ephemeralOwner=%#x "
                "dataLength=%d numChildren=%d pzxid=%#x}" % (
                    v.czxid, v.mzxid, v.version, v.cversion, v.aversion, v.ephemeralOwner,
                    v.dataLength, v.numChildren, v.pzxid))
    if isinstance(v, list):
        return "[" + ", ".join(show(x) if hasattr(x, "czxid") else repr(x) for x in v) + "]"
    return repr(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--direct", required=True)
    ap.add_argument("--control", type=int, required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    d = Driver(args)
    d.basic()
    d.reconnect()


if __name__ == "__main__":
    main()
