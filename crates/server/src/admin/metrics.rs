//! `GET /metrics`: what ZooKeeper's PrometheusMetricsProvider serves, under its names, types
//! and labels, so that dashboards and alerts written for ZooKeeper work unchanged; then the
//! process's `process_*` families; then Warden's own, prefixed `warden_` (docs/metrics.md).
//!
//! ZooKeeper's families are written here as its simpleclient 0.9 writes them (counters
//! without `_total`, summaries with quantile labels, values as Java doubles): the
//! `prometheus-client` crate has no summaries and adds `_total` to every counter. Warden's
//! own families are the crate's, encoded by it.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use super::facts::{self, Metric};
use super::families::{self, Families, is_advanced, java_double, number};
use super::{http, process};
use crate::config::Metrics;
use crate::server::Context;
use crate::stats::SummarySnapshot;

/// The quantiles of simpleclient's advanced summaries, of those the families carry.
const PROMETHEUS_ADVANCED: &[f64] = &[0.5, 0.9, 0.99];

/// The text format ZooKeeper's endpoint declares.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How long an idle scraper's connection is kept open (Jetty's default, as ZooKeeper's
/// endpoint).
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Warden's figures in `mntr` that are served as `warden_` gauges, and what they mean.
const MONITOR_WARDEN_GAUGES: &[(&str, &str, &str)] = &[
    (
        "raft_term",
        "warden_raft_term",
        "The Raft term this server is in",
    ),
    (
        "raft_last_log_index",
        "warden_raft_last_log_index",
        "Index of the last entry in this server's Raft log",
    ),
    (
        "raft_applied_index",
        "warden_raft_applied_index",
        "Index of the last Raft log entry applied to the tree",
    ),
    (
        "raft_snapshot_index",
        "warden_raft_snapshot_index",
        "Index of the last Raft log entry in the newest snapshot",
    ),
    ("log_bytes", "warden_log_bytes", "Bytes of Raft log on disk"),
    (
        "snapshot_bytes",
        "warden_snapshot_dir_bytes",
        "Bytes of snapshots on disk",
    ),
];

/// Binds the metrics listener before anything else starts, so that an address the operator
/// named and cannot have stops the start. `None`: no endpoint configured, or the default
/// address is taken (logged as an error).
pub async fn bind(metrics: &Metrics) -> std::io::Result<Option<TcpListener>> {
    let Some((listen, named)) = metrics.address() else {
        return Ok(None);
    };
    match TcpListener::bind((listen.host.as_str(), listen.port)).await {
        Ok(listener) => Ok(Some(listener)),
        Err(e) if !named => {
            tracing::error!(
                addr = %listen,
                error = %e,
                "no Prometheus metrics: their default address is not free; set \
                 metricsProvider.httpPort (zoo.cfg) or [metrics] listen (TOML) to choose one"
            );
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Binds the HTTPS listener (`metrics.https_listen`) when it has an address of its own; an
/// address shared with the plain listener is served by that one (`Metrics::unified`).
/// Failing to bind is fatal: the address was named.
pub async fn bind_https(metrics: &Metrics) -> std::io::Result<Option<TcpListener>> {
    match &metrics.https_listen {
        Some(listen) if !metrics.unified() => {
            TcpListener::bind((listen.host.as_str(), listen.port))
                .await
                .map(Some)
        }
        _ => Ok(None),
    }
}

/// Serves `GET /metrics` on `listener` until the task is aborted: over plain HTTP, HTTPS, or
/// either as `scheme` says.
pub async fn serve(ctx: Arc<Context>, listener: TcpListener, scheme: http::Scheme) {
    let addr = listener.local_addr().ok();
    let over = match scheme {
        http::Scheme::Http => "HTTP",
        http::Scheme::Https(_) => "HTTPS",
        http::Scheme::Either(_) => "HTTP and HTTPS",
    };
    tracing::info!(?addr, "serving Prometheus metrics on /metrics over {over}");
    let app = Router::new()
        .route("/metrics", get(metrics))
        .with_state(ctx);
    http::serve_app(listener, app, scheme, IDLE_TIMEOUT, "a metrics connection").await;
}

async fn metrics(State(ctx): State<Arc<Context>>) -> Response {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], render(&ctx)).into_response()
}

/// Everything `/metrics` serves, sampled now.
pub fn render(ctx: &Context) -> String {
    let monitor = facts::monitor(ctx);
    let status = ctx.consensus.status();
    let process = process::look();
    let mut out = Exposition::default();
    families::zookeeper(ctx, &monitor, &status, &process, &mut out);
    if ctx.config.metrics.process {
        process_families(&process, &mut out);
    }
    let mut text = out.text;
    warden(ctx, &monitor, &status, &mut text);
    text
}

/// The `process_*` families simpleclient's DefaultExports serves, from `/proc`.
fn process_families(p: &process::Process, out: &mut Exposition) {
    if let Some(v) = p.cpu_seconds {
        out.counter("process_cpu_seconds_total", v);
    }
    if let Some(v) = p.start_time_seconds {
        out.gauge("process_start_time_seconds", v);
    }
    if let Some(v) = p.open_fds {
        out.gauge("process_open_fds", v as f64);
    }
    if let Some(v) = p.max_fds {
        out.gauge("process_max_fds", v as f64);
    }
    if let Some(v) = p.virtual_bytes {
        out.gauge("process_virtual_memory_bytes", v as f64);
    }
    if let Some(v) = p.resident_bytes {
        out.gauge("process_resident_memory_bytes", v as f64);
    }
}

/// Warden's own families, through the prometheus-client crate.
fn warden(
    ctx: &Context,
    monitor: &[(&'static str, Metric)],
    status: &crate::consensus::Status,
    text: &mut String,
) {
    let mut registry = Registry::default();
    let mut gauge = |name: &str, help: &str, value: f64| {
        let g = Gauge::<f64, AtomicU64>::default();
        g.set(value);
        registry.register(name, help, g);
    };
    for (name, value) in monitor {
        if let Some((_, family, help)) = MONITOR_WARDEN_GAUGES.iter().find(|(n, ..)| n == name) {
            gauge(family, help, number(value));
        }
    }
    gauge(
        "warden_raft_committed_index",
        "Index of the last Raft log entry known to be committed",
        status.committed_index as f64,
    );
    gauge(
        "warden_apply_lag_entries",
        "Committed Raft log entries not applied to the tree yet: a stalled apply grows it",
        status.committed_index.saturating_sub(status.applied_index) as f64,
    );
    let stats = &ctx.stats;
    gauge(
        "warden_snapshot_last_bytes",
        "Bytes of the last snapshot this server wrote, 0 before the first",
        stats.snapshot_last_bytes.load(Ordering::Relaxed) as f64,
    );
    let figure = |name: &str| {
        monitor
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0.0, |(_, v)| number(v))
    };
    let znodes = figure("znode_count");
    gauge(
        "warden_znode_bytes_avg",
        "Bytes of path and data per znode: approximate_data_size / znode_count",
        if znodes > 0.0 {
            figure("approximate_data_size") / znodes
        } else {
            0.0
        },
    );
    let snapshots = Counter::<u64>::default();
    snapshots.inc_by(stats.snapshot_ms.snapshot(&[]).count);
    registry.register(
        "warden_snapshots_written",
        "Snapshots this server wrote since it started",
        snapshots,
    );
    for (name, help, holds) in [
        (
            "warden_snapshot_copy",
            "each snapshot's copy-on-write copy of the state held applies and reads (it is \
             taken between two applies): what a snapshot stops the server for",
            &stats.snapshot_copy,
        ),
        (
            "warden_apply",
            "each log entry's apply held the replica's lock, and so reads",
            &stats.apply,
        ),
    ] {
        registry.register(
            format!("{name}_seconds"),
            format!("Seconds {help}"),
            holds.seconds(),
        );
        let longest = Gauge::<f64, AtomicU64>::default();
        longest.set(holds.longest().as_secs_f64());
        registry.register(
            format!("{name}_longest_seconds"),
            format!("The longest of {name}_seconds since the start"),
            longest,
        );
    }
    let flushes = status.flushes;
    let seconds = |us: u64| {
        let c = Counter::<f64, AtomicU64>::default();
        c.inc_by(us as f64 / 1e6);
        c
    };
    registry.register(
        "warden_log_flush_busy_seconds",
        "Seconds the log's flush thread spent writing and fsyncing batches: its rate is how \
         busy this serial stage of the write path is",
        seconds(flushes.busy_us),
    );
    registry.register(
        "warden_log_flush_group_wait_seconds",
        "Seconds the log's flush thread waited on purpose for more writes to join a batch",
        seconds(flushes.group_wait_us),
    );
    let busy = Family::<[(&str, String); 1], Counter<f64, AtomicU64>>::default();
    let requests = Family::<[(&str, String); 1], Counter>::default();
    let entries = Family::<[(&str, String); 1], Counter>::default();
    for (member, appends) in &status.appends {
        let label = [("member", member.to_string())];
        busy.get_or_create(&label)
            .inc_by(appends.busy_us as f64 / 1e6);
        requests.get_or_create(&label).inc_by(appends.requests);
        entries.get_or_create(&label).inc_by(appends.entries);
    }
    registry.register(
        "warden_replication_busy_seconds",
        "Seconds this server's append requests to a member were outstanding while it led: \
         they go one at a time, so the rate is how busy that member's replication stream is",
        busy,
    );
    registry.register(
        "warden_replication_appends",
        "Append requests (heartbeats among them) this server sent to a member while it led",
        requests,
    );
    registry.register(
        "warden_replication_entries",
        "Log entries this server's append requests carried to a member while it led",
        entries,
    );
    let writes = Counter::<u64>::default();
    writes.inc_by(flushes.writes);
    registry.register(
        "warden_log_flush_writes",
        "Log appends the flush thread wrote; over fsynctime's count, appends per fsync",
        writes,
    );
    registry.register(
        "warden_log_append_seconds",
        "Seconds from appending entries to the Raft log until they are durable: the \
         group-commit wait, the write and the fsync",
        ctx.consensus.log_append_seconds(),
    );
    prometheus_client::encoding::text::encode_registry(text, &registry)
        .expect("writing to a String cannot fail");
}

/// Families in simpleclient 0.9's text: `# HELP` is the name, labels end with a comma,
/// values are Java doubles.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn head(&mut self, name: &str, kind: &str) {
        let _ = writeln!(self.text, "# HELP {name} {name}\n# TYPE {name} {kind}");
    }
}

impl Families for Exposition {
    fn gauge(&mut self, name: &str, value: f64) {
        self.head(name, "gauge");
        let _ = writeln!(self.text, "{name} {}", java_double(value));
    }

    fn counter(&mut self, name: &str, value: f64) {
        self.head(name, "counter");
        let _ = writeln!(self.text, "{name} {}", java_double(value));
    }

    fn summary(&mut self, name: &str, s: &SummarySnapshot) {
        self.head(name, "summary");
        self.summary_samples(name, "", s);
    }

    /// A gauge or counter set: one sample per `key` label value, as ZooKeeper's
    /// per-namespace families (none before there is a value).
    fn by_key(&mut self, name: &str, kind: &str, values: &[(String, f64)]) {
        self.head(name, kind);
        for (key, v) in values {
            let _ = writeln!(
                self.text,
                "{name}{{key=\"{}\",}} {}",
                label_value(key),
                java_double(*v)
            );
        }
    }

    /// A summary set: one summary per `key` label value, as ZooKeeper's per-namespace
    /// families (none before the first observation).
    fn summaries_by_key(&mut self, name: &str, by_key: &[(String, SummarySnapshot)]) {
        self.head(name, "summary");
        for (key, s) in by_key {
            self.summary_samples(name, &format!("key=\"{}\",", label_value(key)), s);
        }
    }
}

impl Exposition {
    /// `labels`: each `name="value",`, before the quantile.
    fn summary_samples(&mut self, name: &str, labels: &str, s: &SummarySnapshot) {
        let served = |q: f64| !is_advanced(s) || PROMETHEUS_ADVANCED.contains(&q);
        for (q, v) in s.quantiles.iter().filter(|(q, _)| served(*q)) {
            let v = v.map_or(f64::NAN, |v| v as f64);
            let _ = writeln!(
                self.text,
                "{name}{{{labels}quantile=\"{q}\",}} {}",
                java_double(v)
            );
        }
        let braces = |labels: &str| {
            if labels.is_empty() {
                String::new()
            } else {
                format!("{{{labels}}}")
            }
        };
        let _ = writeln!(
            self.text,
            "{name}_count{} {}",
            braces(labels),
            java_double(s.count as f64)
        );
        let _ = writeln!(
            self.text,
            "{name}_sum{} {}",
            braces(labels),
            java_double(s.sum as f64)
        );
    }
}

/// A label value as the text format escapes it: backslash, double quote, newline.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HostPort;

    #[tokio::test]
    async fn a_taken_default_address_is_given_up_a_named_one_is_an_error() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = taken.local_addr().unwrap().port();
        let mut metrics = Metrics {
            listen_default: Some(HostPort::new("127.0.0.1", port)),
            ..Metrics::default()
        };
        assert!(bind(&metrics).await.unwrap().is_none());
        metrics.listen = Some(HostPort::new("127.0.0.1", port));
        assert!(bind(&metrics).await.is_err());
        metrics.listen = Some(HostPort::new("127.0.0.1", 0));
        assert!(bind(&metrics).await.unwrap().is_some());
        assert!(bind(&Metrics::default()).await.unwrap().is_none());
    }

    #[test]
    fn values_are_written_as_java_doubles() {
        assert_eq!(java_double(8.0), "8.0");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(4.3333), "4.3333");
        assert_eq!(java_double(f64::NAN), "NaN");
    }

    #[test]
    fn gauge_sets_are_labelled_by_key() {
        let mut out = Exposition::default();
        let key = "q".to_owned();
        out.by_key("quota_count_limit_per_namespace", "gauge", &[(key, 3.0)]);
        assert_eq!(
            out.text,
            "# HELP quota_count_limit_per_namespace quota_count_limit_per_namespace\n\
             # TYPE quota_count_limit_per_namespace gauge\n\
             quota_count_limit_per_namespace{key=\"q\",} 3.0\n"
        );
    }

    #[test]
    fn summary_sets_are_labelled_by_key() {
        let mut out = Exposition::default();
        let s = SummarySnapshot {
            count: 7,
            sum: 61,
            min: Some(1),
            max: Some(20),
            quantiles: vec![(0.5, Some(8))],
        };
        out.summaries_by_key("write_per_namespace", &[("a\"b".to_owned(), s)]);
        assert_eq!(
            out.text,
            "# HELP write_per_namespace write_per_namespace\n\
             # TYPE write_per_namespace summary\n\
             write_per_namespace{key=\"a\\\"b\",quantile=\"0.5\",} 8.0\n\
             write_per_namespace_count{key=\"a\\\"b\",} 7.0\n\
             write_per_namespace_sum{key=\"a\\\"b\",} 61.0\n"
        );
    }

    #[test]
    fn families_are_written_as_simpleclient_writes_them() {
        let mut out = Exposition::default();
        out.gauge("znode_count", 8.0);
        out.counter("snap_count", 0.0);
        out.summary(
            "readlatency",
            &SummarySnapshot {
                count: 7,
                sum: 25,
                min: Some(1),
                max: Some(9),
                // Those of both outputs: simpleclient's leaves out 0.95 and 0.999.
                quantiles: vec![
                    (0.5, Some(2)),
                    (0.9, Some(6)),
                    (0.95, Some(7)),
                    (0.99, None),
                    (0.999, None),
                ],
            },
        );
        assert_eq!(
            out.text,
            "# HELP znode_count znode_count\n# TYPE znode_count gauge\nznode_count 8.0\n\
             # HELP snap_count snap_count\n# TYPE snap_count counter\nsnap_count 0.0\n\
             # HELP readlatency readlatency\n# TYPE readlatency summary\n\
             readlatency{quantile=\"0.5\",} 2.0\nreadlatency{quantile=\"0.9\",} 6.0\n\
             readlatency{quantile=\"0.99\",} NaN\nreadlatency_count 7.0\nreadlatency_sum 25.0\n"
        );
    }
}
