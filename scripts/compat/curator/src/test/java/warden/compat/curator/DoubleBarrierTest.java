package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** DistributedDoubleBarrier: nobody gets in before all N arrive, nobody gets out before all N leave. */
class DoubleBarrierTest extends CompatBase {
    private static final int MEMBERS = 4;

    @Test
    @Timeout(90)
    void enterAndLeaveTogether() throws Exception {
        String barrierPath = path("barrier");
        for (int round = 0; round < 2; round++) { // the same barrier path is reusable
            AtomicInteger arrived = new AtomicInteger();
            AtomicInteger inside = new AtomicInteger();
            AtomicInteger leaving = new AtomicInteger();
            AtomicInteger left = new AtomicInteger();
            List<Callable<Void>> tasks = new ArrayList<>();
            for (int i = 0; i < MEMBERS; i++) {
                DistributedDoubleBarrier barrier = new DistributedDoubleBarrier(newClient(), barrierPath, MEMBERS);
                tasks.add(() -> {
                    Thread.sleep(ThreadLocalRandom.current().nextInt(300));
                    arrived.incrementAndGet();
                    assertTrue(barrier.enter(30, TimeUnit.SECONDS), "enter timed out");
                    assertEquals(MEMBERS, arrived.get(), "entered before every member arrived");
                    assertEquals(0, left.get(), "someone left before all entered");
                    inside.incrementAndGet();
                    Thread.sleep(ThreadLocalRandom.current().nextInt(300));
                    leaving.incrementAndGet();
                    assertTrue(barrier.leave(30, TimeUnit.SECONDS), "leave timed out");
                    assertEquals(MEMBERS, leaving.get(), "left before every member started leaving");
                    assertEquals(MEMBERS, inside.get());
                    left.incrementAndGet();
                    return null;
                });
            }
            runAll(tasks, Duration.ofSeconds(70));
            assertEquals(MEMBERS, left.get());
            // Every member deleted its node and the "ready" node on the way out. (The barrier node
            // itself is a container: the server may reap it between rounds; enter() recreates it.)
            await("barrier nodes gone", Duration.ofSeconds(10), 
                    () -> childrenOrEmpty(barrierPath).isEmpty());
        }
    }

    @Test
    @Timeout(60)
    void enterWaitsForTheLastMember() throws Exception {
        String barrierPath = path("barrier");
        List<Callable<Boolean>> early = new ArrayList<>();
        for (int i = 0; i < MEMBERS - 1; i++) {
            DistributedDoubleBarrier barrier = new DistributedDoubleBarrier(newClient(), barrierPath, MEMBERS);
            early.add(() -> barrier.enter(1500, TimeUnit.MILLISECONDS));
        }
        for (Boolean entered : runAll(early, Duration.ofSeconds(30))) {
            assertFalse(entered, "entered a barrier that was one member short");
        }
        // Their (ephemeral) member nodes stay; the last member completes the barrier at once.
        assertEquals(MEMBERS - 1, admin.getChildren().forPath(barrierPath).size());
        DistributedDoubleBarrier last = new DistributedDoubleBarrier(newClient(), barrierPath, MEMBERS);
        assertTrue(last.enter(10, TimeUnit.SECONDS), "the last member did not get in");
        assertTrue(admin.getChildren().forPath(barrierPath).contains("ready"));
    }
}
