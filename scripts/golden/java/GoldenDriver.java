// Golden-vector driver: exercises every ZooKeeper operation with the real ZooKeeper 3.9.5 Java
// client, through scripts/golden/capture_proxy.py, which records the bytes.
//
//   java -cp <zookeeper jars>:<classes> GoldenDriver <proxy host:port> <direct host:port>
//        <control port> [scenario ...]
//
// The proxy's control port chooses the output file (SCENARIO), takes the step annotations
// (COMMENT), and cuts / pauses connections to force reconnects (CUT, PAUSE, RESUME).
// <direct host:port> is the ZooKeeper server itself: a second, unrecorded client uses it to
// change the tree while the recorded client is disconnected.
//
// Every step states the outcome it expects; any other outcome aborts the run (exit code 1), so
// the captured files always show what their comments say.
//
// A few requests are sent "raw" (ZooKeeper.cnxn.submitRequest with a hand-built jute record)
// because the public API refuses to send them (invalid paths, ttl 0, an empty multi, server-side
// NoWatcher): they still travel through the real client's connection code, and every such step
// is marked "raw" in its comment.

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.jute.InputArchive;
import org.apache.jute.OutputArchive;
import org.apache.jute.Record;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.CreateOptions;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.KeeperException.Code;
import org.apache.zookeeper.MultiResponse;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooDefs.Perms;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.admin.ZooKeeperAdmin;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.data.Stat;
import org.apache.zookeeper.proto.CheckWatchesRequest;
import org.apache.zookeeper.proto.Create2Response;
import org.apache.zookeeper.proto.CreateRequest;
import org.apache.zookeeper.proto.CreateResponse;
import org.apache.zookeeper.proto.CreateTTLRequest;
import org.apache.zookeeper.proto.MultiHeader;
import org.apache.zookeeper.proto.RemoveWatchesRequest;
import org.apache.zookeeper.proto.ReplyHeader;
import org.apache.zookeeper.proto.RequestHeader;
import org.apache.zookeeper.server.auth.DigestAuthenticationProvider;

public class GoldenDriver {

    static final List<ACL> OPEN = Ids.OPEN_ACL_UNSAFE;
    static final int TIMEOUT = 30000;
    static final long WAIT_MS = 15000;

    // ------------------------------------------------------------------ proxy control channel
    static final class Control {
        final Socket s;
        final BufferedReader r;
        final Writer w;

        Control(int port) throws IOException {
            s = new Socket("127.0.0.1", port);
            s.setSoTimeout(60000);
            r = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8));
            w = new OutputStreamWriter(s.getOutputStream(), StandardCharsets.UTF_8);
        }

        synchronized String cmd(String line) throws IOException {
            w.write(line.replace('\n', ' ').replace('\r', ' ') + "\n");
            w.flush();
            String resp = r.readLine();
            if (resp == null || !resp.startsWith("OK")) {
                throw new IOException("proxy said " + resp + " to " + line);
            }
            return resp;
        }
    }

    // ------------------------------------------------------------------ client with raw access
    static final class Zk extends ZooKeeperAdmin {
        Zk(String connect, int timeout, Watcher w, boolean canBeReadOnly) throws IOException {
            super(connect, timeout, w, canBeReadOnly);
        }

        /** Shuts the connection down without sending closeSession (the session stays on the server). */
        void abandon() {
            cnxn.disconnect();
        }

        /** Sends a hand-built request through the client's own connection; returns the header. */
        ReplyHeader raw(int type, Record req, Record resp) throws InterruptedException {
            RequestHeader h = new RequestHeader();
            h.setType(type);
            return cnxn.submitRequest(h, req, resp, null);
        }
    }

    /** A multi request body with no ops (the public API refuses to send an empty multi). */
    static final class EmptyMulti implements Record {
        public void serialize(OutputArchive a, String tag) throws IOException {
            a.startRecord(this, tag);
            new MultiHeader(-1, true, -1).serialize(a, tag);
            a.endRecord(this, tag);
        }

        public void deserialize(InputArchive a, String tag) throws IOException {
            throw new IOException("not used");
        }
    }

    // ------------------------------------------------------------------ event collection
    static final class Events implements Watcher {
        final String name;
        final BlockingQueue<WatchedEvent> q;
        volatile KeeperState state = KeeperState.Disconnected;
        final Object lock = new Object();

        Events(String name, BlockingQueue<WatchedEvent> q) {
            this.name = name;
            this.q = q;
        }

        public void process(WatchedEvent e) {
            if (e.getType() == EventType.None) {
                synchronized (lock) {
                    state = e.getState();
                    lock.notifyAll();
                }
            }
            q.add(e);
        }

        void awaitState(KeeperState want) throws InterruptedException {
            long deadline = System.currentTimeMillis() + WAIT_MS;
            synchronized (lock) {
                while (state != want) {
                    long left = deadline - System.currentTimeMillis();
                    if (left <= 0) {
                        throw new IllegalStateException(name + ": state " + state + ", wanted " + want);
                    }
                    lock.wait(left);
                }
            }
        }
    }

    interface Body<T> {
        T run() throws Exception;
    }

    // ------------------------------------------------------------------ driver state
    final Control ctl;
    final String proxy;
    final String direct;
    final BlockingQueue<WatchedEvent> events = new LinkedBlockingQueue<>();
    Events defaultWatcher;
    Zk zk;

    GoldenDriver(String proxy, String direct, int controlPort) throws IOException {
        this.proxy = proxy;
        this.direct = direct;
        this.ctl = new Control(controlPort);
    }

    void comment(String s) throws IOException {
        System.out.println("  " + s);
        ctl.cmd("COMMENT " + s);
    }

    void scenario(String name, String... description) throws IOException {
        System.out.println("== " + name);
        ctl.cmd("SCENARIO " + name);
        comment("client: Apache ZooKeeper Java client 3.9.5 (org.apache.zookeeper.ZooKeeper, sync API)");
        for (String d : description) {
            comment(d);
        }
        events.clear();
    }

    void endScenario() throws IOException {
        ctl.cmd("WAIT_CLOSED 15");
        ctl.cmd("END");
    }

    Zk open(int timeout, boolean canBeReadOnly) throws Exception {
        defaultWatcher = new Events("default", events);
        comment("connect: sessionTimeout=" + timeout + " canBeReadOnly=" + canBeReadOnly);
        Zk z = new Zk(proxy, timeout, defaultWatcher, canBeReadOnly);
        defaultWatcher.awaitState(KeeperState.SyncConnected);
        comment(String.format("connected: sessionId=0x%x negotiatedTimeout=%d", z.getSessionId(), z.getSessionTimeout()));
        drainStateEvents();
        return z;
    }

    void close(Zk z) throws Exception {
        comment("step: close (closeSession)");
        z.close();
    }

    void drainStateEvents() {
        events.removeIf(e -> e.getType() == EventType.None);
    }

    /** Runs one step; expected == null means success is expected. */
    <T> T step(String desc, Code expected, Body<T> body) throws Exception {
        comment("step: " + desc);
        try {
            T v = body.run();
            if (expected != null) {
                throw new IllegalStateException("step '" + desc + "' succeeded, expected " + expected);
            }
            comment("result: " + fmt(v));
            return v;
        } catch (KeeperException e) {
            if (expected != e.code()) {
                throw new IllegalStateException("step '" + desc + "' failed with " + e.code() + ", expected " + expected, e);
            }
            String extra = "";
            if (e.getResults() != null) {
                extra = " results=" + fmt(e.getResults());
            }
            comment("result: error " + e.code() + " (" + e.code().intValue() + ")" + extra);
            return null;
        }
    }

    <T> T ok(String desc, Body<T> body) throws Exception {
        return step(desc, null, body);
    }

    /** Raw request: checks the reply header's err code. */
    ReplyHeader raw(String desc, Code expected, int type, Record req, Record resp) throws Exception {
        comment("step: raw " + desc);
        ReplyHeader h = zk.raw(type, req, resp);
        Code got = Code.get(h.getErr());
        Code want = expected == null ? Code.OK : expected;
        if (got != want) {
            throw new IllegalStateException("raw step '" + desc + "' got " + got + ", expected " + want);
        }
        comment("result: err=" + got + " (" + h.getErr() + ") zxid=0x" + Long.toHexString(h.getZxid())
                + (got == Code.OK && resp != null ? " " + resp : ""));
        return h;
    }

    WatchedEvent expectEvent(EventType type, String path) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (true) {
            long left = deadline - System.currentTimeMillis();
            WatchedEvent e = events.poll(Math.max(left, 0), TimeUnit.MILLISECONDS);
            if (e == null) {
                throw new IllegalStateException("no " + type + " event for " + path);
            }
            if (e.getType() == EventType.None) {
                continue; // connection state change, not on the wire
            }
            if (e.getType() != type || !path.equals(e.getPath())) {
                throw new IllegalStateException("unexpected event " + e + ", wanted " + type + " " + path);
            }
            comment("event: " + type + " (" + type.getIntValue() + ") " + path + " zxid=0x" + Long.toHexString(e.getZxid()));
            return e;
        }
    }

    void expectNoEvent(long ms) throws Exception {
        Thread.sleep(ms);
        drainStateEvents();
        if (!events.isEmpty()) {
            throw new IllegalStateException("unexpected events " + events);
        }
    }

    static String fmt(Object v) {
        if (v == null) {
            return "ok";
        }
        if (v instanceof Stat) {
            Stat s = (Stat) v;
            return String.format("Stat{czxid=0x%x mzxid=0x%x ctime=%d mtime=%d version=%d cversion=%d aversion=%d"
                    + " ephemeralOwner=0x%x dataLength=%d numChildren=%d pzxid=0x%x}",
                    s.getCzxid(), s.getMzxid(), s.getCtime(), s.getMtime(), s.getVersion(), s.getCversion(),
                    s.getAversion(), s.getEphemeralOwner(), s.getDataLength(), s.getNumChildren(), s.getPzxid());
        }
        if (v instanceof byte[]) {
            return "data=\"" + new String((byte[]) v, StandardCharsets.UTF_8) + "\"";
        }
        if (v instanceof OpResult.ErrorResult) {
            int err = ((OpResult.ErrorResult) v).getErr();
            return "ErrorResult(" + Code.get(err) + " " + err + ")";
        }
        if (v instanceof OpResult.CreateResult) {
            OpResult.CreateResult c = (OpResult.CreateResult) v;
            return "CreateResult(type=" + c.getType() + " " + c.getPath() + (c.getStat() != null ? " " + fmt(c.getStat()) : "") + ")";
        }
        if (v instanceof OpResult.SetDataResult) {
            return "SetDataResult(" + fmt(((OpResult.SetDataResult) v).getStat()) + ")";
        }
        if (v instanceof OpResult.GetDataResult) {
            OpResult.GetDataResult g = (OpResult.GetDataResult) v;
            return "GetDataResult(" + fmt(g.getData()) + " " + fmt(g.getStat()) + ")";
        }
        if (v instanceof OpResult.GetChildrenResult) {
            return "GetChildrenResult(" + ((OpResult.GetChildrenResult) v).getChildren() + ")";
        }
        if (v instanceof OpResult) {
            return v.getClass().getSimpleName() + "(type=" + ((OpResult) v).getType() + ")";
        }
        if (v instanceof ClientInfo) {
            ClientInfo c = (ClientInfo) v;
            return "ClientInfo(" + c.getAuthScheme() + ", " + c.getUser() + ")";
        }
        if (v instanceof ACL) {
            ACL a = (ACL) v;
            return "ACL(perms=" + a.getPerms() + " " + a.getId().getScheme() + ":" + a.getId().getId() + ")";
        }
        if (v instanceof List) {
            List<String> out = new ArrayList<>();
            for (Object o : (List<?>) v) {
                out.add(fmt(o));
            }
            return out.toString();
        }
        return String.valueOf(v);
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** A second client straight to the server, not recorded, for changes made behind the back. */
    ZooKeeper directClient() throws Exception {
        CountDownLatch up = new CountDownLatch(1);
        ZooKeeper d = new ZooKeeper(direct, TIMEOUT, e -> {
            if (e.getState() == KeeperState.SyncConnected) {
                up.countDown();
            }
        });
        if (!up.await(WAIT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("direct client did not connect");
        }
        return d;
    }

    // ================================================================== scenarios

    /** Every create mode, with and without Stat (create / create2 / createContainer / createTTL). */
    void javaCreate() throws Exception {
        scenario("java_create",
                "scenario: create in every CreateMode, create vs create2 (with Stat), container and TTL nodes,",
                "create errors NodeExists / NoNode / NoChildrenForEphemerals / BadArguments, getEphemerals, getAllChildrenNumber");
        zk = open(TIMEOUT, false);
        Stat st = new Stat();
        ok("exists / (java_create runs first on a fresh server: the root's Stat before any client write)", () -> zk.exists("/", false));
        ok("create /create data=\"root\" PERSISTENT (opcode create 1)", () -> zk.create("/create", b("root"), OPEN, CreateMode.PERSISTENT));
        ok("create2 /create/p2 PERSISTENT with Stat (opcode create2 15)", () -> {
            zk.create("/create/p2", b("p2"), OPEN, CreateMode.PERSISTENT, st);
            return st;
        });
        ok("create /create/e EPHEMERAL (create 1)", () -> zk.create("/create/e", b("e"), OPEN, CreateMode.EPHEMERAL));
        ok("create2 /create/e2 EPHEMERAL with Stat (create2 15): ephemeralOwner = session id", () -> {
            zk.create("/create/e2", b(""), OPEN, CreateMode.EPHEMERAL, st);
            return st;
        });
        ok("create /create/ps- PERSISTENT_SEQUENTIAL (create 1)", () -> zk.create("/create/ps-", b("ps"), OPEN, CreateMode.PERSISTENT_SEQUENTIAL));
        ok("create2 /create/ps- PERSISTENT_SEQUENTIAL with Stat (create2 15)", () -> {
            String p = zk.create("/create/ps-", b("ps"), OPEN, CreateMode.PERSISTENT_SEQUENTIAL, st);
            return p + " " + fmt(st);
        });
        ok("create /create/es- EPHEMERAL_SEQUENTIAL (create 1)", () -> zk.create("/create/es-", null, OPEN, CreateMode.EPHEMERAL_SEQUENTIAL));
        ok("create2 /create/es- EPHEMERAL_SEQUENTIAL with Stat (create2 15)", () -> {
            String p = zk.create("/create/es-", b("x"), OPEN, CreateMode.EPHEMERAL_SEQUENTIAL, st);
            return p + " " + fmt(st);
        });
        ok("create /create/c CONTAINER without Stat (opcode createContainer 19; the Java client parses only the path)",
                () -> zk.create("/create/c", b("c"), OPEN, CreateMode.CONTAINER));
        ok("create /create/c2 CONTAINER with Stat (createContainer 19): clients see ephemeralOwner 0 for containers and TTL nodes", () -> {
            zk.create("/create/c2", b("c2"), OPEN, CreateMode.CONTAINER, st);
            return st;
        });
        ok("create /create/c2/child PERSISTENT (a container's child)", () -> zk.create("/create/c2/child", b(""), OPEN, CreateMode.PERSISTENT));
        ok("create /create/ttl PERSISTENT_WITH_TTL ttl=60000 with Stat (opcode createTTL 21)", () -> {
            zk.create("/create/ttl", b("ttl"), OPEN, CreateMode.PERSISTENT_WITH_TTL, st, 60000);
            return st;
        });
        ok("create /create/ttls- PERSISTENT_SEQUENTIAL_WITH_TTL ttl=1000 with Stat (createTTL 21)", () -> {
            String p = zk.create("/create/ttls-", b(""), OPEN, CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL, st, 1000);
            return p + " " + fmt(st);
        });
        ok("exists /create/ttl (Stat of a TTL node)", () -> zk.exists("/create/ttl", false));
        ok("exists /create/c (Stat of a container)", () -> zk.exists("/create/c", false));
        ok("getChildren2 /create", () -> {
            List<String> c = zk.getChildren("/create", false, st);
            Collections.sort(c);
            return c + " " + fmt(st);
        });
        ok("getEphemerals() (opcode 103, all of this session's ephemerals)", () -> {
            List<String> l = zk.getEphemerals();
            return l;
        });
        ok("getEphemerals(\"/create/e\") (prefix match, not a path: also matches /create/es-...)", () -> zk.getEphemerals("/create/e"));
        ok("getEphemerals(\"/nonexistent\") (no match: empty list, not NoNode)", () -> zk.getEphemerals("/nonexistent"));
        ok("getAllChildrenNumber /create (opcode 104)", () -> zk.getAllChildrenNumber("/create"));
        ok("getAllChildrenNumber / ", () -> zk.getAllChildrenNumber("/"));
        step("getAllChildrenNumber /nonexistent", Code.NONODE, () -> zk.getAllChildrenNumber("/nonexistent"));

        step("create /create again -> NodeExists", Code.NODEEXISTS, () -> zk.create("/create", b("x"), OPEN, CreateMode.PERSISTENT));
        step("create2 /create again with Stat -> NodeExists", Code.NODEEXISTS, () -> zk.create("/create", b("x"), OPEN, CreateMode.PERSISTENT, st));
        step("create /nonexistent/child -> NoNode (no parent)", Code.NONODE, () -> zk.create("/nonexistent/child", b(""), OPEN, CreateMode.PERSISTENT));
        step("create /create/e/child under an ephemeral -> NoChildrenForEphemerals", Code.NOCHILDRENFOREPHEMERALS,
                () -> zk.create("/create/e/child", b(""), OPEN, CreateMode.PERSISTENT));
        step("create /create/bad-acl with [digest 'nocolon' ALL] -> InvalidACL", Code.INVALIDACL,
                () -> zk.create("/create/bad-acl", b(""), Collections.singletonList(new ACL(Perms.ALL, new Id("digest", "nocolon"))), CreateMode.PERSISTENT));
        raw("create \"/create//bad\" (empty path element): the parent \"/create/\" is looked up first -> NoNode", Code.NONODE, ZooDefs.OpCode.create,
                new CreateRequest("/create//bad", b(""), OPEN, CreateMode.PERSISTENT.toFlag()), new CreateResponse());
        raw("create \"/create/bad/\" (trailing slash, not sequential): parent \"/create/bad\" is missing -> NoNode", Code.NONODE, ZooDefs.OpCode.create,
                new CreateRequest("/create/bad/", b(""), OPEN, CreateMode.PERSISTENT.toFlag()), new CreateResponse());
        raw("create \"/create/.\" (parent exists, the path itself is invalid) -> BadArguments", Code.BADARGUMENTS, ZooDefs.OpCode.create,
                new CreateRequest("/create/.", b(""), OPEN, CreateMode.PERSISTENT.toFlag()), new CreateResponse());
        raw("create \"/create/e/\" PERSISTENT_SEQUENTIAL under an ephemeral -> NoChildrenForEphemerals", Code.NOCHILDRENFOREPHEMERALS, ZooDefs.OpCode.create,
                new CreateRequest("/create/e/", b(""), OPEN, CreateMode.PERSISTENT_SEQUENTIAL.toFlag()), new CreateResponse());
        raw("create \"create-relative\" (no leading slash) -> BadArguments", Code.BADARGUMENTS, ZooDefs.OpCode.create,
                new CreateRequest("create-relative", b(""), OPEN, CreateMode.PERSISTENT.toFlag()), new CreateResponse());
        raw("createTTL /create/ttl0 PERSISTENT_WITH_TTL ttl=0 -> BadArguments", Code.BADARGUMENTS, ZooDefs.OpCode.createTTL,
                new CreateTTLRequest("/create/ttl0", b(""), OPEN, CreateMode.PERSISTENT_WITH_TTL.toFlag(), 0), new Create2Response());
        raw("createTTL /create/ttlp with a non-TTL mode (PERSISTENT) ttl=1000 -> BadArguments", Code.BADARGUMENTS, ZooDefs.OpCode.createTTL,
                new CreateTTLRequest("/create/ttlp", b(""), OPEN, CreateMode.PERSISTENT.toFlag(), 1000), new Create2Response());
        raw("create /create/flags99 with flags=99 (no such CreateMode)", Code.BADARGUMENTS, ZooDefs.OpCode.create,
                new CreateRequest("/create/flags99", b(""), OPEN, 99), new CreateResponse());
        close(zk);
        endScenario();
    }

    /** Reads, writes, deletes and their errors; sync; whoAmI. */
    void javaBasic() throws Exception {
        scenario("java_basic",
                "scenario: exists (hit/miss), getData, setData (+BadVersion), getChildren, getChildren2, sync,",
                "delete (version -1, exact version, BadVersion, NotEmpty, NoNode), whoAmI without auth, getConfig");
        zk = open(TIMEOUT, false);
        Stat st = new Stat();
        ok("create /basic data=\"hello\"", () -> zk.create("/basic", b("hello"), OPEN, CreateMode.PERSISTENT));
        ok("exists /basic (hit)", () -> zk.exists("/basic", false));
        ok("exists /basic/missing (miss: err NoNode in the reply header, the client returns null)", () -> zk.exists("/basic/missing", false));
        ok("getData /basic", () -> {
            byte[] d = zk.getData("/basic", false, st);
            return fmt(d) + " " + fmt(st);
        });
        step("getData /basic/missing -> NoNode", Code.NONODE, () -> zk.getData("/basic/missing", false, st));
        ok("setData /basic \"world\" version=0", () -> zk.setData("/basic", b("world"), 0));
        step("setData /basic version=0 again -> BadVersion", Code.BADVERSION, () -> zk.setData("/basic", b("again"), 0));
        ok("setData /basic \"\" version=-1 (any)", () -> zk.setData("/basic", b(""), -1));
        step("setData /basic/missing -> NoNode", Code.NONODE, () -> zk.setData("/basic/missing", b(""), -1));
        ok("setData /basic null data (-1 length buffer)", () -> zk.setData("/basic", null, -1));
        ok("getData /basic after null setData", () -> {
            byte[] d = zk.getData("/basic", false, st);
            return (d == null ? "null" : fmt(d)) + " " + fmt(st);
        });
        ok("create /basic/a", () -> zk.create("/basic/a", b("a"), OPEN, CreateMode.PERSISTENT));
        ok("create /basic/b", () -> zk.create("/basic/b", b("b"), OPEN, CreateMode.PERSISTENT));
        ok("create /basic/a/x", () -> zk.create("/basic/a/x", b("x"), OPEN, CreateMode.PERSISTENT));
        ok("getChildren /basic (opcode 8)", () -> {
            List<String> c = zk.getChildren("/basic", false);
            return c;
        });
        ok("getChildren2 /basic (opcode 12, children + Stat)", () -> {
            List<String> c = zk.getChildren("/basic", false, st);
            return c + " " + fmt(st);
        });
        ok("getChildren /basic/b (no children: empty vector)", () -> zk.getChildren("/basic/b", false));
        step("getChildren /basic/missing -> NoNode", Code.NONODE, () -> zk.getChildren("/basic/missing", false));
        step("getChildren2 /basic/missing -> NoNode", Code.NONODE, () -> zk.getChildren("/basic/missing", false, st));
        ok("sync /basic (opcode 9)", () -> {
            zk.sync("/basic");
            return "synced";
        });
        ok("sync / ", () -> {
            zk.sync("/");
            return "synced";
        });
        ok("create /basic/d1 then delete /basic/d1 version=0 (exact)", () -> zk.create("/basic/d1", b(""), OPEN, CreateMode.PERSISTENT));
        ok("delete /basic/d1 version=0", () -> {
            zk.delete("/basic/d1", 0);
            return "deleted";
        });
        ok("create /basic/d2", () -> zk.create("/basic/d2", b(""), OPEN, CreateMode.PERSISTENT));
        ok("setData /basic/d2 (version becomes 1)", () -> zk.setData("/basic/d2", b("v1"), -1));
        step("delete /basic/d2 version=0 -> BadVersion", Code.BADVERSION, () -> {
            zk.delete("/basic/d2", 0);
            return null;
        });
        ok("delete /basic/d2 version=-1 (any)", () -> {
            zk.delete("/basic/d2", -1);
            return "deleted";
        });
        step("delete /basic/a (has a child) -> NotEmpty", Code.NOTEMPTY, () -> {
            zk.delete("/basic/a", -1);
            return null;
        });
        step("delete /basic/missing -> NoNode", Code.NONODE, () -> {
            zk.delete("/basic/missing", -1);
            return null;
        });
        step("delete / -> BadArguments (root cannot be deleted)", Code.BADARGUMENTS, () -> {
            zk.delete("/", -1);
            return null;
        });
        ok("exists /basic (after deletes: cversion and pzxid)", () -> zk.exists("/basic", false));
        ok("whoAmI (opcode 107) without addAuthInfo", () -> zk.whoAmI());
        ok("getData /zookeeper/config (ZooKeeper.getConfig) on a standalone server", () -> {
            byte[] d = zk.getConfig(false, st);
            return fmt(d) + " " + fmt(st);
        });
        ok("getChildren / ", () -> {
            List<String> c = zk.getChildren("/", false);
            Collections.sort(c);
            return c;
        });
        ok("getChildren /zookeeper", () -> zk.getChildren("/zookeeper", false));
        ok("getData /zookeeper/quota", () -> {
            byte[] d = zk.getData("/zookeeper/quota", false, st);
            return fmt(d) + " " + fmt(st);
        });
        ok("exists / (root Stat)", () -> zk.exists("/", false));
        close(zk);
        endScenario();
    }

    /** Sequential suffixes after deletes, cversion/pzxid evolution. */
    void javaSeq() throws Exception {
        scenario("java_seq",
                "scenario: sequential-node counter, cversion and pzxid after child creates and deletes");
        zk = open(TIMEOUT, false);
        Stat st = new Stat();
        ok("create /seq", () -> zk.create("/seq", b(""), OPEN, CreateMode.PERSISTENT));
        ok("exists /seq (fresh: cversion 0, pzxid = czxid)", () -> zk.exists("/seq", false));
        ok("create /seq/n- PERSISTENT_SEQUENTIAL", () -> zk.create("/seq/n-", b(""), OPEN, CreateMode.PERSISTENT_SEQUENTIAL));
        ok("exists /seq", () -> zk.exists("/seq", false));
        ok("delete /seq/n-0000000000", () -> {
            zk.delete("/seq/n-0000000000", -1);
            return "deleted";
        });
        ok("exists /seq (after delete)", () -> zk.exists("/seq", false));
        ok("create /seq/n- PERSISTENT_SEQUENTIAL again (suffix after a delete)", () -> zk.create("/seq/n-", b(""), OPEN, CreateMode.PERSISTENT_SEQUENTIAL));
        ok("create /seq/plain (non-sequential child)", () -> zk.create("/seq/plain", b(""), OPEN, CreateMode.PERSISTENT));
        ok("create /seq/n- PERSISTENT_SEQUENTIAL (suffix after a plain create)", () -> zk.create("/seq/n-", b(""), OPEN, CreateMode.PERSISTENT_SEQUENTIAL));
        ok("create /seq/e- EPHEMERAL_SEQUENTIAL (shares the parent's counter)", () -> zk.create("/seq/e-", b(""), OPEN, CreateMode.EPHEMERAL_SEQUENTIAL));
        ok("create /seq/ (prefix is the parent itself: name is just the number)", () -> zk.create("/seq/", b(""), OPEN, CreateMode.PERSISTENT_SEQUENTIAL));
        step("create /seq/plain again -> NodeExists (a failed create)", Code.NODEEXISTS, () -> zk.create("/seq/plain", b(""), OPEN, CreateMode.PERSISTENT));
        ok("exists /seq (a failed create does not touch cversion)", () -> zk.exists("/seq", false));
        ok("setData /seq/plain (child data change: parent's cversion/pzxid unchanged)", () -> zk.setData("/seq/plain", b("d"), -1));
        ok("exists /seq", () -> zk.exists("/seq", false));
        ok("create /seq/n- PERSISTENT_SEQUENTIAL", () -> zk.create("/seq/n-", b(""), OPEN, CreateMode.PERSISTENT_SEQUENTIAL));
        ok("getChildren2 /seq", () -> {
            List<String> c = zk.getChildren("/seq", false, st);
            Collections.sort(c);
            return c + " " + fmt(st);
        });
        close(zk);
        endScenario();
    }

    /** Pings: a short session left idle. */
    void javaPing() throws Exception {
        scenario("java_ping",
                "scenario: session timeout negotiation (asks 1000 ms; server min is 2*tickTime), readOnly=true",
                "in the ConnectRequest, and pings (xid -2, opcode 11) while idle");
        zk = open(1000, true);
        ok("getData / ", () -> fmt(zk.getData("/", false, null)));
        comment("idle 3500 ms: the client pings when nothing was sent for about readTimeout/2 (readTimeout = 2/3 of the negotiated timeout)");
        Thread.sleep(3500);
        ok("exists / ", () -> zk.exists("/", false));
        close(zk);
        endScenario();
    }

    /** Watches of every type, persistent and recursive watches, checkWatches/removeWatches. */
    void javaWatches() throws Exception {
        scenario("java_watches",
                "scenario: one-shot watches (exists/getData/getChildren) and every event type, addWatch PERSISTENT",
                "and PERSISTENT_RECURSIVE and the events they fire, checkWatches (17) / removeWatches (18)");
        zk = open(TIMEOUT, false);
        Stat st = new Stat();
        ok("create /w", () -> zk.create("/w", b(""), OPEN, CreateMode.PERSISTENT));

        ok("exists /w/a watch=true (miss: NoNode, but the watch is set)", () -> zk.exists("/w/a", true));
        ok("create /w/a (fires NodeCreated)", () -> zk.create("/w/a", b("a"), OPEN, CreateMode.PERSISTENT));
        expectEvent(EventType.NodeCreated, "/w/a");

        ok("getData /w/a watch=true", () -> fmt(zk.getData("/w/a", true, st)));
        ok("setData /w/a (fires NodeDataChanged)", () -> zk.setData("/w/a", b("a2"), -1));
        expectEvent(EventType.NodeDataChanged, "/w/a");

        ok("exists /w/a watch=true (hit)", () -> zk.exists("/w/a", true));
        ok("setData /w/a (fires NodeDataChanged for the exists watch)", () -> zk.setData("/w/a", b("a3"), -1));
        expectEvent(EventType.NodeDataChanged, "/w/a");

        ok("getChildren /w watch=true", () -> zk.getChildren("/w", true));
        ok("create /w/b (fires NodeChildrenChanged on /w)", () -> zk.create("/w/b", b(""), OPEN, CreateMode.PERSISTENT));
        expectEvent(EventType.NodeChildrenChanged, "/w");

        ok("getData /w/b watch=true", () -> fmt(zk.getData("/w/b", true, null)));
        ok("exists /w/b watch=true", () -> zk.exists("/w/b", true));
        ok("getChildren /w watch=true", () -> zk.getChildren("/w", true));
        ok("getChildren2 /w/b watch=true", () -> zk.getChildren("/w/b", true, st));
        ok("delete /w/b (fires NodeDeleted /w/b and NodeChildrenChanged /w)", () -> {
            zk.delete("/w/b", -1);
            return "deleted";
        });
        // Order of the two notifications is the server's; accept either, record what came.
        WatchedEvent e1 = nextWatchEvent();
        WatchedEvent e2 = nextWatchEvent();
        comment("events: " + e1.getType() + " " + e1.getPath() + " zxid=0x" + Long.toHexString(e1.getZxid())
                + ", then " + e2.getType() + " " + e2.getPath() + " zxid=0x" + Long.toHexString(e2.getZxid()));
        expectNoEvent(300);

        ok("getData /w/a watch=true (the data watch is fired only once per change)", () -> fmt(zk.getData("/w/a", true, null)));
        ok("setData /w/a", () -> zk.setData("/w/a", b("a4"), -1));
        expectEvent(EventType.NodeDataChanged, "/w/a");
        ok("setData /w/a again (no watch left: no event)", () -> zk.setData("/w/a", b("a5"), -1));
        expectNoEvent(300);

        // Persistent watch.
        Events pw = new Events("persistent", events);
        ok("addWatch /pw PERSISTENT (opcode 106, mode 0) on a missing node", () -> {
            zk.addWatch("/pw", pw, AddWatchMode.PERSISTENT);
            return "added";
        });
        ok("create /pw", () -> zk.create("/pw", b(""), OPEN, CreateMode.PERSISTENT));
        expectEvent(EventType.NodeCreated, "/pw");
        ok("setData /pw", () -> zk.setData("/pw", b("1"), -1));
        expectEvent(EventType.NodeDataChanged, "/pw");
        ok("create /pw/x", () -> zk.create("/pw/x", b(""), OPEN, CreateMode.PERSISTENT));
        expectEvent(EventType.NodeChildrenChanged, "/pw");
        ok("setData /pw/x (not watched: a PERSISTENT watch is not recursive)", () -> zk.setData("/pw/x", b("1"), -1));
        expectNoEvent(300);
        ok("delete /pw/x", () -> {
            zk.delete("/pw/x", -1);
            return "deleted";
        });
        expectEvent(EventType.NodeChildrenChanged, "/pw");
        ok("delete /pw", () -> {
            zk.delete("/pw", -1);
            return "deleted";
        });
        expectEvent(EventType.NodeDeleted, "/pw");
        ok("create /pw (the persistent watch survives the delete)", () -> zk.create("/pw", b(""), OPEN, CreateMode.PERSISTENT));
        expectEvent(EventType.NodeCreated, "/pw");

        // Persistent recursive watch.
        Events rw = new Events("recursive", events);
        ok("create /rw", () -> zk.create("/rw", b(""), OPEN, CreateMode.PERSISTENT));
        ok("addWatch /rw PERSISTENT_RECURSIVE (opcode 106, mode 1)", () -> {
            zk.addWatch("/rw", rw, AddWatchMode.PERSISTENT_RECURSIVE);
            return "added";
        });
        ok("create /rw/x", () -> zk.create("/rw/x", b(""), OPEN, CreateMode.PERSISTENT));
        expectEvent(EventType.NodeCreated, "/rw/x");
        ok("create /rw/x/y", () -> zk.create("/rw/x/y", b(""), OPEN, CreateMode.PERSISTENT));
        expectEvent(EventType.NodeCreated, "/rw/x/y");
        ok("setData /rw/x/y", () -> zk.setData("/rw/x/y", b("1"), -1));
        expectEvent(EventType.NodeDataChanged, "/rw/x/y");
        ok("delete /rw/x/y (NodeDeleted only: recursive watches never send NodeChildrenChanged)", () -> {
            zk.delete("/rw/x/y", -1);
            return "deleted";
        });
        expectEvent(EventType.NodeDeleted, "/rw/x/y");
        expectNoEvent(300);
        ok("setData /rw", () -> zk.setData("/rw", b("1"), -1));
        expectEvent(EventType.NodeDataChanged, "/rw");

        // Removing watches.
        Events dw = new Events("data-watch", events);
        ok("getData /w/a with a specific watcher", () -> fmt(zk.getData("/w/a", dw, null)));
        ok("removeWatches(/w/a, watcher, Data) -> checkWatches (opcode 17, type 2=data)", () -> {
            zk.removeWatches("/w/a", dw, Watcher.WatcherType.Data, false);
            return "removed";
        });
        expectEvent(EventType.DataWatchRemoved, "/w/a");
        ok("getChildren /w watch=true", () -> zk.getChildren("/w", true));
        ok("exists /w watch=true", () -> zk.exists("/w", true));
        ok("removeAllWatches(/w, Any) -> removeWatches (opcode 18, type 3=any)", () -> {
            zk.removeAllWatches("/w", Watcher.WatcherType.Any, false);
            return "removed";
        });
        WatchedEvent r1 = nextWatchEvent();
        WatchedEvent r2 = nextWatchEvent();
        comment("local events: " + r1.getType() + " " + r1.getPath() + ", " + r2.getType() + " " + r2.getPath());
        ok("removeAllWatches(/pw, Persistent) -> removeWatches (opcode 18, type 4=persistent)", () -> {
            zk.removeAllWatches("/pw", Watcher.WatcherType.Persistent, false);
            return "removed";
        });
        expectEvent(EventType.PersistentWatchRemoved, "/pw");
        ok("removeAllWatches(/rw, PersistentRecursive) -> removeWatches (opcode 18, type 5=persistent recursive)", () -> {
            zk.removeAllWatches("/rw", Watcher.WatcherType.PersistentRecursive, false);
            return "removed";
        });
        expectEvent(EventType.PersistentWatchRemoved, "/rw");
        raw("checkWatches /w/a type=1 (children) with no such watch on the server -> NoWatcher", Code.NOWATCHER,
                ZooDefs.OpCode.checkWatches, new CheckWatchesRequest("/w/a", 1), null);
        raw("removeWatches /w/a type=3 (any): checkWatches above only checked, so the server still holds the data watch -> OK", null,
                ZooDefs.OpCode.removeWatches, new RemoveWatchesRequest("/w/a", 3), null);
        raw("removeWatches /w/a type=3 (any) again: nothing left on the server -> NoWatcher", Code.NOWATCHER,
                ZooDefs.OpCode.removeWatches, new RemoveWatchesRequest("/w/a", 3), null);
        raw("removeWatches /nonexistent type=2 (data) -> NoWatcher", Code.NOWATCHER,
                ZooDefs.OpCode.removeWatches, new RemoveWatchesRequest("/nonexistent", 2), null);
        ok("setData /pw and /rw after removal: no events", () -> {
            zk.setData("/pw", b("2"), -1);
            zk.setData("/rw", b("2"), -1);
            return "set";
        });
        expectNoEvent(300);
        close(zk);
        endScenario();
    }

    WatchedEvent nextWatchEvent() throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (true) {
            WatchedEvent e = events.poll(Math.max(deadline - System.currentTimeMillis(), 0), TimeUnit.MILLISECONDS);
            if (e == null) {
                throw new IllegalStateException("expected a watch event");
            }
            if (e.getType() != EventType.None) {
                return e;
            }
        }
    }

    /** multi (14) and multiRead (22). */
    void javaMulti() throws Exception {
        scenario("java_multi",
                "scenario: multi (opcode 14) success with create/create2/createContainer/createTTL/setData/check/delete,",
                "failing multis (which result each op gets), an empty multi, multiRead (opcode 22) with and without errors");
        zk = open(TIMEOUT, false);
        ok("create /multi", () -> zk.create("/multi", b(""), OPEN, CreateMode.PERSISTENT));
        ok("multi [create /multi/a (1), setData /multi/a v0 (5), check /multi/a v1 (13), create /multi/b (1), delete /multi/b (2)]",
                () -> zk.multi(Arrays.asList(
                        Op.create("/multi/a", b("a"), OPEN, CreateMode.PERSISTENT),
                        Op.setData("/multi/a", b("a1"), 0),
                        Op.check("/multi/a", 1),
                        Op.create("/multi/b", b("b"), OPEN, CreateMode.PERSISTENT),
                        Op.delete("/multi/b", -1))));
        ok("multi [create2 /multi/c2 via CreateOptions (15), createContainer /multi/cont (19), createTTL /multi/ttl (21),"
                + " create /multi/s- PERSISTENT_SEQUENTIAL (1), create2 /multi/es- EPHEMERAL_SEQUENTIAL (15)]",
                () -> zk.multi(Arrays.asList(
                        Op.create("/multi/c2", b("c2"), CreateOptions.newBuilder(OPEN, CreateMode.PERSISTENT).build()),
                        Op.create("/multi/cont", b(""), OPEN, CreateMode.CONTAINER),
                        Op.create("/multi/ttl", b(""), OPEN, CreateMode.PERSISTENT_WITH_TTL, 60000),
                        Op.create("/multi/s-", b(""), OPEN, CreateMode.PERSISTENT_SEQUENTIAL),
                        Op.create("/multi/es-", b(""), CreateOptions.newBuilder(OPEN, CreateMode.EPHEMERAL_SEQUENTIAL).build()))));
        step("failing multi [create /multi/x (ok), setData /multi/a v1 (ok), check /multi/a v99 (BadVersion), create /multi/y, delete /multi/c2]",
                Code.BADVERSION,
                () -> zk.multi(Arrays.asList(
                        Op.create("/multi/x", b(""), OPEN, CreateMode.PERSISTENT),
                        Op.setData("/multi/a", b("a2"), 1),
                        Op.check("/multi/a", 99),
                        Op.create("/multi/y", b(""), OPEN, CreateMode.PERSISTENT),
                        Op.delete("/multi/c2", -1))));
        ok("exists /multi/x (the failed multi was rolled back)", () -> zk.exists("/multi/x", false));
        ok("exists /multi/a (version still 1)", () -> zk.exists("/multi/a", false));
        step("failing multi, first op fails [create /multi/a (NodeExists), create /multi/z]", Code.NODEEXISTS,
                () -> zk.multi(Arrays.asList(
                        Op.create("/multi/a", b(""), OPEN, CreateMode.PERSISTENT),
                        Op.create("/multi/z", b(""), OPEN, CreateMode.PERSISTENT))));
        step("failing multi, last op fails [create2 /multi/z (15), delete /multi/missing (NoNode)]", Code.NONODE,
                () -> zk.multi(Arrays.asList(
                        Op.create("/multi/z", b(""), CreateOptions.newBuilder(OPEN, CreateMode.PERSISTENT).build()),
                        Op.delete("/multi/missing", -1))));
        step("failing multi [delete /multi (NotEmpty)]", Code.NOTEMPTY,
                () -> zk.multi(Collections.singletonList(Op.delete("/multi", -1))));
        step("failing multi [create /multi/q, create /multi/q again (NodeExists within the same multi)]", Code.NODEEXISTS,
                () -> zk.multi(Arrays.asList(
                        Op.create("/multi/q", b(""), OPEN, CreateMode.PERSISTENT),
                        Op.create("/multi/q", b(""), OPEN, CreateMode.PERSISTENT))));
        raw("multi with no ops (just the done header)", null, ZooDefs.OpCode.multi, new EmptyMulti(), new MultiResponse());
        ok("multiRead [getData /multi/a (4), getChildren /multi (8)] (opcode 22)", () -> {
            List<OpResult> r = zk.multi(Arrays.asList(Op.getData("/multi/a"), Op.getChildren("/multi")));
            return r;
        });
        ok("multiRead [getData /multi/missing (NoNode), getChildren /multi/a, getData /multi/a]: per-op errors, no rollback",
                () -> zk.multi(Arrays.asList(Op.getData("/multi/missing"), Op.getChildren("/multi/a"), Op.getData("/multi/a"))));
        close(zk);
        endScenario();
    }

    /** addAuthInfo, digest ACLs, getACL/setACL, NoAuth, whoAmI. */
    void javaAcl() throws Exception {
        scenario("java_acl",
                "scenario: addAuthInfo digest (auth packet xid -4, opcode 100), digest and auth ACLs, getACL (6), setACL (7)",
                "with versions and BadVersion, NoAuth, InvalidACL, whoAmI (107) with several identities");
        zk = open(TIMEOUT, false);
        Stat st = new Stat();
        String aliceDigest = DigestAuthenticationProvider.generateDigest("alice:secret");
        String bobDigest = DigestAuthenticationProvider.generateDigest("bob:bobpw");
        comment("digest ids: " + aliceDigest + " , " + bobDigest);
        ok("addAuthInfo digest alice:secret", () -> {
            zk.addAuthInfo("digest", b("alice:secret"));
            return "sent";
        });
        ok("whoAmI after addAuthInfo (the auth reply came first: requests are answered in order)", () -> zk.whoAmI());
        ok("getACL / (default world:anyone ALL)", () -> {
            List<ACL> a = zk.getACL("/", st);
            return fmt(a) + " " + fmt(st);
        });
        ok("create /acl with CREATOR_ALL_ACL (auth scheme: the server stores alice's digest)", () -> zk.create("/acl", b("acl"), Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT));
        ok("getACL /acl", () -> {
            List<ACL> a = zk.getACL("/acl", st);
            return fmt(a) + " " + fmt(st);
        });
        ok("create /acl/open OPEN_ACL_UNSAFE", () -> zk.create("/acl/open", b(""), OPEN, CreateMode.PERSISTENT));
        List<ACL> mixed = Arrays.asList(new ACL(Perms.ALL, new Id("digest", aliceDigest)), new ACL(Perms.READ, Ids.ANYONE_ID_UNSAFE));
        ok("setACL /acl/open [digest alice ALL, world:anyone READ] version=0", () -> zk.setACL("/acl/open", mixed, 0));
        step("setACL /acl/open version=0 again -> BadVersion (aversion is 1 now)", Code.BADVERSION, () -> zk.setACL("/acl/open", mixed, 0));
        ok("setACL /acl/open version=-1", () -> zk.setACL("/acl/open", mixed, -1));
        ok("getACL /acl/open", () -> {
            List<ACL> a = zk.getACL("/acl/open", st);
            return fmt(a) + " " + fmt(st);
        });
        step("setACL /acl/missing -> NoNode", Code.NONODE, () -> zk.setACL("/acl/missing", OPEN, -1));
        step("getACL /acl/missing -> NoNode", Code.NONODE, () -> zk.getACL("/acl/missing", st));
        ok("create /acl/bob with ACL [digest bob ALL] (alice may create it: /acl grants alice CREATE)",
                () -> zk.create("/acl/bob", b("bob's"), Collections.singletonList(new ACL(Perms.ALL, new Id("digest", bobDigest))), CreateMode.PERSISTENT));
        step("getData /acl/bob as alice -> NoAuth", Code.NOAUTH, () -> zk.getData("/acl/bob", false, st));
        step("setData /acl/bob as alice -> NoAuth", Code.NOAUTH, () -> zk.setData("/acl/bob", b("x"), -1));
        step("create /acl/bob/child as alice -> NoAuth", Code.NOAUTH, () -> zk.create("/acl/bob/child", b(""), OPEN, CreateMode.PERSISTENT));
        step("getACL /acl/bob as alice -> NoAuth (getACL needs READ or ADMIN)", Code.NOAUTH, () -> zk.getACL("/acl/bob", st));
        step("exists /acl/bob as alice -> NoAuth (exists needs READ on an existing node)", Code.NOAUTH, () -> zk.exists("/acl/bob", false));
        step("getChildren /acl/bob as alice -> NoAuth", Code.NOAUTH, () -> zk.getChildren("/acl/bob", false));
        ok("exists /acl/bob/missing as alice (a missing node: NoNode, no ACL check possible)", () -> zk.exists("/acl/bob/missing", false));
        step("create /acl/bad with [digest 'nocolon' ALL] -> InvalidACL", Code.INVALIDACL,
                () -> zk.create("/acl/bad", b(""), Collections.singletonList(new ACL(Perms.ALL, new Id("digest", "nocolon"))), CreateMode.PERSISTENT));
        step("create /acl/bad2 with [world:nobody ALL] (unknown world id) -> InvalidACL", Code.INVALIDACL,
                () -> zk.create("/acl/bad2", b(""), Collections.singletonList(new ACL(Perms.ALL, new Id("world", "nobody"))), CreateMode.PERSISTENT));
        step("create /acl/bad3 with [nosuch:scheme ALL] -> InvalidACL", Code.INVALIDACL,
                () -> zk.create("/acl/bad3", b(""), Collections.singletonList(new ACL(Perms.ALL, new Id("nosuch", "x"))), CreateMode.PERSISTENT));
        ok("create /acl/ip with [ip:127.0.0.1 READ|WRITE, ip:10.0.0.0/8 ALL]",
                () -> zk.create("/acl/ip", b(""), Arrays.asList(new ACL(Perms.READ | Perms.WRITE, new Id("ip", "127.0.0.1")),
                        new ACL(Perms.ALL, new Id("ip", "10.0.0.0/8"))), CreateMode.PERSISTENT));
        ok("getACL /acl/ip", () -> fmt(zk.getACL("/acl/ip", st)));
        ok("addAuthInfo digest bob:bobpw (a second identity on the same session)", () -> {
            zk.addAuthInfo("digest", b("bob:bobpw"));
            return "sent";
        });
        ok("getData /acl/bob as alice+bob", () -> fmt(zk.getData("/acl/bob", false, st)) + " " + fmt(st));
        ok("whoAmI with two digest identities", () -> zk.whoAmI());
        ok("delete /acl/bob", () -> {
            zk.delete("/acl/bob", -1);
            return "deleted";
        });
        close(zk);
        endScenario();
    }

    /** An auth packet with an unknown scheme: AuthFailed, and the server drops the connection. */
    void javaAuthFailed() throws Exception {
        scenario("java_authfailed",
                "scenario: addAuthInfo with an unknown scheme -> AuthFailed (-115) on xid -4; the server then closes the",
                "connection and the Java client stops (state AUTH_FAILED, no reconnect, no closeSession)");
        zk = open(4000, false);
        comment("step: addAuthInfo nosuchscheme");
        zk.addAuthInfo("nosuchscheme", b("whatever"));
        defaultWatcher.awaitState(KeeperState.AuthFailed);
        comment("result: client state " + zk.getState());
        zk.close();
        endScenario();
    }

    /** reconfig on a standalone server. */
    void javaReconfig() throws Exception {
        scenario("java_reconfig",
                "scenario: reconfig (opcode 16) against a standalone server (reconfigEnabled=false): the error reply");
        zk = open(TIMEOUT, false);
        Stat st = new Stat();
        comment("step: reconfigure(joining=\"server.2=127.0.0.1:2888:3888;2181\", leaving=null, newMembers=null, fromConfig=-1)");
        try {
            byte[] r = zk.reconfigure("server.2=127.0.0.1:2888:3888;2181", null, null, -1, st);
            throw new IllegalStateException("reconfig succeeded on a standalone server: " + fmt(r));
        } catch (KeeperException e) {
            comment("result: error " + e.code() + " (" + e.code().intValue() + ")");
        }
        comment("step: reconfigure(joining=null, leaving=\"1\", newMembers=null, fromConfig=5)");
        try {
            zk.reconfigure((String) null, "1", null, 5, st);
            throw new IllegalStateException("reconfig succeeded on a standalone server");
        } catch (KeeperException e) {
            comment("result: error " + e.code() + " (" + e.code().intValue() + ")");
        }
        close(zk);
        endScenario();
    }

    /** Reconnect to the same session while holding watches: setWatches (101) and setWatches2 (105). */
    void javaReconnect() throws Exception {
        scenario("java_reconnect",
                "scenario: the proxy cuts the connection while the client holds watches and auth; the client reconnects",
                "to the same session (ConnectRequest with its sessionId, passwd and lastZxidSeen), re-sends its watches",
                "(setWatches 101, or setWatches2 105 once it has persistent watches) and its auth (xid -4). setWatches goes out",
                "with an ordinary xid: ClientCnxn builds it with SET_WATCHES_XID -8 but its socket layer overwrites every xid but ping/auth.",
                "Changes made by another client while disconnected fire on reconnect. Lines '# reconnect' start a new connection.");
        zk = open(TIMEOUT, false);
        ZooKeeper other = directClient();
        ok("addAuthInfo digest alice:secret", () -> {
            zk.addAuthInfo("digest", b("alice:secret"));
            return "sent";
        });
        ok("create /rc", () -> zk.create("/rc", b(""), OPEN, CreateMode.PERSISTENT));
        ok("create /rc/a", () -> zk.create("/rc/a", b("a"), OPEN, CreateMode.PERSISTENT));
        ok("create /rc/gone", () -> zk.create("/rc/gone", b(""), OPEN, CreateMode.PERSISTENT));
        ok("create /rc/same", () -> zk.create("/rc/same", b(""), OPEN, CreateMode.PERSISTENT));
        ok("exists /rc/new watch=true (miss: exist watch)", () -> zk.exists("/rc/new", true));
        ok("getData /rc/a watch=true (data watch)", () -> fmt(zk.getData("/rc/a", true, null)));
        ok("getChildren /rc watch=true (child watch)", () -> zk.getChildren("/rc", true));
        ok("exists /rc/gone watch=true (hit: data watch)", () -> zk.exists("/rc/gone", true));
        ok("getData /rc/same watch=true (data watch on a node that will not change)", () -> fmt(zk.getData("/rc/same", true, null)));

        comment("proxy: PAUSE (hold new connections), CUT; meanwhile another client (not recorded) creates /rc/new,");
        comment("sets /rc/a and deletes /rc/gone; then RESUME lets the reconnect through");
        ctl.cmd("PAUSE");
        ctl.cmd("CUT");
        defaultWatcher.awaitState(KeeperState.Disconnected);
        other.create("/rc/new", b(""), OPEN, CreateMode.PERSISTENT);
        other.setData("/rc/a", b("changed"), -1);
        other.delete("/rc/gone", -1);
        ctl.cmd("RESUME");
        defaultWatcher.awaitState(KeeperState.SyncConnected);
        comment("reconnected: sessionId=0x" + Long.toHexString(zk.getSessionId()));
        // Four triggers: NodeCreated /rc/new, NodeDataChanged /rc/a, NodeDeleted /rc/gone, NodeChildrenChanged /rc
        List<String> got = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            WatchedEvent e = nextWatchEvent();
            got.add(e.getType() + " " + e.getPath() + " zxid=0x" + Long.toHexString(e.getZxid()));
        }
        comment("events after setWatches: " + got);
        expectNoEvent(300);
        ok("whoAmI (auth was re-sent on reconnect)", () -> zk.whoAmI());

        comment("phase 2: persistent watches make the client use setWatches2 (105)");
        Events pw = new Events("persistent", events);
        Events rw = new Events("recursive", events);
        ok("addWatch /rc/a PERSISTENT", () -> {
            zk.addWatch("/rc/a", pw, AddWatchMode.PERSISTENT);
            return "added";
        });
        ok("addWatch /rc PERSISTENT_RECURSIVE", () -> {
            zk.addWatch("/rc", rw, AddWatchMode.PERSISTENT_RECURSIVE);
            return "added";
        });
        ok("exists /rc/new2 watch=true (exist watch)", () -> zk.exists("/rc/new2", true));
        ok("getChildren /rc/a watch=true (child watch)", () -> zk.getChildren("/rc/a", true));
        comment("proxy: PAUSE, CUT; the other client sets /rc/a and creates /rc/new2; RESUME");
        ctl.cmd("PAUSE");
        ctl.cmd("CUT");
        defaultWatcher.awaitState(KeeperState.Disconnected);
        other.setData("/rc/a", b("changed again"), -1);
        other.create("/rc/new2", b(""), OPEN, CreateMode.PERSISTENT);
        ctl.cmd("RESUME");
        defaultWatcher.awaitState(KeeperState.SyncConnected);
        comment("reconnected");
        Thread.sleep(500);
        List<String> got2 = new ArrayList<>();
        WatchedEvent e;
        while ((e = events.poll(200, TimeUnit.MILLISECONDS)) != null) {
            if (e.getType() != EventType.None) {
                got2.add(e.getType() + " " + e.getPath() + " zxid=0x" + Long.toHexString(e.getZxid()));
            }
        }
        comment("events delivered to the client's watchers after setWatches2 (one wire notification can reach several watchers): " + got2);

        comment("phase 3: reconnect with nothing changed (setWatches2 re-registers, no events)");
        ctl.cmd("CUT");
        defaultWatcher.awaitState(KeeperState.Disconnected);
        defaultWatcher.awaitState(KeeperState.SyncConnected);
        comment("reconnected");
        expectNoEvent(500);
        ok("setData /rc/a (the re-registered persistent watches fire)", () -> zk.setData("/rc/a", b("3"), -1));
        Thread.sleep(300);
        List<String> got3 = new ArrayList<>();
        while ((e = events.poll(200, TimeUnit.MILLISECONDS)) != null) {
            if (e.getType() != EventType.None) {
                got3.add(e.getType() + " " + e.getPath() + " zxid=0x" + Long.toHexString(e.getZxid()));
            }
        }
        comment("events: " + got3);
        close(zk);
        other.close();
        endScenario();
    }

    /** Reconnect with an expired session, and with a wrong password. */
    void javaExpired() throws Exception {
        scenario("java_expired",
                "scenario: (1) a session is abandoned without closeSession (the client's connection object is shut down),",
                "the server expires it; a new Java client then connects with the old sessionId and passwd and gets the",
                "'session expired' ConnectResponse (timeOut 0, sessionId 0, 16 zero bytes of passwd) and the server closes",
                "the connection. (2) a client connects to a live session with a wrong passwd: the same answer.");
        zk = open(4000, false);
        final long sid = zk.getSessionId();
        final byte[] pw = zk.getSessionPasswd();
        ok("create /expired-e EPHEMERAL", () -> zk.create("/expired-e", b(""), OPEN, CreateMode.EPHEMERAL));
        comment("step: abandon the session: ClientCnxn.disconnect() closes the socket, no closeSession is sent");
        zk.abandon();
        ZooKeeper other = directClient();
        long deadline = System.currentTimeMillis() + 30000;
        while (other.exists("/expired-e", false) != null) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("session did not expire");
            }
            Thread.sleep(200);
        }
        comment("the server expired the session (its ephemeral /expired-e is gone, checked over another connection)");
        Events w = new Events("expired", new LinkedBlockingQueue<>());
        comment(String.format("connect: new client with the expired sessionId=0x%x and its passwd", sid));
        ZooKeeper z2 = new ZooKeeper(proxy, 4000, w, sid, pw);
        w.awaitState(KeeperState.Expired);
        comment("result: client state " + z2.getState() + " after an Expired event");
        z2.close();
        ctl.cmd("WAIT_CLOSED 15");

        ZooKeeper live = directClient();
        long liveId = live.getSessionId();
        byte[] wrong = live.getSessionPasswd().clone();
        wrong[0] ^= 0x55;
        Events w3 = new Events("wrong-passwd", new LinkedBlockingQueue<>());
        comment(String.format("connect: sessionId=0x%x of a live session (opened directly, not recorded) with a wrong passwd", liveId));
        ZooKeeper z3 = new ZooKeeper(proxy, 4000, w3, liveId, wrong);
        w3.awaitState(KeeperState.Expired);
        comment("result: client state " + z3.getState() + " after an Expired event");
        z3.close();
        live.close();
        other.close();
        endScenario();
    }

    /** An opcode the server does not know. */
    void javaUnknownOp() throws Exception {
        scenario("java_unknown_op",
                "scenario: a request with opcode 999 (sent raw, empty body): the server answers err Unimplemented (-6)",
                "and closes the connection (not the session); the Java client reconnects to the same session");
        zk = open(TIMEOUT, false);
        ok("exists / ", () -> zk.exists("/", false));
        comment("step: raw request type=999 with an empty body");
        ReplyHeader h = zk.raw(999, null, null);
        comment("result: err=" + Code.get(h.getErr()) + " (" + h.getErr() + ") zxid=0x" + Long.toHexString(h.getZxid()));
        if (h.getErr() != Code.UNIMPLEMENTED.intValue()) {
            throw new IllegalStateException("opcode 999 gave " + h.getErr());
        }
        defaultWatcher.awaitState(KeeperState.Disconnected);
        defaultWatcher.awaitState(KeeperState.SyncConnected);
        comment("reconnected: sessionId=0x" + Long.toHexString(zk.getSessionId()));
        ok("exists / after the reconnect", () -> zk.exists("/", false));
        close(zk);
        endScenario();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: GoldenDriver <proxy host:port> <direct host:port> <control port> [scenario...]");
            System.exit(2);
        }
        GoldenDriver d = new GoldenDriver(args[0], args[1], Integer.parseInt(args[2]));
        List<String> all = Arrays.asList("create", "basic", "seq", "ping", "watches", "multi", "acl", "authfailed",
                "reconfig", "reconnect", "expired", "unknown_op");
        List<String> which = args.length > 3 ? Arrays.asList(args).subList(3, args.length) : all;
        int status = 0;
        try {
            for (String s : which) {
                switch (s) {
                    case "create": d.javaCreate(); break;
                    case "basic": d.javaBasic(); break;
                    case "seq": d.javaSeq(); break;
                    case "ping": d.javaPing(); break;
                    case "watches": d.javaWatches(); break;
                    case "multi": d.javaMulti(); break;
                    case "acl": d.javaAcl(); break;
                    case "authfailed": d.javaAuthFailed(); break;
                    case "reconfig": d.javaReconfig(); break;
                    case "reconnect": d.javaReconnect(); break;
                    case "expired": d.javaExpired(); break;
                    case "unknown_op": d.javaUnknownOp(); break;
                    default: throw new IllegalArgumentException("unknown scenario " + s);
                }
            }
        } catch (Throwable t) {
            t.printStackTrace();
            status = 1;
        }
        System.exit(status);
    }
}
