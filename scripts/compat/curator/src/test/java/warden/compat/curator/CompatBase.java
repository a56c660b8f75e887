package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.TestInfo;

/**
 * Shared plumbing: the connect string of the server under test (system property
 * {@code compat.connect}, set by run.sh), one private base znode per test, Curator clients that are
 * each their own ZooKeeper session and are all closed after the test, and small polling helpers.
 */
abstract class CompatBase {
    static final String ROOT = "/curator-compat";
    /** Session timeout the Curator clients ask for (the server may negotiate it down or up). */
    static final int SESSION_TIMEOUT_MS = 15_000;

    private final List<CuratorFramework> clients = new CopyOnWriteArrayList<>();
    private final List<ZooKeeper> rawHandles = new CopyOnWriteArrayList<>();
    private final List<AutoCloseable> closeables = new CopyOnWriteArrayList<>();
    private ExecutorService pool;

    /** Client used for setup, checks from the outside, and cleanup. */
    protected CuratorFramework admin;
    /** This test's own base path; everything the test creates lives below it. */
    protected String base;

    static String connectString() {
        String s = System.getProperty("compat.connect", "").trim();
        if (s.isEmpty()) {
            fail("system property compat.connect (host:port of the server under test) is not set; run the suite through run.sh");
        }
        return s;
    }

    @BeforeEach
    void setUpBase(TestInfo info) throws Exception {
        pool = Executors.newCachedThreadPool();
        admin = newClient();
        String method = info.getTestMethod().map(m -> m.getName()).orElse("test");
        base = ROOT + "/" + getClass().getSimpleName() + "." + method + "-"
                + Long.toHexString(ThreadLocalRandom.current().nextLong() & 0xFFFFFFFFFFL);
        admin.create().creatingParentsIfNeeded().forPath(base);
    }

    @AfterEach
    void tearDownBase() throws Exception {
        try {
            if (pool != null) {
                pool.shutdownNow();
                pool.awaitTermination(10, TimeUnit.SECONDS);
            }
            List<AutoCloseable> cs = new ArrayList<>(closeables);
            Collections.reverse(cs);
            for (AutoCloseable c : cs) {
                try {
                    c.close();
                } catch (Exception | AssertionError ignored) {
                    // the test may have closed it already, or its session may be gone
                }
            }
            try {
                if (admin != null && admin.checkExists().forPath(base) != null) {
                    admin.delete().deletingChildrenIfNeeded().forPath(base);
                }
            } catch (KeeperException.NoNodeException ignored) {
                // already gone
            } catch (Exception e) {
                System.err.println("cleanup of " + base + " failed: " + e);
            }
        } finally {
            for (ZooKeeper zk : rawHandles) {
                try {
                    zk.close(2_000);
                } catch (Exception ignored) {
                    // best effort
                }
            }
            List<CuratorFramework> cs = new ArrayList<>(clients);
            Collections.reverse(cs);
            for (CuratorFramework c : cs) {
                c.close();
            }
        }
    }

    /** A new started Curator client, i.e. a new session; closed after the test. */
    protected CuratorFramework newClient() throws InterruptedException {
        return newClient(SESSION_TIMEOUT_MS);
    }

    protected CuratorFramework newClient(int sessionTimeoutMs) throws InterruptedException {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(connectString())
                .sessionTimeoutMs(sessionTimeoutMs)
                .connectionTimeoutMs(10_000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5, 2_000))
                .build();
        clients.add(c);
        c.start();
        assertTrue(c.blockUntilConnected(20, TimeUnit.SECONDS), "Curator client did not connect to " + connectString());
        return c;
    }

    /** Registers a recipe (or anything closeable) to be closed after the test, before the clients. */
    protected <T extends AutoCloseable> T closeLater(T c) {
        closeables.add(c);
        return c;
    }

    /** Opens a plain ZooKeeper handle and waits until it is connected; closed after the test. */
    protected ZooKeeper newRawHandle(String connect, int sessionTimeoutMs, Watcher watcher) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(connect, sessionTimeoutMs, e -> {
            if (e.getType() == Watcher.Event.EventType.None && e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
            if (watcher != null) {
                watcher.process(e);
            }
        });
        rawHandles.add(zk);
        assertTrue(connected.await(20, TimeUnit.SECONDS), "raw ZooKeeper handle did not connect to " + connect);
        return zk;
    }

    /**
     * Ends {@code victim}'s session on the server for real: a second handle opens the same session
     * (id + password), which moves the session to it, and then closes it. The server must then
     * expire/close the session, delete its ephemerals and fire their watches; the victim finds its
     * session expired when it reconnects.
     */
    protected void killSession(CuratorFramework victim) throws Exception {
        ZooKeeper zk = victim.getZookeeperClient().getZooKeeper();
        long id = zk.getSessionId();
        byte[] password = zk.getSessionPasswd();
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper dup = new ZooKeeper(connectString(), SESSION_TIMEOUT_MS, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        }, id, password);
        try {
            assertTrue(connected.await(20, TimeUnit.SECONDS), "second handle for session 0x" + Long.toHexString(id) + " did not connect");
            assertTrue(dup.getSessionId() == id, "second handle got another session id");
        } finally {
            dup.close(5_000);
        }
    }

    /** Runs each task on its own thread and waits for all; rethrows the first failure. */
    protected <T> List<T> runAll(List<Callable<T>> tasks, Duration timeout) throws Exception {
        List<Future<T>> futures = new ArrayList<>();
        for (Callable<T> t : tasks) {
            futures.add(pool.submit(t));
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        List<T> results = new ArrayList<>();
        for (Future<T> f : futures) {
            try {
                results.add(f.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS));
            } catch (ExecutionException e) {
                futures.forEach(x -> x.cancel(true));
                Throwable cause = e.getCause();
                if (cause instanceof Exception ex) {
                    throw ex;
                }
                if (cause instanceof Error err) {
                    throw err;
                }
                throw e;
            } catch (TimeoutException e) {
                futures.forEach(x -> x.cancel(true));
                fail("tasks did not finish within " + timeout);
            }
        }
        return results;
    }

    protected <T> Future<T> submit(Callable<T> task) {
        return pool.submit(task);
    }

    /** Polls {@code condition} every 50 ms until it holds; fails with {@code message} after {@code timeout}. */
    protected static void await(String message, Duration timeout, CheckedCondition condition) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            if (condition.holds()) {
                return;
            }
            if (System.nanoTime() > deadline) {
                fail(message + " (not true within " + timeout.toMillis() + " ms)");
            }
            Thread.sleep(50);
        }
    }

    @FunctionalInterface
    interface CheckedCondition {
        boolean holds() throws Exception;
    }

    /** Children of {@code path} as {@code admin} sees them; empty when the node does not exist. */
    protected List<String> childrenOrEmpty(String path) throws Exception {
        try {
            return admin.getChildren().forPath(path);
        } catch (KeeperException.NoNodeException e) {
            return List.of();
        }
    }

    protected String path(String relative) {
        return base + "/" + relative;
    }
}
