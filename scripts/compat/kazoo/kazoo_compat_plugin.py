"""pytest plugin: run kazoo 2.11.0's own test suite (kazoo/tests) against the server under test.

Loaded by scripts/compat/kazoo/run.sh with `-p kazoo_compat_plugin`; kazoo's files are not
modified. kazoo's harness (kazoo/testing/harness.py, get_global_cluster) builds a
`ZookeeperCluster` (kazoo/testing/common.py) whose `ManagedZooKeeper`s write a zoo.cfg and start
`java ... QuorumPeerMain zoo.cfg` themselves. This plugin replaces the name `ZookeeperCluster`
in the harness module with `CompatCluster`, which keeps kazoo's configuration (the zoo.cfg
entries and system properties the harness asks for, its TLS material, its JAAS file) but
starts every server through a zoo.cfg the way scripts/compat/server.sh does:

    COMPAT_SERVER=warden     $WARDEN_BIN server --zoo-cfg CFG
    COMPAT_SERVER=zookeeper  scripts/zookeeper/run.sh CFG        (Apache ZooKeeper 3.9.5)

The harness's `-Dzookeeper.X=Y` system properties become `X=Y` lines in the zoo.cfg (ZooKeeper
turns unknown zoo.cfg keys into `zookeeper.X` system properties; Warden reads them the same
way). Other JVM properties (JAAS login file, file.encoding, readonlymode.enabled) can only be
passed to a JVM: they go to ZooKeeper through ZK_JVM_OPTS; Warden gets the JAAS login file in
SERVER_JVMFLAGS, as zkServer.sh would pass it, and readonlymode.enabled as a zoo.cfg line.

ZOOKEEPER_CLUSTER_SIZE servers: with 1 (run.sh's standalone run), a standalone server, and the
few tests that need an ensemble (failover, read-only mode, reconfig) are skipped with a reason
(SKIPS below); with more (its ensemble run), an ensemble started from kazoo's server.N lines and
myid files, and nothing is skipped for that. Any other skip counts as a failure
(EXPECTED_SKIP_REASONS).

The plugin also records every test's outcome in $KAZOO_COMPAT_WORK/results.jsonl as it happens
and the number of collected tests in collected.txt, so run.sh can print counts even if the hard
time limit kills pytest. `python kazoo_compat_plugin.py summarize WORK [KNOWN]` prints
"N M K U" = passed, failed (failed + errors + collected but never finished), skipped, and
failed but not listed in the known-failures file KNOWN (known-failures-warden.txt).
"""

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

log = logging.getLogger("kazoo_compat")

# Tests that need an ensemble, with the reason; skipped in the standalone run
# (ZOOKEEPER_CLUSTER_SIZE=1), where a standalone Apache ZooKeeper fails them as well. run.sh runs
# them in its ensemble run (3 servers). Keyed by the end of the pytest node id ("::test"
# matches the test in every class that inherits it, e.g. TestClient's tests rerun by
# TestGeventClient and TestEventletClient). See README.md.
SKIPS = {
    "::test_update_host_list": (
        "needs a 3-server ensemble (runs in the ensemble run): stops server 0 and expects the "
        "client to stay connected through the other servers of self.servers"
    ),
    "test_connection.py::TestReadOnlyMode::test_read_only": (
        "needs a 3-server ensemble (runs in the ensemble run): stops servers 1 and 2 "
        "(self.cluster[1], [2]) so that the remaining one loses quorum and serves read-only"
    ),
    "test_client.py::TestReconfig::": (
        "dynamic reconfiguration needs an ensemble (runs in the ensemble run): a standalone "
        "ZooKeeper answers every reconfig with UNIMPLEMENTED"
    ),
}

# Features Warden does not have yet. Skipped only when the server under test is Warden (the
# ZooKeeper reference run executes and passes them); each is a known gap, listed in
# README.md, not a difference of behaviour. Empty since Warden has TLS (TestSSLClient).
WARDEN_GAPS = {}

# ---------------------------------------------------------------------------------------------
# Server management


def _env(name, default=None):
    value = os.environ.get(name)
    return value if value else default


def _port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _accepts(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class CompatServer(object):
    """Stands in for kazoo.testing.common.ManagedZooKeeper (same attributes and methods the
    harness and the tests use: run, stop, reset, destroy, running, address, secure_address,
    client_port, secure_client_port, server_info, host, get_logs)."""

    def __init__(
        self,
        server_info,
        peers=(),
        configuration_entries=(),
        java_system_properties=(),
        jaas_config=None,
        ssl_configuration=None,
    ):
        self.server_info = server_info
        self.host = "127.0.0.1"
        self.peers = tuple(peers)
        self.configuration_entries = list(configuration_entries)
        self.java_system_properties = list(java_system_properties)
        self.jaas_config = jaas_config
        self.ssl_configuration = ssl_configuration or {}
        work = _env("KAZOO_COMPAT_WORK") or tempfile.gettempdir()
        os.makedirs(work, exist_ok=True)
        self.working_path = tempfile.mkdtemp(prefix="server-", dir=work)
        self.process = None
        self._running = False
        self.kind = _env("COMPAT_SERVER", "warden")
        if self.kind not in ("warden", "zookeeper"):
            raise RuntimeError(
                "COMPAT_SERVER must be warden or zookeeper, not %r" % self.kind
            )

    # -- paths --------------------------------------------------------------------------------
    def _path(self, *names):
        return os.path.join(self.working_path, *names)

    @property
    def config_path(self):
        return self._path("zoo.cfg")

    @property
    def log_path(self):
        return self._path("server.log")

    # -- configuration ------------------------------------------------------------------------
    def _write_files(self):
        data_path = self._path("data")
        os.makedirs(data_path, exist_ok=True)
        keystore = self._path("keystore.jks")
        truststore = self._path("truststore.jks")
        # The TLS material kazoo's ZookeeperCluster generated (same password as kazoo uses).
        self.ssl_configuration["truststore"].save(truststore, "apassword")
        self.ssl_configuration["keystore"].save(keystore, "apassword")

        lines = [
            "# written by scripts/compat/kazoo/kazoo_compat_plugin.py for kazoo's test suite",
            "tickTime=2000",
            "dataDir=%s" % data_path,
            "clientPortAddress=%s" % self.host,
            "clientPort=%d" % self.client_port,
            "secureClientPort=%d" % self.secure_client_port,
            "maxClientCnxns=0",
            # As kazoo's ManagedZooKeeper (TLS needs the Netty connection factory in ZooKeeper).
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
            "ssl.keyStore.location=%s" % keystore,
            "ssl.keyStore.password=apassword",
            "ssl.trustStore.location=%s" % truststore,
            "ssl.trustStore.password=apassword",
        ]
        # What the harness asks for (4lw.commands.whitelist=*, reconfigEnabled=true,
        # localSessionsEnabled/UpgradingEnabled=...).
        lines += self.configuration_entries
        # -Dzookeeper.X=Y -> X=Y (the super digest "super:test").
        for prop in self.java_system_properties:
            if prop.startswith("-Dzookeeper."):
                lines.append(prop[len("-Dzookeeper."):])
        if self.kind == "warden":
            # kazoo always starts ZooKeeper with -Dreadonlymode.enabled=true; Warden reads that
            # setting from zoo.cfg (and warns that it has no read-only mode yet).
            lines.append("readonlymode.enabled=true")
        if self.peers:
            # A replicated setup, as kazoo's ManagedZooKeeper writes it (its initLimit,
            # syncLimit, server.N lines with the peer type, peerType), except that the servers
            # are named 127.0.0.1 rather than localhost (loopback IPv4 only, whatever localhost
            # resolves to).
            lines += ["initLimit=4", "syncLimit=2"]
            for p in sorted((self.server_info,) + self.peers, key=lambda i: i.server_id):
                lines.append(
                    "server.%d=%s:%d:%d:%s"
                    % (p.server_id, self.host, p.leader_port, p.election_port, p.peer_type)
                )
            lines.append("peerType=%s" % self.server_info.peer_type)
        with open(self.config_path, "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(data_path, "myid"), "w") as f:
            f.write(str(self.server_info.server_id))
        with open(self._path("jaas.conf"), "w") as f:
            f.write(self.jaas_config or "")

    def _command(self):
        env = dict(os.environ)
        if self.kind == "warden":
            binary = _env("WARDEN_BIN") or os.path.join(
                _env("COMPAT_REPO", "."), "target", "release", "warden"
            )
            # The JAAS file (its Server section has the SASL users of test_sasl.py), given
            # the way an operator gives it to zkServer.sh, which Warden reads too.
            env["SERVER_JVMFLAGS"] = "-Djava.security.auth.login.config=%s" % self._path(
                "jaas.conf"
            )
            return [binary, "server", "--zoo-cfg", self.config_path], env
        # ZooKeeper: JVM-only settings kazoo's ManagedZooKeeper passes on its java command line.
        jvm = [
            "-Dfile.encoding=UTF-8",
            "-Dreadonlymode.enabled=true",
            "-Djava.security.auth.login.config=%s" % self._path("jaas.conf"),
        ]
        jvm += [
            p for p in self.java_system_properties if not p.startswith("-Dzookeeper.")
        ]
        env["ZK_JVM_OPTS"] = " ".join([env.get("ZK_JVM_OPTS", "")] + jvm).strip()
        run_sh = os.path.join(_env("COMPAT_REPO", "."), "scripts", "zookeeper", "run.sh")
        return [run_sh, self.config_path], env

    # -- lifecycle ----------------------------------------------------------------------------
    def run(self):
        """Start the server and wait (60 s at most) until its client port accepts connections,
        as compat_start in scripts/compat/server.sh does."""
        if self._running:
            return
        os.makedirs(self.working_path, exist_ok=True)
        self._write_files()
        args, env = self._command()
        logf = open(self.log_path, "ab")
        logf.write(b"==== starting %s\n" % " ".join(args).encode())
        logf.flush()
        self.process = subprocess.Popen(
            args, env=env, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT
        )
        logf.close()
        pidfile = _env("KAZOO_COMPAT_PIDS")
        if pidfile:
            with open(pidfile, "a") as f:
                f.write("%d %s\n" % (self.process.pid, self.config_path))
        self._running = True
        log.info(
            "started %s (pid %d) on %s with %s",
            self.kind,
            self.process.pid,
            self.address,
            self.config_path,
        )
        deadline = time.monotonic() + 60
        while not _accepts(self.host, self.client_port):
            if self.process.poll() is not None:
                self._running = False
                raise RuntimeError(
                    "server exited (status %s) before listening on %s; its log:\n%s"
                    % (self.process.returncode, self.address, "".join(self.get_logs(50)))
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("server did not listen on %s within 60 s" % self.address)
            time.sleep(0.1)
        # The TLS port may open just after the plain one (ZooKeeper's does); TestSSLClient
        # connects to it at once.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _accepts(self.host, self.secure_client_port):
            time.sleep(0.1)

    def stop(self):
        """SIGTERM, then SIGKILL after 10 s (compat_stop). On-disk state is kept."""
        if not self._running:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            log.warning("server pid %d ignored SIGTERM for 10 s; SIGKILL", self.process.pid)
            self.process.kill()
            self.process.wait()
        self._running = False

    def reset(self):
        self.stop()
        shutil.rmtree(self._path("data"), True)
        os.makedirs(self._path("data"))
        with open(self._path("data", "myid"), "w") as fh:
            fh.write(str(self.server_info.server_id))

    def destroy(self):
        self.stop()
        if _env("KAZOO_COMPAT_KEEP"):
            return
        shutil.rmtree(self.working_path, True)

    def get_logs(self, num_lines=100):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.readlines()[-num_lines:]
        except OSError:
            return []

    # -- addresses ----------------------------------------------------------------------------
    @property
    def running(self):
        return self._running

    @property
    def client_port(self):
        return self.server_info.client_port

    @property
    def secure_client_port(self):
        return self.server_info.secure_client_port

    @property
    def address(self):
        return "%s:%s" % (self.host, self.client_port)

    @property
    def secure_address(self):
        return "%s:%s" % (self.host, self.secure_client_port)


def _four_letter_word(host, port, word, timeout=2.0):
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            s.settimeout(timeout)
            chunks = []
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def _make_cluster_class():
    from kazoo.testing import common

    class CompatCluster(common.ZookeeperCluster):
        """kazoo's ZookeeperCluster with CompatServer instead of ManagedZooKeeper: `size`
        servers (ZOOKEEPER_CLUSTER_SIZE), numbered and given ports as kazoo does (server i+1:
        client port offset+10i, TLS +4, election +1, quorum +2, admin +3; observers from
        observer_start_id), each with kazoo's zoo.cfg and, for more than one, the server.N
        lines of all of them and its myid."""

        def __init__(
            self,
            install_path=None,
            classpath=None,
            size=3,
            port_offset=20000,
            observer_start_id=-1,
            configuration_entries=(),
            java_system_properties=(),
            jaas_config=None,
        ):
            if size < 1:
                raise RuntimeError("a cluster needs at least one server, not %d" % size)
            self._install_path = install_path
            self._classpath = classpath
            self._servers = []
            self._ssl_configuration = {}
            self.perform_ssl_certs_generation()
            # kazoo's layout. Ports below the ephemeral range (20000 by default); move up if
            # something already uses one of them.
            port = port_offset
            while not all(
                _port_free(port + 10 * i + k) for i in range(size) for k in range(5)
            ):
                port += 10 * size
                if port > port_offset + 5000:
                    raise RuntimeError("no %d free port blocks from %d on" % (size, port_offset))
            infos = []
            for i in range(size):
                server_id = i + 1
                if observer_start_id != -1 and server_id >= observer_start_id:
                    peer_type = "observer"
                else:
                    peer_type = "participant"
                base = port + 10 * i
                infos.append(
                    common.ServerInfo(
                        server_id, base, base + 4, base + 1, base + 2, base + 3, peer_type
                    )
                )
            for info in infos:
                self._servers.append(
                    CompatServer(
                        info,
                        peers=[p for p in infos if p is not info] if size > 1 else (),
                        configuration_entries=configuration_entries,
                        java_system_properties=java_system_properties,
                        jaas_config=jaas_config,
                        ssl_configuration=dict(self._ssl_configuration),
                    )
                )

        def start(self):
            # kazoo starts the servers in reverse order, then sleeps 2 s. Here each run() waits
            # for its client port, and an ensemble is then given up to 60 s until every
            # server answers `srvr` with a Mode (it has a leader and serves).
            for server in reversed(list(self)):
                server.run()
            if len(self._servers) > 1:
                self.wait_serving(60)

        def wait_serving(self, seconds):
            deadline = time.monotonic() + seconds
            waiting = [s for s in self if s.running]
            while waiting:
                waiting = [
                    s
                    for s in waiting
                    if "Mode: " not in _four_letter_word(s.host, s.client_port, "srvr")
                ]
                if not waiting:
                    return
                if time.monotonic() > deadline:
                    log.warning(
                        "ensemble not serving after %d s: %s",
                        seconds,
                        ", ".join(s.address for s in waiting),
                    )
                    return
                time.sleep(0.2)

    return CompatCluster


# ---------------------------------------------------------------------------------------------
# pytest hooks


def pytest_configure(config):
    from kazoo.testing import harness

    harness.ZookeeperCluster = _make_cluster_class()


# Skips kazoo's tests make on their own that are expected here (the reference standalone
# ZooKeeper run has them too). Any other skip -- e.g. "Must use Zookeeper 3.5 or above"
# because the server's `envi` reported an old or no version, "PureSASL not available", a
# missing handler library or fd limit -- is turned into a failure, so that a server or an
# environment cannot pass by making tests skip themselves.
EXPECTED_SKIP_REASONS = (
    "compat: ",  # SKIPS above
    "Only run build config tests on CI.",  # test_build: checks kazoo's own CI matrix
    "Kerberos support not available.",  # test_sasl GSSAPI: needs a KDC and keytabs
)


def _skip_reason(report):
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped:
        reason = _skip_reason(report)
        if reason.startswith("Skipped: "):
            reason = reason[len("Skipped: "):]
        if not reason.startswith(EXPECTED_SKIP_REASONS):
            report.outcome = "failed"
            report.longrepr = (
                "compat: unexpected skip, counted as a failure (see EXPECTED_SKIP_REASONS in "
                "scripts/compat/kazoo/kazoo_compat_plugin.py): %s" % reason
            )


def _selected(nodeid, keys):
    return any(nodeid.startswith(k) or nodeid.endswith(k) for k in keys)


def pytest_collection_modifyitems(session, config, items):
    # KAZOO_COMPAT_SELECT (run.sh's ensemble run): space-separated keys; a test runs if its
    # node id starts or ends with one of them, the others are deselected.
    keys = _env("KAZOO_COMPAT_SELECT", "").split()
    if keys:
        keep = [i for i in items if _selected(i.nodeid, keys)]
        dropped = [i for i in items if not _selected(i.nodeid, keys)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    skips = dict(SKIPS) if int(_env("ZOOKEEPER_CLUSTER_SIZE", "1")) == 1 else {}
    if _env("COMPAT_SERVER", "warden") == "warden":
        skips.update(WARDEN_GAPS)
    for item in items:
        for key, reason in skips.items():
            if item.nodeid.endswith(key) or (key.endswith("::") and key in item.nodeid):
                item.add_marker(pytest.mark.skip(reason="compat: " + reason))
                break


def pytest_sessionfinish(session, exitstatus):
    # Stop the server now rather than in kazoo's atexit handler, and keep the clients some tests
    # leave running from printing their reconnection attempts after pytest's summary (pytest's
    # log capture is gone by then, so Python's last-resort handler would print them).
    from kazoo.testing import harness

    logging.getLogger("kazoo").addHandler(logging.NullHandler())
    if harness.CLUSTER is not None:
        harness.CLUSTER.terminate()


def _work_file(name):
    work = _env("KAZOO_COMPAT_WORK")
    return os.path.join(work, name) if work else None


def pytest_collection_finish(session):
    path = _work_file("collected.txt")
    if path:
        with open(path, "w") as f:
            f.write("%d\n" % len(session.items))


def pytest_runtest_logreport(report):
    path = _work_file("results.jsonl")
    if not path:
        return
    if report.when == "call" or report.outcome != "passed":
        with open(path, "a") as f:
            f.write(
                json.dumps({"id": report.nodeid, "when": report.when, "outcome": report.outcome})
                + "\n"
            )


# ---------------------------------------------------------------------------------------------
# summary for run.sh


def _read_known(path):
    """Known failures: "node-id-suffix  reason" lines, # comments. A key matches a test as the
    SKIPS keys do (end of the node id, or contained in it if it ends with ::)."""
    known = {}
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                key, _, reason = line.partition(" ")
                known[key] = reason.strip()
    except OSError:
        pass
    return known


def _known_reason(known, nodeid):
    for key, reason in known.items():
        if nodeid.endswith(key) or (key.endswith("::") and key in nodeid):
            return reason
    return None


def summarize(work, known_path=None):
    """passed, failed, skipped, new (failed and not a known failure) from results.jsonl. A
    test failed if any phase failed (setup or teardown errors included); skipped if it was
    skipped and did not fail; passed if its call passed and nothing failed; collected tests
    without an outcome count as failed (and new). Writes failures.txt in work: one line per
    failed test, "known <id> <reason>" or "new <id>", and "fixed <id>" for a known failure
    that passed."""
    outcome = {}
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    try:
        with open(os.path.join(work, "results.jsonl")) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                o = r["outcome"]
                if outcome.get(r["id"]) is None or rank[o] > rank[outcome[r["id"]]]:
                    outcome[r["id"]] = o
    except OSError:
        pass
    known = _read_known(known_path) if known_path else {}
    passed = sum(1 for o in outcome.values() if o == "passed")
    failed = sum(1 for o in outcome.values() if o == "failed")
    skipped = sum(1 for o in outcome.values() if o == "skipped")
    lines = []
    new = 0
    for nodeid, o in sorted(outcome.items()):
        reason = _known_reason(known, nodeid)
        if o == "failed":
            if reason is None:
                new += 1
                lines.append("new %s" % nodeid)
            else:
                lines.append("known %s %s" % (nodeid, reason))
        elif o == "passed" and reason is not None:
            lines.append("fixed %s" % nodeid)
    try:
        with open(os.path.join(work, "collected.txt")) as f:
            collected = int(f.read().strip())
    except (OSError, ValueError):
        collected = len(outcome)
    unfinished = max(0, collected - len(outcome))
    if unfinished:
        lines.append("new (%d collected tests never finished)" % unfinished)
    failed += unfinished
    new += unfinished
    with open(os.path.join(work, "failures.txt"), "w") as f:
        f.write("".join(line + "\n" for line in lines))
    return passed, failed, skipped, new


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "summarize":
        print("%d %d %d %d" % summarize(*sys.argv[2:]))
    else:
        sys.exit("usage: kazoo_compat_plugin.py summarize WORK [KNOWN-FAILURES-FILE]")
