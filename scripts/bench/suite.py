#!/usr/bin/env python3
"""ClickHouse's keeper-bench-suite, for Warden and ZooKeeper 3.9.5 on one machine.

    sudo scripts/bench/suite.sh --quick --warden-bin target/release/warden   # a few minutes
    sudo scripts/bench/suite.sh --warden-bin target/release/warden           # the full matrix

keeper-bench-suite runs keeper-bench over a matrix of server sizes, client counts and request
counts, each configuration several times, scraping memory and CPU every second. This does the
same here:

- server sizes: each server held by cgroup limits to a share of the cores and a memory bound
  (`--server-sizes cores:MiB,...`; the CPU quota and the memory limit of cgroup v1 or v2, as
  small.py sets them). ZooKeeper's heap is half the memory bound (`--zk-heap-share`).
- client counts (`--clients`) and request counts (`--requests`): `warden bench` with that many
  sessions, one request outstanding each, counting that many requests of `--workload`
  (ClickHouse's pattern by default). The runtime is from the first request to the last.
- repetitions (`--repeats`): every configuration, in each repeat, runs against ZooKeeper and
  Warden in turn, the order swapped on every repeat; each run starts fresh servers on an empty
  data directory, as keeper-bench-suite does.
- every second of every run, each server's RSS, its CPU time over that second and its cgroup's
  memory (page cache included) are sampled.

Output in --out (default target/bench-suite/<time>): results.jsonl (one line per run),
samples.jsonl (one line per server per second), report.md with the medians and their spread,
PNG plots (throughput against clients per server size; memory over time of the largest
configuration), and each run's `warden bench` JSON under raw/. Needs root (cgroups). The load
generator runs outside the limits, on the same cores. Every process is killed by pid and every
cgroup removed when the script ends, however it ends.
"""

import argparse
import json
import os
import statistics
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (the cluster, its ports, its processes, warden bench)
import small  # noqa: E402  (cgroup limits per server)

# keeper-bench-suite's matrix is 1 core + 1 GiB, 3 cores + 1 GiB and 6 cores + 6 GiB; these
# machines have 2 cores, so the sizes are a third of a core (ClickHouse's Kubernetes Keeper),
# one core, and the whole machine.
FULL = {
    "server_sizes": "0.33:256,1:1024,2:6144",
    "clients": "3,10,100,500,1000",
    "requests": "10000,100000,1000000",
    "repeats": 10,
}
QUICK = {
    "server_sizes": "0.33:256,1:1024",
    "clients": "3,100",
    "requests": "20000",
    "repeats": 1,
}
SAMPLE_EVERY_S = 1.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def log(message):
    print(f"[suite {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Sampler(threading.Thread):
    """Every SAMPLE_EVERY_S: each server's RSS, CPU seconds over the last interval and its
    cgroup's memory, appended as JSON lines to `out` under the run's `key`."""

    def __init__(self, key, pids, limits, out):
        super().__init__(daemon=True)
        self.key, self.pids, self.limits, self.out = key, pids, limits, out
        self.done = threading.Event()
        self.count = 0

    @staticmethod
    def cpu_seconds(pid):
        with open(f"/proc/{pid}/stat") as stat:
            # The command may hold spaces: the fields counted after its closing parenthesis.
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime

    def run(self):
        began = time.monotonic()
        last = {}
        while not self.done.wait(SAMPLE_EVERY_S if last else 0):
            t = round(time.monotonic() - began, 3)
            for i, (pid, lim) in enumerate(zip(self.pids, self.limits)):
                try:
                    cpu, rss = self.cpu_seconds(pid), compare.rss_bytes(pid)
                except (OSError, RuntimeError, IndexError):
                    continue  # the server has exited
                line = dict(self.key, server=i + 1, t=t, rss_bytes=rss,
                            cgroup_memory_bytes=lim.memory_now(),
                            cpu_seconds=round(cpu - last.get(pid, cpu), 3))
                last[pid] = cpu
                self.out.write(json.dumps(line) + "\n")
                self.count += 1
            self.out.flush()

    def stop(self):
        self.done.set()
        self.join()
        return {"samples": self.count}


def run_one(key, args, work, raw_dir, samples):
    """One configuration against one system, on fresh servers; the results line."""
    system, cores, memory_mib = key["system"], key["cores"], key["memory_mib"]
    zk_heap = f"{max(16, int(memory_mib * args.zk_heap_share))}m"
    bench_args = ["--workload", args.workload, "--sessions", str(key["clients"]),
                  "--requests", str(key["requests"]), "--warmup", "0", "--time-limit", str(args.time_limit)]
    name = f"{system}-{cores}c-{memory_mib}m-c{key['clients']}-n{key['requests']}-r{key['repeat']}"

    def sample(cluster, limits):
        sampler = Sampler(key, cluster.pids(), limits, samples)
        sampler.start()
        return sampler

    result = small.run_limited(system, args.cluster_size, cores, memory_mib, zk_heap, bench_args, name, work,
                               raw_dir, args.warden_bin, on_serving=sample)
    return dict(key, zk_heap=zk_heap if system == "zookeeper" else None, **result)


def summary(line):
    if "failed" in line:
        return f"failed: {line['failed']}"
    return (f"{line['throughput']:.0f} ops/s, p99 {line['latency_us']['p99'] / 1000:.1f} ms, "
            f"peak RSS {max(line['rss_peak_bytes']) >> 20} MiB, {line['errors']} errors")


# ---------------------------------------------------------------------------------------------
# Report


def configurations(results):
    seen = []
    for r in results:
        config = (r["cores"], r["memory_mib"], r["clients"], r["requests"])
        if config not in seen:
            seen.append(config)
    return seen


def runs_of(results, system, config):
    return [r for r in results if r["system"] == system
            and (r["cores"], r["memory_mib"], r["clients"], r["requests"]) == config]


def median_of(runs, value):
    values = [value(r) for r in runs if "failed" not in r]
    return (statistics.median(values), min(values), max(values)) if values else None


def cell(stat, scale=1.0, digits=0):
    if stat is None:
        return "-"
    m, lo, hi = (v * scale for v in stat)
    if lo == hi:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def write_report(out, args, results, plots, machine):
    systems = [s for s in compare.SYSTEMS if any(r["system"] == s for r in results)]
    lines = [
        "# keeper-bench-suite on this machine: Warden against ZooKeeper 3.9.5",
        "",
        f"{machine}. {args.cluster_size} server(s) per system, each in its own cgroup; workload "
        f"`{args.workload}`, one request outstanding per session, {args.repeats} repeat(s) per "
        f"configuration, fresh servers for every run; ZooKeeper's heap {args.zk_heap_share:.0%} "
        "of the memory bound. Medians, with the range over repeats in parentheses. Runtime is "
        "from the first request to the last.",
        "",
    ]
    header = ["server", "clients", "requests"]
    for s in systems:
        header += [f"{s} ops/s", f"{s} runtime s", f"{s} p99 ms", f"{s} peak RSS MiB", f"{s} ops/CPU-s"]
    if len(systems) == 2:
        header.append("warden / zookeeper ops/s")
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for config in configurations(results):
        cores, memory_mib, clients, requests = config
        row = [f"{cores:g} core, {memory_mib} MiB", str(clients), f"{requests:,}"]
        medians = {}
        for s in systems:
            runs = runs_of(results, s, config)
            failed = sum("failed" in r for r in runs)
            throughput = median_of(runs, lambda r: r["throughput"])
            medians[s] = throughput[0] if throughput else None
            row += [
                cell(throughput) + (f", {failed} failed" if failed else ""),
                cell(median_of(runs, lambda r: r["runtime_seconds"]), digits=1),
                cell(median_of(runs, lambda r: r["latency_us"]["p99"]), 1e-3, 1),
                cell(median_of(runs, lambda r: max(r["rss_peak_bytes"])), 1 / (1 << 20)),
                cell(median_of(runs, lambda r: r["ops_per_server_cpu_second"] or 0)),
            ]
        if len(systems) == 2:
            a, b = medians[systems[1]], medians[systems[0]]
            row.append(f"{a / b:.2f}x" if a and b else "-")
        lines.append("| " + " | ".join(row) + " |")
    trouble = [r for r in results if "failed" in r or r.get("errors")
               or any(c["oom_kills"] for c in r["cgroups"]) or not all(r.get("running_at_end", []))]
    lines += ["", "## Runs that failed, erred, were OOM-killed or lost a server", ""]
    if not trouble:
        lines.append("None.")
    for r in trouble:
        lines.append(f"- {r['system']}, {r['cores']:g} core + {r['memory_mib']} MiB, {r['clients']} clients, "
                     f"{r['requests']:,} requests, repeat {r['repeat']}: {summary(r)}; OOM kills "
                     f"{[c['oom_kills'] for c in r['cgroups']]}, running at the end {r.get('running_at_end')}")
    lines += [""] + [f"![{p.stem}]({p.name})" for p in plots]
    (out / "report.md").write_text("\n".join(lines) + "\n")


def plot(out, results, samples_path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no plots (suite.sh installs it into a venv)")
        return []
    files = []
    systems = [s for s in compare.SYSTEMS if any(r["system"] == s for r in results)]
    sizes = sorted({(r["cores"], r["memory_mib"]) for r in results})
    requests = max(r["requests"] for r in results)
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.5 * len(sizes), 3.8), sharey=True, squeeze=False)
    for ax, (cores, memory_mib) in zip(axes[0], sizes):
        for s in systems:
            clients = sorted({r["clients"] for r in results if (r["cores"], r["memory_mib"]) == (cores, memory_mib)})
            ys = [median_of(runs_of(results, s, (cores, memory_mib, c, requests)), lambda r: r["throughput"])
                  for c in clients]
            ax.errorbar(clients, [y[0] if y else float("nan") for y in ys],
                        yerr=[[y[0] - y[1] if y else 0 for y in ys], [y[2] - y[0] if y else 0 for y in ys]],
                        marker="o", capsize=3, label=s)
        ax.set_xscale("log")
        ax.set_title(f"{cores:g} core, {memory_mib} MiB per server")
        ax.set_xlabel("clients")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel(f"requests per second ({requests:,} requests)")
    axes[0][0].legend()
    files.append(compare.save_plot(plt, fig, out / "throughput-by-clients.png"))

    # Memory over time in the largest configuration's first repeat.
    cores, memory_mib = sizes[-1]
    clients = max(r["clients"] for r in results)
    wanted = dict(cores=cores, memory_mib=memory_mib, clients=clients, requests=requests, repeat=1)
    series = {}
    with open(samples_path) as f:
        for line in f:
            sample = json.loads(line)
            if all(sample[k] == v for k, v in wanted.items()):
                series.setdefault((sample["system"], sample["server"]), []).append(sample)
    if series:
        fig, ax = plt.subplots(figsize=(8, 4))
        for (system, server), points in sorted(series.items()):
            ax.plot([p["t"] for p in points], [p["rss_bytes"] / (1 << 20) for p in points],
                    label=f"{system} server {server}")
        ax.set_xlabel("seconds since the servers served")
        ax.set_ylabel("RSS, MiB")
        ax.set_title(f"Memory, {cores:g} core + {memory_mib} MiB per server, {clients} clients, "
                     f"{requests:,} requests")
        ax.grid(True, alpha=0.3)
        ax.legend()
        files.append(compare.save_plot(plt, fig, out / "memory-over-time.png"))
    return files


# ---------------------------------------------------------------------------------------------


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warden-bin", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="a matrix that runs in a few minutes")
    parser.add_argument("--server-sizes", help=f"cores:MiB per server, comma-separated (default "
                                               f"{FULL['server_sizes']}; quick {QUICK['server_sizes']})")
    parser.add_argument("--clients", help=f"default {FULL['clients']}; quick {QUICK['clients']}")
    parser.add_argument("--requests", help=f"default {FULL['requests']}; quick {QUICK['requests']}")
    parser.add_argument("--repeats", type=int, help=f"default {FULL['repeats']}; quick {QUICK['repeats']}")
    parser.add_argument("--systems", default="zookeeper,warden")
    parser.add_argument("--workload", default="clickhouse", help="a warden bench workload (default clickhouse)")
    parser.add_argument("--cluster-size", type=int, default=1, help="servers per system (default 1)")
    parser.add_argument("--zk-heap-share", type=float, default=0.5,
                        help="ZooKeeper's -Xmx as a share of the memory bound (default 0.5)")
    parser.add_argument("--time-limit", type=int, default=1800, help="seconds for one run (default 1800)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    defaults = QUICK if args.quick else FULL
    for name, default in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    try:
        args.server_sizes = [(float(c), int(m)) for c, m in (s.split(":") for s in args.server_sizes.split(","))]
        args.clients = [int(c) for c in args.clients.split(",")]
        args.requests = [int(n) for n in args.requests.split(",")]
    except ValueError:
        parser.error("--server-sizes is cores:MiB,...; --clients and --requests are numbers, comma-separated")
    if any(not 0.01 <= c <= 64 or m < 64 for c, m in args.server_sizes):
        parser.error("a server size is 0.01..64 cores and at least 64 MiB")
    if any(c < 1 for c in args.clients) or any(n < 1 for n in args.requests) or args.repeats < 1:
        parser.error("clients, requests and repeats are at least 1")
    if not 1 <= args.cluster_size <= 7 or not 0.05 <= args.zk_heap_share <= 1:
        parser.error("--cluster-size 1..7, --zk-heap-share 0.05..1")
    args.systems = [s for s in args.systems.split(",") if s]
    if not args.systems or any(s not in compare.SYSTEMS for s in args.systems):
        parser.error(f"systems are {', '.join(compare.SYSTEMS)}")
    return args


def main():
    args = parse_args()
    if os.geteuid() != 0:
        sys.exit("suite.py makes cgroups: run it as root")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or compare.REPO / "target" / "bench-suite" / stamp
    raw_dir = out / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    compare.signal.signal(compare.signal.SIGTERM, compare.on_signal)
    compare.signal.signal(compare.signal.SIGINT, compare.on_signal)
    if "zookeeper" in args.systems:
        compare.subprocess.run([str(compare.REPO / "scripts/zookeeper/install.sh")], check=True,
                               stdout=compare.subprocess.DEVNULL)
    matrix = [(c, m, clients, n) for c, m in args.server_sizes for clients in args.clients for n in args.requests]
    total = len(matrix) * args.repeats * len(args.systems)
    log(f"{len(matrix)} configurations x {args.repeats} repeats x {len(args.systems)} systems = {total} runs")
    results_path, samples_path = out / "results.jsonl", out / "samples.jsonl"
    results = []
    facts = compare.machine()
    machine = (f"{facts['cpu']}, {facts['cores']} cores, {facts['memory']}, kernel {facts['kernel']}, "
               f"{facts['java']}, Warden at {facts['commit']}")
    done = 0
    try:
        with open(results_path, "w") as results_file, open(samples_path, "w") as samples:
            for repeat in range(1, args.repeats + 1):
                order = args.systems if repeat % 2 else list(reversed(args.systems))
                for cores, memory_mib, clients, requests in matrix:
                    for system in order:
                        key = dict(system=system, cores=cores, memory_mib=memory_mib, clients=clients,
                                   requests=requests, repeat=repeat)
                        line = run_one(key, args, work, raw_dir, samples)
                        results.append(line)
                        results_file.write(json.dumps(line) + "\n")
                        results_file.flush()
                        done += 1
                        log(f"[{done}/{total}] {system}, {cores:g} core + {memory_mib} MiB, {clients} clients, "
                            f"{requests:,} requests, repeat {repeat}: {summary(line)}")
    finally:
        compare.kill_all()
    compare.shutil.rmtree(work, ignore_errors=True)
    plots = plot(out, results, samples_path)
    write_report(out, args, results, plots, machine)
    log(f"report: {out / 'report.md'}")
    print(out / "report.md")


if __name__ == "__main__":
    main()
