package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.apache.curator.framework.recipes.queue.DistributedPriorityQueue;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.framework.CuratorFramework;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** DistributedQueue / DistributedPriorityQueue: every item is consumed exactly once, priorities respected. */
class QueueTest extends CompatBase {
    private static final QueueSerializer<String> UTF8 = new QueueSerializer<>() {
        @Override
        public byte[] serialize(String item) {
            return item.getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public String deserialize(byte[] bytes) {
            return new String(bytes, StandardCharsets.UTF_8);
        }
    };

    private static QueueConsumer<String> consumer(java.util.function.Consumer<String> sink) {
        return new QueueConsumer<>() {
            @Override
            public void consumeMessage(String message) {
                sink.accept(message);
            }

            @Override
            public void stateChanged(CuratorFramework client, ConnectionState newState) {}
        };
    }

    private void producersAndConsumers(boolean lockSafety) throws Exception {
        final int producers = 2;
        final int consumers = 3;
        final int perProducer = 40;
        String queuePath = path("queue");
        String lockPath = path("queue-locks");

        Map<String, AtomicInteger> consumed = new ConcurrentHashMap<>();
        AtomicInteger total = new AtomicInteger();
        for (int c = 0; c < consumers; c++) {
            QueueBuilder<String> b = QueueBuilder.builder(newClient(), consumer(item -> {
                consumed.computeIfAbsent(item, k -> new AtomicInteger()).incrementAndGet();
                total.incrementAndGet();
            }), UTF8, queuePath);
            if (lockSafety) {
                b = b.lockPath(lockPath);
            }
            DistributedQueue<String> q = closeLater(b.buildQueue());
            q.start();
        }

        List<Callable<Integer>> tasks = new ArrayList<>();
        for (int p = 0; p < producers; p++) {
            int producer = p;
            DistributedQueue<String> q = closeLater(
                    QueueBuilder.builder(newClient(), null, UTF8, queuePath).putInBackground(false).buildQueue());
            q.start();
            tasks.add(() -> {
                for (int i = 0; i < perProducer; i++) {
                    q.put("p" + producer + "-" + i);
                    if (ThreadLocalRandom.current().nextInt(8) == 0) {
                        Thread.sleep(5);
                    }
                }
                return perProducer;
            });
        }
        runAll(tasks, Duration.ofSeconds(60));

        int expected = producers * perProducer;
        await("all " + expected + " items consumed", Duration.ofSeconds(60), () -> total.get() >= expected);
        Thread.sleep(500); // a duplicate delivery would show up here
        assertEquals(expected, consumed.size(), "distinct items consumed");
        List<String> duplicates = consumed.entrySet().stream()
                .filter(e -> e.getValue().get() != 1).map(Map.Entry::getKey).collect(Collectors.toList());
        assertTrue(duplicates.isEmpty(), "consumed more than once: " + duplicates);
        assertEquals(expected, total.get());
        await("queue node has no items left", Duration.ofSeconds(10),
                () -> childrenOrEmpty(queuePath).isEmpty());
        if (lockSafety) {
            await("no item locks left", Duration.ofSeconds(10),
                    () -> childrenOrEmpty(lockPath).isEmpty());
        }
    }

    @Test
    @Timeout(120)
    void everyItemConsumedExactlyOnce() throws Exception {
        producersAndConsumers(false);
    }

    @Test
    @Timeout(120)
    void everyItemConsumedExactlyOnceWithLockSafety() throws Exception {
        producersAndConsumers(true);
    }

    @Test
    @Timeout(60)
    void priorityQueueDeliversLowestPriorityFirst() throws Exception {
        String queuePath = path("pqueue");
        DistributedPriorityQueue<String> producer = closeLater(QueueBuilder.builder(newClient(), null, UTF8, queuePath)
                .putInBackground(false).buildPriorityQueue(0));
        producer.start();
        List<Integer> priorities = new ArrayList<>();
        for (int i = 0; i < 30; i++) {
            priorities.add(ThreadLocalRandom.current().nextInt(-50, 50));
        }
        for (int i = 0; i < priorities.size(); i++) {
            producer.put(String.format("%d:%02d", priorities.get(i), i), priorities.get(i));
        }
        assertEquals(priorities.size(), admin.getChildren().forPath(queuePath).size());

        // The consumer starts after every item is queued, so it must take them in priority order
        // (ties in the order they were put: sequence numbers).
        List<String> got = new CopyOnWriteArrayList<>();
        DistributedPriorityQueue<String> consumerQueue = closeLater(
                QueueBuilder.builder(newClient(), consumer(got::add), UTF8, queuePath).buildPriorityQueue(0));
        consumerQueue.start();
        await("all priority items consumed", Duration.ofSeconds(30), () -> got.size() >= priorities.size());

        List<String> expected = new ArrayList<>();
        for (int i = 0; i < priorities.size(); i++) {
            expected.add(String.format("%d:%02d", priorities.get(i), i));
        }
        Collections.sort(expected, (x, y) -> {
            int px = Integer.parseInt(x.substring(0, x.indexOf(':')));
            int py = Integer.parseInt(y.substring(0, y.indexOf(':')));
            if (px != py) {
                return Integer.compare(px, py);
            }
            return x.substring(x.indexOf(':')).compareTo(y.substring(y.indexOf(':')));
        });
        assertEquals(expected, new ArrayList<>(got));
    }
}
