package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** InterProcessSemaphoreV2: never more than maxLeases held at once across sessions; leases die with their session. */
class SemaphoreTest extends CompatBase {
    private static final int MAX_LEASES = 2;

    @Test
    @Timeout(120)
    void neverMoreThanMaxLeases() throws Exception {
        final int clients = 6;
        final int rounds = 5;
        String semPath = path("semaphore");
        AtomicInteger holding = new AtomicInteger();
        AtomicInteger maxHolding = new AtomicInteger();
        AtomicInteger acquisitions = new AtomicInteger();
        List<Callable<Void>> tasks = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(newClient(), semPath, MAX_LEASES);
            tasks.add(() -> {
                for (int r = 0; r < rounds; r++) {
                    Lease lease = sem.acquire(30, TimeUnit.SECONDS);
                    assertNotNull(lease, "acquire timed out");
                    try {
                        int now = holding.incrementAndGet();
                        maxHolding.accumulateAndGet(now, Math::max);
                        acquisitions.incrementAndGet();
                        Thread.sleep(30 + ThreadLocalRandom.current().nextInt(40));
                        holding.decrementAndGet();
                    } finally {
                        sem.returnLease(lease);
                    }
                }
                return null;
            });
        }
        runAll(tasks, Duration.ofSeconds(100));
        assertEquals(clients * rounds, acquisitions.get());
        assertTrue(maxHolding.get() <= MAX_LEASES, "leases held at once: " + maxHolding.get());
        assertEquals(MAX_LEASES, maxHolding.get(), "the semaphore never let " + MAX_LEASES + " holders in together");
        await("lease nodes gone", Duration.ofSeconds(10), () -> childrenOrEmpty(semPath + "/leases").isEmpty());
    }

    @Test
    @Timeout(60)
    void exhaustedSemaphoreBlocksUntilLeaseReturnedOrHolderGone() throws Exception {
        String semPath = path("semaphore");
        CuratorFramework holderClient = newClient();
        InterProcessSemaphoreV2 holder = new InterProcessSemaphoreV2(holderClient, semPath, MAX_LEASES);
        InterProcessSemaphoreV2 other = new InterProcessSemaphoreV2(newClient(), semPath, MAX_LEASES);

        Collection<Lease> both = holder.acquire(MAX_LEASES, 10, TimeUnit.SECONDS);
        assertNotNull(both);
        assertEquals(MAX_LEASES, both.size());
        assertNull(other.acquire(300, TimeUnit.MILLISECONDS), "got a lease beyond maxLeases");

        Lease one = both.iterator().next();
        holder.returnLease(one);
        Lease mine = other.acquire(10, TimeUnit.SECONDS);
        assertNotNull(mine, "a returned lease was not handed out");
        assertNull(other.acquire(300, TimeUnit.MILLISECONDS), "got a lease beyond maxLeases");

        CountDownLatch waiting = new CountDownLatch(1);
        Future<Lease> next = submit(() -> {
            waiting.countDown();
            return other.acquire(30, TimeUnit.SECONDS);
        });
        assertTrue(waiting.await(5, TimeUnit.SECONDS));
        Thread.sleep(300);
        assertFalse(next.isDone(), "acquired while all leases were held");
        holderClient.close(); // the holder's session ends: its lease node (ephemeral) goes with it
        assertNotNull(next.get(20, TimeUnit.SECONDS), "lease of a closed session was not freed");
    }
}
