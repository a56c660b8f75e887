#!/usr/bin/env python3
"""Recording TCP proxy for ZooKeeper client connections (python3 stdlib only).

Listens on a loopback port, forwards every accepted client connection to the upstream
ZooKeeper server, and records each length-prefixed frame that crosses it, in each direction, in
the order the proxy saw it complete, into a golden-vector text file:

    # free-text comment lines
    C <hex>    client -> server frame: lowercase hex of the payload WITHOUT the 4-byte length
    S <hex>    server -> client frame, same

Bytes are forwarded unchanged and immediately (the proxy never reframes or delays them); the
frame parser only observes. A connection whose first four bytes look like a four-letter word
(ruok, srvr, ...) is forwarded but not recorded.

Which file a connection goes to is chosen on a line-based control port (one command per line,
each answered with one line "OK ..." or "ERR ..."):

    SCENARIO <name>    new client connections are recorded into <out-dir>/<name>.txt
                       (truncated); until the first SCENARIO, connections are forwarded only
    COMMENT <text>     append "# <text>" to the current scenario file, at this point in the
                       frame sequence (drivers annotate each step this way)
    CUT                close every open recorded connection (both sockets) now, so the client
                       sees a dropped connection and reconnects to the same session; a
                       "# proxy: connection cut" comment marks the spot
    PAUSE              stop accepting new client connections (connection attempts wait in
                       the listen backlog; a client's ConnectRequest waits in its socket)
    RESUME             accept again (a waiting client then gets through). PAUSE, CUT, change
                       the tree through another connection, RESUME makes a reconnect with
                       pending watch triggers deterministic.
    WAIT_CLOSED [secs] answer OK once no connection of the current scenario is open (ERR on
                       timeout, default 10 s)
    STATS              frames recorded so far in the current scenario, open connections
    END                close the current scenario file (after its connections are closed or
                       cut); new connections are then forwarded only
    QUIT               stop the proxy

When a side closes the TCP connection the proxy closes the other and notes it as
"# proxy: connection closed by client" (or "by server").

Reconnects: the second and later connections recorded into the same scenario file start with
a line "# reconnect"; the next C frame after it is again a ConnectRequest. If a connection of a
scenario opens while another of the same scenario is still open, it is recorded into
<name>.connN.txt instead (never interleaved), and a warning goes to stderr.

Usage:
    capture_proxy.py --upstream 127.0.0.1:2181 --out-dir DIR [--listen 127.0.0.1:0]
                     [--control 127.0.0.1:0] [--port-file FILE] [--header TEXT ...]

--port-file receives "<listen_port> <control_port>\\n" once both sockets are listening.
Each --header line is written as a comment at the top of every scenario file.
"""

import argparse
import os
import selectors
import socket
import sys
import time

MAX_FRAME = 64 * 1024 * 1024  # a bigger "length" means we are not looking at ZK framing


def log(msg):
    sys.stderr.write("capture_proxy: %s\n" % msg)
    sys.stderr.flush()


def parse_addr(s):
    host, _, port = s.rpartition(":")
    return host or "127.0.0.1", int(port)


class Recorder:
    """One scenario output file."""

    def __init__(self, path, name, headers):
        self.path = path
        self.name = name
        self.f = open(path, "w", encoding="ascii", newline="\n")
        for h in headers:
            self.comment(h)
        self.connections = 0  # how many connections were recorded here
        self.frames = 0
        self.open_conns = set()
        self.ended = False

    def line(self, s):
        self.f.write(s + "\n")
        self.f.flush()

    def comment(self, text):
        for part in str(text).splitlines() or [""]:
            self.line(("# " + part).rstrip())

    def frame(self, direction, payload):
        self.frames += 1
        self.line("%s %s" % (direction, payload.hex()))

    def maybe_close(self):
        if self.ended and not self.open_conns and not self.f.closed:
            self.f.close()


class Side:
    """Frame parser for one direction of one connection."""

    def __init__(self, direction):
        self.direction = direction
        self.buf = bytearray()
        self.broken = False

    def feed(self, data):
        """Append data and return the list of completed frame payloads."""
        if self.broken:
            return []
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            n = int.from_bytes(self.buf[:4], "big", signed=True)
            if n < 0 or n > MAX_FRAME:
                self.broken = True
                return out
            if len(self.buf) < 4 + n:
                break
            out.append(bytes(self.buf[4:4 + n]))
            del self.buf[:4 + n]
        return out


class Conn:
    def __init__(self, proxy, client, upstream, peer, recorder, number):
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.peer = peer
        self.recorder = recorder
        self.number = number
        self.sides = {"C": Side("C"), "S": Side("S")}
        self.first = True  # still deciding whether this is four-letter-word traffic
        self.flw = False
        self.pending = {client: bytearray(), upstream: bytearray()}  # bytes waiting to be written
        self.closed = False

    def other(self, sock):
        return self.upstream if sock is self.client else self.client

    def on_data(self, sock, data):
        direction = "C" if sock is self.client else "S"
        if direction == "C" and self.first:
            self.first = False
            head = data[:4]
            if len(head) >= 4 and head.isalpha() and head.islower():
                self.flw = True
        if self.recorder is not None and not self.flw:
            for payload in self.sides[direction].feed(data):
                self.recorder.frame(direction, payload)
            if self.sides[direction].broken:
                self.recorder.comment("proxy: unparseable framing from %s, recording stopped" % direction)
                log("%s: unparseable framing on connection %d" % (self.recorder.name, self.number))
                self.flw = True
        self.send(self.other(sock), data)

    def send(self, sock, data):
        buf = self.pending[sock]
        buf += data
        try:
            while buf:
                n = sock.send(buf)
                del buf[:n]
        except BlockingIOError:
            pass
        except OSError:
            self.close("send error")
            return
        if not self.closed:
            self.proxy.update_interest(self)

    def close(self, why):
        if self.closed:
            return
        self.closed = True
        for s in (self.client, self.upstream):
            try:
                self.proxy.sel.unregister(s)
            except Exception:
                pass
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.proxy.conns.discard(self)
        r = self.recorder
        if r is not None and not self.flw:
            if why in ("closed by client", "closed by server"):
                r.comment("proxy: connection %s" % why)
            for d, side in self.sides.items():
                if side.buf and not side.broken:
                    r.comment("proxy: %d trailing bytes from %s were not a whole frame" % (len(side.buf), d))
        if r is not None:
            r.open_conns.discard(self)
            r.maybe_close()


class Proxy:
    def __init__(self, args):
        self.args = args
        self.upstream = parse_addr(args.upstream)
        self.out_dir = args.out_dir
        os.makedirs(self.out_dir, exist_ok=True)
        self.sel = selectors.DefaultSelector()
        self.conns = set()
        self.recorder = None
        self.stop = False
        self.waiters = []  # (ctl, deadline)
        self.paused = False

        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(parse_addr(args.listen))
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ, ("accept", None))

        self.ctl_listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ctl_listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ctl_listener.bind(parse_addr(args.control))
        self.ctl_listener.listen(8)
        self.ctl_listener.setblocking(False)
        self.sel.register(self.ctl_listener, selectors.EVENT_READ, ("ctl_accept", None))

        lp = self.listener.getsockname()[1]
        cp = self.ctl_listener.getsockname()[1]
        log("listening on %s:%d, control on %s:%d, upstream %s:%d" % (
            self.listener.getsockname()[0], lp, self.ctl_listener.getsockname()[0], cp, *self.upstream))
        if args.port_file:
            tmp = args.port_file + ".tmp"
            with open(tmp, "w") as f:
                f.write("%d %d\n" % (lp, cp))
            os.replace(tmp, args.port_file)

    # ---- data path -------------------------------------------------------------------------
    def accept(self):
        try:
            client, peer = self.listener.accept()
        except BlockingIOError:
            return
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError as e:
            log("cannot reach upstream: %s" % e)
            client.close()
            return
        for s in (client, upstream):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rec = self.recorder
        number = 0
        if rec is not None and not rec.ended:
            if rec.open_conns:
                # Never interleave two connections in one file.
                rec.connections += 1
                number = rec.connections
                side_path = os.path.join(self.out_dir, "%s.conn%d.txt" % (rec.name, number))
                log("%s: connection %d overlaps an open one; recording it into %s" % (rec.name, number, side_path))
                side = Recorder(side_path, "%s.conn%d" % (rec.name, number), self.args.header)
                side.ended = True
                rec = side
                rec.connections = 1
            else:
                rec.connections += 1
                number = rec.connections
                if number > 1:
                    rec.line("# reconnect")
        else:
            rec = None
        c = Conn(self, client, upstream, peer, rec, number)
        if rec is not None:
            rec.open_conns.add(c)
        self.conns.add(c)
        self.sel.register(client, selectors.EVENT_READ, ("data", c))
        self.sel.register(upstream, selectors.EVENT_READ, ("data", c))

    def update_interest(self, c):
        for s in (c.client, c.upstream):
            ev = selectors.EVENT_READ
            if c.pending[s]:
                ev |= selectors.EVENT_WRITE
            try:
                self.sel.modify(s, ev, ("data", c))
            except (KeyError, ValueError):
                pass

    def on_sock(self, sock, mask, c):
        if c.closed:
            return
        if mask & selectors.EVENT_WRITE:
            c.send(sock, b"")
            if c.closed:
                return
        if mask & selectors.EVENT_READ:
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                who = "client" if sock is c.client else "server"
                # Flush what the other side still has to send, then close both.
                other = c.other(sock)
                if c.pending[other]:
                    other.setblocking(True)
                    try:
                        other.sendall(c.pending[other])
                    except OSError:
                        pass
                c.close("closed by " + who)
                return
            c.on_data(sock, data)

    # ---- control ---------------------------------------------------------------------------
    def ctl_accept(self):
        try:
            s, _ = self.ctl_listener.accept()
        except BlockingIOError:
            return
        s.setblocking(False)
        self.sel.register(s, selectors.EVENT_READ, ("ctl", bytearray()))

    def ctl_reply(self, s, text):
        s.setblocking(True)
        try:
            s.sendall((text + "\n").encode())
        except OSError:
            pass
        s.setblocking(False)

    def on_ctl(self, s, buf):
        try:
            data = s.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.sel.unregister(s)
            s.close()
            return
        buf += data
        while b"\n" in buf:
            line, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            self.command(s, line.decode("utf-8", "replace").rstrip("\r"))

    def end_scenario(self):
        r = self.recorder
        if r is not None:
            r.ended = True
            r.maybe_close()
        self.recorder = None

    def command(self, s, line):
        cmd, _, arg = line.partition(" ")
        cmd = cmd.upper()
        r = self.recorder
        if cmd == "SCENARIO":
            name = arg.strip()
            if not name or "/" in name or name.startswith("."):
                return self.ctl_reply(s, "ERR bad name")
            self.end_scenario()
            path = os.path.join(self.out_dir, name + ".txt")
            self.recorder = Recorder(path, name, self.args.header)
            return self.ctl_reply(s, "OK " + path)
        if cmd == "COMMENT":
            if r is None:
                return self.ctl_reply(s, "ERR no scenario")
            r.comment(arg)
            return self.ctl_reply(s, "OK")
        if cmd == "CUT":
            victims = [c for c in list(self.conns) if c.recorder is not None and not c.flw]
            for c in victims:
                c.recorder.comment("proxy: connection cut")
                c.close("cut")
            return self.ctl_reply(s, "OK %d" % len(victims))
        if cmd == "PAUSE":
            if not self.paused:
                self.sel.unregister(self.listener)
                self.paused = True
            return self.ctl_reply(s, "OK")
        if cmd == "RESUME":
            if self.paused:
                self.sel.register(self.listener, selectors.EVENT_READ, ("accept", None))
                self.paused = False
            return self.ctl_reply(s, "OK")
        if cmd == "WAIT_CLOSED":
            timeout = float(arg) if arg.strip() else 10.0
            self.waiters.append((s, time.monotonic() + timeout))
            self.check_waiters()
            return
        if cmd == "STATS":
            if r is None:
                return self.ctl_reply(s, "OK none")
            return self.ctl_reply(s, "OK frames=%d open=%d connections=%d" % (
                r.frames, len(r.open_conns), r.connections))
        if cmd == "END":
            self.end_scenario()
            return self.ctl_reply(s, "OK")
        if cmd == "QUIT":
            self.stop = True
            return self.ctl_reply(s, "OK")
        return self.ctl_reply(s, "ERR unknown command")

    def check_waiters(self):
        now = time.monotonic()
        keep = []
        for s, deadline in self.waiters:
            r = self.recorder
            if r is None or not r.open_conns:
                self.ctl_reply(s, "OK")
            elif now >= deadline:
                self.ctl_reply(s, "ERR timeout, %d open" % len(r.open_conns))
            else:
                keep.append((s, deadline))
        self.waiters = keep

    def run(self):
        while not self.stop:
            for key, mask in self.sel.select(timeout=0.1):
                kind, obj = key.data
                if kind == "accept":
                    self.accept()
                elif kind == "ctl_accept":
                    self.ctl_accept()
                elif kind == "ctl":
                    self.on_ctl(key.fileobj, obj)
                else:
                    self.on_sock(key.fileobj, mask, obj)
            if self.waiters:
                self.check_waiters()
        for c in list(self.conns):
            c.close("proxy stopping")
        self.end_scenario()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", required=True, help="host:port of the ZooKeeper server")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--control", default="127.0.0.1:0")
    ap.add_argument("--port-file")
    ap.add_argument("--header", action="append", default=[], help="comment line for every file")
    args = ap.parse_args()
    for a in (args.listen, args.control, args.upstream):
        host = parse_addr(a)[0]
        if host not in ("127.0.0.1", "localhost", "::1"):
            ap.error("loopback addresses only: %s" % a)
    Proxy(args).run()


if __name__ == "__main__":
    main()
