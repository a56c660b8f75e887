//! The Raft log on disk: openraft's log storage over the `raft-log` crate (checksummed
//! records, group-commit fsync on its own thread, torn-tail recovery; see
//! docs/consensus-research.md for why it and not a WAL of our own).

use std::fmt;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use openraft::alias::{EntryOf, LogIdOf, PayloadOf, VoteOf};
use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::{Entry, RaftLogReader};
use prometheus_client::metrics::histogram::Histogram;
use raft_log::api::raft_log_writer::RaftLogWriter;
use raft_log::codeq::{Decode, Encode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::types::WardenRaft;

/// Entries kept in memory besides those of the file being written: raft-log keeps every entry
/// of that file cached (it evicts only entries of files already complete on disk), so its
/// size, not these, bounds the cache under a steady load.
const LOG_CACHE_ENTRIES_MAX: usize = 4096;
/// Bytes of entries kept in memory (as [`Payload::size`] charges them), besides those of the
/// file being written.
const LOG_CACHE_BYTES_MAX: usize = 32 << 20;
/// Bytes of entries in one append to a follower, unless a single entry is larger.
const APPEND_BYTES_MAX: usize = 8 << 20;
/// Size at which the log moves on to a new file. Purging deletes whole files, and every entry
/// of the file being written stays cached (above), at about three times its bytes: 1 MiB
/// (about 1,800 of ClickHouse's requests, 3,600 creates of 100 bytes) holds that cache to
/// about 3 MB. 16 MiB files held 60-70 MB; 4 MiB files, 13 MB, which was most of a small
/// server's peak (46 MiB under the seed benchmark's shape against 37 MiB now), at no cost in
/// throughput measured (about nine new files a second under 30,000 creates a second).
const LOG_FILE_BYTES_MAX: usize = 1 << 20;

/// A serde value in raft-log's record codec (MessagePack inside a length-prefixed buffer).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cw<T>(pub T);

impl<T: Serialize> Encode for Cw<T> {
    fn encode<W: io::Write>(&self, w: W) -> Result<usize, io::Error> {
        let buf = rmp_serde::to_vec(&self.0).map_err(io::Error::other)?;
        buf.encode(w)
    }
}

impl<T: DeserializeOwned> Decode for Cw<T> {
    fn decode<R: io::Read>(r: R) -> Result<Self, io::Error> {
        let buf: Vec<u8> = Vec::decode(r)?;
        rmp_serde::from_slice(&buf)
            .map(Cw)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

/// An entry's payload as the log holds it: an appended entry's value, encoded for the file
/// when it is written; an entry read back from the file, its bytes, decoded only when the
/// entry itself is read. A restart reads every retained entry to index the log, and
/// decoding each one then (most are never read again) was most of its cost. Shared, so that
/// raft-log's cache and the readers it serves hold one copy.
#[derive(Clone)]
pub struct Payload(Arc<PayloadForms>);

struct PayloadForms {
    /// An entry read back from the file: its MessagePack, as `Cw` encodes (the bytes on disk
    /// are the same whichever form came first).
    bytes: OnceLock<Vec<u8>>,
    value: OnceLock<PayloadOf<WardenRaft>>,
}

impl Payload {
    fn new(value: PayloadOf<WardenRaft>) -> Payload {
        Payload(Arc::new(PayloadForms {
            bytes: OnceLock::new(),
            value: OnceLock::from(value),
        }))
    }

    /// The MessagePack the file holds, made for the one write of an entry appended here and
    /// not kept: the cache holds such an entry's decoded proposal and the proposal's own
    /// encoding already, and a third copy made every cached entry half as large again.
    fn encode_value(value: &PayloadOf<WardenRaft>) -> io::Result<Vec<u8>> {
        // Sized for a proposal's encoding and MessagePack's few bytes around it: growing the
        // buffer copied a large value once more.
        let mut bytes = Vec::with_capacity(match value {
            openraft::EntryPayload::Normal(proposal) => proposal.encoded().len() + 16,
            _ => 0,
        });
        rmp_serde::encode::write(&mut bytes, value).map_err(io::Error::other)?;
        Ok(bytes)
    }

    /// The entry's payload, decoded on the first read of it.
    fn value(&self) -> io::Result<PayloadOf<WardenRaft>> {
        if let Some(value) = self.0.value.get() {
            return Ok(value.clone());
        }
        let bytes = self.0.bytes.get().expect("a payload has one form or both");
        let value = rmp_serde::from_slice(bytes)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(self.0.value.get_or_init(|| value).clone())
    }

    /// What the cache is charged, the same from the entry's insertion to its eviction: an
    /// entry read back from the file holds its MessagePack, and once read, the decoded
    /// proposal and the proposal's own encoding (kept for replication), each about as large;
    /// an entry appended here holds the last two only.
    fn size(&self) -> u64 {
        let copies = if self.0.bytes.get().is_some() { 3 } else { 2 };
        64 + copies * self.encoded_len() as u64
    }

    /// About the bytes the entry takes in the file and in an append to a follower: its
    /// MessagePack, or for an entry appended here, its proposal's encoding.
    fn encoded_len(&self) -> usize {
        match (self.0.bytes.get(), self.0.value.get()) {
            (Some(bytes), _) => bytes.len(),
            (None, Some(openraft::EntryPayload::Normal(proposal))) => proposal.encoded().len(),
            (None, _) => 0,
        }
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0.value.get(), self.0.bytes.get()) {
            (Some(value), _) => value.fmt(f),
            (None, Some(bytes)) => write!(f, "<{} bytes not yet decoded>", bytes.len()),
            (None, None) => f.write_str("<empty>"),
        }
    }
}

impl Encode for Payload {
    fn encode<W: io::Write>(&self, w: W) -> Result<usize, io::Error> {
        match (self.0.bytes.get(), self.0.value.get()) {
            (Some(bytes), _) => bytes.encode(w),
            (None, Some(value)) => Payload::encode_value(value)?.encode(w),
            (None, None) => unreachable!("a payload has one form or both"),
        }
    }
}

impl Decode for Payload {
    fn decode<R: io::Read>(r: R) -> Result<Self, io::Error> {
        Ok(Payload(Arc::new(PayloadForms {
            bytes: OnceLock::from(Vec::decode(r)?),
            value: OnceLock::new(),
        })))
    }
}

/// What a log directory records about its owner, checked at every open: a directory never
/// changes hands between node ids.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogOwner {
    pub node_id: u64,
}

/// Completion of a flush: openraft's append callback (with when the entries were handed
/// over, for [`Durability`]), or a oneshot for our own waits.
pub enum Flushed {
    Append {
        callback: IOFlushed<WardenRaft>,
        appended: Instant,
        durability: Durability,
    },
    Wait(tokio::sync::oneshot::Sender<io::Result<()>>),
}

/// How long appends take to become durable: the histogram of it, and the appends slower than
/// ZooKeeper's fsync.warningthresholdms, counted and logged as ZooKeeper logs a slow fsync.
#[derive(Clone)]
pub struct Durability {
    seconds: Histogram,
    threshold: Duration,
    slow: Arc<AtomicU64>,
    /// When a slow append was last logged (ms since the Unix epoch), to log at most one a second.
    logged_ms: Arc<AtomicU64>,
}

impl Durability {
    fn new(threshold: Duration) -> Durability {
        Durability {
            seconds: Histogram::new(append_seconds_buckets()),
            threshold,
            slow: Arc::default(),
            logged_ms: Arc::default(),
        }
    }

    fn observe(&self, took: Duration) {
        self.seconds.observe(took.as_secs_f64());
        if took <= self.threshold {
            return;
        }
        let slow = self.slow.fetch_add(1, Ordering::Relaxed) + 1;
        let now_ms = crate::replica::now_ms() as u64;
        let last = self.logged_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) >= 1000
            && self
                .logged_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                ms = took.as_millis() as u64,
                threshold_ms = self.threshold.as_millis() as u64,
                slow_appends = slow,
                "fsync-ing the log took longer than fsync.warningthresholdms, which delays \
                 every write: a slow or overloaded disk"
            );
        }
    }
}

impl raft_log::Callback for Flushed {
    fn send(self, res: Result<(), io::Error>) {
        match self {
            Flushed::Append {
                callback,
                appended,
                durability,
            } => {
                durability.observe(appended.elapsed());
                callback.io_completed(res)
            }
            Flushed::Wait(tx) => {
                let _ = tx.send(res);
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogTypes;

impl raft_log::Types for LogTypes {
    type LogId = Cw<LogIdOf<WardenRaft>>;
    type LogPayload = Payload;
    type Vote = Cw<VoteOf<WardenRaft>>;
    type Callback = Flushed;
    type UserData = Cw<LogOwner>;

    fn log_index(log_id: &Self::LogId) -> u64 {
        log_id.0.index
    }

    fn payload_size(payload: &Self::LogPayload) -> u64 {
        payload.size()
    }
}

/// The log store, shared by openraft's writer side and its readers.
#[derive(Clone)]
pub struct LogStore {
    log: Arc<Mutex<raft_log::RaftLog<LogTypes>>>,
    /// From appending entries to their being durable: the group-commit wait, the write and
    /// the fsync.
    durability: Durability,
    /// Bytes of entries one append to a follower carries, unless its first entry alone is
    /// larger: APPEND_BYTES_MAX, or half a peer frame if that is less, so that a follower
    /// catching up on large values gets them in appends it accepts, each in about a second
    /// at worst (openraft's own bound, 300 entries, would be 300 MB of 1 MB values).
    append_bytes_max: usize,
}

/// See [`LogStore::released`].
pub struct Released(Weak<Mutex<raft_log::RaftLog<LogTypes>>>);

impl Released {
    pub fn is_released(&self) -> bool {
        self.0.strong_count() == 0
    }
}

/// What the log's flush thread did since the log was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flushes {
    /// Fsyncs, and the time they took.
    pub fsync_count: u64,
    pub fsync_us: u64,
    /// The median fsync, 0 before the first.
    pub fsync_median_us: u64,
    /// Appends that took longer than fsync.warningthresholdms to become durable.
    pub slow: u64,
    /// Log writes (one per append of one or more entries) the thread wrote.
    pub writes: u64,
    /// Time the thread spent writing and fsyncing batches: over wall time, how busy this
    /// serial stage of the write path is.
    pub busy_us: u64,
    /// Time the thread waited on purpose for more writes to join a batch.
    pub group_wait_us: u64,
}

/// Buckets of [`LogStore::append_seconds`]: 50 µs doubling to about 1.6 s.
fn append_seconds_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(50e-6, 2.0, 16)
}

/// Why the log directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the log in {dir}: {source}")]
    Io { dir: String, source: io::Error },
    #[error("the log in {dir} belongs to node {found}, not to this node {expected}")]
    WrongOwner {
        dir: String,
        found: u64,
        expected: u64,
    },
}

impl LogStore {
    /// Opens (or creates) the log in `dir` for node `node_id`. `flush_wait` is the longest the
    /// flush thread gathers writes into one fsync; an append slower than `slow` to become
    /// durable is counted and logged. Appends to followers fit in `peer_frame_bytes_max`.
    pub async fn open(
        dir: &Path,
        node_id: u64,
        flush_wait: Duration,
        slow: Duration,
        peer_frame_bytes_max: usize,
    ) -> Result<LogStore, OpenError> {
        let shown = dir.display().to_string();
        let io_err = |source| OpenError::Io {
            dir: shown.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io_err)?;
        let mut config = raft_log::Config::new(dir.to_string_lossy().to_string());
        config.wal.flush_batch_wait = Some(flush_wait);
        // A fixed wait delays every write when writers are few and nothing joins it
        // (vendor/chunked-wal/PATCHED.md): the wait grows with the batches instead.
        config.wal.flush_batch_wait_adaptive = Some(true);
        // raft-log's defaults cache 100,000 entries (up to 1 GiB) and rotate files at 1 GiB:
        // far more memory than the tree itself for a modest data set, and purging that frees
        // disk only a gigabyte at a time. Applies read entries right after they are appended,
        // so a short cache keeps every hit that matters.
        config.log_cache_max_items = Some(LOG_CACHE_ENTRIES_MAX);
        config.log_cache_capacity = Some(LOG_CACHE_BYTES_MAX);
        config.wal.chunk_max_size = Some(LOG_FILE_BYTES_MAX);
        // Each file is given its whole size on disk when created, so that an fsync commits
        // the appended records without a new file size: 57-60 µs against 76-88 µs for a
        // growing file on this project's machines (vendor/chunked-wal/PATCHED.md). ZooKeeper
        // pads its logs ahead of the writes for the same reason (`preAllocSize`).
        config.wal.preallocate_chunks = Some(true);
        let started = Instant::now();
        let mut log = raft_log::RaftLog::<LogTypes>::open(Arc::new(config)).map_err(io_err)?;
        let state = log.log_state();
        let first = state.purged().map_or(0, |p| p.0.index + 1);
        let entries = state
            .last()
            .map_or(0, |l| l.0.index + 1)
            .saturating_sub(first);
        tracing::info!(
            entries,
            ms = started.elapsed().as_millis() as u64,
            dir = %dir.display(),
            "log opened"
        );
        match log.log_state().user_data.clone() {
            Some(Cw(owner)) if owner.node_id != node_id => {
                return Err(OpenError::WrongOwner {
                    dir: shown,
                    found: owner.node_id,
                    expected: node_id,
                });
            }
            Some(_) => {}
            None => {
                log.save_user_data(Some(Cw(LogOwner { node_id })))
                    .map_err(io_err)?;
                let (tx, rx) = tokio::sync::oneshot::channel();
                log.flush(true, Some(Flushed::Wait(tx))).map_err(io_err)?;
                rx.await
                    .map_err(io::Error::other)
                    .and_then(|r| r)
                    .map_err(io_err)?;
            }
        }
        Ok(LogStore {
            log: Arc::new(Mutex::new(log)),
            durability: Durability::new(slow),
            append_bytes_max: (peer_frame_bytes_max / 2).min(APPEND_BYTES_MAX),
        })
    }

    /// Tells when every handle on the log is gone, and its directory lock with it: openraft's
    /// tasks hold handles of their own, let go as each ends, after the stop that ended them.
    pub fn released(&self) -> Released {
        Released(Arc::downgrade(&self.log))
    }

    fn log(&self) -> MutexGuard<'_, raft_log::RaftLog<LogTypes>> {
        // A poisoned lock means a thread panicked mid-write: the log cannot be trusted.
        self.log.lock().expect("log store lock poisoned")
    }

    /// Bytes of log on disk.
    pub fn disk_bytes(&self) -> u64 {
        self.log().on_disk_size()
    }

    /// What raft-log's flush thread measured of its work.
    pub fn flushes(&self) -> Flushes {
        let m = self.log().stat().flush_metrics;
        Flushes {
            fsync_count: m.sync_batch_count,
            fsync_us: m.sync_us,
            fsync_median_us: m.sync_percentiles.p50_us,
            slow: self.slow_appends(),
            writes: m.write_request_count,
            busy_us: m.batch_us,
            group_wait_us: m.group_wait_us,
        }
    }

    /// How long appended entries took to become durable (shared: observed by the flush
    /// thread, read by the metrics endpoint).
    pub fn append_seconds(&self) -> Histogram {
        self.durability.seconds.clone()
    }

    /// Appends slower to become durable than the threshold, since the log was opened.
    pub fn slow_appends(&self) -> u64 {
        self.durability.slow.load(Ordering::Relaxed)
    }

    /// Whether the entry right after `prev` (`None`: the first entry) has been purged, so
    /// that entries can no longer be sent from `prev`.
    pub fn purged_past(&self, prev: Option<&LogIdOf<WardenRaft>>) -> bool {
        let purged = self.log().log_state().purged().map(|p| p.0.index);
        match (prev, purged) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(prev), Some(purged)) => prev.index < purged,
        }
    }
}

fn half_open<RB: RangeBounds<u64>>(range: &RB) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(&n) => n,
        Bound::Excluded(&n) => n + 1,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&n) => n + 1,
        Bound::Excluded(&n) => n,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

/// The entries of payloads read from the log, each decoded if it never was (outside the
/// log's lock).
fn entries(
    read: Vec<(Cw<LogIdOf<WardenRaft>>, Payload)>,
) -> Result<Vec<EntryOf<WardenRaft>>, io::Error> {
    read.into_iter()
        .map(|(id, payload)| {
            Ok(Entry {
                log_id: id.0,
                payload: payload.value()?,
            })
        })
        .collect()
}

impl RaftLogReader<WardenRaft> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + fmt::Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<EntryOf<WardenRaft>>, io::Error> {
        let (start, end) = half_open(&range);
        // Shared payloads under the lock; decoded, if they never were, after it.
        let read: Vec<_> = self.log().read(start, end).collect::<Result<_, _>>()?;
        entries(read)
    }

    /// The entries a replication stream sends next: from `start`, before `end`, and no more
    /// bytes than `append_bytes_max` unless the first entry alone is larger; none when
    /// `start` has been purged. raft-log answers a range whose beginning was purged with the
    /// entries that remain, which would not follow the request's previous entry; openraft
    /// sends an empty answer as a heartbeat, which `network::Peer::stream_append` recognises.
    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<EntryOf<WardenRaft>>, io::Error> {
        let read = {
            let log = self.log();
            let mut read = Vec::new();
            let mut bytes = 0;
            for entry in log.read(start, end) {
                let (id, payload) = entry?;
                if read.is_empty() && id.0.index != start {
                    return Ok(Vec::new());
                }
                bytes += payload.encoded_len();
                if !read.is_empty() && bytes > self.append_bytes_max {
                    break;
                }
                read.push((id, payload));
            }
            read
        };
        entries(read)
    }

    async fn read_vote(&mut self) -> Result<Option<VoteOf<WardenRaft>>, io::Error> {
        Ok(self.log().log_state().vote().map(|v| v.0))
    }
}

impl RaftLogStorage<WardenRaft> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<WardenRaft>, io::Error> {
        let log = self.log();
        let state = log.log_state();
        Ok(LogState {
            last_purged_log_id: state.purged().map(|x| x.0),
            last_log_id: state.last().map(|x| x.0),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &VoteOf<WardenRaft>) -> Result<(), io::Error> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        {
            let mut log = self.log();
            log.save_vote(Cw(*vote))?;
            log.flush(true, Some(Flushed::Wait(tx)))?;
        }
        rx.await.map_err(io::Error::other)?
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogIdOf<WardenRaft>>,
    ) -> Result<(), io::Error> {
        if let Some(c) = committed {
            let mut log = self.log();
            log.commit(Cw(c))?;
            log.flush(false, None)?;
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogIdOf<WardenRaft>>, io::Error> {
        Ok(self.log().log_state().committed().map(|x| x.0))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<WardenRaft>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = EntryOf<WardenRaft>> + Send,
        I::IntoIter: Send,
    {
        let mut log = self.log();
        log.append(
            entries
                .into_iter()
                .map(|e| (Cw(e.log_id), Payload::new(e.payload))),
        )?;
        // Durable before the callback: openraft counts the entries only once it fires.
        let flushed = Flushed::Append {
            callback,
            appended: Instant::now(),
            durability: self.durability.clone(),
        };
        log.flush(true, Some(flushed))?;
        Ok(())
    }

    async fn truncate_after(&mut self, last: Option<LogIdOf<WardenRaft>>) -> Result<(), io::Error> {
        let keep_below = last.map(|l| l.index + 1).unwrap_or(0);
        let mut log = self.log();
        let next = log.log_state().last().map(|l| l.0.index + 1).unwrap_or(0);
        if keep_below < next {
            log.truncate(keep_below)?;
        }
        Ok(())
    }

    async fn purge(&mut self, upto: LogIdOf<WardenRaft>) -> Result<(), io::Error> {
        let mut log = self.log();
        let purged = log.log_state().purged().map(|p| p.0.index);
        if purged.is_none_or(|p| p < upto.index) {
            log.purge(Cw(upto))?;
            // raft-log deletes the purged files only after a flush that makes the purge
            // durable: without one here they stay until the next write, and when writes
            // stop after a snapshot a restart reads them all back.
            log.flush(true, None)?;
            tracing::info!(
                upto = upto.index,
                "log purged: its files wholly at or below this index are removed"
            );
        }
        Ok(())
    }
}
