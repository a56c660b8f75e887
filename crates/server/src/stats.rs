//! Counters the four-letter words and metrics report: per server (lock-free, updated on every
//! reply) and per client (kept with the client under the replica's lock).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use warden_proto::types::EventType;
use warden_proto::{Request, Response};

/// Request latency, as ZooKeeper's `srvr` reports it: min/avg/max in milliseconds.
#[derive(Debug)]
pub struct Latency {
    min_us: AtomicU64,
    max_us: AtomicU64,
    total_us: AtomicU64,
    count: AtomicU64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            min_us: AtomicU64::new(u64::MAX),
            max_us: AtomicU64::new(0),
            total_us: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

impl Latency {
    pub fn record(&self, d: Duration) {
        let us = d.as_micros() as u64;
        self.min_us.fetch_min(us, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
        self.total_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// (min, avg, max) in milliseconds; all 0 before the first request.
    pub fn min_avg_max_ms(&self) -> (f64, f64, f64) {
        let count = self.count.load(Ordering::Relaxed);
        if count == 0 {
            return (0.0, 0.0, 0.0);
        }
        let ms = |us: u64| us as f64 / 1000.0;
        (
            ms(self.min_us.load(Ordering::Relaxed)),
            ms(self.total_us.load(Ordering::Relaxed)) / count as f64,
            ms(self.max_us.load(Ordering::Relaxed)),
        )
    }

    /// Requests timed and their total latency in microseconds, since the start or the last
    /// reset: the average over an interval is the difference of two looks.
    pub fn count_total_us(&self) -> (u64, u64) {
        (
            self.count.load(Ordering::Relaxed),
            self.total_us.load(Ordering::Relaxed),
        )
    }

    pub fn reset(&self) {
        self.min_us.store(u64::MAX, Ordering::Relaxed);
        self.max_us.store(0, Ordering::Relaxed);
        self.total_us.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
    }
}

/// Observations of one quantity since the server started (ZooKeeper's summaries): their
/// count, sum and distribution, in the unit they were recorded in.
#[derive(Debug)]
pub struct Summary {
    /// 3 significant digits over any u64: quantiles within 0.1 %.
    observed: Mutex<Histogram<u64>>,
}

/// What a [`Summary`] holds at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct SummarySnapshot {
    pub count: u64,
    pub sum: u64,
    /// The smallest and largest observation (0 before the first, as ZooKeeper reports);
    /// `None` where they are not kept.
    pub min: Option<u64>,
    pub max: Option<u64>,
    /// The requested quantiles, in the order asked; `None` before the first observation.
    pub quantiles: Vec<(f64, Option<u64>)>,
}

impl Default for Summary {
    fn default() -> Self {
        Summary {
            observed: Mutex::new(Histogram::new(3).expect("3 significant digits are allowed")),
        }
    }
}

impl Summary {
    pub fn record(&self, value: u64) {
        self.observed
            .lock()
            .expect("summary lock poisoned")
            .saturating_record(value);
    }

    pub fn snapshot(&self, quantiles: &[f64]) -> SummarySnapshot {
        let h = self.observed.lock().expect("summary lock poisoned");
        let count = h.len();
        // The histogram keeps values to 3 significant digits; its mean times the count is
        // the sum to the same precision.
        let sum = (h.mean() * count as f64).round() as u64;
        SummarySnapshot {
            count,
            sum,
            min: Some(if count > 0 { h.min() } else { 0 }),
            max: Some(if count > 0 { h.max() } else { 0 }),
            quantiles: quantiles
                .iter()
                .map(|&q| (q, (count > 0).then(|| h.value_at_quantile(q))))
                .collect(),
        }
    }
}

/// Namespaces (top-level path components) a [`PerNamespace`] keeps apart; reads and writes
/// under further ones are not recorded, so a client creating top-level nodes without end
/// cannot grow the server's memory or a scrape without end.
pub const NAMESPACES_MAX: usize = 1024;

/// ZooKeeper's `STAT_OVERHEAD_BYTES`, which it adds to every read it records: a Stat's six
/// longs and five ints.
const STAT_BYTES: u64 = 6 * 8 + 5 * 4;

/// Bytes read or written per top-level namespace (ZooKeeper's read_per_namespace and
/// write_per_namespace, labelled `key`), counted as ZooKeeper's DataTree counts them.
#[derive(Debug, Default)]
pub struct PerNamespace {
    by_key: Mutex<BTreeMap<String, Summary>>,
}

impl PerNamespace {
    fn record(&self, path: &str, bytes: u64) {
        // Java's "/a/b".split("/")[1]; nothing for "/".
        let Some(key) = path.split('/').nth(1).filter(|k| !k.is_empty()) else {
            return;
        };
        let mut by_key = self.by_key.lock().expect("namespace lock poisoned");
        if let Some(summary) = by_key.get(key) {
            summary.record(bytes);
        } else if by_key.len() < NAMESPACES_MAX {
            let summary = Summary::default();
            summary.record(bytes);
            by_key.insert(key.to_owned(), summary);
        }
    }

    /// A successful read: the path, the data or children names returned, and a Stat.
    pub fn read(&self, request: &Request, body: &Response) {
        let (path, bytes) = match (request, body) {
            (Request::GetData(r), Response::GetData { data, .. }) => {
                (&r.path, data.as_ref().map_or(0, Vec::len))
            }
            (Request::Exists(r), Response::Stat(_)) => (&r.path, 0),
            (Request::GetChildren(r), Response::GetChildren { children })
            | (Request::GetChildren2(r), Response::GetChildren2 { children, .. }) => {
                (&r.path, children.name_bytes())
            }
            _ => return,
        };
        self.record(path, (path.len() + bytes) as u64 + STAT_BYTES);
    }

    /// A successful write: the path and the data of each create and setData in it.
    pub fn write(&self, request: &Request) {
        let (path, data) = match request {
            Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) => {
                (&r.path, &r.data)
            }
            Request::CreateTtl(r) => (&r.path, &r.data),
            Request::SetData(r) => (&r.path, &r.data),
            Request::Multi(ops) => return ops.iter().for_each(|op| self.write(op)),
            _ => return,
        };
        self.record(
            path,
            (path.len() + data.as_ref().map_or(0, Vec::len)) as u64,
        );
    }

    pub fn snapshot(&self, quantiles: &[f64]) -> Vec<(String, SummarySnapshot)> {
        self.by_key
            .lock()
            .expect("namespace lock poisoned")
            .iter()
            .map(|(key, summary)| (key.clone(), summary.snapshot(quantiles)))
            .collect()
    }
}

/// Writes refused for going over a quota's hard limit, per top-level namespace of the path
/// written (ZooKeeper's quota_exceeded_error_per_namespace, labelled `key`).
#[derive(Debug, Default)]
pub struct QuotaExceeded {
    by_key: Mutex<BTreeMap<String, u64>>,
}

impl QuotaExceeded {
    pub fn count(&self, namespace: &str) {
        let mut by_key = self.by_key.lock().expect("namespace lock poisoned");
        if let Some(n) = by_key.get_mut(namespace) {
            *n += 1;
        } else if by_key.len() < NAMESPACES_MAX {
            by_key.insert(namespace.to_owned(), 1);
        }
    }

    pub fn snapshot(&self) -> Vec<(String, u64)> {
        let by_key = self.by_key.lock().expect("namespace lock poisoned");
        by_key.iter().map(|(k, n)| (k.clone(), *n)).collect()
    }
}

/// Sizes in bytes: the last, the smallest and the largest (ZooKeeper's BufferStats), of the
/// replies sent to clients or of the entries proposed.
#[derive(Debug)]
pub struct BufferStats {
    last: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
}

impl Default for BufferStats {
    fn default() -> Self {
        BufferStats {
            last: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
        }
    }
}

impl BufferStats {
    pub fn record(&self, bytes: usize) {
        let bytes = bytes as u64;
        self.last.store(bytes, Ordering::Relaxed);
        self.min.fetch_min(bytes, Ordering::Relaxed);
        self.max.fetch_max(bytes, Ordering::Relaxed);
    }

    /// (last, min, max), each -1 before the first, as ZooKeeper's BufferStats.
    pub fn last_min_max(&self) -> (i64, i64, i64) {
        let min = self.min.load(Ordering::Relaxed);
        if min == u64::MAX {
            return (-1, -1, -1);
        }
        (
            self.last.load(Ordering::Relaxed) as i64,
            min as i64,
            self.max.load(Ordering::Relaxed) as i64,
        )
    }

    fn reset(&self) {
        self.last.store(0, Ordering::Relaxed);
        self.min.store(u64::MAX, Ordering::Relaxed);
        self.max.store(0, Ordering::Relaxed);
    }
}

/// How long one kind of work held the replica's state, during which applies and reads
/// waited: each hold in a histogram, and the longest since the start.
#[derive(Debug)]
pub struct Holds {
    seconds: prometheus_client::metrics::histogram::Histogram,
    longest_ns: AtomicU64,
}

impl Default for Holds {
    fn default() -> Self {
        Holds {
            // 1 µs doubling to about 1 s.
            seconds: prometheus_client::metrics::histogram::Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(1e-6, 2.0, 21),
            ),
            longest_ns: AtomicU64::new(0),
        }
    }
}

impl Holds {
    pub fn record(&self, held: Duration) {
        self.seconds.observe(held.as_secs_f64());
        self.longest_ns
            .fetch_max(held.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The histogram, to register with a metrics registry (a handle on the same counts).
    pub fn seconds(&self) -> prometheus_client::metrics::histogram::Histogram {
        self.seconds.clone()
    }

    /// The longest hold since the start, zero before the first.
    pub fn longest(&self) -> Duration {
        Duration::from_nanos(self.longest_ns.load(Ordering::Relaxed))
    }
}

/// Server-wide counters.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub packets_received: AtomicU64,
    pub packets_sent: AtomicU64,
    pub latency: Latency,
    /// Milliseconds from receiving a read to sending its reply (ZooKeeper's readlatency).
    pub read_latency_ms: Summary,
    /// Milliseconds from receiving a write to sending its reply (ZooKeeper's updatelatency).
    pub write_latency_ms: Summary,
    pub response_sizes: BufferStats,
    /// Sizes of the log entries this server proposed while it led a cluster (ZooKeeper's
    /// leader's proposal_stats): each entry's encoding, as the log stores it.
    pub proposal_sizes: BufferStats,
    /// Those entries (ZooKeeper's proposal_count; a standalone server proposes none, as
    /// ZooKeeper's has no leader).
    pub proposals: AtomicU64,
    /// Bytes of client frames read, length prefixes included.
    pub bytes_received: AtomicU64,
    /// Client connections accepted by the listener, refused ones included.
    pub connections_requested: AtomicU64,
    /// Client connections refused at a limit.
    pub connections_refused: AtomicU64,
    /// Committed transactions applied (client requests and the leader's own).
    pub commits: AtomicU64,
    /// Clients that reconnected to a session they already had (ZooKeeper's revalidate_count).
    pub sessions_resumed: AtomicU64,
    /// Sessions this server, leading, expired for their clients' silence.
    pub sessions_expired: AtomicU64,
    /// Client authentications this server refused, `addauth` and SASL alike (ZooKeeper's
    /// auth_failed_count); kept since the start, `srst` leaves it.
    pub auth_failed: AtomicU64,
    /// Bytes of successful reads and writes per top-level namespace.
    pub reads_per_namespace: PerNamespace,
    pub writes_per_namespace: PerNamespace,
    /// Writes of this server's clients refused by a quota hard limit.
    pub quota_exceeded: QuotaExceeded,
    /// Watchers each event fired, by event (ZooKeeper's node_*_watch_count): created,
    /// deleted, data changed, children changed.
    pub watchers_fired: [Summary; 4],
    /// Milliseconds each snapshot took to encode and write (ZooKeeper's snapshottime).
    pub snapshot_ms: Summary,
    /// Bytes of the last snapshot written.
    pub snapshot_last_bytes: AtomicU64,
    /// Each snapshot's copy of the state: the copy-on-write clone, taken between two applies
    /// while applies and reads wait. What a snapshot stops the server for.
    pub snapshot_copy: Holds,
    /// Each log entry's apply under the replica's lock (the copy of a chunk a snapshot still
    /// shares included).
    pub apply: Holds,
    /// Milliseconds the start-up took to recover the state from snapshot and log
    /// (ZooKeeper's dbinittime): one observation per start.
    pub recovery_ms: Summary,
    /// Log entries replayed on top of the snapshot at start-up (ZooKeeper's
    /// startup_txns_loaded).
    pub recovery_entries: Summary,
    /// Milliseconds the start-up took to load its snapshot (ZooKeeper's
    /// startup_snap_load_time); snapshots installed from a leader later are not counted.
    pub startup_snapshot_load_ms: Summary,
    /// Whether the start-up's recovery of the state is over.
    pub recovery_done: AtomicBool,
    /// Admin `snapshot` commands that failed, and those refused by its rate limit.
    pub snapshot_errors: AtomicU64,
    pub snapshot_rate_limited: AtomicU64,
    /// Admin `restore` commands that failed (a damaged body included), and those refused by
    /// its rate limit.
    pub restore_errors: AtomicU64,
    pub restore_rate_limited: AtomicU64,
    /// Milliseconds each `restore` took, from the body read to the new state applied here
    /// (ZooKeeper's restore_time).
    pub restore_ms: Summary,
}

/// Whether a reply answers a read or a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    Read,
    Write,
}

impl ServerStats {
    pub fn received(&self) {
        self.packets_received.fetch_add(1, Ordering::Relaxed);
    }

    /// A reply of `bytes` went out, `latency` after its request arrived.
    pub fn sent(&self, answered: Answered, latency: Duration, bytes: usize) {
        self.packets_sent.fetch_add(1, Ordering::Relaxed);
        self.latency.record(latency);
        let ms = latency.as_millis() as u64;
        match answered {
            Answered::Read => self.read_latency_ms.record(ms),
            Answered::Write => self.write_latency_ms.record(ms),
        }
        self.response_sizes.record(bytes);
    }

    /// An event of type `event` fired `watchers` watchers; counted when it fired any, as
    /// ZooKeeper's WatchManager counts.
    pub fn watchers_fired(&self, event: EventType, watchers: usize) {
        let i = match event {
            EventType::NodeCreated => 0,
            EventType::NodeDeleted => 1,
            EventType::NodeDataChanged => 2,
            EventType::NodeChildrenChanged => 3,
            _ => return,
        };
        if watchers > 0 {
            self.watchers_fired[i].record(watchers as u64);
        }
    }

    /// A snapshot was loaded in `ms`: at start-up, or installed from a leader.
    pub fn snapshot_loaded(&self, ms: u64) {
        if !self.recovery_done.load(Ordering::Relaxed) {
            self.startup_snapshot_load_ms.record(ms);
        }
    }

    /// The start-up recovered the state in `ms`, replaying `entries` log entries.
    pub fn recovered(&self, ms: u64, entries: u64) {
        self.recovery_ms.record(ms);
        self.recovery_entries.record(entries);
        self.recovery_done.store(true, Ordering::Relaxed);
    }

    pub fn snapshot_written(&self, ms: u64, bytes: u64) {
        self.snapshot_ms.record(ms);
        self.snapshot_last_bytes.store(bytes, Ordering::Relaxed);
    }

    /// `srst`: counters back to zero.
    pub fn reset(&self) {
        self.packets_received.store(0, Ordering::Relaxed);
        self.packets_sent.store(0, Ordering::Relaxed);
        self.latency.reset();
        self.response_sizes.reset();
    }
}

/// One client's counters, for `cons`.
#[derive(Debug, Clone)]
pub struct ClientStats {
    pub established: SystemTime,
    pub received: u64,
    pub sent: u64,
    pub min_latency: Duration,
    pub max_latency: Duration,
    pub total_latency: Duration,
    pub answered: u64,
    pub last_zxid: i64,
    pub last_op: i32,
    pub last_response: Option<Instant>,
}

impl Default for ClientStats {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientStats {
    pub fn new() -> ClientStats {
        ClientStats {
            established: SystemTime::now(),
            received: 0,
            sent: 0,
            min_latency: Duration::MAX,
            max_latency: Duration::ZERO,
            total_latency: Duration::ZERO,
            answered: 0,
            last_zxid: -1,
            last_op: -1,
            last_response: None,
        }
    }

    pub fn received(&mut self) {
        self.received += 1;
    }

    /// A reply went out after `latency`, carrying `zxid`, to an operation `op` (0 if unknown).
    pub fn sent(&mut self, latency: Duration, zxid: i64, op: i32) {
        self.sent += 1;
        self.answered += 1;
        self.min_latency = self.min_latency.min(latency);
        self.max_latency = self.max_latency.max(latency);
        self.total_latency += latency;
        self.last_zxid = zxid;
        self.last_op = op;
        self.last_response = Some(Instant::now());
    }

    /// Fastest reply in milliseconds; 0 before the first.
    pub fn min_latency_ms(&self) -> u64 {
        if self.answered == 0 {
            0
        } else {
            self.min_latency.as_millis() as u64
        }
    }

    /// Average reply time in milliseconds; 0 before the first.
    pub fn avg_latency_ms(&self) -> u64 {
        if self.answered == 0 {
            0
        } else {
            (self.total_latency / self.answered as u32).as_millis() as u64
        }
    }

    /// `crst`: counters back to zero.
    pub fn reset(&mut self) {
        let established = self.established;
        *self = ClientStats::new();
        self.established = established;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_counts_sums_and_ranks_what_it_saw() {
        let s = Summary::default();
        assert_eq!(
            s.snapshot(&[0.5]),
            SummarySnapshot {
                count: 0,
                sum: 0,
                min: Some(0),
                max: Some(0),
                quantiles: vec![(0.5, None)],
            }
        );
        for v in 1..=100 {
            s.record(v);
        }
        let snap = s.snapshot(&[0.5, 0.99]);
        assert_eq!(snap.count, 100);
        assert_eq!(snap.sum, 5050);
        assert_eq!(snap.quantiles, vec![(0.5, Some(50)), (0.99, Some(99))]);
    }

    #[test]
    fn namespaces_are_counted_as_zookeepers_data_tree_counts_them() {
        use warden_proto::request::{PathWatchRequest, SetDataRequest};
        let reads = PerNamespace::default();
        let get = Request::GetData(PathWatchRequest {
            path: "/app".into(),
            watch: false,
        });
        let data = Response::GetData {
            data: Some(b"ab".to_vec()),
            stat: Default::default(),
        };
        reads.read(&get, &data);
        // ZooKeeper 3.9.5's capture: a getData of /app with 2 bytes of data counts 74.
        assert_eq!(reads.snapshot(&[0.5])[0].1.sum, 74);
        let writes = PerNamespace::default();
        let set = |path: &str| {
            Request::SetData(SetDataRequest {
                path: path.into(),
                data: Some(b"xyz".to_vec()),
                version: -1,
            })
        };
        writes.write(&Request::Multi(vec![set("/app/a"), set("/other")]));
        writes.write(&set("/"));
        let by_key = writes.snapshot(&[]);
        assert_eq!(by_key.len(), 2);
        assert_eq!((by_key[0].0.as_str(), by_key[0].1.sum), ("app", 9));
        assert_eq!((by_key[1].0.as_str(), by_key[1].1.sum), ("other", 9));
        for i in 0..NAMESPACES_MAX + 5 {
            writes.write(&set(&format!("/n{i}")));
        }
        assert_eq!(writes.snapshot(&[]).len(), NAMESPACES_MAX);
    }

    #[test]
    fn reply_sizes_are_none_before_the_first_and_reset() {
        let sizes = BufferStats::default();
        assert_eq!(sizes.last_min_max(), (-1, -1, -1));
        sizes.record(40);
        sizes.record(10);
        sizes.record(25);
        assert_eq!(sizes.last_min_max(), (25, 10, 40));
        sizes.reset();
        assert_eq!(sizes.last_min_max(), (-1, -1, -1));
    }
}
