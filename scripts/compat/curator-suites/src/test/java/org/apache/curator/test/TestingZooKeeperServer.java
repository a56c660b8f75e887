/*
 * Warden compatibility harness: replaces curator-test 5.7.1's TestingZooKeeperServer (same
 * package, same public API; this class comes ahead of curator-test on the classpath). Curator's
 * TestingServer and TestingCluster build on this class, so both now run real server processes
 * (ExternalServerMain) instead of an in-process ZooKeeper: stop() is SIGTERM, kill() is SIGKILL,
 * restart() starts the process again on the same port and data directory.
 *
 * Kept from the original: the LATENT/STARTED/STOPPED/CLOSED states and their transitions, the
 * data directory deleted on close, the port bound at the first start kept for restarts.
 */
package org.apache.curator.test;

import java.io.Closeable;
import java.io.IOException;
import java.util.Collection;
import java.util.concurrent.atomic.AtomicReference;

public class TestingZooKeeperServer implements Closeable {
    private final AtomicReference<State> state = new AtomicReference<>(State.LATENT);
    private final QuorumConfigBuilder configBuilder;
    private final int thisInstanceIndex;
    private int thisInstancePort;
    private volatile ZooKeeperMainFace main;

    ZooKeeperMainFace getMain() {
        return main;
    }

    private enum State {
        LATENT,
        STARTED,
        STOPPED,
        CLOSED
    }

    public TestingZooKeeperServer(QuorumConfigBuilder configBuilder) {
        this(configBuilder, 0);
    }

    public TestingZooKeeperServer(QuorumConfigBuilder configBuilder, int thisInstanceIndex) {
        this.configBuilder = configBuilder;
        this.thisInstanceIndex = thisInstanceIndex;
        this.thisInstancePort = configBuilder.getInstanceSpec(thisInstanceIndex).getPort();
        main = new ExternalServerMain();
    }

    public Collection<InstanceSpec> getInstanceSpecs() {
        return configBuilder.getInstanceSpecs();
    }

    public void kill() {
        main.kill();
        state.set(State.STOPPED);
    }

    public void restart() throws Exception {
        if (state.get() == State.CLOSED) {
            throw new IllegalStateException("Cannot restart a closed instance");
        }
        if (state.get() == State.STARTED) {
            stop();
        }
        state.set(State.LATENT);
        main = new ExternalServerMain();
        start();
    }

    public void stop() throws IOException {
        if (state.compareAndSet(State.STARTED, State.STOPPED)) {
            main.close();
        }
    }

    public InstanceSpec getInstanceSpec() {
        return configBuilder.getInstanceSpec(thisInstanceIndex);
    }

    @Override
    public void close() throws IOException {
        stop();
        if (state.compareAndSet(State.STOPPED, State.CLOSED)) {
            configBuilder.close();
            InstanceSpec spec = getInstanceSpec();
            if (spec.deleteDataDirectoryOnClose()) {
                DirectoryUtils.deleteRecursively(spec.getDataDirectory());
            }
        }
    }

    public void start() throws Exception {
        if (!state.compareAndSet(State.LATENT, State.STARTED)) {
            return;
        }
        main.start(configBuilder.bindInstance(thisInstanceIndex, thisInstancePort));
        thisInstancePort = main.getClientPort();
    }

    public int getLocalPort() {
        if (thisInstancePort == 0) {
            throw new IllegalStateException("server is configured to bind to port 0 but not started");
        }
        return thisInstancePort;
    }
}
