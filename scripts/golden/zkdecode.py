#!/usr/bin/env python3
"""Decode and check golden-vector files (python3 stdlib only).

    zkdecode.py FILE...          print every frame decoded (jute), one line per frame
    zkdecode.py --check FILE...  only check: every line well-formed, every frame decodes with no
                                 bytes left over, every reply matches an outstanding request
                                 (except the reserved xids -1, -2, -4, -8), first frames of a
                                 connection are ConnectRequest / ConnectResponse. Exit 1 on error.

This is an independent, deliberately simple reading of the ZooKeeper wire format, used to
prove the captures are framed and attributed correctly; the Rust proto crate is the real decoder.
"""

import struct
import sys

OPS = {
    0: "notification", 1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData",
    6: "getACL", 7: "setACL", 8: "getChildren", 9: "sync", 11: "ping", 12: "getChildren2",
    13: "check", 14: "multi", 15: "create2", 16: "reconfig", 17: "checkWatches",
    18: "removeWatches", 19: "createContainer", 20: "deleteContainer", 21: "createTTL",
    22: "multiRead", 100: "auth", 101: "setWatches", 102: "sasl", 103: "getEphemerals",
    104: "getAllChildrenNumber", 105: "setWatches2", 106: "addWatch", 107: "whoAmI",
    -10: "createSession", -11: "closeSession", -1: "error",
}
ERRS = {
    0: "OK", -1: "SystemError", -2: "RuntimeInconsistency", -3: "DataInconsistency",
    -4: "ConnectionLoss", -5: "MarshallingError", -6: "Unimplemented", -7: "OperationTimeout",
    -8: "BadArguments", -12: "UnknownSession", -13: "NewConfigNoQuorum",
    -14: "ReconfigInProgress", -100: "APIError", -101: "NoNode", -102: "NoAuth",
    -103: "BadVersion", -108: "NoChildrenForEphemerals", -110: "NodeExists", -111: "NotEmpty",
    -112: "SessionExpired", -113: "InvalidCallback", -114: "InvalidACL", -115: "AuthFailed",
    -118: "SessionMoved", -119: "NotReadOnly", -120: "EphemeralOnLocalSession",
    -121: "NoWatcher", -122: "RequestTimeout", -123: "ReconfigDisabled",
    -124: "SessionClosedRequireSaslAuth", -125: "QuotaExceeded", -127: "ThrottledOp",
}
EVENTS = {-1: "None", 1: "NodeCreated", 2: "NodeDeleted", 3: "NodeDataChanged",
          4: "NodeChildrenChanged", 5: "DataWatchRemoved", 6: "ChildWatchRemoved",
          7: "PersistentWatchRemoved"}
STATES = {0: "Disconnected", 3: "SyncConnected", 4: "AuthFailed", 5: "ConnectedReadOnly",
          6: "SaslAuthenticated", -112: "Expired", 7: "Closed"}


class DecodeError(Exception):
    pass


class R:
    def __init__(self, b):
        self.b = b
        self.i = 0

    def take(self, n):
        if n < 0 or self.i + n > len(self.b):
            raise DecodeError("need %d bytes at offset %d of %d" % (n, self.i, len(self.b)))
        v = self.b[self.i:self.i + n]
        self.i += n
        return v

    def int(self):
        return struct.unpack(">i", self.take(4))[0]

    def long(self):
        return struct.unpack(">q", self.take(8))[0]

    def bool(self):
        v = self.take(1)[0]
        if v not in (0, 1):
            raise DecodeError("bool byte %d" % v)
        return bool(v)

    def buffer(self):
        n = self.int()
        if n == -1:
            return None
        return bytes(self.take(n))

    def string(self):
        v = self.buffer()
        return None if v is None else v.decode("utf-8")

    def vector(self, item):
        n = self.int()
        if n == -1:
            return None
        return [item() for _ in range(n)]

    def left(self):
        return len(self.b) - self.i

    def stat(self):
        f = struct.unpack(">qqqqiiiqiiq", self.take(68))
        names = ("czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion",
                 "ephemeralOwner", "dataLength", "numChildren", "pzxid")
        d = dict(zip(names, f))
        return ("Stat{czxid=%#x mzxid=%#x ctime=%d mtime=%d version=%d cversion=%d aversion=%d "
                "ephemeralOwner=%#x dataLength=%d numChildren=%d pzxid=%#x}" % (
                    d["czxid"], d["mzxid"], d["ctime"], d["mtime"], d["version"], d["cversion"],
                    d["aversion"], d["ephemeralOwner"] & 0xFFFFFFFFFFFFFFFF, d["dataLength"],
                    d["numChildren"], d["pzxid"]))

    def acl(self):
        perms = self.int()
        scheme = self.string()
        ident = self.string()
        return "%d:%s:%s" % (perms, scheme, ident)

    def acls(self):
        return self.vector(self.acl)

    def strings(self):
        return self.vector(self.string)


def show_data(d):
    if d is None:
        return "null"
    try:
        s = d.decode("utf-8")
        if s.isprintable():
            return repr(s)
    except UnicodeDecodeError:
        pass
    return "0x" + d.hex()


def request_body(r, op):
    if op in (1, 15, 19):
        return "path=%s data=%s acl=%s flags=%d" % (r.string(), show_data(r.buffer()), r.acls(), r.int())
    if op == 21:
        return "path=%s data=%s acl=%s flags=%d ttl=%d" % (r.string(), show_data(r.buffer()), r.acls(), r.int(), r.long())
    if op in (2, 13):
        return "path=%s version=%d" % (r.string(), r.int())
    if op in (3, 4, 8, 12):
        return "path=%s watch=%s" % (r.string(), r.bool())
    if op == 5:
        return "path=%s data=%s version=%d" % (r.string(), show_data(r.buffer()), r.int())
    if op in (6, 9, 104):
        return "path=%s" % r.string()
    if op == 103:
        return "prefixPath=%s" % r.string()
    if op == 7:
        return "path=%s acl=%s version=%d" % (r.string(), r.acls(), r.int())
    if op in (11, 107, -11):
        return ""
    if op in (14, 22):
        parts = []
        while True:
            t, done, err = r.int(), r.bool(), r.int()
            if done:
                parts.append("<done type=%d err=%d>" % (t, err))
                break
            parts.append("%s{%s}" % (OPS.get(t, t), request_body(r, t)) + ("" if err == -1 else " hdr.err=%d" % err))
        return "ops=[" + ", ".join(parts) + "]"
    if op == 16:
        return "joining=%r leaving=%r newMembers=%r curConfigId=%d" % (r.string(), r.string(), r.string(), r.long())
    if op in (17, 18):
        return "path=%s type=%d" % (r.string(), r.int())
    if op == 100:
        return "type=%d scheme=%s auth=%s" % (r.int(), r.string(), show_data(r.buffer()))
    if op == 101:
        return "relativeZxid=%#x data=%s exist=%s child=%s" % (r.long(), r.strings(), r.strings(), r.strings())
    if op == 105:
        return "relativeZxid=%#x data=%s exist=%s child=%s persistent=%s persistentRecursive=%s" % (
            r.long(), r.strings(), r.strings(), r.strings(), r.strings(), r.strings())
    if op == 106:
        return "path=%s mode=%d" % (r.string(), r.int())
    if op == 102:
        return "token=%s" % show_data(r.buffer())
    if op not in OPS:  # an opcode ZooKeeper does not know: show the body as is
        return "unknown-opcode body=0x%s" % bytes(r.take(r.left())).hex()
    raise DecodeError("no request decoder for opcode %d" % op)


def response_body(r, op):
    if op == 1:
        return "path=%s" % r.string()
    if op in (15, 19, 21):
        return "path=%s stat=%s" % (r.string(), r.stat())
    if op in (2, 11, 13, 17, 18, 100, 101, 105, -11):
        return ""
    if op == 106:  # ZooKeeper answers addWatch with an ErrorResponse body (err int, 0)
        return "ErrorResponse.err=%d" % r.int()
    if op in (3, 5, 7):
        return "stat=%s" % r.stat()
    if op in (4, 16):
        return "data=%s stat=%s" % (show_data(r.buffer()), r.stat())
    if op == 6:
        return "acl=%s stat=%s" % (r.acls(), r.stat())
    if op in (8, 103):
        return "children=%s" % r.strings()
    if op == 9:
        return "path=%s" % r.string()
    if op == 12:
        return "children=%s stat=%s" % (r.strings(), r.stat())
    if op == 104:
        return "totalNumber=%d" % r.int()
    if op == 107:
        return "clientInfo=%s" % r.vector(lambda: "%s:%s" % (r.string(), r.string()))
    if op in (14, 22):
        parts = []
        while True:
            t, done, err = r.int(), r.bool(), r.int()
            if done:
                parts.append("<done type=%d err=%d>" % (t, err))
                break
            if t == -1:
                e = r.int()
                parts.append("error{hdr.err=%d err=%d %s}" % (err, e, ERRS.get(e, "?")))
            else:
                parts.append("%s{hdr.err=%d %s}" % (OPS.get(t, t), err, response_body(r, t)))
        return "results=[" + ", ".join(parts) + "]"
    raise DecodeError("no response decoder for opcode %d" % op)


def decode_file(path, out):
    """Yield problems; write decoded lines to out (or not, if out is None)."""
    problems = []
    lines = open(path, encoding="ascii").read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    conn = 0
    first_c = first_s = True
    pending = {}
    frames = 0

    def emit(s):
        if out is not None:
            out.write(s + "\n")

    for n, line in enumerate(lines, 1):
        where = "%s:%d" % (path, n)
        if line.startswith("#") or line == "":
            if line == "":
                problems.append("%s: empty line" % where)
            if line == "# reconnect":
                conn += 1
                first_c = first_s = True
                if pending:
                    emit("   (unanswered before reconnect: %s)" % sorted(pending))
                pending = {}
            emit(line)
            continue
        if len(line) < 3 or line[1] != " " or line[0] not in "CS":
            problems.append("%s: malformed line" % where)
            continue
        hexpart = line[2:]
        if hexpart != hexpart.lower():
            problems.append("%s: hex not lowercase" % where)
        try:
            data = bytes.fromhex(hexpart)
        except ValueError:
            problems.append("%s: bad hex" % where)
            continue
        frames += 1
        r = R(data)
        d = line[0]
        try:
            if d == "C" and first_c:
                first_c = False
                pv, lz, to, sid, pw = r.int(), r.long(), r.int(), r.long(), r.buffer()
                ro = r.bool() if r.left() else "absent"
                s = "ConnectRequest protocolVersion=%d lastZxidSeen=%#x timeOut=%d sessionId=%#x passwd=%s readOnly=%s (%d bytes)" % (
                    pv, lz, to, sid, pw.hex() if pw is not None else None, ro, len(data))
            elif d == "S" and first_s:
                first_s = False
                pv, to, sid, pw = r.int(), r.int(), r.long(), r.buffer()
                ro = r.bool() if r.left() else "absent"
                s = "ConnectResponse protocolVersion=%d timeOut=%d sessionId=%#x passwd=%s readOnly=%s (%d bytes)" % (
                    pv, to, sid, pw.hex() if pw is not None else None, ro, len(data))
            elif d == "C":
                xid, op = r.int(), r.int()
                if xid in pending:
                    problems.append("%s: xid %d reused while outstanding" % (where, xid))
                pending[xid] = op
                s = "xid=%d %s(%d) %s" % (xid, OPS.get(op, "?"), op, request_body(r, op))
            else:
                xid, zxid, err = r.int(), r.long(), r.int()
                head = "xid=%d zxid=%#x err=%d%s" % (xid, zxid, err, "" if err == 0 else " " + ERRS.get(err, "?"))
                if xid == -1:
                    t, st, p = r.int(), r.int(), r.string()
                    s = head + " notification %s(%d) state=%s(%d) path=%s" % (EVENTS.get(t, "?"), t, STATES.get(st, "?"), st, p)
                else:
                    if xid not in pending:
                        problems.append("%s: reply xid %d matches no outstanding request" % (where, xid))
                        op = None
                    else:
                        op = pending.pop(xid)
                        if xid >= 0:
                            older = [x for x in pending if 0 <= x < xid]
                            if older:
                                problems.append("%s: reply xid %d overtook %s" % (where, xid, older))
                    body = ""
                    if op is not None and (err == 0 or op in (14, 22)) and r.left():
                        body = response_body(r, op)
                    s = head + " reply to %s %s" % (OPS.get(op, "?"), body)
            if r.left():
                problems.append("%s: %d bytes left over after decoding (%s)" % (where, r.left(), data[r.i:].hex()))
                s += "  [+%d undecoded bytes: %s]" % (r.left(), data[r.i:].hex())
            emit("%s %s" % (d, s.rstrip()))
        except DecodeError as e:
            problems.append("%s: %s" % (where, e))
            emit("%s <undecodable: %s> %s" % (d, e, hexpart))
    if frames == 0:
        problems.append("%s: no frames" % path)
    return problems


def main(argv):
    check = False
    files = []
    for a in argv:
        if a == "--check":
            check = True
        else:
            files.append(a)
    if not files:
        print(__doc__)
        return 2
    problems = []
    for f in files:
        if not check:
            print("=== %s" % f)
        problems += decode_file(f, None if check else sys.stdout)
    for p in problems:
        print("PROBLEM: " + p, file=sys.stderr)
    if check:
        print("checked %d file(s): %s" % (len(files), "OK" if not problems else "%d problem(s)" % len(problems)), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
