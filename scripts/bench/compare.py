#!/usr/bin/env python3
"""Warden against Apache ZooKeeper 3.9.5, on the same machine, in the same run.

Started by scripts/bench/compare.sh (which supplies matplotlib for the plots); see README.md.

Phases, for each system (ZooKeeper always; Warden when `warden server --help` works):

1. throughput: both systems run side by side on loopback (one server, or three with
   --cluster-sizes 1,3); every workload runs against each system in turn, the order swapped on
   every repeat so that drift of the machine hits both alike. `warden bench --pid` measures
   the servers' CPU time, hence ops per server CPU-second.
2. footprint, one fresh server at a time: RSS after loading N znodes, the disk taken by its
   snapshots and logs, restart time with those N znodes (process start to the last znode being
   readable), RSS after the restart, and peak RSS under ClickHouse's Keeper-vs-ZooKeeper
   pattern (3 clients, about 1/3 writes and deletes, 2/3 reads).

Writes report.md, PNG plots and every run's JSON into the output directory. Every process it
starts is killed by pid when it ends, however it ends. Only Python's standard library is needed;
without matplotlib the plots are skipped.
"""

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ZK_VERSION = "3.9.5"
WORKLOADS = ["create", "mixed", "clickhouse", "read", "load"]
LOAD_PARENTS = 1000
BENCH_ROOT = "/warden-bench"
# A Stat is 68 bytes on the wire: the "stats" part of the raw size of a znode.
STAT_BYTES = 68
START_TIMEOUT_S = 600  # ZooKeeper takes minutes to load 10,000,000 znodes
STOP_TIMEOUT_S = 30
BENCH_SLACK_S = 120
SYSTEMS = ("zookeeper", "warden")
# How warden bench sends requests (--driver); set from the arguments.
DRIVER = "lean"

# (quick, full) defaults of every size; each can be set by a flag or a COMPARE_* variable.
SIZES = {
    "repeats": (2, 3),
    "duration": (4, 30),
    "warmup": (2, 5),
    "sessions": (8, 8),
    "load_nodes": (100_000, 1_000_000),
    "footprint_nodes": (100_000, 1_000_000),
    "clickhouse_requests": (60_000, 1_000_000),
}

started = []  # every process this script started, for the exit handler


def log(message):
    print(f"[compare {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Processes


def kill_all():
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def on_signal(signum, _frame):
    kill_all()
    sys.exit(128 + signum)


def stop(process):
    """SIGTERM, then SIGKILL after STOP_TIMEOUT_S; by pid, this process only."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_frame(sock):
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    (length,) = struct.unpack(">i", exactly(4))
    return exactly(length)


def send_frame(sock, body):
    sock.sendall(struct.pack(">i", len(body)) + body)


def four_letter(port, word):
    """A four-letter word's whole answer from the server on `port`."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def snapshot_times(cluster):
    """(snapshots written, the longest in seconds) by the cluster's first server since it
    started, from mntr's snapshottime summary (milliseconds), which both systems keep."""
    mntr = dict(line.split("\t", 1) for line in four_letter(cluster.client_ports[0], "mntr").splitlines()
                if "\t" in line)
    return int(mntr.get("zk_cnt_snapshottime", 0)), int(mntr.get("zk_max_snapshottime", 0)) / 1000


def session_ready(port, must_exist=None):
    """Whether the server on `port` grants a session (and serves `must_exist` as an existing
    znode); speaks the ZooKeeper protocol itself so that it depends on no client library."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.settimeout(5)
            connect = struct.pack(">iqiqi", 0, 0, 30000, 0, 16) + b"\0" * 16
            send_frame(sock, connect)
            _, timeout_ms, session_id = struct.unpack(">iiq", read_frame(sock)[:16])
            if session_id == 0 or timeout_ms <= 0:
                return False
            ready = True
            if must_exist:
                path = must_exist.encode()
                send_frame(sock, struct.pack(">iii", 1, 3, len(path)) + path + b"\0")  # exists
                _, _, err = struct.unpack(">iqi", read_frame(sock)[:16])
                ready = err == 0
            send_frame(sock, struct.pack(">ii", 2, -11))  # closeSession
            read_frame(sock)
            return ready
    except (OSError, ConnectionError, struct.error):
        return False


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def disk_bytes(path):
    """Bytes allocated on disk under `path` (as du counts: preallocated log files that are
    sparse count only for what they hold)."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def newest_snapshot_bytes(paths):
    """Size of the newest file named like a snapshot: what a restart loads, as against the
    total, which holds every snapshot the server has not purged."""
    newest = None
    for path in paths:
        for dirpath, _, files in os.walk(path):
            for name in files:
                if "snap" in name.lower():
                    st = os.lstat(os.path.join(dirpath, name))
                    if newest is None or st.st_mtime > newest[0]:
                        newest = (st.st_mtime, st.st_size)
    return newest[1] if newest else None


class Cluster:
    """One system's servers on loopback, each with its own zoo.cfg and data directory."""

    def __init__(self, system, size, work, warden_bin, extra_lines=None, zk_heap="2g", preexec=None):
        """`extra_lines(i)`, if given, returns zoo.cfg lines of its own for node i; `preexec(i)`,
        if given, runs in node i's process before it executes the server (to join a cgroup)."""
        self.system, self.size, self.warden_bin = system, size, warden_bin
        self.extra_lines = extra_lines or (lambda _i: [])
        self.zk_heap, self.preexec = zk_heap, preexec
        self.dir = work / f"{system}-{size}"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.client_ports = [free_port() for _ in range(size)]
        self.peer_ports = [(free_port(), free_port()) for _ in range(size)]
        self.processes = [None] * size
        self.configs = [self.write_config(i) for i in range(size)]

    def write_config(self, i):
        node = self.dir / f"node{i + 1}"
        (node / "data").mkdir(parents=True, exist_ok=True)
        lines = [
            "tickTime=2000",
            "initLimit=10",
            "syncLimit=5",
            f"dataDir={node / 'data'}",
            f"clientPort={self.client_ports[i]}",
            "clientPortAddress=127.0.0.1",
            "forceSync=yes",
            "admin.enableServer=false",
            # mntr, for ZooKeeper's snapshot times.
            "4lw.commands.whitelist=*",
            # ZooKeeper's default of 60 connections per address would refuse the benchmark's
            # 100 and 1,000 sessions, which all come from 127.0.0.1.
            "maxClientCnxns=0",
        ]
        if self.size > 1:
            (node / "data" / "myid").write_text(f"{i + 1}\n")
            for j, (quorum, election) in enumerate(self.peer_ports):
                lines.append(f"server.{j + 1}=127.0.0.1:{quorum}:{election}")
        lines += self.extra_lines(i)
        config = node / "zoo.cfg"
        config.write_text("\n".join(lines) + "\n")
        return config

    def data_dirs(self):
        return [self.dir / f"node{i + 1}" / "data" for i in range(self.size)]

    def start(self, must_exist=None):
        """Starts every node; returns seconds until each one serves (`must_exist` readable)."""
        began = time.monotonic()
        for i, config in enumerate(self.configs):
            if self.system == "zookeeper":
                # run.sh execs java: the pid is ZooKeeper's own.
                command = [str(REPO / "scripts/zookeeper/run.sh"), str(config)]
                env = dict(os.environ, ZK_HEAP=self.zk_heap, ZK_LOG_LEVEL="warn")
            else:
                command = [str(self.warden_bin), "server", "--zoo-cfg", str(config)]
                env = dict(os.environ)
            with open(self.dir / f"node{i + 1}" / "server.log", "ab") as log_file:
                preexec = (lambda i=i: self.preexec(i)) if self.preexec else None
                process = subprocess.Popen(
                    command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                    preexec_fn=preexec,
                )
            started.append(process)
            self.processes[i] = process
        deadline = began + START_TIMEOUT_S
        waiting = set(range(self.size))
        while waiting:
            for i in list(waiting):
                if self.processes[i].poll() is not None:
                    raise RuntimeError(f"{self.system} node {i + 1} exited at start; see {self.dir}")
                if session_ready(self.client_ports[i], must_exist):
                    waiting.discard(i)
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"{self.system} did not serve within {START_TIMEOUT_S} s; see {self.dir}")
            if waiting:
                time.sleep(0.02)
        return time.monotonic() - began

    def stop(self):
        for process in self.processes:
            if process is not None:
                stop(process)

    def pids(self):
        return [p.pid for p in self.processes]

    def servers(self):
        return ",".join(f"127.0.0.1:{port}" for port in self.client_ports)


# ---------------------------------------------------------------------------------------------
# Runs


def bench(warden_bin, cluster, args, raw_dir, name):
    """Runs `warden bench` against the cluster; returns its JSON report (also saved)."""
    command = [
        str(warden_bin), "bench", "--servers", cluster.servers(),
        "--pid", ",".join(map(str, cluster.pids())), "--json", "--progress", "0", "--driver", DRIVER,
    ] + args
    limit = None
    if "--time-limit" in args:
        limit = float(args[args.index("--time-limit") + 1]) + 30
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started.append(process)
    try:
        out, err = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise RuntimeError(f"warden bench {name} overran its time limit")
    if process.returncode != 0:
        raise RuntimeError(f"warden bench {name} failed:\n{err}")
    report = json.loads(out)
    (raw_dir / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    if report["errors"]:
        log(f"  {name}: {report['errors']} errors: {report['errors_by_code']}")
    check = report.get("znodes")
    if check and check["found"] != check["acknowledged"]:
        # The run's writes, counted through the independent client, are not the ones the
        # driver saw acknowledged: a wrong answer somewhere, unless requests failed.
        message = (f"  {name}: {check['found']} znodes made, {check['acknowledged']} acknowledged "
                   f"({report['errors']} errors)")
        if not report["errors"]:
            raise RuntimeError(message)
        log(message)
    return report


def workload_args(workload, sizes):
    if workload == "load":
        return ["--workload", "load", "--nodes", str(sizes.load_nodes), "--parents", str(LOAD_PARENTS),
                "--sessions", str(sizes.sessions), "--time-limit", "3600"]
    return ["--workload", workload, "--sessions", str(sizes.sessions), "--duration", str(sizes.duration),
            "--warmup", str(sizes.warmup), "--time-limit", str(sizes.duration + sizes.warmup + BENCH_SLACK_S)]


def throughput_phase(systems, cluster_size, sizes, work, raw_dir, warden_bin):
    clusters = {}
    runs = {s: {w: [] for w in sizes.workloads} for s in systems}
    try:
        for system in systems:
            log(f"starting {system} x{cluster_size}")
            clusters[system] = Cluster(system, cluster_size, work, warden_bin, zk_heap=sizes.zk_heap)
            clusters[system].start()
        for repeat in range(sizes.repeats):
            order = list(systems) if repeat % 2 == 0 else list(reversed(systems))
            for workload in sizes.workloads:
                for system in order:
                    name = f"{system}-x{cluster_size}-{workload}-r{repeat + 1}"
                    report = bench(warden_bin, clusters[system], workload_args(workload, sizes), raw_dir, name)
                    runs[system][workload].append(report)
                    log(f"  {name}: {report['throughput']:.0f} ops/s, p99 {report['latency_us']['p99'] / 1000:.2f} ms"
                        f", {report['errors']} errors")
    finally:
        for cluster in clusters.values():
            cluster.stop()
    return runs


def raw_load_bytes(nodes, parents, value_bytes=100):
    """Paths + values + stats of what the load workload creates (its parents included)."""
    total = 0
    for prefix in (BENCH_ROOT, f"{BENCH_ROOT}/load"):
        total += len(prefix) + STAT_BYTES
    for p in range(parents):
        total += len(f"{BENCH_ROOT}/load/p{p}") + STAT_BYTES
    for i in range(nodes):
        total += len(f"{BENCH_ROOT}/load/p{i % parents}/n{i}") + value_bytes + STAT_BYTES
    return total


def footprint_phase(system, sizes, work, raw_dir, warden_bin):
    n = sizes.footprint_nodes
    result = {"nodes": n}
    cluster = Cluster(system, 1, work, warden_bin, zk_heap=sizes.zk_heap)
    try:
        log(f"footprint of {system}: fresh server")
        cluster.start()
        pid = cluster.pids()[0]
        time.sleep(2)
        result["rss_idle"] = rss_bytes(pid)
        snapshots_before, _ = snapshot_times(cluster)  # ZooKeeper's of its empty tree at start
        args = ["--workload", "load", "--nodes", str(n), "--parents", str(LOAD_PARENTS), "--keep",
                "--sessions", str(sizes.sessions), "--time-limit", "3600"]
        load = bench(warden_bin, cluster, args, raw_dir, f"{system}-footprint-load")
        result["load_throughput"] = load["throughput"]
        result["load_seconds"] = load["measured_seconds"]
        time.sleep(2)
        result["rss_after_load"] = rss_bytes(pid)
        snapshots, result["snapshot_longest_seconds"] = snapshot_times(cluster)
        result["snapshots_during_load"] = snapshots - snapshots_before
        cluster.stop()
        result["disk"] = sum(disk_bytes(d) for d in cluster.data_dirs())
        result["newest_snapshot"] = newest_snapshot_bytes(cluster.data_dirs())
        last = f"{BENCH_ROOT}/load/p{(n - 1) % LOAD_PARENTS}/n{n - 1}"
        log(f"footprint of {system}: restart with {n} znodes")
        result["restart_seconds"] = cluster.start(must_exist=last)
        pid = cluster.pids()[0]
        time.sleep(2)
        result["rss_after_restart"] = rss_bytes(pid)
        log(f"footprint of {system}: ClickHouse pattern, 3 sessions, {sizes.clickhouse_requests} requests")
        args = ["--workload", "clickhouse", "--sessions", "3", "--requests", str(sizes.clickhouse_requests),
                "--warmup", "0", "--root", "/warden-bench-clickhouse", "--time-limit", "3600"]
        clickhouse = bench(warden_bin, cluster, args, raw_dir, f"{system}-footprint-clickhouse")
        result["clickhouse_rss_peak"] = clickhouse["servers_usage"][0]["rss_bytes_peak"]
        result["clickhouse_throughput"] = clickhouse["throughput"]
        result["clickhouse_errors"] = clickhouse["errors"]
    finally:
        cluster.stop()
    return result


# ---------------------------------------------------------------------------------------------
# Report


def median(values):
    return statistics.median(values) if values else None


def spread(values):
    """(max - min) / median, as a percentage: the noise between repeats."""
    if len(values) < 2 or not median(values):
        return None
    return 100.0 * (max(values) - min(values)) / median(values)


METRICS = {
    "throughput": lambda r: r["throughput"],
    "ops/cpu-s": lambda r: r["ops_per_server_cpu_second"],
    "p50": lambda r: r["latency_us"]["p50"],
    "p99": lambda r: r["latency_us"]["p99"],
    "p99.9": lambda r: r["latency_us"]["p999"],
}


def summarize(reports):
    return {m: [f(r) for r in reports if f(r) is not None] for m, f in METRICS.items()}


def fmt(value, kind):
    if value is None:
        return "–"
    if kind in ("p50", "p99", "p99.9"):
        return f"{value / 1000:.2f} ms"
    if kind == "ratio":
        return f"{value:.2f}x"
    if kind == "pct":
        return f"{value:.0f}%"
    if kind == "bytes":
        return f"{value / 2**20:.1f} MiB"
    return f"{value:,.0f}"


def machine():
    cpu = "unknown"
    with open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as info:
        mem_kib = int(info.readline().split()[1])
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": f"{mem_kib / 2**20:.0f} GiB",
        "kernel": platform.release(),
        "java": java[0] if java else "unknown",
        "commit": commit or "unknown",
    }


def cores(reports):
    """Median CPU use of the servers and of the bench itself, in cores: on a small machine the
    two compete, and a bench near a full core limits what any server can show."""
    server = median([r["server_cpu_seconds"] / r["measured_seconds"] for r in reports if r["measured_seconds"]])
    client = median([r["client_cpu_seconds"] / r["measured_seconds"] for r in reports if r["measured_seconds"]])
    return "–" if server is None else f"{server:.2f} / {client:.2f}"


def bench_cpu_per_request(reports):
    """The bench's own CPU per answered request (median over the repeats)."""
    us = median([r["client_cpu_us_per_op"] for r in reports if r.get("client_cpu_us_per_op")])
    return "–" if us is None else f"{us:.1f} µs"


def ratio(a, b):
    return a / b if a is not None and b else None


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def write_report(out, sizes, runs_by_size, footprints, warden_note, plots, loads):
    facts = machine()
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Warden vs ZooKeeper {ZK_VERSION}",
        "",
        f"Run {now} by `scripts/bench/compare.sh` ({'quick' if sizes.quick else 'full'} sizes), commit "
        f"{facts['commit']}.",
        f"Machine: {facts['cpu']}, {facts['cores']} cores, {facts['memory']}, Linux {facts['kernel']}; "
        f"{facts['java']}. Servers and `warden bench` share the machine, on loopback; "
        f"load average {loads[0]} before the run, {loads[1]} after.",
        f"ZooKeeper: {ZK_VERSION} from Maven Central, forceSync=yes, maxClientCnxns=0, default settings otherwise, heap {sizes.zk_heap} (G1).",
        f"Warden: {warden_note}.",
        "",
        f"Each workload ran {sizes.repeats} times per system, alternating systems (order swapped every repeat), "
        f"{sizes.sessions} sessions, {sizes.warmup} s warm-up + {sizes.duration} s measured "
        f"(load: {sizes.load_nodes:,} znodes of 100 B under {LOAD_PARENTS} parents, 64 outstanding per session). "
        "Figures are medians over the repeats; latencies are of all requests of the workload together.",
        f"`warden bench --driver {DRIVER}`"
        + (": requests written straight onto each session's socket; after each run the znodes it made are "
           "counted through the independent zookeeper-client crate against the writes the driver saw "
           "acknowledged." if DRIVER == "lean" else ": requests sent through the independent zookeeper-client crate."),
        "",
    ]
    for size, runs in runs_by_size.items():
        systems = list(runs)
        lines += [f"## Throughput and latency, {size} server{'s' if size > 1 else ''}", ""]
        header = ("| workload | system | ops/s | ops per server CPU-s | p50 | p99 | p99.9 | server / bench CPU, cores "
                  "| bench CPU per request |")
        lines += [header, "|---|---|---|---|---|---|---|---|---|"]
        for workload in sizes.workloads:
            for system in systems:
                s = summarize(runs[system][workload])
                cells = [fmt(median(s[m]), m) for m in METRICS]
                cells.append(cores(runs[system][workload]))
                cells.append(bench_cpu_per_request(runs[system][workload]))
                lines.append(f"| {workload} | {system} | " + " | ".join(cells) + " |")
            if "warden" in systems and "zookeeper" in systems:
                w, z = summarize(runs["warden"][workload]), summarize(runs["zookeeper"][workload])
                cells = [fmt(ratio(median(w[m]), median(z[m])), "ratio") for m in METRICS]
                lines.append(f"| {workload} | **Warden / ZooKeeper** | " + " | ".join(cells) + " | | |")
        lines += ["", "Noise between repeats, (max - min) / median:", ""]
        lines += ["| workload | system | ops/s | ops per server CPU-s | p50 | p99 | p99.9 |",
                  "|---|---|---|---|---|---|---|"]
        for workload in sizes.workloads:
            for system in systems:
                s = summarize(runs[system][workload])
                lines.append(f"| {workload} | {system} | " + " | ".join(fmt(spread(s[m]), "pct") for m in METRICS)
                             + " |")
        lines.append("")
    if footprints:
        n = next(iter(footprints.values()))["nodes"]
        raw = raw_load_bytes(n, LOAD_PARENTS)
        lines += [f"## Footprint with {n:,} znodes (100 B values under {LOAD_PARENTS} parents)", "",
                  f"Raw size of the data (paths + values + 68-byte stats): {fmt(raw, 'bytes')}.", ""]
        systems = list(footprints)
        lines += ["| | " + " | ".join(systems) + (" | Warden / ZooKeeper |" if len(systems) > 1 else " |"),
                  "|---|" + "---|" * (len(systems) + (1 if len(systems) > 1 else 0))]
        rows = [
            ("RSS idle, fresh", "rss_idle", "bytes"),
            (f"RSS after loading {n:,} znodes", "rss_after_load", "bytes"),
            (f"RSS after restart with {n:,} znodes", "rss_after_restart", "bytes"),
            ("RSS after restart / raw data size", None, "ratio"),
            ("restart time (process start to last znode readable)", "restart_seconds", "s"),
            ("disk: snapshots + logs, all kept (default purge settings)", "disk", "bytes"),
            ("disk: newest snapshot", "newest_snapshot", "bytes"),
            ("load throughput on the fresh server, ops/s", "load_throughput", ""),
            (f"load time, {n:,} creates", "load_seconds", "s"),
            ("snapshots written during the load", "snapshots_during_load", ""),
            ("longest of those snapshots", "snapshot_longest_seconds", "s"),
            (f"peak RSS, ClickHouse pattern (3 sessions, {sizes.clickhouse_requests:,} requests)",
             "clickhouse_rss_peak", "bytes"),
        ]
        for label, key, kind in rows:
            values = []
            for system in systems:
                f = footprints[system]
                values.append(f["rss_after_restart"] / raw if key is None else f[key])
            cells = [f"{v:.2f} s" if kind == "s" else fmt(v, kind) for v in values]
            if len(systems) > 1:
                cells.append(fmt(ratio(values[1], values[0]), "ratio"))
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += aims(runs_by_size.get(1), footprints)
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    lines += ["Every run's JSON report is in `raw/`.", ""]
    (out / "report.md").write_text("\n".join(lines))


def aims(runs, footprints):
    """Where Warden stands against the project's aims (issue 4), when both systems ran."""
    lines = ["## Against the aims", ""]
    if not runs or "warden" not in runs:
        if "warden" not in footprints:
            return lines + ["Warden did not run, so there is nothing to hold against the aims yet.", ""]
    lines += ["| aim | measured | met |", "|---|---|---|"]

    def throughput_ratio(workload):
        if not runs or "warden" not in runs or workload not in runs["warden"]:
            return None
        w = median(summarize(runs["warden"][workload])["throughput"])
        z = median(summarize(runs["zookeeper"][workload])["throughput"])
        return ratio(w, z)

    def p99_ratio(workload):
        if not runs or "warden" not in runs or workload not in runs["warden"]:
            return None
        w = median(summarize(runs["warden"][workload])["p99"])
        z = median(summarize(runs["zookeeper"][workload])["p99"])
        return ratio(w, z)

    def row(aim, value, kind, good):
        met = "–" if value is None else ("yes" if good(value) else "**no**")
        shown = f"{value:.2f} s" if kind == "s" and value is not None else fmt(value, kind)
        lines.append(f"| {aim} | {shown} | {met} |")

    row("write throughput (create) at least 3x ZooKeeper's", throughput_ratio("create"), "ratio", lambda v: v >= 3)
    row("mixed throughput at least 4x ZooKeeper's", throughput_ratio("mixed"), "ratio", lambda v: v >= 4)
    for workload in WORKLOADS:
        row(f"p99 at most half ZooKeeper's ({workload})", p99_ratio(workload), "ratio", lambda v: v <= 0.5)
    warden = footprints.get("warden")
    if warden:
        raw = raw_load_bytes(warden["nodes"], LOAD_PARENTS)
        row(f"RSS at most 1.3x the raw data ({warden['nodes']:,} znodes, after restart)",
            warden["rss_after_restart"] / raw, "ratio", lambda v: v <= 1.3)
        row(f"restart with {warden['nodes']:,} znodes under 1 s", warden["restart_seconds"], "s", lambda v: v < 1)
    return lines + [""]


def save_plot(plt, fig, path):
    """Lays out, writes and closes a figure; its path."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot(out, sizes, runs_by_size):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no plots (compare.sh installs it into a venv)")
        return []
    files = []
    for size, runs in runs_by_size.items():
        systems = list(runs)
        workloads = sizes.workloads
        width = 0.8 / len(systems)
        fig, ax = plt.subplots(figsize=(8, 4))
        for k, system in enumerate(systems):
            values = [summarize(runs[system][w])["throughput"] for w in workloads]
            mids = [median(v) or 0 for v in values]
            low = [m - min(v) if v else 0 for m, v in zip(mids, values)]
            high = [max(v) - m if v else 0 for m, v in zip(mids, values)]
            xs = [i + (k - (len(systems) - 1) / 2) * width for i in range(len(workloads))]
            ax.bar(xs, mids, width, yerr=[low, high], capsize=3, label=system)
        ax.set_xticks(range(len(workloads)), workloads)
        ax.set_ylabel("requests per second (median, min-max bars)")
        ax.set_title(f"Throughput, {size} server{'s' if size > 1 else ''}")
        ax.legend()
        files.append(save_plot(plt, fig, out / f"throughput-{size}.png"))

        fig, axes = plt.subplots(1, len(workloads), figsize=(3 * len(workloads), 3.6), sharey=True)
        axes = axes if len(workloads) > 1 else [axes]
        percentiles = [("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p999", "p99.9")]
        for ax, workload in zip(axes, workloads):
            for system in systems:
                reports = runs[system][workload]
                ys = [median([r["latency_us"][key] / 1000 for r in reports]) for key, _ in percentiles]
                ax.plot([label for _, label in percentiles], ys, marker="o", label=system)
            ax.set_yscale("log")
            ax.set_title(workload)
            ax.grid(True, which="both", alpha=0.3)
        axes[0].set_ylabel("latency, ms (median of repeats)")
        axes[0].legend()
        fig.suptitle(f"Latency percentiles, {size} server{'s' if size > 1 else ''}")
        files.append(save_plot(plt, fig, out / f"latency-{size}.png"))
    return files


# ---------------------------------------------------------------------------------------------


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", default=os.environ.get("COMPARE_QUICK") == "1",
                        help="small sizes: the whole comparison in a few minutes (env COMPARE_QUICK=1)")
    for name in SIZES:
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=int, default=None,
                            help=f"default {SIZES[name][1]} ({SIZES[name][0]} with --quick); "
                                 f"env COMPARE_{name.upper()}")
    parser.add_argument("--workloads", default=os.environ.get("COMPARE_WORKLOADS", ",".join(WORKLOADS)),
                        help="comma-separated (default: all named workloads)")
    parser.add_argument("--cluster-sizes", default=os.environ.get("COMPARE_CLUSTER_SIZES", "1"),
                        help="servers per system, comma-separated, e.g. 1,3 (default 1)")
    parser.add_argument("--zk-heap", default=os.environ.get("COMPARE_ZK_HEAP", "2g"),
                        help="ZooKeeper's heap, -Xmx and -Xms (default 2g; 10,000,000 znodes need about 12g)")
    parser.add_argument("--systems", default=os.environ.get("COMPARE_SYSTEMS", "zookeeper,warden"),
                        help="which systems to run (warden is skipped while `warden server` does not exist)")
    parser.add_argument("--phases", default=os.environ.get("COMPARE_PHASES", "throughput,footprint"),
                        help="throughput (workloads side by side), footprint (memory, disk, restart); "
                             "default both")
    parser.add_argument("--driver", choices=("lean", "client"), default=os.environ.get("COMPARE_DRIVER", "lean"),
                        help="how warden bench sends requests: lean (straight onto the socket, its writes "
                             "checked through zookeeper-client after each run) or client (through "
                             "zookeeper-client); default lean; env COMPARE_DRIVER")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default target/bench-compare/<time>)")
    parser.add_argument("--warden-bin", type=Path, default=None,
                        help="the warden binary (default: built here with cargo build --release)")
    args = parser.parse_args()
    for name, (quick, full) in SIZES.items():
        if getattr(args, name) is None:
            env = os.environ.get(f"COMPARE_{name.upper()}")
            setattr(args, name, int(env) if env else (quick if args.quick else full))
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    args.workloads = [w for w in args.workloads.split(",") if w]
    for w in args.workloads:
        if w not in WORKLOADS:
            parser.error(f"unknown workload {w!r}; known: {', '.join(WORKLOADS)}")
    args.cluster_sizes = [int(n) for n in args.cluster_sizes.split(",")]
    if any(n < 1 or n > 7 for n in args.cluster_sizes):
        parser.error("cluster sizes must be within 1..7")
    args.phases = [p for p in args.phases.split(",") if p]
    if not args.phases or any(p not in ("throughput", "footprint") for p in args.phases):
        parser.error("phases are throughput and footprint")
    args.systems = [s for s in args.systems.split(",") if s]
    if any(s not in SYSTEMS for s in args.systems):
        parser.error(f"systems are {', '.join(SYSTEMS)}")
    return args


def build_warden():
    log("building warden (release)")
    subprocess.run(["cargo", "build", "--release", "-p", "warden"], cwd=REPO, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "release" / "warden"


def main():
    global DRIVER
    args = parse_args()
    DRIVER = args.driver
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or REPO / "target" / "bench-compare" / stamp
    raw_dir = out / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    log(f"installing ZooKeeper {ZK_VERSION}")
    subprocess.run([str(REPO / "scripts/zookeeper/install.sh")], check=True, stdout=subprocess.DEVNULL)
    warden_bin = args.warden_bin or build_warden()
    systems = list(args.systems)
    warden_note = "built from this commit"
    if "warden" in systems:
        probe = subprocess.run([str(warden_bin), "server", "--help"], capture_output=True, timeout=30)
        if probe.returncode != 0:
            warden_note = "warden server not available yet (`warden server --help` fails); ZooKeeper ran alone"
            log(warden_note)
            systems.remove("warden")
    else:
        warden_note = "not run (--systems)"
    # ZooKeeper first: ratios read Warden / ZooKeeper.
    systems.sort(key=SYSTEMS.index)
    if not systems:
        sys.exit("nothing to run")
    try:
        load_before = loadavg()
        runs_by_size = {}
        if "throughput" in args.phases:
            for size in args.cluster_sizes:
                runs_by_size[size] = throughput_phase(systems, size, args, work, raw_dir, warden_bin)
        footprints = {}
        if "footprint" in args.phases:
            for system in systems:
                footprints[system] = footprint_phase(system, args, work, raw_dir, warden_bin)
        (out / "footprint.json").write_text(json.dumps(footprints, indent=2) + "\n")
        plots = plot(out, args, runs_by_size)
        write_report(out, args, runs_by_size, footprints, warden_note, plots, (load_before, loadavg()))
    finally:
        kill_all()
    shutil.rmtree(work, ignore_errors=True)
    log(f"report: {out / 'report.md'}")
    print(out / "report.md")


if __name__ == "__main__":
    main()
