package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import java.util.stream.LongStream;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.retry.RetryNTimes;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** DistributedAtomicLong: concurrent increments from several sessions sum up exactly. */
class AtomicLongTest extends CompatBase {

    private void concurrentIncrements(int clients, int rounds, boolean promoteToLock) throws Exception {
        String counterPath = path("counter");
        Set<Long> postValues = ConcurrentHashMap.newKeySet();
        AtomicInteger failedAttempts = new AtomicInteger();
        AtomicInteger optimisticTries = new AtomicInteger();
        AtomicInteger lockTries = new AtomicInteger();
        List<Callable<Integer>> tasks = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            DistributedAtomicLong counter = promoteToLock
                    // One optimistic try, then the increment is done under an InterProcessMutex.
                    ? new DistributedAtomicLong(newClient(), counterPath, new RetryNTimes(0, 0),
                            PromotedToLock.builder().lockPath(path("lock")).timeout(30, TimeUnit.SECONDS)
                                    .retryPolicy(new RetryNTimes(3, 10)).build())
                    : new DistributedAtomicLong(newClient(), counterPath, new RetryNTimes(50, 5));
            tasks.add(() -> {
                int done = 0;
                while (done < rounds) {
                    AtomicValue<Long> v = counter.increment();
                    optimisticTries.addAndGet(v.getStats().getOptimisticTries());
                    lockTries.addAndGet(v.getStats().getPromotedLockTries());
                    if (v.succeeded()) {
                        assertEquals(v.preValue() + 1, v.postValue());
                        assertTrue(postValues.add(v.postValue()), "two increments produced " + v.postValue());
                        done++;
                    } else {
                        failedAttempts.incrementAndGet(); // contention: try again
                    }
                }
                return done;
            });
        }
        runAll(tasks, Duration.ofSeconds(100));
        long total = (long) clients * rounds;
        AtomicValue<Long> end = new DistributedAtomicLong(admin, counterPath, new RetryNTimes(0, 0)).get();
        assertTrue(end.succeeded());
        assertEquals(total, end.postValue(), "final counter value");
        assertEquals(LongStream.rangeClosed(1, total).boxed().collect(Collectors.toSet()), postValues,
                "every value 1..N produced by exactly one increment");
        // More optimistic tries than increments means the versioned setData did meet contention.
        System.out.println("increments: " + total + ", optimistic tries: " + optimisticTries.get()
                + ", promoted-lock tries: " + lockTries.get() + ", unsuccessful increment() calls: " + failedAttempts.get());
    }

    @Test
    @Timeout(120)
    void optimisticIncrementsSumCorrectly() throws Exception {
        concurrentIncrements(4, 25, false);
    }

    @Test
    @Timeout(120)
    void promotedToLockIncrementsSumCorrectly() throws Exception {
        concurrentIncrements(3, 15, true);
    }

    @Test
    @Timeout(60)
    void compareAndSetUsesCurrentValue() throws Exception {
        String counterPath = path("cas");
        DistributedAtomicLong a = new DistributedAtomicLong(newClient(), counterPath, new RetryNTimes(3, 10));
        DistributedAtomicLong b = new DistributedAtomicLong(newClient(), counterPath, new RetryNTimes(3, 10));
        assertTrue(a.initialize(10L), "initialize on a fresh path");
        assertFalse(b.initialize(99L), "initialize must not overwrite an existing value");
        assertEquals(10L, b.get().postValue());

        AtomicValue<Long> stale = b.compareAndSet(7L, 8L);
        assertFalse(stale.succeeded(), "compareAndSet with a wrong expected value succeeded");
        AtomicValue<Long> ok = b.compareAndSet(10L, 11L);
        assertTrue(ok.succeeded());
        assertEquals(11L, a.get().postValue());

        AtomicValue<Long> added = a.add(-20L);
        assertTrue(added.succeeded());
        assertEquals(-9L, b.get().postValue());
        b.forceSet(1000L);
        assertEquals(1000L, a.get().postValue());
    }
}
