package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Callable;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.SharedCountListener;
import org.apache.curator.framework.recipes.shared.SharedCountReader;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.framework.state.ConnectionState;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** SharedCount: versioned compare-and-set, and listeners in other sessions see every committed change. */
class SharedCountTest extends CompatBase {

    private SharedCount started(String countPath, BlockingQueue<Integer> changes) throws Exception {
        SharedCount count = closeLater(new SharedCount(newClient(), countPath, 0));
        if (changes != null) {
            count.addListener(new SharedCountListener() {
                @Override
                public void countHasChanged(SharedCountReader reader, int newCount) {
                    changes.add(newCount);
                }

                @Override
                public void stateChanged(CuratorFramework client, ConnectionState newState) {}
            });
        }
        count.start();
        return count;
    }

    private static void awaitChange(BlockingQueue<Integer> changes, int expected) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        List<Integer> seen = new ArrayList<>();
        while (System.nanoTime() < deadline) {
            Integer v = changes.poll(100, TimeUnit.MILLISECONDS);
            if (v == null) {
                continue;
            }
            seen.add(v);
            if (v == expected) {
                return;
            }
        }
        throw new AssertionError("listener never saw " + expected + "; saw " + seen);
    }

    @Test
    @Timeout(60)
    void trySetCountIsVersionedAndListenersSeeChanges() throws Exception {
        String countPath = path("count");
        BlockingQueue<Integer> aChanges = new LinkedBlockingQueue<>();
        BlockingQueue<Integer> bChanges = new LinkedBlockingQueue<>();
        SharedCount a = started(countPath, aChanges);
        SharedCount b = started(countPath, bChanges);
        assertEquals(0, a.getCount());
        assertEquals(0, b.getCount());

        VersionedValue<Integer> v0 = a.getVersionedValue();
        VersionedValue<Integer> bStale = b.getVersionedValue();
        assertEquals(v0.getVersion(), bStale.getVersion());
        assertTrue(a.trySetCount(v0, 5), "trySetCount with the current version failed");
        awaitChange(bChanges, 5);
        assertEquals(5, b.getCount());

        assertFalse(b.trySetCount(bStale, 7), "trySetCount with a stale version succeeded");
        assertFalse(a.trySetCount(v0, 6), "trySetCount reused an old version");
        assertEquals(5, a.getCount());
        VersionedValue<Integer> v1 = b.getVersionedValue(); // refreshed by the failed attempt
        assertEquals(5, v1.getValue());
        assertTrue(v1.getVersion() > v0.getVersion());
        assertTrue(b.trySetCount(v1, 8));
        awaitChange(aChanges, 8);

        b.setCount(42); // unconditional
        awaitChange(aChanges, 42);
        assertEquals(42, a.getCount());
        assertNotNull(admin.checkExists().forPath(countPath));
    }

    @Test
    @Timeout(90)
    void concurrentTrySetLoopsCountEveryIncrement() throws Exception {
        final int clients = 3;
        final int rounds = 20;
        String countPath = path("count");
        BlockingQueue<Integer> watcherChanges = new LinkedBlockingQueue<>();
        SharedCount watcher = started(countPath, watcherChanges);
        List<SharedCount> counts = new ArrayList<>();
        List<Callable<Integer>> tasks = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            SharedCount count = started(countPath, null);
            counts.add(count);
            tasks.add(() -> {
                int conflicts = 0;
                for (int r = 0; r < rounds; r++) {
                    while (true) {
                        VersionedValue<Integer> v = count.getVersionedValue();
                        if (count.trySetCount(v, v.getValue() + 1)) {
                            break;
                        }
                        conflicts++;
                    }
                }
                return conflicts;
            });
        }
        runAll(tasks, Duration.ofSeconds(80));
        int total = clients * rounds;
        awaitChange(watcherChanges, total);
        for (SharedCount c : counts) {
            await("every SharedCount converges on " + total, Duration.ofSeconds(10), () -> c.getCount() == total);
        }
        assertEquals(total, watcher.getCount());
    }
}
