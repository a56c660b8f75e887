package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.zookeeper.data.Stat;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** InterProcessMutex: mutual exclusion across sessions, reentrancy, release when the holder's session ends. */
class MutexTest extends CompatBase {
    private static final int CLIENTS = 5;
    private static final int ROUNDS = 20;

    @Test
    @Timeout(120)
    void contendedCounterHasNoLostUpdates() throws Exception {
        String counter = path("counter");
        String lockPath = path("lock");
        admin.create().forPath(counter, "0".getBytes(StandardCharsets.UTF_8));

        AtomicInteger holders = new AtomicInteger();
        AtomicInteger maxHolders = new AtomicInteger();
        List<Callable<Integer>> tasks = new ArrayList<>();
        for (int i = 0; i < CLIENTS; i++) {
            CuratorFramework client = newClient();
            InterProcessMutex mutex = new InterProcessMutex(client, lockPath);
            tasks.add(() -> {
                int done = 0;
                for (int r = 0; r < ROUNDS; r++) {
                    assertTrue(mutex.acquire(30, TimeUnit.SECONDS), "acquire timed out");
                    try {
                        int now = holders.incrementAndGet();
                        maxHolders.accumulateAndGet(now, Math::max);
                        Stat stat = new Stat();
                        int value = Integer.parseInt(new String(
                                client.getData().storingStatIn(stat).forPath(counter), StandardCharsets.UTF_8));
                        if (ThreadLocalRandom.current().nextInt(4) == 0) {
                            Thread.sleep(ThreadLocalRandom.current().nextInt(3));
                        }
                        // Versioned write: a concurrent writer would make this fail with BadVersion.
                        client.setData().withVersion(stat.getVersion())
                                .forPath(counter, Integer.toString(value + 1).getBytes(StandardCharsets.UTF_8));
                        holders.decrementAndGet();
                        done++;
                    } finally {
                        mutex.release();
                    }
                }
                return done;
            });
        }
        List<Integer> done = runAll(tasks, Duration.ofSeconds(100));
        assertEquals(CLIENTS * ROUNDS, done.stream().mapToInt(Integer::intValue).sum());
        assertEquals(1, maxHolders.get(), "more than one client held the mutex at once");
        Stat stat = new Stat();
        String value = new String(admin.getData().storingStatIn(stat).forPath(counter), StandardCharsets.UTF_8);
        assertEquals(Integer.toString(CLIENTS * ROUNDS), value, "lost updates on the shared counter");
        assertEquals(CLIENTS * ROUNDS, stat.getVersion(), "counter znode version");
        assertTrue(childrenOrEmpty(lockPath).isEmpty(), "lock nodes left behind after every release");
    }

    @Test
    @Timeout(60)
    void reentrantAndExclusiveAcrossSessions() throws Exception {
        String lockPath = path("lock");
        InterProcessMutex a = new InterProcessMutex(newClient(), lockPath);
        InterProcessMutex b = new InterProcessMutex(newClient(), lockPath);

        assertTrue(a.acquire(10, TimeUnit.SECONDS));
        assertTrue(a.acquire(10, TimeUnit.SECONDS), "reentrant acquire by the holder");
        assertTrue(a.isAcquiredInThisProcess());
        assertEquals(1, admin.getChildren().forPath(lockPath).size(), "reentrancy must not create a second lock node");

        assertFalse(b.acquire(300, TimeUnit.MILLISECONDS), "another session acquired a held mutex");
        a.release();
        assertFalse(b.acquire(300, TimeUnit.MILLISECONDS), "released once of twice: still held");
        a.release();
        assertTrue(b.acquire(10, TimeUnit.SECONDS), "free mutex not acquired");
        assertEquals(1, b.getParticipantNodes().size());
        b.release();
        assertTrue(childrenOrEmpty(lockPath).isEmpty());
    }

    @Test
    @Timeout(60)
    void holderSessionEndReleasesTheLock() throws Exception {
        String lockPath = path("lock");
        CuratorFramework holderClient = newClient();
        InterProcessMutex holder = new InterProcessMutex(holderClient, lockPath);
        InterProcessMutex waiter = new InterProcessMutex(newClient(), lockPath);
        assertTrue(holder.acquire(10, TimeUnit.SECONDS));

        // InterProcessMutex is owned by a thread: the waiter acquires, and later releases, on its own thread.
        CountDownLatch waiting = new CountDownLatch(1);
        CountDownLatch checked = new CountDownLatch(1);
        Future<Boolean> got = submit(() -> {
            waiting.countDown();
            boolean acquired = waiter.acquire(30, TimeUnit.SECONDS);
            if (acquired) {
                assertTrue(waiter.isAcquiredInThisProcess());
                checked.await(20, TimeUnit.SECONDS);
                waiter.release();
            }
            return acquired;
        });
        assertTrue(waiting.await(5, TimeUnit.SECONDS));
        await("the waiter's lock node appears", Duration.ofSeconds(10),
                () -> admin.getChildren().forPath(lockPath).size() == 2);
        Thread.sleep(200);
        assertFalse(waiter.isAcquiredInThisProcess(), "waiter acquired while the holder still held the lock");

        holderClient.close(); // ends the session: its ephemeral lock node must go, waking the waiter
        await("waiter gets the lock after the holder's session closed", Duration.ofSeconds(20),
                () -> waiter.isAcquiredInThisProcess() || got.isDone());
        assertEquals(1, admin.getChildren().forPath(lockPath).size(), "lock nodes while the waiter holds it");
        checked.countDown();
        assertTrue(got.get(20, TimeUnit.SECONDS), "waiter did not get the lock");
        assertTrue(childrenOrEmpty(lockPath).isEmpty());
    }
}
