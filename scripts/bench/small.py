#!/usr/bin/env python3
"""Small machines: a three-server cluster whose every server is held by cgroup limits to a
share of a core and a memory bound (by default a third of a core and 256 MiB: ClickHouse runs
Keeper in Kubernetes with three servers of a third of a core each), under the ClickHouse
pattern with 3 sessions spread over the servers. Warden and ZooKeeper 3.9.5 in turn.

    sudo scripts/bench/small.py --warden-bin target/release/warden [--requests 100000]

Needs root (it makes cgroups) and cgroup v1's cpu and memory controllers, or cgroup v2 with
both enabled for the root's children. For each server it reports the cgroup's peak memory
(page cache included) and its OOM kills, how often its CPU quota throttled it, its peak RSS,
and whether it still runs at the end; for the run, throughput, latency and errors. The load
generator runs outside the limits. Every process is killed by pid and every cgroup removed
when the script ends, however it ends. Writes small.json and the runs' JSON into --out.
"""

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (the cluster, its ports, its processes, warden bench)

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000


class Limits:
    """One cgroup per server (v1: one in `cpu` and one in `memory`; v2: one), made on
    construction and removed by `remove`."""

    def __init__(self, name, cpus, memory_bytes):
        controllers = CGROUP_ROOT / "cgroup.controllers"
        self.v2 = controllers.exists() and "memory" in controllers.read_text().split()
        if self.v2:
            self.dirs = [CGROUP_ROOT / name]
        else:
            self.dirs = [CGROUP_ROOT / "cpu" / name, CGROUP_ROOT / "memory" / name]
        try:
            for d in self.dirs:
                d.mkdir()
            self.limit(cpus, memory_bytes)
        except Exception:
            self.remove()  # what was made of it so far
            raise

    def limit(self, cpus, memory_bytes):
        quota = int(CPU_PERIOD_US * cpus)
        if self.v2:
            self.write("cpu.max", f"{quota} {CPU_PERIOD_US}")
            self.write("memory.max", str(memory_bytes))
            self.write("memory.swap.max", "0", optional=True)
        else:
            self.write("cpu.cfs_period_us", str(CPU_PERIOD_US))
            self.write("cpu.cfs_quota_us", str(quota))
            self.write("memory.limit_in_bytes", str(memory_bytes))
            self.write("memory.memsw.limit_in_bytes", str(memory_bytes), optional=True)

    def file(self, name):
        for d in self.dirs:
            if (d / name).exists():
                return d / name
        return None

    def write(self, name, value, optional=False):
        path = self.file(name)
        if path is None:
            if optional:
                return
            raise RuntimeError(f"no {name} in {self.dirs}")
        path.write_text(value)

    def join(self):
        """Moves the calling process (a server about to start) into the cgroups."""
        for d in self.dirs:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    def memory_now(self):
        """The cgroup's memory now (page cache included), or None without the file."""
        path = self.file("memory.current" if self.v2 else "memory.usage_in_bytes")
        try:
            return int(path.read_text()) if path else None
        except OSError:
            return None

    def figures(self):
        def fields(name):
            path = self.file(name)
            if path is None:
                return {}
            return dict((line.split() + ["0"])[:2] for line in path.read_text().splitlines() if line)

        cpu = fields("cpu.stat")
        if self.v2:
            peak = self.file("memory.peak")
            events = fields("memory.events")
            return {
                "memory_peak_bytes": int(peak.read_text()) if peak else None,
                "oom_kills": int(events.get("oom_kill", 0)),
                "throttled_periods": int(cpu.get("nr_throttled", 0)),
                "throttled_seconds": int(cpu.get("throttled_usec", 0)) / 1e6,
            }
        return {
            "memory_peak_bytes": int(self.file("memory.max_usage_in_bytes").read_text()),
            "oom_kills": int(fields("memory.oom_control").get("oom_kill", 0)),
            "throttled_periods": int(cpu.get("nr_throttled", 0)),
            "throttled_seconds": int(cpu.get("throttled_time", 0)) / 1e9,
        }

    def remove(self):
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # its processes are still exiting


def run_limited(system, servers, cpus, memory_mib, zk_heap, bench_args, name, work, raw_dir, warden_bin,
                on_serving=None):
    """Starts `servers` fresh servers of `system`, each in its own cgroup of `cpus` cores and
    `memory_mib`, runs `warden bench` on them, stops them and removes the cgroups. Returns the
    run's figures; `on_serving(cluster, limits)`, if given, is called once they serve and
    returns a watcher whose `stop()` (called before they stop) gives figures of its own."""
    limits = []
    cluster = compare.Cluster(system, servers, work, warden_bin, zk_heap=zk_heap,
                              preexec=lambda i: limits[i].join())
    result = {}
    watcher = None
    try:
        for i in range(servers):
            limits.append(Limits(f"warden-limited-{os.getpid()}-{system}-{i + 1}", cpus, memory_mib << 20))
        result["start_seconds"] = cluster.start()
        if on_serving:
            watcher = on_serving(cluster, limits)
        try:
            report = compare.bench(warden_bin, cluster, bench_args, raw_dir, name)
            result.update(
                throughput=report["throughput"],
                runtime_seconds=report["measured_seconds"],
                ops_per_server_cpu_second=report["ops_per_server_cpu_second"],
                latency_us=report["latency_us"],
                errors=report["errors"],
                errors_by_code=report["errors_by_code"],
                rss_peak_bytes=[u["rss_bytes_peak"] for u in report["servers_usage"]],
                bench_cpu_us_per_op=report["client_cpu_us_per_op"],
            )
        except RuntimeError as e:
            compare.log(f"  {name}: {e}")
            # The bench's own error follows the line naming the run.
            result["failed"] = " ".join(line.strip() for line in str(e).splitlines() if line.strip())
        result["running_at_end"] = [p.poll() is None for p in cluster.processes]
    finally:
        if watcher is not None:
            result.update(watcher.stop())
        cluster.stop()
        result["cgroups"] = [lim.figures() for lim in limits]
        for lim in limits:
            lim.remove()
    return result


def run_system(system, args, work, raw_dir):
    compare.log(f"starting {system} x3, each within {args.cpus:.2f} of a core and {args.memory_mib} MiB")
    bench_args = ["--workload", "clickhouse", "--sessions", "3", "--requests", str(args.requests),
                  "--warmup", "0", "--time-limit", str(args.time_limit)]
    result = run_limited(system, 3, args.cpus, args.memory_mib, args.zk_heap, bench_args, f"small-{system}",
                         work, raw_dir, args.warden_bin)
    return dict(result, system=system)


def mib(n):
    return f"{n / (1 << 20):.0f} MiB" if n is not None else "-"


def table(results, args):
    lines = [
        f"Three servers, each within {args.cpus:.2f} of a core and {args.memory_mib} MiB (cgroup), "
        f"ClickHouse pattern, 3 sessions, {args.requests} requests; ZooKeeper's heap {args.zk_heap}.",
        "",
        "| | " + " | ".join(r["system"] for r in results) + " |",
        "|---|" + "---|" * len(results),
    ]

    def row(label, cell):
        lines.append(f"| {label} | " + " | ".join(cell(r) for r in results) + " |")

    row("ran to the end", lambda r: "yes" if "failed" not in r else f"no: {r['failed']}")
    row("throughput", lambda r: f"{r['throughput']:.0f} ops/s" if "throughput" in r else "-")
    row("ops per server CPU-second", lambda r: f"{r['ops_per_server_cpu_second']:.0f}"
        if "throughput" in r else "-")
    row("p50 / p99 latency", lambda r: f"{r['latency_us']['p50'] / 1000:.1f} / {r['latency_us']['p99'] / 1000:.1f} ms"
        if "latency_us" in r else "-")
    row("errors", lambda r: str(r.get("errors", "-")))
    row("peak RSS per server", lambda r: ", ".join(mib(b) for b in r.get("rss_peak_bytes", [])) or "-")
    row("cgroup memory peak per server (page cache included)",
        lambda r: ", ".join(mib(c["memory_peak_bytes"]) for c in r["cgroups"]))
    row("OOM kills", lambda r: ", ".join(str(c["oom_kills"]) for c in r["cgroups"]))
    row("CPU quota throttled (periods, seconds)",
        lambda r: ", ".join(f"{c['throttled_periods']}, {c['throttled_seconds']:.1f} s" for c in r["cgroups"]))
    row("servers running at the end", lambda r: f"{sum(r['running_at_end'])} of 3" if "running_at_end" in r else "-")
    row("start, all three serving", lambda r: f"{r['start_seconds']:.1f} s" if "start_seconds" in r else "-")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warden-bin", type=Path, required=True)
    parser.add_argument("--systems", default="zookeeper,warden")
    parser.add_argument("--cpus", type=float, default=1 / 3, help="share of a core per server (default 1/3)")
    parser.add_argument("--memory-mib", type=int, default=256, help="memory per server (default 256)")
    parser.add_argument("--zk-heap", default="128m", help="ZooKeeper's -Xmx/-Xms (default 128m)")
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--time-limit", type=int, default=900, help="seconds for each system's run")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not 0.01 <= args.cpus <= 64 or args.memory_mib < 16 or args.requests < 1:
        parser.error("--cpus 0.01..64, --memory-mib >= 16, --requests >= 1")
    if os.geteuid() != 0:
        sys.exit("small.py makes cgroups: run it as root")
    systems = [s for s in args.systems.split(",") if s]
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or compare.REPO / "target" / "bench-small" / stamp
    raw_dir = out / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    compare.signal.signal(compare.signal.SIGTERM, compare.on_signal)
    compare.signal.signal(compare.signal.SIGINT, compare.on_signal)
    results = []
    try:
        for system in systems:
            results.append(run_system(system, args, out / "work", raw_dir))
    finally:
        compare.kill_all()
    (out / "small.json").write_text(json.dumps(results, indent=2) + "\n")
    text = table(results, args)
    (out / "small.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
