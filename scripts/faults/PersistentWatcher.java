// The fault suite's persistent watcher (docs/faults.md, workload "pwatch"): a real, unmodified
// ZooKeeper 3.9.5 Java client that keeps a PERSISTENT_RECURSIVE watch on one path and prints,
// one line each and in the order its event thread delivers them, every connection state and
// every event it receives. The suite (pwatch.go) reads the lines and checks that, while the
// connection lasts, the events cover every change in order. It is Java because go-zookeeper,
// the suite's other client, has no addWatch; the Java client delivers state changes and watch
// events on one thread in the order they arrived, so a line "state Disconnected" truly
// separates the events before it from those after.
//
//   java -cp '<zookeeper-3.9.5 lib>/*' PersistentWatcher.java HOST:PORT,... PATH SESSION_MS
//
// Lines: "state <KeeperState>", "watching <session id, hex>" (addWatch answered),
// "event <EventType> <path> <zxid>". It runs until killed; an expired session is replaced.
import java.io.PrintStream;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;

public final class PersistentWatcher implements Watcher {
    private final PrintStream out = new PrintStream(System.out, true);
    private final LinkedBlockingQueue<Event.KeeperState> states = new LinkedBlockingQueue<>();
    private ZooKeeper zk;

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: PersistentWatcher HOST:PORT,... PATH SESSION_MS");
            System.exit(2);
        }
        new PersistentWatcher().run(args[0], args[1], Integer.parseInt(args[2]));
    }

    private void run(String connect, String path, int sessionMs) throws Exception {
        while (true) {
            states.clear();
            zk = new ZooKeeper(connect, sessionMs, this);
            if (watch(path)) {
                // Until the session expires; reconnections within it re-register the watch.
                while (states.take() != Event.KeeperState.Expired) {
                }
            }
            zk.close();
        }
    }

    // Sets the watch once the session is connected; false when the session expired first.
    private boolean watch(String path) throws InterruptedException {
        while (true) {
            Event.KeeperState state = states.poll(100, TimeUnit.MILLISECONDS);
            if (state == Event.KeeperState.Expired) {
                return false;
            }
            if (zk.getState() != ZooKeeper.States.CONNECTED) {
                continue;
            }
            try {
                zk.addWatch(path, this, AddWatchMode.PERSISTENT_RECURSIVE);
                out.println("watching " + Long.toHexString(zk.getSessionId()));
                return true;
            } catch (KeeperException.SessionExpiredException e) {
                return false;
            } catch (KeeperException e) {
                // Connection lost or the like: try again once connected.
                Thread.sleep(100);
            }
        }
    }

    // Called on the client's one event thread, for state changes and watch events alike (the
    // same object is the default watcher and the persistent one, so each event comes once).
    @Override
    public void process(WatchedEvent event) {
        if (event.getType() == Event.EventType.None) {
            out.println("state " + event.getState());
            states.add(event.getState());
        } else {
            out.println("event " + event.getType() + " " + event.getPath() + " " + event.getZxid());
        }
    }
}
