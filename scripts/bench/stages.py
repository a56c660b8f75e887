#!/usr/bin/env python3
"""Where one Raft group saturates: the busy fraction of each serial stage of Warden's write path.

A three-server Warden cluster on loopback takes `warden bench` creates with 100 to 1,000
requests in flight (sessions spread over the servers). For each load, over the same measured
window, on every server:

- the CPU of each thread (/proc/PID/task/*/stat): raft-log's flush thread apart from the tokio
  threads, and the whole process;
- the flush thread's busy time, which is mostly fsync and so not CPU, from Warden's own
  counters (`warden_log_flush_busy_seconds_total`, `..._group_wait_...`, `..._writes_total`);
- with `perf` (frame pointers: build with RUSTFLAGS="-C force-frame-pointers=yes"), the CPU of
  each task on the tokio threads: openraft's core task, its state-machine worker (the apply),
  its replication streams, the peer RPC server, the client connections. Each of the first
  three is one task, so its CPU time over wall time is how busy that serial stage is.

A stage near 1.0 saturates; per committed write, its microseconds bound what one group can do
whatever the number of cores (1 s / its µs per write). Writes `stages.json` and `report.md`
into the output directory. Every process started is stopped by pid. Standard library only.

    scripts/bench/stages.py --warden-bin target/fp/release/warden
"""

import argparse
import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (the cluster, its ports and its processes)

CLK_TCK = os.sysconf("SC_CLK_TCK")
FLUSH_THREAD = "chunked_wal_flu"  # raft-log's "chunked_wal_flush_worker", as the kernel cuts it
PERF_HZ = 499

# A sample belongs to the first stage, in this order, one of whose frames contains the pattern.
# The order matters: the core calls the log store (its append is the core's work), the
# replication task calls the peer client (its sending is replication's work).
STAGES = [
    ("raft core", "RaftCore"),
    ("apply (state machine worker)", "core::sm::worker"),
    ("replication streams", "openraft::replication"),
    ("peer RPC server", "warden_server::consensus::rpc"),
    ("peer transport", "warden_server::cluster::transport"),
    ("forwarding to the leader", "warden_server::cluster::forward"),
    ("client connections", "warden_server::connection"),
    ("snapshots", "SnapshotBuilder"),
    ("tokio scheduler, idle", "tokio::runtime"),
    # Unwinding stops in libc, which has no frame pointers: the caller (a client connection or
    # the peer transport) is not known.
    ("socket send and receive (caller not unwound)", "__send"),
    ("socket send and receive (caller not unwound)", "__libc_recv"),
]
SERIAL = {"raft core", "apply (state machine worker)"}
# Across the stages above: CPU in the replica's methods is CPU under its one lock, which every
# apply, read and request takes (a serial resource of its own); spinning on a contended lock.
ACROSS = [
    ("replica lock held (across stages)", "warden_server::replica::Replica"),
    ("contended lock spinning (across stages)", "lock_contended"),
]


def log(message):
    print(f"[stages {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def leader_index(cluster, deadline_s=60):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for i, port in enumerate(cluster.client_ports):
            try:
                if "Mode: leader" in compare.four_letter(port, "srvr"):
                    return i
            except OSError:
                pass
        time.sleep(0.2)
    raise RuntimeError("no leader within 60 s")


def metrics(port):
    """The server's Prometheus samples, by name with its labels (`name{label="v"}`)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                samples[name] = float(value)
            except ValueError:
                pass
    return samples


def threads(pid):
    """CPU seconds of each thread of `pid`, by thread id: (comm, seconds)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[task.name] = (comm, (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return out


MACHINE_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def machine_jiffies():
    """The whole machine's jiffies by kind (/proc/stat's first line)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    return dict(zip(MACHINE_FIELDS, map(int, fields)))


def machine_shares(before, after):
    """Each kind's share of the machine's time between two samples."""
    spent = {k: after[k] - before[k] for k in MACHINE_FIELDS}
    total = sum(spent.values())
    return {k: v / total for k, v in spent.items()}


def sample(cluster, metric_ports):
    return {
        "at": time.monotonic(),
        "machine": machine_jiffies(),
        "threads": [threads(pid) for pid in cluster.pids()],
        "metrics": [metrics(port) for port in metric_ports],
    }


def thread_cpu(before, after):
    """CPU seconds between two samples of one process: flush thread, the rest."""
    flush = rest = 0.0
    for tid, (comm, seconds) in after.items():
        spent = seconds - before.get(tid, (comm, 0.0))[1]
        if comm == FLUSH_THREAD:
            flush += spent
        else:
            rest += spent
    return flush, rest


def perf_stages(data):
    """CPU samples of each stage in a `perf record -g` file."""
    script = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "comm,tid,ip,sym"],
        capture_output=True, text=True, timeout=900,
    )
    counts = collections.Counter()
    for block in script.stdout.split("\n\n"):
        lines = [line.strip() for line in block.strip().splitlines()]
        if not lines:
            continue
        comm = lines[0].split()[0]
        frames = "\n".join(lines[1:])
        for name, pattern in ACROSS:
            if pattern in frames:
                counts[name] += 1
        if comm.startswith(FLUSH_THREAD[:8]):
            counts["log flush thread (CPU)"] += 1
            continue
        for name, pattern in STAGES:
            if pattern in frames:
                counts[name] += 1
                break
        else:
            counts["other"] += 1
    return counts


def run_load(cluster, metric_ports, leader, sessions, pipeline, args, raw, warden_bin):
    name = f"create-{sessions}x{pipeline}"
    window = args.duration - 2
    bench_args = [
        str(warden_bin), "bench", "--servers", cluster.servers(), "--json", "--progress", "0",
        "--workload", "create", "--sessions", str(sessions), "--pipeline", str(pipeline),
        "--warmup", str(args.warmup), "--duration", str(args.duration),
        "--time-limit", str(args.warmup + args.duration + 120),
        "--pid", ",".join(map(str, cluster.pids())),
    ]
    bench = subprocess.Popen(bench_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    compare.started.append(bench)
    # The window starts a second into the measured part and ends a second before it.
    time.sleep(args.warmup + 1 + 1)
    perfs = []
    if args.perf:
        for i, pid in enumerate(cluster.pids()):
            data = raw / f"{name}-node{i + 1}.perf"
            process = subprocess.Popen(
                ["perf", "record", "-q", "-F", str(PERF_HZ), "-g", "-p", str(pid), "-o", str(data),
                 "--", "sleep", str(window)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            compare.started.append(process)
            perfs.append((process, data))
    before = sample(cluster, metric_ports)
    bench_before = threads(bench.pid)
    time.sleep(window)
    after = sample(cluster, metric_ports)
    bench_cpu = sum(s for _, s in threads(bench.pid).values()) - sum(
        s for _, s in bench_before.values()
    )
    out, err = bench.communicate(timeout=args.duration + 240)
    if bench.returncode != 0:
        raise RuntimeError(f"warden bench {name} failed:\n{err}")
    report = json.loads(out)
    for process, _ in perfs:
        process.wait(timeout=120)
    wall = after["at"] - before["at"]
    machine = machine_shares(before["machine"], after["machine"])
    writes = after["metrics"][leader]["warden_raft_committed_index"] - before["metrics"][leader][
        "warden_raft_committed_index"
    ]
    servers = []
    for i in range(cluster.size):
        flush_cpu, rest_cpu = thread_cpu(before["threads"][i], after["threads"][i])
        m0, m1 = before["metrics"][i], after["metrics"][i]
        delta = lambda key: m1.get(key, 0.0) - m0.get(key, 0.0)  # noqa: E731
        server = {
            "role": "leader" if i == leader else "follower",
            "cpu_cores": (flush_cpu + rest_cpu) / wall,
            "flush_thread_cpu_cores": flush_cpu / wall,
            "flush_busy": delta("warden_log_flush_busy_seconds_total") / wall,
            "flush_group_wait": delta("warden_log_flush_group_wait_seconds_total") / wall,
            "flush_writes": delta("warden_log_flush_writes_total"),
            "fsyncs": delta("fsynctime_count"),
            # On the leader, each follower's replication stream.
            "streams": {
                member: {
                    "busy": delta(f'warden_replication_busy_seconds_total{{member="{member}"}}') / wall,
                    "appends": delta(f'warden_replication_appends_total{{member="{member}"}}'),
                    "entries": delta(f'warden_replication_entries_total{{member="{member}"}}'),
                }
                for member in range(1, cluster.size + 1)
                if i == leader and member != i + 1
            },
        }
        if perfs:
            counts = perf_stages(perfs[i][1])
            total = sum(n for stage, n in counts.items() if stage not in dict(ACROSS))
            server["perf_samples"] = total
            # Samples of each stage, scaled to the process's CPU measured from /proc.
            server["stages_cores"] = {
                stage: n / total * server["cpu_cores"] for stage, n in counts.most_common()
            }
        servers.append(server)
    result = {
        "name": name, "sessions": sessions, "pipeline": pipeline, "in_flight": sessions * pipeline,
        "ops_per_s": report["throughput"], "errors": report["errors"],
        "latency_us": report["latency_us"], "window_s": wall, "writes_committed": writes,
        "machine": machine, "bench_cpu_cores": bench_cpu / wall, "servers": servers,
    }
    (raw / f"{name}.json").write_text(json.dumps({"bench": report, "stages": result}, indent=2) + "\n")
    return result


def write_report(out, results, args, commit):
    lines = [
        "# Serial stages of one Raft group under creates (three servers)",
        "",
        f"Warden {commit}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
        f"load average before {args.load_before}. `scripts/bench/stages.py` "
        f"(warm-up {args.warmup} s, measured {args.duration} s, window {args.duration - 2} s).",
        "",
        "Busy fraction of each stage over the window (1.0 = one core, or the flush thread never "
        "idle); µs per committed write in brackets.",
        "",
    ]
    for r in results:
        per_write = lambda cores: cores * r["window_s"] / max(r["writes_committed"], 1) * 1e6  # noqa: E731
        lines += [
            f"## {r['sessions']} sessions × {r['pipeline']} outstanding ({r['in_flight']} in flight)",
            "",
            f"{r['ops_per_s']:,.0f} creates/s (p50 {r['latency_us']['p50'] / 1000:.1f} ms, p99 "
            f"{r['latency_us']['p99'] / 1000:.1f} ms), {r['errors']} errors; {r['writes_committed']:,.0f} "
            f"entries committed in the window; the load generator {r['bench_cpu_cores']:.2f} "
            f"cores; the machine's time: "
            + ", ".join(f"{k} {v:.0%}" for k, v in r["machine"].items() if v >= 0.005)
            + ".",
            "",
            "| stage | " + " | ".join(s["role"] for s in r["servers"]) + " |",
            "|---|" + "---|" * len(r["servers"]),
        ]
        row = lambda label, values: lines.append(f"| {label} | " + " | ".join(values) + " |")  # noqa: E731
        cell = lambda v: f"{v:.2f} ({per_write(v):.1f} µs)"  # noqa: E731
        row("whole process, CPU", [cell(s["cpu_cores"]) for s in r["servers"]])
        row("log flush thread, busy (write + fsync)", [cell(s["flush_busy"]) for s in r["servers"]])
        row("log flush thread, CPU", [cell(s["flush_thread_cpu_cores"]) for s in r["servers"]])
        row("log flush thread, group-commit wait", [f"{s['flush_group_wait']:.2f}" for s in r["servers"]])
        row("**replication stream to each follower**, busy (entries per append)", [
            ", ".join(
                f"to {m}: {st['busy']:.2f} ({st['entries'] / st['appends']:.1f})"
                for m, st in s["streams"].items() if st["appends"]
            ) or "-"
            for s in r["servers"]
        ])
        row("log entries per fsync", [
            f"{r['writes_committed'] / s['fsyncs']:.1f}" if s["fsyncs"] else "-" for s in r["servers"]
        ])
        row("log writes per fsync", [
            f"{s['flush_writes'] / s['fsyncs']:.1f}" if s["fsyncs"] else "-" for s in r["servers"]
        ])
        if all("stages_cores" in s for s in r["servers"]):
            names = []
            for s in r["servers"]:
                names += [n for n in s["stages_cores"] if n not in names]
            for n in names:
                label = f"**{n}** (one task)" if n in SERIAL else (f"*{n}*" if n in dict(ACROSS) else n)
                row(label, [cell(s["stages_cores"].get(n, 0.0)) for s in r["servers"]])
        lines.append("")
    (out / "report.md").write_text("\n".join(lines) + "\n")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warden-bin", type=Path, required=True)
    parser.add_argument("--loads", default="100x1,100x10,1000x1",
                        help="sessions x outstanding requests each, comma-separated")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--no-perf", dest="perf", action="store_false",
                        help="skip the per-task attribution (no perf here)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    args.loads = [tuple(int(v) for v in load.split("x")) for load in args.loads.split(",")]
    if args.perf and not shutil.which("perf"):
        sys.exit("perf is not installed (apt-get install linux-perf), or pass --no-perf")
    return args


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, compare.on_signal)
    signal.signal(signal.SIGINT, compare.on_signal)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or compare.REPO / "target" / "bench-stages" / stamp
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    args.load_before = open("/proc/loadavg").read().split()[0]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=compare.REPO,
                            capture_output=True, text=True).stdout.strip()
    metric_ports = [compare.free_port() for _ in range(3)]
    extra = lambda i: [  # noqa: E731
        "metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider",
        "metricsProvider.httpHost=127.0.0.1",
        f"metricsProvider.httpPort={metric_ports[i]}",
    ]
    cluster = compare.Cluster("warden", 3, out / "work", args.warden_bin, extra)
    results = []
    try:
        cluster.start()
        leader = leader_index(cluster)
        log(f"leader: node {leader + 1}")
        for sessions, pipeline in args.loads:
            log(f"{sessions} sessions x {pipeline} outstanding")
            results.append(run_load(cluster, metric_ports, leader, sessions, pipeline, args, raw,
                                    args.warden_bin))
            if leader_index(cluster) != leader:
                raise RuntimeError("the leader changed during the run: figures would mix roles")
    finally:
        cluster.stop()
        compare.kill_all()
    (out / "stages.json").write_text(json.dumps(results, indent=2) + "\n")
    write_report(out, results, args, commit)
    shutil.rmtree(out / "work", ignore_errors=True)
    log(f"report: {out / 'report.md'}")
    print(out / "report.md")


if __name__ == "__main__":
    main()
