package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.PathChildrenCache;
import org.apache.curator.framework.recipes.cache.PathChildrenCacheEvent;
import org.apache.curator.utils.ZKPaths;
import org.apache.zookeeper.CreateMode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** PathChildrenCache (deprecated in Curator 5 but widely used): add/update/remove events and cache contents. */
@SuppressWarnings("deprecation")
class PathChildrenCacheTest extends CompatBase {
    private static final Set<PathChildrenCacheEvent.Type> CONNECTION_EVENTS = EnumSet.of(
            PathChildrenCacheEvent.Type.CONNECTION_SUSPENDED,
            PathChildrenCacheEvent.Type.CONNECTION_RECONNECTED,
            PathChildrenCacheEvent.Type.CONNECTION_LOST);

    private final BlockingQueue<PathChildrenCacheEvent> events = new LinkedBlockingQueue<>();

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** The next non-connection event; fails if none arrives within 15 s or it is not what is expected. */
    private PathChildrenCacheEvent expect(PathChildrenCacheEvent.Type type, String child, String data) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (true) {
            long left = deadline - System.nanoTime();
            PathChildrenCacheEvent e = events.poll(Math.max(0, left), TimeUnit.NANOSECONDS);
            if (e == null) {
                fail("no " + type + " event for " + child + " within 15 s");
            }
            if (CONNECTION_EVENTS.contains(e.getType())) {
                continue;
            }
            assertEquals(type, e.getType(), "event " + e);
            if (child != null) {
                assertNotNull(e.getData(), "event without data: " + e);
                assertEquals(child, ZKPaths.getNodeFromPath(e.getData().getPath()), "event " + e);
                if (data != null) {
                    assertEquals(data, new String(e.getData().getData(), StandardCharsets.UTF_8), "data of " + e);
                }
            }
            return e;
        }
    }

    private void expectNothingMore() throws InterruptedException {
        PathChildrenCacheEvent e;
        while ((e = events.poll(300, TimeUnit.MILLISECONDS)) != null) {
            if (!CONNECTION_EVENTS.contains(e.getType())) {
                fail("unexpected event " + e);
            }
        }
    }

    @Test
    @Timeout(60)
    void addUpdateRemoveEvents() throws Exception {
        String parent = path("children");
        admin.create().forPath(parent);
        admin.create().forPath(parent + "/a", utf8("pre"));

        CuratorFramework writer = newClient();
        PathChildrenCache cache = closeLater(new PathChildrenCache(newClient(), parent, true));
        cache.getListenable().addListener((c, e) -> events.add(e));
        cache.start(PathChildrenCache.StartMode.POST_INITIALIZED_EVENT);

        expect(PathChildrenCacheEvent.Type.CHILD_ADDED, "a", "pre");
        PathChildrenCacheEvent init = expect(PathChildrenCacheEvent.Type.INITIALIZED, null, null);
        assertEquals(1, init.getInitialData().size());

        writer.create().forPath(parent + "/b", utf8("1"));
        expect(PathChildrenCacheEvent.Type.CHILD_ADDED, "b", "1");
        writer.setData().forPath(parent + "/b", utf8("2"));
        PathChildrenCacheEvent upd = expect(PathChildrenCacheEvent.Type.CHILD_UPDATED, "b", "2");
        assertEquals(1, upd.getData().getStat().getVersion());
        writer.setData().forPath(parent + "/b", utf8("3"));
        expect(PathChildrenCacheEvent.Type.CHILD_UPDATED, "b", "3");
        writer.delete().forPath(parent + "/a");
        expect(PathChildrenCacheEvent.Type.CHILD_REMOVED, "a", null);
        writer.create().withMode(CreateMode.PERSISTENT_SEQUENTIAL).forPath(parent + "/seq-", utf8("s"));
        PathChildrenCacheEvent seq = expect(PathChildrenCacheEvent.Type.CHILD_ADDED, null, null);
        String seqName = ZKPaths.getNodeFromPath(seq.getData().getPath());
        if (!seqName.matches("seq-\\d{10}")) {
            fail("sequential child name " + seqName);
        }
        expectNothingMore();

        List<String> cached = cache.getCurrentData().stream()
                .map(d -> ZKPaths.getNodeFromPath(d.getPath())).sorted().collect(Collectors.toList());
        assertEquals(List.of("b", seqName), cached);
        ChildData b = cache.getCurrentData(parent + "/b");
        assertEquals("3", new String(b.getData(), StandardCharsets.UTF_8));
        assertEquals(2, b.getStat().getVersion());
    }

    @Test
    @Timeout(60)
    void ephemeralChildRemovedWhenItsSessionCloses() throws Exception {
        String parent = path("members");
        admin.create().forPath(parent);
        PathChildrenCache cache = closeLater(new PathChildrenCache(newClient(), parent, true));
        cache.getListenable().addListener((c, e) -> events.add(e));
        cache.start(PathChildrenCache.StartMode.POST_INITIALIZED_EVENT);
        expect(PathChildrenCacheEvent.Type.INITIALIZED, null, null);

        List<CuratorFramework> members = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            CuratorFramework m = newClient();
            members.add(m);
            m.create().withMode(CreateMode.EPHEMERAL).forPath(parent + "/m" + i, utf8("member " + i));
            expect(PathChildrenCacheEvent.Type.CHILD_ADDED, "m" + i, "member " + i);
        }
        members.get(1).close();
        expect(PathChildrenCacheEvent.Type.CHILD_REMOVED, "m1", null);
        expectNothingMore();
        assertEquals(2, cache.getCurrentData().size());
    }
}
