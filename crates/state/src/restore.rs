//! A [`State`] rebuilt from ZooKeeper's own history: the nodes and sessions of one of its
//! snapshots, then its logged transactions replayed as ZooKeeper replays them at start-up
//! (`FileTxnSnapLog.processTransaction` and `DataTree.processTxn`, 3.9).
//!
//! A logged transaction carries the values the leader decided (the new version, the parent's
//! new cversion), not the request, so replay sets them as given instead of validating a
//! request. ZooKeeper's snapshots are fuzzy (written while transactions went on), so replay
//! starts from a tree that may already hold some of the transactions it applies: a missing
//! node (NoNode) or one already there (NodeExists) is expected, reported and skipped.
//!
//! Beside Warden's own digest, the tree's ZooKeeper digest (`DigestCalculator`: a wrapping
//! sum over nodes of a CRC-32 of path, data and stat) is kept up to date on every change, so
//! the digests ZooKeeper logged can be checked after every transaction.
//!
//! The same replay applies what Warden mirrors from a running ensemble it follows
//! ([`State::apply`] of a [`crate::TxnKind::Mirrored`]): there it also reports the changes
//! watchers may be told of, and keeps no ZooKeeper digest.

use warden_proto::{Acl, ErrorCode, EventType};

use crate::path;
use crate::state::{Session, State, StateConfig};
use crate::tree::{DataTree, NodeId, NodeRef, NodeStat, ROOT};
use crate::txn::Trigger;

/// ZooKeeper's `ZooKeeperServer.superSecret`, mixed into every session password.
const PASSWORD_SECRET: i64 = 0xB341_5C00;
const PASSWORD_BYTES: usize = 16;

/// One logged change (a record of `zookeeper.jute`'s txn section), as the leader decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoggedOp {
    CreateSession {
        timeout_ms: i32,
    },
    /// `paths` are the ephemerals the leader listed (empty in logs written before 3.6).
    CloseSession {
        paths: Vec<String>,
    },
    Create {
        path: String,
        data: Option<Vec<u8>>,
        acl: Vec<Acl>,
        ephemeral_owner: i64,
        /// The parent's cversion after this create; -1 in old logs: one more than now.
        parent_cversion: i32,
        /// Whether this is a plain create (opcode 1): only then does ZooKeeper raise the
        /// parent's cversion and pzxid when the node already exists.
        fix_parent_if_exists: bool,
    },
    Delete {
        path: String,
    },
    /// `version` is the node's new dataVersion.
    SetData {
        path: String,
        data: Option<Vec<u8>>,
        version: i32,
    },
    /// `version` is the node's new aversion.
    SetAcl {
        path: String,
        acl: Vec<Acl>,
        version: i32,
    },
    /// A multi's version check: nothing to apply.
    Check,
    /// A failed request; inside a multi it means the whole multi failed.
    Error {
        err: i32,
    },
    Multi(Vec<LoggedOp>),
}

/// One logged transaction: its header and its change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedTxn {
    pub session_id: i64,
    pub zxid: i64,
    pub time_ms: i64,
    pub op: LoggedOp,
}

/// Why a snapshot's nodes do not make a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("node {path:?} has no parent in the snapshot")]
    NoParent { path: String },
    #[error("node {path:?} appears twice in the snapshot")]
    Duplicate { path: String },
    #[error("node path {path:?} is not a valid absolute path")]
    BadPath { path: String },
}

/// The state under reconstruction.
pub struct Restore {
    state: State,
    zk_digest: u64,
    /// Whether `zk_digest` is kept (a replay from files), or not (a live mirror).
    digested: bool,
    /// The changes watchers may be told of, when a live mirror collects them.
    triggers: Option<Vec<Trigger>>,
}

impl Restore {
    /// A tree holding only the root, as ZooKeeper saved it.
    pub fn new(
        config: StateConfig,
        root_data: Option<&[u8]>,
        root_acl: &[Acl],
        root: NodeStat,
    ) -> Self {
        let mut state = State::new(config);
        let mut tree = DataTree::new();
        let id = ROOT;
        tree.set_data("/", id, root_data, root.mzxid, root.mtime);
        tree.set_acl("/", id, root_acl);
        tree.set_stat("/", id, root);
        state.tree = tree;
        let mut restore = Restore {
            state,
            zk_digest: 0,
            digested: true,
            triggers: None,
        };
        restore.zk_digest = restore.zk_hash("/");
        restore
    }

    /// A tree as ZooKeeper's is before its first snapshot: the root, /zookeeper and
    /// /zookeeper/quota with zero stats (`DataTree`'s constructor), and /zookeeper/config.
    pub fn empty(config: StateConfig) -> Self {
        let mut restore = Restore::new(config, Some(b""), &Acl::open(), NodeStat::default());
        let stat = NodeStat::default();
        for (p, acl, aversion) in [
            (crate::system::ZOOKEEPER, Acl::open(), 0),
            (crate::system::QUOTA, Acl::open(), 0),
            (crate::system::CONFIG, Acl::read_only(), -1),
        ] {
            let stat = NodeStat { aversion, ..stat };
            restore
                .add_node(p, Some(b""), &acl, stat)
                .expect("system nodes make a tree");
        }
        restore
    }

    /// Replays on a live state (what a mirror applies): the changes are reported as watch
    /// triggers, and no ZooKeeper digest is kept.
    pub(crate) fn resume(state: State) -> Self {
        Restore {
            state,
            zk_digest: 0,
            digested: false,
            triggers: Some(Vec::new()),
        }
    }

    /// The state and the triggers collected since [`Restore::resume`].
    pub(crate) fn into_parts(self) -> (State, Vec<Trigger>) {
        (self.state, self.triggers.unwrap_or_default())
    }

    /// Adds a node read from a snapshot; its parent must already be there.
    pub fn add_node(
        &mut self,
        node_path: &str,
        data: Option<&[u8]>,
        acl: &[Acl],
        stat: NodeStat,
    ) -> Result<(), RestoreError> {
        let bad = || RestoreError::BadPath {
            path: node_path.to_owned(),
        };
        if path::validate(node_path).is_err() || node_path == "/" {
            return Err(bad());
        }
        let (parent_path, name) = path::split_parent(node_path).ok_or_else(bad)?;
        let tree = &mut self.state.tree;
        let parent = tree
            .lookup(parent_path)
            .ok_or_else(|| RestoreError::NoParent {
                path: node_path.to_owned(),
            })?;
        if tree.child(parent, name).is_some() {
            return Err(RestoreError::Duplicate {
                path: node_path.to_owned(),
            });
        }
        // The parent's stat is as saved: put it back after `create` moved it.
        let parent_stat = tree.node(parent).stat();
        tree.create(
            parent_path,
            parent,
            name,
            data,
            acl,
            stat,
            parent_stat.cversion,
        );
        tree.set_stat(parent_path, parent, parent_stat);
        self.zk_digest = self.zk_digest.wrapping_add(self.zk_hash(node_path));
        Ok(())
    }

    /// Adds a session read from a snapshot.
    pub fn add_session(&mut self, id: i64, timeout_ms: i32) {
        self.state.sessions.insert(
            id,
            Session {
                timeout_ms,
                password: zookeeper_password(id),
            },
        );
    }

    /// Sets the zxid the state has reached (a snapshot's, before its log is replayed).
    pub fn set_zxid(&mut self, zxid: i64) {
        self.state.zxid = zxid;
    }

    pub fn zxid(&self) -> i64 {
        self.state.zxid
    }

    pub fn tree(&self) -> &DataTree {
        &self.state.tree
    }

    /// The tree's digest as ZooKeeper computes it (`DataTree.getTreeDigest`).
    pub fn zookeeper_digest(&self) -> u64 {
        self.zk_digest
    }

    /// Applies one logged transaction; returns the first error ZooKeeper's replay would
    /// meet (NoNode or NodeExists on a fuzzy snapshot), which it ignores.
    pub fn apply(&mut self, txn: &LoggedTxn) -> ErrorCode {
        self.state.zxid = txn.zxid;
        self.state.time_ms = self.state.time_ms.max(txn.time_ms);
        match &txn.op {
            LoggedOp::CreateSession { timeout_ms } => {
                self.add_session(txn.session_id, *timeout_ms);
                ErrorCode::OK
            }
            LoggedOp::CloseSession { paths } => self.close_session(txn, paths),
            LoggedOp::Multi(ops) if ops.iter().any(|op| matches!(op, LoggedOp::Error { .. })) => {
                // A failed multi applied nothing (`DataTree.processTxn`, case multi).
                ErrorCode::OK
            }
            LoggedOp::Multi(ops) => {
                ops.iter()
                    .map(|op| self.apply_op(txn, op))
                    .fold(
                        ErrorCode::OK,
                        |first, e| if first.is_ok() { e } else { first },
                    )
            }
            op => self.apply_op(txn, op),
        }
    }

    /// The rebuilt state, its quota usage recounted as ZooKeeper recounts it when it loads
    /// its files. The next session id is left for the first new session to choose
    /// from its time, as on a fresh server (ZooKeeper's ids carry their creation time too).
    ///
    /// `/zookeeper/config` describes the ensemble that wrote the files, not the servers that
    /// will serve the state, and Warden's leader makes its membership follow that node: if it
    /// holds a dynamic configuration it is emptied (as on a new server, which then writes its
    /// own membership there); returns whether it was.
    pub fn finish(mut self) -> (State, bool) {
        self.state.tree.recount_quotas();
        let config = crate::system::CONFIG;
        let reset = self
            .state
            .tree
            .get(config)
            .is_some_and(|n| !n.data().unwrap_or_default().is_empty());
        if reset {
            self.change(config, |tree, p, id| {
                let stat = tree.node(id).stat();
                tree.set_data(p, id, Some(b""), 0, 0);
                tree.set_stat(
                    p,
                    id,
                    NodeStat {
                        mzxid: 0,
                        mtime: 0,
                        version: 0,
                        ..stat
                    },
                );
            });
        }
        (self.state, reset)
    }

    fn apply_op(&mut self, txn: &LoggedTxn, op: &LoggedOp) -> ErrorCode {
        match op {
            LoggedOp::Create {
                path,
                data,
                acl,
                ephemeral_owner,
                parent_cversion,
                fix_parent_if_exists,
            } => {
                let stat = NodeStat {
                    czxid: txn.zxid,
                    mzxid: txn.zxid,
                    pzxid: txn.zxid,
                    ctime: txn.time_ms,
                    mtime: txn.time_ms,
                    ephemeral_owner: *ephemeral_owner,
                    ..NodeStat::default()
                };
                let err = self.create(path, data.as_deref(), acl, stat, *parent_cversion);
                if err == ErrorCode::NODE_EXISTS && *fix_parent_if_exists {
                    // `DataTree.processTxn`: a node deleted and re-created by another session
                    // after its parent was saved exists already; its parent still moves on.
                    if let Some((parent, _)) = path::split_parent(path) {
                        self.raise_cversion(parent, *parent_cversion, txn.zxid);
                    }
                }
                err
            }
            LoggedOp::Delete { path } => self.delete(path, txn.zxid),
            LoggedOp::SetData { path, .. }
                if path == crate::system::CONFIG && self.triggers.is_some() =>
            {
                // A live mirror keeps Warden's own membership in /zookeeper/config (its
                // leader makes the membership follow it), not the ensemble's reconfig.
                ErrorCode::OK
            }
            LoggedOp::SetData {
                path,
                data,
                version,
            } => {
                let err = self.change(path, |tree, p, id| {
                    tree.set_data(p, id, data.as_deref(), txn.zxid, txn.time_ms);
                    tree.set_version(p, id, *version);
                });
                if err.is_ok() {
                    self.trigger(EventType::NodeDataChanged, path);
                }
                err
            }
            LoggedOp::SetAcl { path, acl, version } => self.change(path, |tree, p, id| {
                let stat = tree.node(id).stat();
                tree.set_acl(p, id, acl);
                tree.set_stat(
                    p,
                    id,
                    NodeStat {
                        aversion: *version,
                        ..stat
                    },
                );
            }),
            LoggedOp::Check | LoggedOp::Error { .. } => ErrorCode::OK,
            LoggedOp::CreateSession { .. } | LoggedOp::CloseSession { .. } | LoggedOp::Multi(_) => {
                // Not a multi's operation: ZooKeeper's replay refuses these too.
                ErrorCode::BAD_ARGUMENTS
            }
        }
    }

    /// `DataTree.killSession`: the paths the leader listed, then whatever ephemerals of the
    /// session are left.
    fn close_session(&mut self, txn: &LoggedTxn, paths: &[String]) -> ErrorCode {
        self.state.sessions.remove(&txn.session_id);
        for p in paths {
            self.delete(p, txn.zxid);
        }
        let mut left: Vec<String> = self
            .state
            .tree
            .ephemerals_of(txn.session_id)
            .map(|id| self.state.tree.path_of(id))
            .collect();
        left.sort();
        for p in left {
            self.delete(&p, txn.zxid);
        }
        ErrorCode::OK
    }

    /// `DataTree.createNode`: the parent's cversion and pzxid only ever move forward.
    fn create(
        &mut self,
        node_path: &str,
        data: Option<&[u8]>,
        acl: &[Acl],
        stat: NodeStat,
        parent_cversion: i32,
    ) -> ErrorCode {
        let Some((parent_path, name)) = path::split_parent(node_path)
            .filter(|_| path::validate(node_path).is_ok() && node_path != "/")
        else {
            return ErrorCode::BAD_ARGUMENTS;
        };
        let Some(parent) = self.state.tree.lookup(parent_path) else {
            return ErrorCode::NO_NODE;
        };
        if self.state.tree.child(parent, name).is_some() {
            return ErrorCode::NODE_EXISTS;
        }
        let before = self.state.tree.node(parent).stat();
        let cversion = match parent_cversion {
            -1 => before.cversion.wrapping_add(1),
            v => v,
        };
        self.zk_digest = self.zk_digest.wrapping_sub(self.zk_hash(parent_path));
        let tree = &mut self.state.tree;
        tree.create(parent_path, parent, name, data, acl, stat, cversion);
        if cversion <= before.cversion {
            tree.set_stat(parent_path, parent, before);
        }
        self.zk_digest = self
            .zk_digest
            .wrapping_add(self.zk_hash(parent_path))
            .wrapping_add(self.zk_hash(node_path));
        self.trigger(EventType::NodeCreated, node_path);
        self.trigger(EventType::NodeChildrenChanged, parent_path);
        ErrorCode::OK
    }

    /// Records a change at `node_path` (which exists) for watchers, when they are collected.
    fn trigger(&mut self, event: EventType, node_path: &str) {
        let Some(triggers) = self.triggers.as_mut() else {
            return;
        };
        let tree = &self.state.tree;
        let id = tree.lookup(node_path).expect("a changed node exists");
        triggers.push(Trigger {
            event,
            path: node_path.to_owned(),
            acl: tree.shared_acl(id),
        });
    }

    /// `DataTree.setCversionPzxid`.
    fn raise_cversion(&mut self, parent_path: &str, cversion: i32, zxid: i64) {
        self.change(parent_path, |tree, p, id| {
            let stat = tree.node(id).stat();
            let cversion = if cversion == -1 {
                stat.cversion.wrapping_add(1)
            } else {
                cversion
            };
            if cversion > stat.cversion {
                let raised = NodeStat {
                    cversion,
                    pzxid: zxid,
                    ..stat
                };
                tree.set_stat(p, id, raised);
            }
        });
    }

    /// `DataTree.deleteNode`. A node that still has children cannot be deleted here: only a
    /// log that disagrees with its snapshot asks for that, and the digest check reports it.
    fn delete(&mut self, node_path: &str, zxid: i64) -> ErrorCode {
        let Some(id) = self.state.tree.lookup(node_path).filter(|&id| id != ROOT) else {
            return ErrorCode::NO_NODE;
        };
        if self.state.tree.node(id).num_children() > 0 {
            return ErrorCode::NOT_EMPTY;
        }
        let (parent_path, _) = path::split_parent(node_path).expect("a looked-up path");
        if let Some(triggers) = self.triggers.as_mut() {
            let parent = self.state.tree.node(id).parent().expect("not the root");
            triggers.push(Trigger {
                event: EventType::NodeDeleted,
                path: node_path.to_owned(),
                acl: self.state.tree.shared_acl(id),
            });
            triggers.push(Trigger {
                event: EventType::NodeChildrenChanged,
                path: parent_path.to_owned(),
                acl: self.state.tree.shared_acl(parent),
            });
        }
        self.zk_digest = self
            .zk_digest
            .wrapping_sub(self.zk_hash(node_path))
            .wrapping_sub(self.zk_hash(parent_path));
        self.state.tree.delete(node_path, id, zxid);
        self.zk_digest = self.zk_digest.wrapping_add(self.zk_hash(parent_path));
        ErrorCode::OK
    }

    /// Changes the node at `node_path` in place, keeping the ZooKeeper digest in step.
    fn change(
        &mut self,
        node_path: &str,
        f: impl FnOnce(&mut DataTree, &str, NodeId),
    ) -> ErrorCode {
        let Some(id) = self.state.tree.lookup(node_path) else {
            return ErrorCode::NO_NODE;
        };
        let p = if id == ROOT { "/" } else { node_path };
        self.zk_digest = self.zk_digest.wrapping_sub(self.zk_hash(p));
        f(&mut self.state.tree, p, id);
        self.zk_digest = self.zk_digest.wrapping_add(self.zk_hash(p));
        ErrorCode::OK
    }

    /// The ZooKeeper digest of the node at `node_path`, which exists.
    fn zk_hash(&self, node_path: &str) -> u64 {
        if !self.digested {
            return 0;
        }
        let node = self.state.tree.get(node_path).expect("hashed node exists");
        zookeeper_node_digest(node_path, node)
    }
}

/// `DigestCalculator.calculateDigest`: a CRC-32 of the node's path, data and stat; 0 for the
/// nodes under /zookeeper/, the root hashed under the empty path. The tree's digest is the
/// wrapping sum of its nodes'.
pub fn zookeeper_node_digest(node_path: &str, node: NodeRef<'_>) -> u64 {
    if node_path.starts_with("/zookeeper/") {
        return 0;
    }
    let s = node.stat();
    let mut crc = crc32fast::Hasher::new();
    crc.update(if node_path == "/" {
        b""
    } else {
        node_path.as_bytes()
    });
    crc.update(node.data().unwrap_or_default());
    for v in [s.czxid, s.mzxid, s.pzxid, s.ctime, s.mtime] {
        crc.update(&v.to_be_bytes());
    }
    for v in [s.version, s.cversion, s.aversion] {
        crc.update(&v.to_be_bytes());
    }
    crc.update(&s.ephemeral_owner.to_be_bytes());
    u64::from(crc.finalize())
}

/// Whether `zxid` may come right after `previous` in ZooKeeper's history: the next in the
/// same epoch, or the first of a later epoch (a new leader starts its epoch's counter over
/// at 1).
pub fn follows(previous: i64, zxid: i64) -> bool {
    zxid == previous + 1 || ((zxid >> 32) > (previous >> 32) && zxid & 0xffff_ffff == 1)
}

/// The password ZooKeeper gave session `id` (`ZooKeeperServer.generatePasswd`: 16 bytes of
/// `java.util.Random` seeded with `id ^ superSecret`), so that its clients can resume their
/// sessions on Warden.
pub fn zookeeper_password(id: i64) -> Vec<u8> {
    const MULTIPLIER: u64 = 0x5_DEEC_E66D;
    const MASK: u64 = (1 << 48) - 1;
    let mut seed = ((id ^ PASSWORD_SECRET) as u64 ^ MULTIPLIER) & MASK;
    let mut next_int = || {
        seed = seed.wrapping_mul(MULTIPLIER).wrapping_add(0xB) & MASK;
        (seed >> 16) as u32
    };
    let mut out = Vec::with_capacity(PASSWORD_BYTES);
    while out.len() < PASSWORD_BYTES {
        let r = next_int();
        let n = (PASSWORD_BYTES - out.len()).min(4);
        out.extend_from_slice(&r.to_le_bytes()[..n]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(zxid: i64, op: LoggedOp) -> LoggedTxn {
        LoggedTxn {
            session_id: 7,
            zxid,
            time_ms: 1000 + zxid,
            op,
        }
    }

    fn create(path: &str, parent_cversion: i32) -> LoggedOp {
        create_owned(path, parent_cversion, 0)
    }

    fn create_owned(path: &str, parent_cversion: i32, ephemeral_owner: i64) -> LoggedOp {
        LoggedOp::Create {
            path: path.into(),
            data: Some(b"d".to_vec()),
            acl: Acl::open(),
            ephemeral_owner,
            parent_cversion,
            fix_parent_if_exists: true,
        }
    }

    #[test]
    fn values_are_set_as_logged_not_recomputed() {
        let mut r = Restore::empty(StateConfig::default());
        assert_eq!(r.apply(&txn(1, create("/a", 1))), ErrorCode::OK);
        let set = LoggedOp::SetData {
            path: "/a".into(),
            data: None,
            version: 5,
        };
        assert_eq!(r.apply(&txn(2, set)), ErrorCode::OK);
        let acl = LoggedOp::SetAcl {
            path: "/a".into(),
            acl: Acl::read_only(),
            version: 3,
        };
        assert_eq!(r.apply(&txn(3, acl)), ErrorCode::OK);
        let a = r.tree().get("/a").unwrap();
        let s = a.stat();
        assert_eq!((s.version, s.aversion, s.mzxid, s.mtime), (5, 3, 2, 1002));
        assert_eq!(a.data(), None);
        assert_eq!(r.zxid(), 3);
    }

    #[test]
    fn a_fuzzy_snapshot_makes_replayed_changes_no_ops() {
        // The snapshot already holds /a (created at zxid 2) when zxid 2 is replayed.
        let mut r = Restore::empty(StateConfig::default());
        r.apply(&txn(2, create("/a", 1)));
        let before = r.tree().root().stat();
        assert_eq!(r.apply(&txn(2, create("/a", 1))), ErrorCode::NODE_EXISTS);
        assert_eq!(
            r.tree().root().stat(),
            before,
            "cversion only moves forward"
        );
        // A re-creation by another session after the parent was saved moves the parent on.
        assert_eq!(r.apply(&txn(4, create("/a", 3))), ErrorCode::NODE_EXISTS);
        let root = r.tree().root().stat();
        assert_eq!((root.cversion, root.pzxid), (3, 4));
        let delete = LoggedOp::Delete { path: "/b".into() };
        assert_eq!(r.apply(&txn(5, delete)), ErrorCode::NO_NODE);
    }

    #[test]
    fn a_failed_multi_applies_nothing() {
        let mut r = Restore::empty(StateConfig::default());
        let digest = r.zookeeper_digest();
        let multi = LoggedOp::Multi(vec![create("/a", 1), LoggedOp::Error { err: -101 }]);
        assert_eq!(r.apply(&txn(1, multi)), ErrorCode::OK);
        assert!(r.tree().get("/a").is_none());
        assert_eq!(r.zookeeper_digest(), digest);
    }

    #[test]
    fn closing_a_session_deletes_its_ephemerals() {
        let mut r = Restore::empty(StateConfig::default());
        r.apply(&txn(1, LoggedOp::CreateSession { timeout_ms: 5000 }));
        r.apply(&txn(2, create_owned("/e", 1, 7)));
        let digest_with = r.zookeeper_digest();
        r.apply(&txn(3, LoggedOp::CloseSession { paths: Vec::new() }));
        assert!(r.tree().get("/e").is_none());
        assert_ne!(r.zookeeper_digest(), digest_with);
        let (state, config_reset) = r.finish();
        assert!(state.session(7).is_none());
        assert!(!config_reset);
    }

    #[test]
    fn the_old_ensembles_dynamic_config_is_emptied() {
        let mut r = Restore::empty(StateConfig::default());
        let reconfig = LoggedOp::SetData {
            path: crate::system::CONFIG.into(),
            data: Some(b"server.1=zk1:2888:3888:participant;2181\nversion=100000000".to_vec()),
            version: -1,
        };
        r.apply(&txn(1, reconfig));
        let (state, config_reset) = r.finish();
        assert!(config_reset);
        let node = state.tree().get(crate::system::CONFIG).unwrap();
        assert_eq!(node.data(), Some(&b""[..]));
    }
}
