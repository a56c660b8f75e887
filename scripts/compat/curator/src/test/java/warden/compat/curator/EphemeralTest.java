package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Ephemeral nodes go away with their session: closed, killed, or timed out after a network cut. */
class EphemeralTest extends CompatBase {

    private static WatchedEvent poll(BlockingQueue<WatchedEvent> q, String what, long seconds) throws InterruptedException {
        WatchedEvent e = q.poll(seconds, TimeUnit.SECONDS);
        if (e == null) {
            fail("no " + what + " within " + seconds + " s");
        }
        return e;
    }

    /** Waits for a connection-state event of the raw handle (other states in between are skipped). */
    private static void awaitState(BlockingQueue<KeeperState> states, KeeperState wanted, long seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (true) {
            KeeperState s = states.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            if (s == null) {
                fail("handle did not reach " + wanted + " within " + seconds + " s");
            }
            if (s == wanted) {
                return;
            }
        }
    }

    @Test
    @Timeout(60)
    void closedSessionRemovesItsEphemeralsAndFiresWatches() throws Exception {
        CuratorFramework owner = newClient();
        CuratorFramework observer = newClient();
        String parent = path("eph");
        admin.create().forPath(parent);
        owner.create().withMode(CreateMode.EPHEMERAL).forPath(parent + "/plain", "x".getBytes(StandardCharsets.UTF_8));
        String seq = owner.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(parent + "/seq-");
        observer.create().forPath(parent + "/keep"); // persistent, from another session

        Stat st = observer.checkExists().forPath(parent + "/plain");
        assertNotNull(st);
        assertEquals(owner.getZookeeperClient().getZooKeeper().getSessionId(), st.getEphemeralOwner(), "ephemeralOwner");

        BlockingQueue<WatchedEvent> existsEvents = new LinkedBlockingQueue<>();
        BlockingQueue<WatchedEvent> dataEvents = new LinkedBlockingQueue<>();
        BlockingQueue<WatchedEvent> childEvents = new LinkedBlockingQueue<>();
        observer.checkExists().usingWatcher((Watcher) existsEvents::add).forPath(parent + "/plain");
        observer.getData().usingWatcher((Watcher) dataEvents::add).forPath(seq);
        observer.getChildren().usingWatcher((Watcher) childEvents::add).forPath(parent);

        owner.close();

        WatchedEvent e1 = poll(existsEvents, "NodeDeleted for the ephemeral (exists watch)", 15);
        assertEquals(EventType.NodeDeleted, e1.getType());
        assertEquals(parent + "/plain", e1.getPath());
        WatchedEvent e2 = poll(dataEvents, "NodeDeleted for the sequential ephemeral (data watch)", 15);
        assertEquals(EventType.NodeDeleted, e2.getType());
        assertEquals(seq, e2.getPath());
        WatchedEvent e3 = poll(childEvents, "NodeChildrenChanged on the parent", 15);
        assertEquals(EventType.NodeChildrenChanged, e3.getType());
        assertEquals(List.of("keep"), observer.getChildren().forPath(parent));
    }

    @Test
    @Timeout(90)
    void killedSessionExpiresAndItsEphemeralsVanish() throws Exception {
        CuratorFramework owner = newClient();
        CuratorFramework observer = newClient();
        String node = path("owned");
        owner.create().withMode(CreateMode.EPHEMERAL).forPath(node);
        List<ConnectionState> ownerStates = new CopyOnWriteArrayList<>();
        owner.getConnectionStateListenable().addListener((c, s) -> ownerStates.add(s));
        long oldSession = owner.getZookeeperClient().getZooKeeper().getSessionId();

        BlockingQueue<WatchedEvent> events = new LinkedBlockingQueue<>();
        assertNotNull(observer.checkExists().usingWatcher((Watcher) events::add).forPath(node));

        killSession(owner);

        WatchedEvent e = poll(events, "NodeDeleted after the session was killed", 20);
        assertEquals(EventType.NodeDeleted, e.getType());
        assertEquals(node, e.getPath());
        assertNull(observer.checkExists().forPath(node));

        // The owner finds out: its session is expired (LOST), Curator makes a new one.
        await("owner sees LOST", Duration.ofSeconds(30), () -> ownerStates.contains(ConnectionState.LOST));
        await("owner reconnects with a new session", Duration.ofSeconds(30),
                () -> ownerStates.contains(ConnectionState.RECONNECTED)
                        && owner.getZookeeperClient().getZooKeeper().getSessionId() != oldSession);
        assertNull(owner.checkExists().forPath(node), "the expired session's ephemeral is back");
        owner.create().withMode(CreateMode.EPHEMERAL).forPath(node);
        Stat st = observer.checkExists().forPath(node);
        assertNotNull(st);
        assertNotEquals(oldSession, st.getEphemeralOwner());
    }

    @Test
    @Timeout(90)
    void sessionTimesOutAfterNetworkCut() throws Exception {
        final int timeoutMs = 6_000;
        TcpProxy proxy = closeLater(new TcpProxy(connectString()));
        BlockingQueue<KeeperState> states = new LinkedBlockingQueue<>();
        ZooKeeper owner = newRawHandle(proxy.connectString(), timeoutMs, e -> {
            if (e.getType() == EventType.None) {
                states.add(e.getState());
            }
        });
        states.clear();
        assertEquals(timeoutMs, owner.getSessionTimeout(), "negotiated session timeout (zoo.cfg allows 2000..60000)");
        long session = owner.getSessionId();
        String node = path("owned");
        owner.create(node, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);

        CuratorFramework observer = newClient();
        BlockingQueue<WatchedEvent> events = new LinkedBlockingQueue<>();
        assertNotNull(observer.checkExists().usingWatcher((Watcher) events::add).forPath(node));

        // 1. A short cut: the client reconnects through the restored link and keeps its session.
        proxy.cut();
        awaitState(states, KeeperState.Disconnected, 10);
        Thread.sleep(1_000);
        proxy.restore();
        awaitState(states, KeeperState.SyncConnected, 15);
        assertEquals(session, owner.getSessionId());
        assertNotNull(owner.exists(node, false), "ephemeral lost although the session survived");
        assertNull(events.poll(), "watch fired although the session survived: ");

        // 2. A long cut: the server must expire the session on its own, then delete the ephemeral.
        long cutAt = System.nanoTime();
        proxy.cut();
        awaitState(states, KeeperState.Disconnected, 10);
        Thread.sleep(1_500);
        assertNotNull(observer.checkExists().forPath(node), "ephemeral deleted as soon as the connection dropped");
        WatchedEvent e = poll(events, "NodeDeleted after the session timed out", 30);
        long elapsedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - cutAt);
        assertEquals(EventType.NodeDeleted, e.getType());
        assertEquals(node, e.getPath());
        assertTrue(elapsedMs >= timeoutMs / 2, "session expired " + elapsedMs + " ms after the cut, timeout " + timeoutMs);
        System.out.println("ephemeral deleted " + elapsedMs + " ms after the cut (session timeout " + timeoutMs + " ms)");

        // 3. Back online, the old handle is told its session expired.
        proxy.restore();
        awaitState(states, KeeperState.Expired, 30);
    }
}
