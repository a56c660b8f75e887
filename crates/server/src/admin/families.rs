//! ZooKeeper's metrics provider's families, as far as Warden has the figures, written once for
//! both of ZooKeeper's outputs of them: `/metrics`, as its Prometheus provider serves them
//! (`metrics.rs`), and the end of `mntr` and of the `monitor` command, as its default provider
//! dumps them there (counters and gauges under their names, summaries as `avg_`, `min_`,
//! `max_`, `cnt_`, `sum_` and for the advanced ones `p50_` to `p999_`, per-key sets as
//! `<key>_<name>`).

use std::sync::atomic::{AtomicU64, Ordering};

use super::facts::Metric;
use super::json::round4;
use super::process;
use crate::server::Context;
use crate::stats::SummarySnapshot;

/// ZooKeeper's BASIC summaries: the median only (in /metrics; mntr gives none).
const BASIC: &[f64] = &[0.5];
/// ZooKeeper's ADVANCED summaries: the quantiles of either output. simpleclient's give 0.5,
/// 0.9 and 0.99; the default provider's, in mntr, p50, p95, p99 and p999.
const ADVANCED: &[f64] = &[0.5, 0.9, 0.95, 0.99, 0.999];

/// ZooKeeper's gauges that `mntr` reports under the same names: copied from its figures.
pub const MONITOR_GAUGES: &[&str] = &[
    "ephemerals_count",
    "num_alive_connections",
    "avg_latency",
    "outstanding_requests",
    "znode_count",
    "global_sessions",
    "packets_sent",
    "packets_received",
    "watch_count",
    "auth_failed_count",
    "min_latency",
    "approximate_data_size",
    "local_sessions",
    "uptime",
    "max_latency",
    // A quorum member's.
    "quorum_size",
    // A leader's.
    "learners",
    "synced_followers",
    "synced_non_voting_followers",
    "synced_observers",
    "pending_syncs",
    "last_proposal_size",
    "min_proposal_size",
    "max_proposal_size",
];

/// Where [`zookeeper`] writes the families.
pub trait Families {
    fn gauge(&mut self, name: &str, value: f64);
    fn counter(&mut self, name: &str, value: f64);
    /// A summary; advanced ones carry every quantile of [`ADVANCED`].
    fn summary(&mut self, name: &str, s: &SummarySnapshot);
    /// A gauge or counter set (`kind`): one value per key.
    fn by_key(&mut self, name: &str, kind: &str, values: &[(String, f64)]);
    /// A summary set: one summary per key.
    fn summaries_by_key(&mut self, name: &str, by_key: &[(String, SummarySnapshot)]);
}

/// Whether a summary is one of ZooKeeper's advanced ones.
pub fn is_advanced(s: &SummarySnapshot) -> bool {
    s.quantiles.len() == ADVANCED.len()
}

/// What `mntr` and the `monitor` command list: the figures of [`super::facts::monitor`], then
/// the families as ZooKeeper's default provider dumps them (less the gauges already listed).
pub fn monitor(ctx: &Context) -> Vec<(String, Metric)> {
    let monitor = super::facts::monitor(ctx);
    let status = ctx.consensus.status();
    let mut dump = Dump::default();
    zookeeper(ctx, &monitor, &status, &process::look(), &mut dump);
    monitor
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .chain(dump.0)
        .collect()
}

#[derive(Default)]
struct Dump(Vec<(String, Metric)>);

impl Dump {
    fn int(&mut self, name: String, value: f64) {
        self.0.push((name, Metric::Int(value as i64)));
    }

    /// `name` is the summary's, with its key for a set (`<key>_<name>`).
    fn summary_values(&mut self, name: &str, s: &SummarySnapshot) {
        let avg = if s.count > 0 {
            round4(s.sum as f64 / s.count as f64)
        } else {
            0.0
        };
        self.0.push((format!("avg_{name}"), Metric::Float(avg)));
        if let Some(min) = s.min {
            self.int(format!("min_{name}"), min as f64);
        }
        if let Some(max) = s.max {
            self.int(format!("max_{name}"), max as f64);
        }
        self.int(format!("cnt_{name}"), s.count as f64);
        self.int(format!("sum_{name}"), s.sum as f64);
        if is_advanced(s) {
            for (q, v) in &s.quantiles {
                let label = match *q {
                    0.5 => "p50",
                    0.95 => "p95",
                    0.99 => "p99",
                    0.999 => "p999",
                    _ => continue,
                };
                self.int(format!("{label}_{name}"), v.unwrap_or(0) as f64);
            }
        }
    }
}

impl Families for Dump {
    fn gauge(&mut self, name: &str, value: f64) {
        if !MONITOR_GAUGES.contains(&name) {
            self.int(name.to_owned(), value);
        }
    }

    fn counter(&mut self, name: &str, value: f64) {
        self.int(name.to_owned(), value);
    }

    fn summary(&mut self, name: &str, s: &SummarySnapshot) {
        self.summary_values(name, s);
    }

    fn by_key(&mut self, name: &str, _kind: &str, values: &[(String, f64)]) {
        for (key, v) in values {
            self.int(format!("{key}_{name}"), *v);
        }
    }

    fn summaries_by_key(&mut self, name: &str, by_key: &[(String, SummarySnapshot)]) {
        for (key, s) in by_key {
            self.summary_values(&format!("{key}_{name}"), s);
        }
    }
}

/// ZooKeeper's families, as far as Warden has the figures (docs/metrics.md lists the rest).
pub fn zookeeper(
    ctx: &Context,
    monitor: &[(&'static str, Metric)],
    status: &crate::consensus::Status,
    process: &process::Process,
    out: &mut dyn Families,
) {
    for (name, value) in monitor {
        if MONITOR_GAUGES.contains(name) {
            out.gauge(name, number(value));
        }
    }
    if let Some(leading) = ctx.leadership.leading_for()
        && !ctx.consensus.standalone()
    {
        out.gauge("leader_uptime", leading.as_millis() as f64);
    }
    if let Some(fds) = process.open_fds {
        out.gauge("open_file_descriptor_count", fds as f64);
    }
    if let Some(fds) = process.max_fds {
        out.gauge("max_file_descriptor_count", fds as f64);
    }
    let stats = &ctx.stats;
    let (last, min, max) = stats.response_sizes.last_min_max();
    out.gauge("last_client_response_size", last as f64);
    out.gauge("min_client_response_size", min as f64);
    out.gauge("max_client_response_size", max as f64);

    let count = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
    out.counter("commit_count", count(&stats.commits));
    out.counter("bytes_received_count", count(&stats.bytes_received));
    out.counter(
        "connection_request_count",
        count(&stats.connections_requested),
    );
    out.counter("connection_rejected", count(&stats.connections_refused));
    out.counter("looking_count", count(&ctx.leadership.elections));
    out.counter("revalidate_count", count(&stats.sessions_resumed));
    out.counter("stale_sessions_expired", count(&stats.sessions_expired));
    out.counter("proposal_count", count(&stats.proposals));
    out.counter("snapshot_error_count", count(&stats.snapshot_errors));
    out.counter(
        "snapshot_rate_limited_count",
        count(&stats.snapshot_rate_limited),
    );
    out.counter("restore_error_count", count(&stats.restore_errors));
    out.counter(
        "restore_rate_limited_count",
        count(&stats.restore_rate_limited),
    );

    out.summary("readlatency", &stats.read_latency_ms.snapshot(ADVANCED));
    out.summary("updatelatency", &stats.write_latency_ms.snapshot(ADVANCED));
    let flushes = status.flushes;
    // raft-log's flush thread keeps the count, the total and percentiles, not the extremes.
    out.summary(
        "fsynctime",
        &SummarySnapshot {
            count: flushes.fsync_count,
            sum: flushes.fsync_us / 1000,
            min: None,
            max: None,
            quantiles: vec![(
                0.5,
                (flushes.fsync_count > 0).then_some(flushes.fsync_median_us / 1000),
            )],
        },
    );
    out.summary("snapshottime", &stats.snapshot_ms.snapshot(BASIC));
    out.summary("restore_time", &stats.restore_ms.snapshot(BASIC));
    out.summary("dbinittime", &stats.recovery_ms.snapshot(BASIC));
    out.summary(
        "startup_snap_load_time",
        &stats.startup_snapshot_load_ms.snapshot(BASIC),
    );
    out.summary(
        "startup_txns_loaded",
        &stats.recovery_entries.snapshot(BASIC),
    );
    out.summary(
        "election_time",
        &ctx.leadership.election_time_ms.snapshot(BASIC),
    );
    out.summaries_by_key(
        "read_per_namespace",
        &stats.reads_per_namespace.snapshot(BASIC),
    );
    out.summaries_by_key(
        "write_per_namespace",
        &stats.writes_per_namespace.snapshot(BASIC),
    );
    let quotas = ctx.replica().state().tree().quota_figures();
    for (name, by_key) in [
        ("quota_count_limit_per_namespace", &quotas.count_limit),
        ("quota_bytes_limit_per_namespace", &quotas.bytes_limit),
        ("quota_count_usage_per_namespace", &quotas.count_usage),
        ("quota_bytes_usage_per_namespace", &quotas.bytes_usage),
    ] {
        let values: Vec<(String, f64)> =
            by_key.iter().map(|(k, v)| (k.clone(), *v as f64)).collect();
        out.by_key(name, "gauge", &values);
    }
    let exceeded = stats.quota_exceeded.snapshot();
    let exceeded: Vec<(String, f64)> = exceeded
        .iter()
        .map(|(k, n)| (k.clone(), *n as f64))
        .collect();
    out.by_key("quota_exceeded_error_per_namespace", "counter", &exceeded);
    let [created, deleted, changed, children] = &stats.watchers_fired;
    out.summary("node_created_watch_count", &created.snapshot(BASIC));
    out.summary("node_deleted_watch_count", &deleted.snapshot(BASIC));
    out.summary("node_changed_watch_count", &changed.snapshot(BASIC));
    out.summary("node_children_watch_count", &children.snapshot(BASIC));
}

pub fn number(m: &Metric) -> f64 {
    match m {
        Metric::Int(v) => *v as f64,
        Metric::Float(v) => *v,
        Metric::Text(_) => f64::NAN,
    }
}

/// A value as Java's `Double.toString` writes it for the values metrics take: `8.0`, `NaN`,
/// `4.3333`. (Java writes 10^7 and above as `1.0E7`; plain digits parse the same.)
pub fn java_double(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}
