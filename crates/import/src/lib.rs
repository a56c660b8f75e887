//! `warden import`: ZooKeeper's data directory read into Warden's state, as ZooKeeper itself
//! would load it at start-up (`FileTxnSnapLog.restore`, 3.9), with every checksum and digest
//! it wrote checked. The formats are drawn in docs/migration.md.
//!
//! - [`files`]: which snapshot and log files a data directory holds, in zxid order; a
//!   snapshot's bytes, decompressed by its name (plain, `.gz`, `.snappy`).
//! - [`snapshot`]: one snapshot (header, sessions, ACL table, nodes, Adler-32 seals, digest)
//!   into a [`Restore`]; also one received whole by the admin `restore` command.
//! - [`snapshot_writer`]: the other way: Warden's state as a ZooKeeper snapshot (the admin
//!   `snapshot` command), in the same layout and with the same seals.
//! - [`txnlog`]: one transaction log's entries, checksummed, decoded into logged
//!   transactions; where the log ends, and whether its last entry was torn.
//! - [`import`] (here): the newest valid snapshot, then every logged transaction after it,
//!   replayed and checked against ZooKeeper's digests.
//!
//! Nothing here writes files: the caller turns the state into a data directory
//! (`warden_server::seed_data_dir`) or streams the snapshot bytes.

pub mod files;
pub mod snapshot;
pub mod snapshot_writer;
pub mod txnlog;

use std::path::{Path, PathBuf};

use warden_state::restore::{Restore, follows};
use warden_state::{State, StateConfig};

/// Why a data directory could not be imported. Every damage names the file and the offset.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is damaged at byte {offset}: {what}", path.display())]
    Damaged {
        path: PathBuf,
        offset: u64,
        what: String,
    },
    #[error("{} holds no ZooKeeper snapshot or transaction log (looked in {})", dir.display(), dir.join(files::VERSION_DIR).display())]
    NoData { dir: PathBuf },
    #[error("no snapshot in {} could be read: {}", dir.display(), tried.join("; "))]
    NoValidSnapshot { dir: PathBuf, tried: Vec<String> },
    #[error(
        "{} at byte {offset}: zxid {zxid:#x} follows {previous:#x}: transactions are missing (a log file lost?)",
        path.display()
    )]
    Gap {
        path: PathBuf,
        offset: u64,
        zxid: i64,
        previous: i64,
    },
    #[error(
        "{} at byte {offset}: after zxid {zxid:#x} the tree's digest is {ours:#x} but ZooKeeper's was {theirs:#x}",
        path.display()
    )]
    Digest {
        path: PathBuf,
        offset: u64,
        zxid: i64,
        ours: u64,
        theirs: u64,
    },
    #[error(
        "the snapshot's digest is of zxid {wanted:#x}, but the logs end at {last:#x}: transactions are missing"
    )]
    DigestUnreached { wanted: i64, last: i64 },
}

/// Where ZooKeeper keeps its files: `dataDir`, and `dataLogDir` when the logs are elsewhere.
#[derive(Debug, Clone)]
pub struct Source {
    pub data_dir: PathBuf,
    pub data_log_dir: Option<PathBuf>,
}

/// The imported state and what was read to make it.
pub struct Imported {
    pub state: State,
    /// The snapshot loaded and its zxid; `None` when there was none (logs only).
    pub snapshot: Option<(PathBuf, i64)>,
    /// Newer snapshots passed over because they were damaged (ZooKeeper does the same).
    pub skipped_snapshots: Vec<String>,
    pub logs: Vec<PathBuf>,
    pub txns_replayed: u64,
    /// NoNode or NodeExists met in the snapshot's fuzzy window, ignored as ZooKeeper does.
    pub txns_already_applied: u64,
    /// ZooKeeper digests that matched the replayed tree.
    pub digests_checked: u64,
    /// The file and offset of a last entry that was never completely written.
    pub torn_tail: Option<(PathBuf, u64)>,
    /// Whether `/zookeeper/config` held the old ensemble's membership and was emptied.
    pub config_reset: bool,
}

/// A digest ZooKeeper recorded: the tree's digest after `zxid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZkDigest {
    pub zxid: i64,
    pub digest: u64,
}

/// Reads the newest valid snapshot and replays the logs after it.
pub fn import(source: &Source, config: StateConfig) -> Result<Imported, ImportError> {
    let snap_dir = files::version_dir(&source.data_dir);
    let log_dir = files::version_dir(source.data_log_dir.as_ref().unwrap_or(&source.data_dir));
    let snapshots = files::snapshots(&snap_dir)?;
    let logs = files::logs(&log_dir)?;
    if snapshots.is_empty() && logs.is_empty() {
        return Err(ImportError::NoData {
            dir: source.data_dir.clone(),
        });
    }
    let (loaded, skipped_snapshots) = snapshot::newest_valid(&snap_dir, &snapshots, config)?;
    let (restore, snapshot, pending) = match loaded {
        Some(l) => (l.restore, Some((l.path, l.zxid)), l.digest),
        None => (Restore::empty(config), None, None),
    };
    let mut replay = Replay {
        restore,
        pending,
        txns_replayed: 0,
        txns_already_applied: 0,
        digests_checked: 0,
    };
    let start = replay.restore.zxid();
    replay.check_snapshot_digest_now(snapshot.as_ref().map(|(p, _)| p.as_path()))?;
    let mut read = Vec::new();
    let mut torn_tail = None;
    for file in files::logs_from(&logs, start) {
        let bytes = files::read(&file.path)?;
        let mut log = txnlog::LogFile::open(&file.path, &bytes)?;
        while let Some(entry) = log.next_entry()? {
            replay.apply(&file.path, entry)?;
        }
        torn_tail = log.torn().map(|at| (file.path.clone(), at));
        read.push(file.path.clone());
    }
    if let Some(d) = replay.pending {
        return Err(ImportError::DigestUnreached {
            wanted: d.zxid,
            last: replay.restore.zxid(),
        });
    }
    let (state, config_reset) = replay.restore.finish();
    Ok(Imported {
        state,
        snapshot,
        skipped_snapshots,
        logs: read,
        txns_replayed: replay.txns_replayed,
        txns_already_applied: replay.txns_already_applied,
        digests_checked: replay.digests_checked,
        torn_tail,
        config_reset,
    })
}

/// The replay of logged transactions over a loaded snapshot.
struct Replay {
    restore: Restore,
    /// The snapshot's digest, until the replay reaches its zxid. Until then the tree is
    /// fuzzy (it may hold later changes already) and logged digests are not compared.
    pending: Option<ZkDigest>,
    txns_replayed: u64,
    txns_already_applied: u64,
    digests_checked: u64,
}

impl Replay {
    /// A snapshot written while nothing changed carries the digest of its own zxid.
    fn check_snapshot_digest_now(&mut self, snapshot: Option<&Path>) -> Result<(), ImportError> {
        match (self.pending, snapshot) {
            (Some(d), Some(path)) if d.zxid == self.restore.zxid() => {
                self.pending = None;
                self.compare(path, 0, d)
            }
            _ => Ok(()),
        }
    }

    fn apply(&mut self, path: &Path, entry: txnlog::Entry) -> Result<(), ImportError> {
        let previous = self.restore.zxid();
        let zxid = entry.txn.zxid;
        if zxid <= previous {
            // Already in the snapshot (FileTxnSnapLog reads from the snapshot's zxid + 1).
            return Ok(());
        }
        if !follows(previous, zxid) {
            return Err(ImportError::Gap {
                path: path.to_owned(),
                offset: entry.offset,
                zxid,
                previous,
            });
        }
        let err = self.restore.apply(&entry.txn);
        self.txns_replayed += 1;
        if !err.is_ok() {
            self.txns_already_applied += 1;
        }
        match self.pending {
            Some(d) if d.zxid == zxid => {
                self.pending = None;
                self.compare(path, entry.offset, d)?;
            }
            Some(d) if d.zxid < zxid => {
                return Err(ImportError::DigestUnreached {
                    wanted: d.zxid,
                    last: previous,
                });
            }
            Some(_) => {}
            None => {
                if let Some(digest) = entry.digest {
                    self.compare(path, entry.offset, ZkDigest { zxid, digest })?;
                }
            }
        }
        Ok(())
    }

    fn compare(&mut self, path: &Path, offset: u64, d: ZkDigest) -> Result<(), ImportError> {
        let ours = self.restore.zookeeper_digest();
        if ours != d.digest {
            return Err(ImportError::Digest {
                path: path.to_owned(),
                offset,
                zxid: d.zxid,
                ours,
                theirs: d.digest,
            });
        }
        self.digests_checked += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
