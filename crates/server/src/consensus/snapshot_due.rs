//! A snapshot due before snapCount's entries: when the log written since the last one has
//! outgrown the tree.
//!
//! openraft takes a snapshot every snapCount entries (ZooKeeper's snapCount, 100,000 by
//! default), however small the tree. Until then raft-log keeps about 125 bytes of memory for
//! every entry it retains (its index and file bookkeeping, besides the cache), and a restart
//! replays every one of them. For a small tree under many writes (the seed benchmark's shape:
//! 1,266 znodes, a 66 KB snapshot, 34 MiB of peak RSS) the log between two snapshots held a
//! quarter of the server's memory, and took longer to replay than a snapshot to load.
//!
//! So a snapshot is also due once the log since the last one holds [`LOG_TO_DATA`] times the
//! tree's data (paths and values, as `approximateDataSize` counts them) and at least
//! [`ENTRIES_MIN`] entries. A tree of more than about 60,000 znodes of 100 bytes reaches
//! snapCount first, so only small trees snapshot sooner, and their snapshots take milliseconds.
//!
//! And as in ZooKeeper, once the log since the last one holds `snapshots.log_bytes_max` bytes
//! (snapSizeLimitInKb, 4 GiB by default), whatever the tree. ZooKeeper draws each server's
//! threshold at random between half the limit and the limit, so that a quorum's servers do
//! not all snapshot at once; Warden's servers take their snapshots off the apply path, and
//! use the limit itself, as they use snapCount itself.

use tokio::sync::mpsc;

/// Entries since the last snapshot below which none is due early: a snapshot every few
/// hundred writes would cost more in files and fsyncs than the memory it frees.
pub const ENTRIES_MIN: u64 = 10_000;

/// Bytes of log for every byte of the tree's data at which a snapshot is due. A create of 100
/// bytes takes about 290 bytes of log and 240 of memory in the tree, so at 4 the retained
/// entries' bookkeeping stays below about the tree's own memory.
const LOG_TO_DATA: u64 = 4;

/// Whether `entries` entries of `log_bytes` bytes since the last snapshot call for one, with
/// `data_bytes` of data in the tree and a limit of `log_bytes_max` (0 for none).
fn due(entries: u64, log_bytes: u64, data_bytes: u64, log_bytes_max: u64) -> bool {
    let outgrew = entries >= ENTRIES_MIN && log_bytes >= data_bytes.saturating_mul(LOG_TO_DATA);
    outgrew || (log_bytes_max > 0 && log_bytes >= log_bytes_max)
}

/// The log applied since the last snapshot, and where to ask for the next one.
pub struct LogSinceSnapshot {
    entries: u64,
    bytes: u64,
    /// `entries` when a snapshot was last asked for since the last one: a request that came
    /// while one was being built is dropped by openraft, so it is repeated every
    /// [`ENTRIES_MIN`] entries until a snapshot's copy is taken.
    asked_at: Option<u64>,
    ask: mpsc::Sender<()>,
    /// `snapshots.log_bytes_max`.
    log_bytes_max: u64,
}

impl LogSinceSnapshot {
    /// Asks for snapshots on `ask`; whoever receives triggers them (`consensus::Consensus`).
    /// `log_bytes_max` is `snapshots.log_bytes_max`.
    pub fn new(ask: mpsc::Sender<()>, log_bytes_max: u64) -> LogSinceSnapshot {
        LogSinceSnapshot {
            entries: 0,
            bytes: 0,
            asked_at: None,
            ask,
            log_bytes_max,
        }
    }

    /// An entry of `bytes` in the log was applied, leaving `data_bytes` of data in the tree.
    pub fn applied(&mut self, bytes: u64, data_bytes: u64) {
        self.entries += 1;
        self.bytes += bytes;
        let asked_lately = self
            .asked_at
            .is_some_and(|at| self.entries < at + ENTRIES_MIN);
        if !asked_lately && due(self.entries, self.bytes, data_bytes, self.log_bytes_max) {
            tracing::debug!(
                entries = self.entries,
                log_bytes = self.bytes,
                data_bytes,
                "snapshot due: the log since the last one outgrew the tree or its limit"
            );
            // Full means a request is already waiting.
            let _ = self.ask.try_send(());
            self.asked_at = Some(self.entries);
        }
    }

    /// A snapshot's copy of the state was taken, or a snapshot installed: the count starts
    /// over.
    pub fn snapshotted(&mut self) {
        self.entries = 0;
        self.bytes = 0;
        self.asked_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_due_when_the_log_outgrows_the_tree_and_not_before_the_minimum() {
        assert!(!due(ENTRIES_MIN - 1, u64::MAX - 1, 0, 0));
        assert!(due(ENTRIES_MIN, 4_000, 1_000, 0));
        assert!(!due(ENTRIES_MIN, 3_999, 1_000, 0));
        assert!(!due(u64::MAX, u64::MAX - 1, u64::MAX, 0));
    }

    #[test]
    fn a_snapshot_is_due_at_the_log_limit_whatever_the_tree_and_the_count() {
        assert!(due(1, 1 << 20, u64::MAX, 1 << 20));
        assert!(!due(1, (1 << 20) - 1, u64::MAX, 1 << 20));
        // 0: no limit.
        assert!(!due(1, u64::MAX - 1, u64::MAX, 0));
    }

    #[test]
    fn it_asks_once_and_again_only_after_as_many_entries_more_until_a_snapshot() {
        let (ask, mut asked) = mpsc::channel(1);
        let mut log = LogSinceSnapshot::new(ask, 0);
        let apply = |log: &mut LogSinceSnapshot, n: u64| {
            for _ in 0..n {
                log.applied(100, 10);
            }
        };
        apply(&mut log, ENTRIES_MIN - 1);
        assert!(asked.try_recv().is_err());
        apply(&mut log, 1);
        assert!(asked.try_recv().is_ok());
        // No snapshot came of it (one was being built): asked again, once, a while later.
        apply(&mut log, ENTRIES_MIN - 1);
        assert!(asked.try_recv().is_err());
        apply(&mut log, 1);
        assert!(asked.try_recv().is_ok());
        log.snapshotted();
        apply(&mut log, ENTRIES_MIN - 1);
        assert!(asked.try_recv().is_err());
        apply(&mut log, 1);
        assert!(asked.try_recv().is_ok());
    }

    #[test]
    fn a_large_tree_waits_for_snapcount() {
        let (ask, mut asked) = mpsc::channel(1);
        let mut log = LogSinceSnapshot::new(ask, 4 << 30);
        // 100,000 creates of 290 bytes into a tree of 100 MB.
        for _ in 0..100_000 {
            log.applied(290, 100_000_000);
        }
        assert!(asked.try_recv().is_err());
    }
}
