package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Recipes across the loss of a server: run.sh's cluster run starts a 3-server ensemble (one
 * fresh ensemble per test method) and passes it as {@code compat.cluster}
 * ({@code id=pid@host:port,...}, every server's process and client address) and the connect string
 * of all three as {@code compat.connect}. Each test kills the ensemble's leader with SIGKILL, by
 * PID, while the recipe is in use, and checks that the sessions survive the failover (same session
 * ids, never LOST) and that the recipe's guarantees hold across it. Tagged {@code cluster}: the
 * standalone run leaves it out.
 */
@Tag("cluster")
class ClusterFailoverTest extends CompatBase {
    /** Time for the remaining two servers to elect a leader and serve again. */
    private static final Duration FAILOVER = Duration.ofSeconds(30);

    record Server(int id, long pid, String host, int port) {
        String address() {
            return host + ":" + port;
        }
    }

    static List<Server> cluster() {
        String spec = System.getProperty("compat.cluster", "").trim();
        if (spec.isEmpty()) {
            fail("system property compat.cluster (id=pid@host:port,...) is not set; run the cluster tests through run.sh");
        }
        List<Server> servers = new ArrayList<>();
        for (String entry : spec.split(",")) {
            String[] idRest = entry.split("=", 2);
            String[] pidAddr = idRest[1].split("@", 2);
            int colon = pidAddr[1].lastIndexOf(':');
            servers.add(new Server(Integer.parseInt(idRest[0]), Long.parseLong(pidAddr[0]),
                    pidAddr[1].substring(0, colon), Integer.parseInt(pidAddr[1].substring(colon + 1))));
        }
        return servers;
    }

    /** The four-letter word's answer, or "" when the server does not answer within 2 s. */
    static String fourLetterWord(Server s, String word) {
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress(s.host(), s.port()), 2_000);
            socket.setSoTimeout(2_000);
            OutputStream out = socket.getOutputStream();
            out.write(word.getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = socket.getInputStream();
            ByteArrayOutputStream answer = new ByteArrayOutputStream();
            in.transferTo(answer);
            return answer.toString(StandardCharsets.UTF_8);
        } catch (Exception e) {
            return "";
        }
    }

    static boolean isAlive(Server s) {
        return ProcessHandle.of(s.pid()).map(ProcessHandle::isAlive).orElse(false);
    }

    /** The server that answers `srvr` with {@code Mode: leader}, among the live ones; waits for one. */
    static Server awaitLeader(List<Server> servers) throws Exception {
        Server[] leader = new Server[1];
        await("a live server says Mode: leader", FAILOVER, () -> {
            for (Server s : servers) {
                if (isAlive(s) && fourLetterWord(s, "srvr").contains("Mode: leader")) {
                    leader[0] = s;
                    return true;
                }
            }
            return false;
        });
        return leader[0];
    }

    /** SIGKILL to the server's PID (it was started by run.sh), and waits until it is gone. */
    static void kill9(Server s) throws Exception {
        ProcessHandle p = ProcessHandle.of(s.pid()).orElseThrow(() -> new AssertionError("server " + s + " is not running"));
        assertTrue(p.destroyForcibly(), "SIGKILL to pid " + s.pid() + " was refused");
        p.onExit().get(10, TimeUnit.SECONDS);
        System.err.println("killed server " + s.id() + " (pid " + s.pid() + ", " + s.address() + ") with SIGKILL");
    }

    /** Kills the leader; returns once the other servers have a new leader that serves. */
    static Server killLeaderAndAwaitNewOne() throws Exception {
        List<Server> servers = cluster();
        Server old = awaitLeader(servers);
        kill9(old);
        Server next = awaitLeader(servers);
        assertTrue(next.id() != old.id(), "the killed server is still the leader");
        return next;
    }

    /** Records every connection state a client goes through. */
    static List<ConnectionState> recordStates(CuratorFramework client) {
        List<ConnectionState> states = new CopyOnWriteArrayList<>();
        client.getConnectionStateListenable().addListener((c, s) -> states.add(s));
        return states;
    }

    static long sessionId(CuratorFramework client) throws Exception {
        return client.getZookeeperClient().getZooKeeper().getSessionId();
    }

    @Test
    @Timeout(150)
    void leaderLatchKeepsOneLeaderWhenTheLeaderServerIsKilled() throws Exception {
        String latchPath = path("latch");
        Map<String, LeaderLatch> latches = new LinkedHashMap<>();
        Map<String, CuratorFramework> clients = new LinkedHashMap<>();
        Map<String, Long> sessions = new LinkedHashMap<>();
        Map<String, List<ConnectionState>> states = new LinkedHashMap<>();
        Set<String> leaders = ConcurrentHashMap.newKeySet();
        List<String> violations = new CopyOnWriteArrayList<>();
        for (int i = 0; i < 3; i++) {
            String id = "member-" + i;
            CuratorFramework client = newClient();
            LeaderLatch latch = closeLater(new LeaderLatch(client, latchPath, id));
            latch.addListener(new LeaderLatchListener() {
                @Override
                public void isLeader() {
                    leaders.add(id);
                    if (leaders.size() > 1) {
                        violations.add("two leaders at once: " + new HashSet<>(leaders));
                    }
                }

                @Override
                public void notLeader() {
                    leaders.remove(id);
                }
            });
            latches.put(id, latch);
            clients.put(id, client);
            sessions.put(id, sessionId(client));
            states.put(id, recordStates(client));
            latch.start();
        }
        awaitSingleLeader(latches);

        killLeaderAndAwaitNewOne();

        // Every member is connected again, with the session it had: the latch nodes (ephemeral)
        // survived, so there are still 3 participants and exactly one leader.
        for (String id : latches.keySet()) {
            CuratorFramework c = clients.get(id);
            await(id + " is connected again", FAILOVER, () -> c.getZookeeperClient().isConnected());
            assertEquals(sessions.get(id), sessionId(c), id + "'s session changed across the failover");
            assertFalse(states.get(id).contains(ConnectionState.LOST), id + " saw its session LOST: " + states.get(id));
        }
        String leader = awaitSingleLeader(latches);
        await("3 participants after the failover", FAILOVER, () -> admin.getChildren().forPath(latchPath).size() == 3);
        for (LeaderLatch l : latches.values()) {
            assertEquals(3, l.getParticipants().size(), "participants seen by " + l.getId());
        }

        // And the latch still fails over on the two remaining servers.
        leaders.remove(leader);
        latches.remove(leader);
        clients.remove(leader).close();
        String next = awaitSingleLeader(latches);
        assertTrue(!next.equals(leader));
        await("2 participants", FAILOVER, () -> admin.getChildren().forPath(latchPath).size() == 2);
        assertTrue(violations.isEmpty(), violations.toString());
    }

    /** Waits until exactly one latch leads and all agree who; returns its id. */
    private static String awaitSingleLeader(Map<String, LeaderLatch> latches) throws Exception {
        String[] leader = new String[1];
        await("exactly one leader among " + latches.keySet(), FAILOVER, () -> {
            List<String> claiming = latches.entrySet().stream()
                    .filter(e -> e.getValue().hasLeadership())
                    .map(Map.Entry::getKey)
                    .collect(Collectors.toList());
            if (claiming.size() != 1) {
                return false;
            }
            for (LeaderLatch l : latches.values()) {
                Participant p = l.getLeader();
                if (!p.isLeader() || !p.getId().equals(claiming.get(0))) {
                    return false;
                }
            }
            leader[0] = claiming.get(0);
            return true;
        });
        return leader[0];
    }

    /**
     * One versioned increment of {@code counter} by the lock holder. A write whose reply was lost in
     * the failover (ConnectionLoss, retried by Curator) may have committed: then the retry finds
     * BadVersion and the node already holds our value at the next version, which counts as done.
     */
    private static void increment(CuratorFramework client, String counter) throws Exception {
        Stat stat = new Stat();
        int value = Integer.parseInt(new String(client.getData().storingStatIn(stat).forPath(counter), StandardCharsets.UTF_8));
        byte[] next = Integer.toString(value + 1).getBytes(StandardCharsets.UTF_8);
        try {
            client.setData().withVersion(stat.getVersion()).forPath(counter, next);
        } catch (KeeperException.BadVersionException e) {
            Stat now = new Stat();
            byte[] data = client.getData().storingStatIn(now).forPath(counter);
            assertEquals(new String(next, StandardCharsets.UTF_8), new String(data, StandardCharsets.UTF_8),
                    "BadVersion, and the counter does not hold our own write: someone else wrote under the lock");
            assertEquals(stat.getVersion() + 1, now.getVersion(), "BadVersion, and more than our one write happened");
        }
    }

    @Test
    @Timeout(150)
    void lockHeldAcrossTheLeaderServerKill() throws Exception {
        String lockPath = path("lock");
        String counter = path("counter");
        admin.create().forPath(counter, "0".getBytes(StandardCharsets.UTF_8));
        CuratorFramework holderClient = newClient();
        CuratorFramework waiterClient = newClient();
        long holderSession = sessionId(holderClient);
        long waiterSession = sessionId(waiterClient);
        List<ConnectionState> holderStates = recordStates(holderClient);
        List<ConnectionState> waiterStates = recordStates(waiterClient);
        InterProcessMutex holderLock = new InterProcessMutex(holderClient, lockPath);
        InterProcessMutex waiterLock = new InterProcessMutex(waiterClient, lockPath);

        // The holder takes the lock and keeps writing under it, on its own thread, through the kill.
        assertTrue(holderLock.acquire(30, TimeUnit.SECONDS));
        AtomicBoolean keepWriting = new AtomicBoolean(true);
        AtomicInteger holderWrites = new AtomicInteger();
        Future<?> writer = submit(() -> {
            while (keepWriting.get()) {
                increment(holderClient, counter);
                holderWrites.incrementAndGet();
                Thread.sleep(20);
            }
            return null;
        });
        // The waiter queues behind it; once it has the lock it writes once and releases it, on its
        // own thread (a Curator lock belongs to the thread that took it).
        AtomicBoolean waiterHolds = new AtomicBoolean();
        CountDownLatch waiterMayWrite = new CountDownLatch(1);
        Future<Boolean> waiter = submit(() -> {
            if (!waiterLock.acquire(120, TimeUnit.SECONDS)) {
                return false;
            }
            waiterHolds.set(true);
            try {
                assertTrue(waiterMayWrite.await(60, TimeUnit.SECONDS));
                increment(waiterClient, counter);
            } finally {
                waiterLock.release();
            }
            return true;
        });
        await("the waiter's lock node is queued", FAILOVER, () -> admin.getChildren().forPath(lockPath).size() == 2);
        await("some writes under the lock before the kill", FAILOVER, () -> holderWrites.get() >= 5);

        killLeaderAndAwaitNewOne();

        int before = holderWrites.get();
        await("the holder writes again after the failover", FAILOVER, () -> holderWrites.get() >= before + 10);
        keepWriting.set(false);
        writer.get(FAILOVER.toSeconds(), TimeUnit.SECONDS);

        // Both sessions survived; the lock never changed hands: the holder still owns it and the
        // waiter is still waiting, both lock nodes are there.
        assertEquals(holderSession, sessionId(holderClient), "the holder's session changed across the failover");
        assertEquals(waiterSession, sessionId(waiterClient), "the waiter's session changed across the failover");
        assertFalse(holderStates.contains(ConnectionState.LOST), "holder saw LOST: " + holderStates);
        assertFalse(waiterStates.contains(ConnectionState.LOST), "waiter saw LOST: " + waiterStates);
        assertTrue(holderLock.isOwnedByCurrentThread(), "the holder lost the lock");
        assertFalse(waiterHolds.get(), "the waiter got the lock while the holder held it");
        assertFalse(waiter.isDone(), "the waiter stopped waiting");
        assertEquals(2, admin.getChildren().forPath(lockPath).size(), "lock nodes: " + admin.getChildren().forPath(lockPath));
        // Every increment is there once: none lost in the failover, none applied twice.
        assertEquals(Integer.toString(holderWrites.get()),
                new String(admin.getData().forPath(counter), StandardCharsets.UTF_8));

        holderLock.release();
        await("the waiter gets the lock after the release", FAILOVER, waiterHolds::get);
        waiterMayWrite.countDown();
        assertTrue(waiter.get(FAILOVER.toSeconds(), TimeUnit.SECONDS), "the waiter did not get the lock after the release");
        assertEquals(Integer.toString(holderWrites.get() + 1),
                new String(admin.getData().forPath(counter), StandardCharsets.UTF_8));
        assertEquals(0, admin.getChildren().forPath(lockPath).size());
    }
}
