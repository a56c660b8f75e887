/*
 * Warden compatibility harness: one real server process (`warden server --zoo-cfg CFG`, or
 * Apache ZooKeeper 3.9.5 through scripts/zookeeper/run.sh) in place of curator-test's
 * in-process ZooKeeper. TestingZooKeeperServer (our replacement) creates one per start.
 *
 * The zoo.cfg is exactly what curator-test would have given its embedded server
 * (QuorumConfigBuilder: tickTime, minSessionTimeout, initLimit, syncLimit, clientPort, the
 * server.N lines and myid of a TestingCluster, the InstanceSpec's custom properties) plus what
 * the embedded adapter adds (4lw whitelist *, no admin server). Server-side system properties
 * that the tests set in their own JVM for the embedded server (TTL nodes, the container check
 * interval, the super digest, read-only mode) are handed on: as -D flags to ZooKeeper, which
 * reads them only that way, and as zoo.cfg lines to Warden, which reads them there; so is
 * QuorumPeerConfig's static reconfigEnabled, as the zoo.cfg line reconfigEnabled=true.
 *
 * Set by run.sh: compat.server (warden|zookeeper), compat.serverCommand (a script that execs
 * the server on the zoo.cfg given as its argument, so the process we start is the server) and
 * compat.runDir (zoo.cfgs and logs under servers/, every PID started in `pids`).
 */
package org.apache.curator.test;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.server.quorum.QuorumPeerConfig;
import org.slf4j.Logger;
import warden.compat.curatorsuites.CurrentTest;
import org.slf4j.LoggerFactory;

class ExternalServerMain implements ZooKeeperMainFace {
    private static final Logger log = LoggerFactory.getLogger(ExternalServerMain.class);

    private static final String SERVER = System.getProperty("compat.server", "warden");
    private static final String COMMAND = System.getProperty("compat.serverCommand", "");
    private static final String RUN_DIR = System.getProperty("compat.runDir", "");

    /** System properties of the test JVM that configure the (formerly in-process) server. */
    private static final List<String> SERVER_PROPERTIES = List.of(
            "zookeeper.extendedTypesEnabled",
            "znode.container.checkIntervalMs",
            "znode.container.maxPerMinute",
            "zookeeper.DigestAuthenticationProvider.superDigest",
            "readonlymode.enabled");

    private static final long START_TIMEOUT_MS = 60_000;
    private static final long STOP_TIMEOUT_MS = 10_000;

    /** Every process started by this JVM and still running: killed when the JVM exits. */
    private static final Set<Process> LIVE = ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> LIVE.forEach(Process::destroyForcibly)));
    }

    private volatile Process process;
    private volatile int clientPort;

    @Override
    public void start(QuorumPeerConfigBuilder configBuilder) {
        if (COMMAND.isEmpty() || RUN_DIR.isEmpty()) {
            throw new IllegalStateException("compat.serverCommand and compat.runDir must be set (run.sh does)");
        }
        try {
            Properties properties = configBuilder.buildProperties();
            InstanceSpec spec = configBuilder.getInstanceSpec();
            boolean standalone = properties.stringPropertyNames().stream().noneMatch(k -> k.startsWith("server."));
            int port = Integer.parseInt(properties.getProperty("clientPort"));
            if (port == 0) {
                // TestingServer() asks for port 0; an external process must be given a real one.
                port = InstanceSpec.getRandomPort();
                properties.setProperty("clientPort", Integer.toString(port));
            }
            if (standalone) {
                properties.setProperty("clientPortAddress", spec.getHostname());
            }
            if (QuorumPeerConfig.isReconfigEnabled()) {
                // TestReconfiguration turns reconfig on for in-process servers through this static.
                properties.setProperty("reconfigEnabled", "true");
            }
            properties.setProperty("admin.enableServer", "false");
            properties.setProperty("4lw.commands.whitelist", "*");

            StringBuilder jvmFlags = new StringBuilder();
            for (String key : SERVER_PROPERTIES) {
                String value = System.getProperty(key);
                if (value == null) {
                    continue;
                }
                if (SERVER.equals("zookeeper")) {
                    jvmFlags.append(" -D").append(key).append('=').append(value);
                } else {
                    properties.setProperty(key, value);
                }
            }

            Path dir = Paths.get(RUN_DIR, "servers", CurrentTest.name() + "-" + spec.getDataDirectory().getName()
                    + "-" + spec.getServerId());
            Files.createDirectories(dir);
            Path cfg = dir.resolve("zoo.cfg");
            Files.writeString(cfg, render(properties));
            Path serverLog = dir.resolve("server.log");

            ProcessBuilder builder = new ProcessBuilder(COMMAND, cfg.toString())
                    .redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.appendTo(serverLog.toFile()));
            Map<String, String> env = builder.environment();
            env.put("ZK_JVM_OPTS", env.getOrDefault("ZK_JVM_OPTS", "") + jvmFlags);
            process = builder.start();
            LIVE.add(process);
            clientPort = port;
            Files.writeString(
                    Paths.get(RUN_DIR, "pids"),
                    process.pid() + " " + cfg + "\n",
                    StandardOpenOption.CREATE,
                    StandardOpenOption.APPEND);
            log.info("started {} pid {} on port {} ({})", SERVER, process.pid(), port, cfg);
            awaitListening(spec.getHostname(), port, standalone, serverLog);
        } catch (FailedServerStartException e) {
            close();
            throw e;
        } catch (Exception e) {
            close();
            throw new FailedServerStartException(e);
        }
    }

    /** Standalone: until `ruok` answers `imok`; a cluster member: until its client port accepts. */
    private void awaitListening(String host, int port, boolean standalone, Path serverLog) throws Exception {
        long deadline = System.currentTimeMillis() + START_TIMEOUT_MS;
        while (System.currentTimeMillis() < deadline) {
            if (!process.isAlive()) {
                throw new FailedServerStartException("server exited with " + process.exitValue()
                        + " before listening on " + host + ":" + port + "; log: " + tail(serverLog));
            }
            try (Socket socket = new Socket()) {
                socket.connect(new InetSocketAddress(host, port), 1000);
                if (!standalone) {
                    return;
                }
                socket.setSoTimeout(2000);
                OutputStream out = socket.getOutputStream();
                out.write("ruok".getBytes(StandardCharsets.US_ASCII));
                out.flush();
                InputStream in = socket.getInputStream();
                if (new String(in.readAllBytes(), StandardCharsets.US_ASCII).startsWith("imok")) {
                    return;
                }
            } catch (IOException notYet) {
                // not listening yet
            }
            Thread.sleep(50);
        }
        throw new FailedServerStartException("server did not listen on " + host + ":" + port + " within "
                + START_TIMEOUT_MS + " ms; log: " + tail(serverLog));
    }

    @Override
    public int getClientPort() {
        return clientPort;
    }

    /** SIGKILL, as a crash. */
    @Override
    public void kill() {
        Process p = process;
        if (p != null) {
            p.destroyForcibly();
            awaitExit(p, STOP_TIMEOUT_MS);
            LIVE.remove(p);
            log.info("killed {} pid {}", SERVER, p.pid());
        }
    }

    /** SIGTERM (a clean stop), SIGKILL if it is still running 10 s later. */
    @Override
    public void close() {
        Process p = process;
        if (p != null && p.isAlive()) {
            p.destroy();
            if (!awaitExit(p, STOP_TIMEOUT_MS)) {
                log.warn("{} pid {} still running {} ms after SIGTERM: SIGKILL", SERVER, p.pid(), STOP_TIMEOUT_MS);
                p.destroyForcibly();
                awaitExit(p, STOP_TIMEOUT_MS);
            }
            log.info("stopped {} pid {}", SERVER, p.pid());
        }
        if (p != null) {
            LIVE.remove(p);
        }
    }

    private static boolean awaitExit(Process p, long timeoutMs) {
        try {
            return p.waitFor(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return !p.isAlive();
        }
    }

    private static String render(Properties properties) {
        StringBuilder text = new StringBuilder("# written by the Curator suites harness (ExternalServerMain)\n");
        new TreeMap<>(properties).forEach((k, v) -> text.append(k).append('=').append(v).append('\n'));
        return text.toString();
    }

    private static String tail(Path file) {
        try {
            List<String> lines = Files.readAllLines(file);
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 20), lines.size()));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
