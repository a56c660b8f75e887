package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * CuratorCache, which rests on one persistent recursive watch (ZooKeeper 3.6+ addWatch): events
 * for descendants at any depth, without re-registering; and the raw addWatch modes themselves.
 */
class CuratorCacheTest extends CompatBase {
    private final BlockingQueue<String> events = new LinkedBlockingQueue<>();

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static String str(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }

    private String rel(String full, String root) {
        return full.equals(root) ? "." : full.substring(root.length() + 1);
    }

    private void expect(String... wanted) throws Exception {
        for (String w : wanted) {
            String got = events.poll(15, TimeUnit.SECONDS);
            if (got == null) {
                fail("no event within 15 s; expected " + w);
            }
            assertEquals(w, got);
        }
    }

    /** The next {@code n} events in any order. */
    private Set<String> nextUnordered(int n) throws Exception {
        Set<String> got = new TreeSet<>();
        for (int i = 0; i < n; i++) {
            String e = events.poll(15, TimeUnit.SECONDS);
            if (e == null) {
                fail("only " + got + " within 15 s; expected " + n + " events");
            }
            got.add(e);
        }
        return got;
    }

    private void expectNothingMore() throws InterruptedException {
        String e = events.poll(400, TimeUnit.MILLISECONDS);
        assertNull(e, "unexpected event");
    }

    @Test
    @Timeout(60)
    void deepDescendantEvents() throws Exception {
        String root = path("tree");
        admin.create().forPath(root, utf8("r"));
        admin.create().forPath(root + "/pre", utf8("p"));

        CuratorCache cache = closeLater(CuratorCache.build(newClient(), root));
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forCreates(d -> events.add("create " + rel(d.getPath(), root) + " " + str(d.getData())))
                .forChanges((o, n) -> events.add("change " + rel(n.getPath(), root) + " " + str(o.getData()) + "->" + str(n.getData())))
                .forDeletes(d -> events.add("delete " + rel(d.getPath(), root)))
                .forInitialized(() -> events.add("initialized"))
                .build());
        cache.start();
        assertEquals(Set.of("create . r", "create pre p"), nextUnordered(2));
        expect("initialized");

        CuratorFramework writer = newClient();
        writer.create().forPath(root + "/a", utf8("1"));
        writer.create().forPath(root + "/a/b", utf8("2"));
        writer.create().forPath(root + "/a/b/c", utf8("3"));
        writer.create().forPath(root + "/a/b/c/d", utf8("4"));
        expect("create a 1", "create a/b 2", "create a/b/c 3", "create a/b/c/d 4");

        writer.setData().forPath(root + "/a/b/c/d", utf8("4b"));
        expect("change a/b/c/d 4->4b");
        writer.setData().forPath(root, utf8("r2"));
        expect("change . r->r2");

        writer.delete().forPath(root + "/a/b/c/d");
        expect("delete a/b/c/d");
        writer.delete().deletingChildrenIfNeeded().forPath(root + "/a");
        expect("delete a/b/c", "delete a/b", "delete a");
        expectNothingMore();

        List<String> cached = cache.stream().map(d -> rel(d.getPath(), root)).sorted().collect(Collectors.toList());
        assertEquals(List.of(".", "pre"), cached);
        assertEquals("r2", str(cache.get(root).map(ChildData::getData).orElse(null)));
        assertEquals(1, cache.get(root).orElseThrow().getStat().getVersion());
    }

    @Test
    @Timeout(60)
    void persistentRecursiveWatchFiresRepeatedlyUntilRemoved() throws Exception {
        String root = path("watched");
        admin.create().forPath(root);
        CuratorFramework watcherClient = newClient();
        Watcher w = (WatchedEvent e) -> {
            if (e.getType() != EventType.None) {
                events.add(e.getType() + " " + rel(e.getPath(), root));
            }
        };
        watcherClient.watchers().add().withMode(AddWatchMode.PERSISTENT_RECURSIVE).usingWatcher(w).forPath(root);

        CuratorFramework writer = newClient();
        writer.create().creatingParentsIfNeeded().forPath(root + "/x/y/z", utf8("z"));
        // creatingParentsIfNeeded creates x, x/y, x/y/z in order; no NodeChildrenChanged in recursive mode.
        expect("NodeCreated x", "NodeCreated x/y", "NodeCreated x/y/z");
        for (int i = 0; i < 3; i++) { // persistent: no re-registration needed
            writer.setData().forPath(root + "/x/y/z", utf8("v" + i));
            expect("NodeDataChanged x/y/z");
        }
        writer.delete().forPath(root + "/x/y/z");
        expect("NodeDeleted x/y/z");
        writer.setData().forPath(root, utf8("self"));
        expect("NodeDataChanged .");
        expectNothingMore();

        watcherClient.watchers().remove(w).ofType(Watcher.WatcherType.Any).forPath(root);
        writer.create().forPath(root + "/x/y/after", utf8("a"));
        writer.setData().forPath(root, utf8("self2"));
        Thread.sleep(500);
        List<String> late = new ArrayList<>();
        events.drainTo(late);
        assertTrue(late.stream().noneMatch(s -> s.startsWith("NodeCreated") || s.startsWith("NodeDataChanged")),
                "events after the watch was removed: " + late);
    }

    @Test
    @Timeout(60)
    void persistentNonRecursiveWatchSeesOnlyTheNodeAndItsChildrenList() throws Exception {
        String root = path("flat");
        admin.create().forPath(root);
        CuratorFramework watcherClient = newClient();
        Watcher w = (WatchedEvent e) -> {
            if (e.getType() != EventType.None) {
                events.add(e.getType() + " " + rel(e.getPath(), root));
            }
        };
        watcherClient.watchers().add().withMode(AddWatchMode.PERSISTENT).usingWatcher(w).forPath(root);

        CuratorFramework writer = newClient();
        writer.create().forPath(root + "/c1");
        expect("NodeChildrenChanged .");
        writer.create().forPath(root + "/c1/grandchild"); // below the watched node's children: not seen
        writer.setData().forPath(root + "/c1", utf8("x")); // a child's data: not seen
        expectNothingMore();
        writer.setData().forPath(root, utf8("d"));
        expect("NodeDataChanged .");
        writer.create().forPath(root + "/c2");
        expect("NodeChildrenChanged .");
        writer.delete().deletingChildrenIfNeeded().forPath(root);
        // c1/grandchild (not seen), c1 and c2 (children changed each time), then the node itself.
        expect("NodeChildrenChanged .", "NodeChildrenChanged .", "NodeDeleted .");
        expectNothingMore();
    }
}
