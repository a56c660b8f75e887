package warden.compat.curator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.state.ConnectionState;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** LeaderLatch: one leader among several sessions; failover when the leader's session ends. */
class LeaderLatchTest extends CompatBase {
    private static final int MEMBERS = 3;

    /** Live latches by id, with their clients. */
    private final Map<String, LeaderLatch> latches = new LinkedHashMap<>();
    private final Map<String, CuratorFramework> clientsById = new LinkedHashMap<>();
    /** Ids whose isLeader() fired and whose notLeader() has not (closed members removed by the test). */
    private final Set<String> leaders = ConcurrentHashMap.newKeySet();
    private final List<String> violations = new CopyOnWriteArrayList<>();

    private void startMembers(String latchPath) throws Exception {
        for (int i = 0; i < MEMBERS; i++) {
            String id = "member-" + i;
            CuratorFramework client = newClient();
            LeaderLatch latch = closeLater(new LeaderLatch(client, latchPath, id));
            latch.addListener(new LeaderLatchListener() {
                @Override
                public void isLeader() {
                    leaders.add(id);
                    if (leaders.size() > 1) {
                        violations.add("two leaders at once: " + new HashSet<>(leaders));
                    }
                }

                @Override
                public void notLeader() {
                    leaders.remove(id);
                }
            });
            latches.put(id, latch);
            clientsById.put(id, client);
            latch.start();
        }
    }

    /** Waits until exactly one live latch leads, every live latch agrees who, and returns its id. */
    private String awaitSingleLeader() throws Exception {
        String[] leader = new String[1];
        await("exactly one leader among " + latches.keySet(), Duration.ofSeconds(30), () -> {
            List<String> claiming = latches.entrySet().stream()
                    .filter(e -> e.getValue().hasLeadership())
                    .map(Map.Entry::getKey)
                    .collect(Collectors.toList());
            if (claiming.size() != 1) {
                return false;
            }
            for (LeaderLatch l : latches.values()) {
                Participant p = l.getLeader();
                if (!p.isLeader() || !p.getId().equals(claiming.get(0))) {
                    return false;
                }
            }
            leader[0] = claiming.get(0);
            return true;
        });
        // Stays stable: no second leader appears.
        Thread.sleep(300);
        long claiming = latches.values().stream().filter(LeaderLatch::hasLeadership).count();
        assertEquals(1, claiming, "leadership is not stable");
        return leader[0];
    }

    @Test
    @Timeout(90)
    void failoverWhenLeaderClientCloses() throws Exception {
        String latchPath = path("latch");
        startMembers(latchPath);
        Set<String> seenLeaders = new HashSet<>();
        while (true) {
            String leader = awaitSingleLeader();
            assertTrue(seenLeaders.add(leader), "a closed member came back as leader: " + leader);
            for (LeaderLatch l : latches.values()) {
                List<String> ids = l.getParticipants().stream().map(Participant::getId).sorted().collect(Collectors.toList());
                List<String> live = new ArrayList<>(latches.keySet());
                Collections.sort(live);
                assertEquals(live, ids, "participants seen by " + l.getId());
            }
            if (latches.size() == 1) {
                break;
            }
            // The leader's whole client goes away: its session ends and its latch node must vanish.
            leaders.remove(leader);
            latches.remove(leader);
            clientsById.remove(leader).close();
        }
        assertEquals(MEMBERS, seenLeaders.size());
        assertTrue(violations.isEmpty(), violations.toString());
        assertEquals(1, admin.getChildren().forPath(latchPath).size());
    }

    @Test
    @Timeout(90)
    void failoverWhenLeaderSessionIsKilled() throws Exception {
        String latchPath = path("latch");
        startMembers(latchPath);
        String first = awaitSingleLeader();
        LeaderLatch oldLatch = latches.get(first);
        CuratorFramework oldClient = clientsById.get(first);
        List<ConnectionState> oldStates = new CopyOnWriteArrayList<>();
        oldClient.getConnectionStateListenable().addListener((c, s) -> oldStates.add(s));
        long oldSession = oldClient.getZookeeperClient().getZooKeeper().getSessionId();

        killSession(oldClient);

        // The others see the leader's node vanish and one of them takes over; the old leader learns
        // its session is gone (LOST), gives up leadership and rejoins with a new session.
        await("the old leader's client sees its session lost", Duration.ofSeconds(30),
                () -> oldStates.contains(ConnectionState.LOST));
        await("the old leader's client reconnects with a new session", Duration.ofSeconds(30),
                () -> oldClient.getZookeeperClient().isConnected()
                        && oldClient.getZookeeperClient().getZooKeeper().getSessionId() != oldSession);
        String second = awaitSingleLeader();
        assertNotEquals(first, second, "the killed leader kept or regained leadership at once");
        await("all members are participants again", Duration.ofSeconds(30),
                () -> admin.getChildren().forPath(latchPath).size() == MEMBERS);
        assertEquals(MEMBERS, oldLatch.getParticipants().size());
        assertEquals(second, awaitSingleLeader());
    }
}
