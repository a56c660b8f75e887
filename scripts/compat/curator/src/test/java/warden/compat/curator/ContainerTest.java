package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.apache.zookeeper.data.Stat;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Container znodes (CreateMode.CONTAINER, what Curator's creatingParentContainersIfNeeded and the
 * lock recipes use for parents): the server deletes a container once it has had children and has
 * none left. run.sh sets the server's container check interval to {@value #CHECK_INTERVAL_MS} ms
 * (znode.container.checkIntervalMs); the deadlines below allow several intervals.
 */
class ContainerTest extends CompatBase {
    static final int CHECK_INTERVAL_MS = 1_000;
    private static final Duration REAPED_WITHIN = Duration.ofMillis(10L * CHECK_INTERVAL_MS);

    @Test
    @Timeout(60)
    void containerRemovedAfterItsLastChildIsDeleted() throws Exception {
        CuratorFramework client = newClient();
        String container = path("container");
        client.create().withMode(CreateMode.CONTAINER).forPath(container);
        Stat st = client.checkExists().forPath(container);
        assertNotNull(st);
        assertTrue(st.getEphemeralOwner() == 0, "a container is not ephemeral");
        client.create().forPath(container + "/a");
        client.create().forPath(container + "/b");

        Thread.sleep(3L * CHECK_INTERVAL_MS);
        assertNotNull(client.checkExists().forPath(container), "a container with children was removed");
        client.delete().forPath(container + "/a");
        Thread.sleep(3L * CHECK_INTERVAL_MS);
        assertNotNull(client.checkExists().forPath(container), "a container with a child left was removed");

        BlockingQueue<WatchedEvent> events = new LinkedBlockingQueue<>();
        assertNotNull(newClient().checkExists().usingWatcher((Watcher) events::add).forPath(container));
        long t0 = System.nanoTime();
        client.delete().forPath(container + "/b");
        WatchedEvent e = events.poll(REAPED_WITHIN.toMillis(), TimeUnit.MILLISECONDS);
        assertNotNull(e, "empty container not removed within " + REAPED_WITHIN.toMillis() + " ms");
        assertTrue(e.getType() == EventType.NodeDeleted, "event " + e);
        assertNull(client.checkExists().forPath(container));
        System.out.println("container removed " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) + " ms after its last child");
    }

    @Test
    @Timeout(60)
    void neverUsedContainerIsKept() throws Exception {
        // ZooKeeper deletes only containers that have had a child (cversion > 0), unless
        // znode.container.maxNeverUsedIntervalMs is set (default 0: never).
        String container = path("unused");
        admin.create().withMode(CreateMode.CONTAINER).forPath(container);
        Thread.sleep(4L * CHECK_INTERVAL_MS);
        assertNotNull(admin.checkExists().forPath(container), "a never-used container was removed");
    }

    @Test
    @Timeout(60)
    void parentContainersAreReapedBottomUp() throws Exception {
        CuratorFramework client = newClient();
        String top = path("p1");
        String leaf = top + "/p2/p3/leaf";
        client.create().creatingParentContainersIfNeeded().forPath(leaf);
        assertNotNull(client.checkExists().forPath(top + "/p2/p3"));
        client.delete().forPath(leaf);
        // p3 empties first; once it is gone p2 is empty, then p1.
        await("p3 reaped", REAPED_WITHIN, () -> client.checkExists().forPath(top + "/p2/p3") == null);
        await("p2 reaped", REAPED_WITHIN, () -> client.checkExists().forPath(top + "/p2") == null);
        await("p1 reaped", REAPED_WITHIN, () -> client.checkExists().forPath(top) == null);
        assertNotNull(client.checkExists().forPath(base), "the persistent base node must stay");
    }

    @Test
    @Timeout(60)
    void lockParentReapedAfterRelease() throws Exception {
        CuratorFramework client = newClient();
        String lockPath = path("locks/resource");
        InterProcessMutex mutex = new InterProcessMutex(client, lockPath);
        assertTrue(mutex.acquire(10, TimeUnit.SECONDS));
        Thread.sleep(2L * CHECK_INTERVAL_MS);
        assertNotNull(client.checkExists().forPath(lockPath), "lock parent reaped while the lock was held");
        mutex.release();
        await("lock parent reaped after release", REAPED_WITHIN, () -> client.checkExists().forPath(lockPath) == null);
        await("its parent reaped too", REAPED_WITHIN, () -> client.checkExists().forPath(path("locks")) == null);
    }
}
