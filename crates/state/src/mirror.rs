//! Mirroring a running ZooKeeper ensemble (docs/migration.md, "Online migration"): the
//! Warden leader follows the ensemble as a ZooKeeper observer and proposes what it receives
//! through Warden's own log, so that every replica applies the same three kinds of entry:
//!
//! - [`TxnKind::MirrorReset`]: the ensemble's tree (a snapshot its leader sent, or its empty
//!   tree) replaces the state; mirroring starts, or starts over after a resync.
//! - [`TxnKind::Mirrored`]: one transaction ZooKeeper committed, applied with the values its
//!   leader decided and its zxid ([`crate::restore`]'s replay).
//! - [`TxnKind::Promote`]: mirroring ends; Warden's own writes take the zxids after
//!   ZooKeeper's last.
//!
//! While the state mirrors, its zxids are ZooKeeper's: Warden's own transactions are refused
//! (NotReadOnly, as a read-only ZooKeeper server answers writes) and take no zxid.

use std::fmt;
use std::sync::Arc;

use warden_proto::ErrorCode;

use crate::restore::{LoggedTxn, Restore, follows};
use crate::state::State;
use crate::system;
use crate::txn::{Outcome, Txn, TxnKind};

/// Where the state stands with the ensemble it may mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MirrorPhase {
    /// Never mirrored: Warden's own state.
    #[default]
    Off,
    /// Mirroring: every change is ZooKeeper's.
    Following,
    /// Mirrored, then promoted: Warden's own state again, for good.
    Promoted,
}

impl MirrorPhase {
    /// The byte a snapshot stores.
    pub(crate) fn to_byte(self) -> u8 {
        match self {
            MirrorPhase::Off => 0,
            MirrorPhase::Following => 1,
            MirrorPhase::Promoted => 2,
        }
    }

    pub(crate) fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            0 => MirrorPhase::Off,
            1 => MirrorPhase::Following,
            2 => MirrorPhase::Promoted,
            _ => return None,
        })
    }
}

/// A ZooKeeper tree to mirror from: the bytes the ensemble's leader sent (`wire`, kept in the
/// log entry; empty for ZooKeeper's empty tree) and the state they decode to.
#[derive(Clone)]
pub struct ZkTree {
    pub zxid: i64,
    pub wire: Arc<[u8]>,
    state: Arc<State>,
}

impl ZkTree {
    /// `restore` is what `wire` decodes to, with the zxid the leader sent it at.
    pub fn new(wire: Arc<[u8]>, restore: Restore) -> Self {
        let zxid = restore.zxid();
        let (mut state, _) = Restore::into_parts(restore);
        state.tree.recount_quotas();
        ZkTree {
            zxid,
            wire,
            state: Arc::new(state),
        }
    }
}

impl PartialEq for ZkTree {
    fn eq(&self, other: &Self) -> bool {
        self.zxid == other.zxid && self.wire == other.wire
    }
}

impl Eq for ZkTree {}

impl fmt::Debug for ZkTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ZkTree(zxid {:#x}, {} bytes, {} znodes)",
            self.zxid,
            self.wire.len(),
            self.state.tree.len()
        )
    }
}

/// One transaction ZooKeeper committed: as decoded, and ZooKeeper's bytes of it (TxnHeader,
/// record, digest), which the log entry keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirroredTxn {
    pub txn: LoggedTxn,
    pub wire: Arc<[u8]>,
}

impl State {
    pub fn mirror_phase(&self) -> MirrorPhase {
        self.mirror
    }

    /// Whether the state mirrors a ZooKeeper ensemble (writes are refused).
    pub fn mirroring(&self) -> bool {
        self.mirror == MirrorPhase::Following
    }

    /// Applies `txn` if mirroring decides it (a mirror entry, or any transaction while
    /// mirroring); `None` for the ordinary path.
    pub(crate) fn apply_mirror(&mut self, txn: &Txn) -> Option<Outcome> {
        let phase = self.mirror;
        let refused = |zxid, err| {
            let mut out = Outcome::new(zxid);
            out.err = err;
            out
        };
        Some(match (&txn.kind, phase) {
            (TxnKind::MirrorReset(tree), MirrorPhase::Off | MirrorPhase::Following) => {
                self.reset_to(tree);
                Outcome::new(self.zxid)
            }
            (TxnKind::Mirrored(m), MirrorPhase::Following) if !follows(self.zxid, m.txn.zxid) => {
                // Mirrored already (a Warden leader that followed before this one proposed it
                // too), or after a gap: zxids never go back, and none is skipped.
                refused(self.zxid, ErrorCode::BAD_ARGUMENTS)
            }
            (TxnKind::Mirrored(m), MirrorPhase::Following) => self.apply_logged(&m.txn),
            (TxnKind::Promote, MirrorPhase::Following) => {
                self.mirror = MirrorPhase::Promoted;
                Outcome::new(self.zxid)
            }
            (TxnKind::MirrorReset(_) | TxnKind::Mirrored(_) | TxnKind::Promote, _) => {
                // Mirroring is over (or never began): what is left of it changes nothing.
                refused(self.zxid, ErrorCode::BAD_ARGUMENTS)
            }
            (TxnKind::Reconfigured { members }, MirrorPhase::Following) => {
                // Warden's membership goes on being written, without taking a zxid.
                let mut out = Outcome::new(self.zxid);
                self.time_ms = self.time_ms.max(txn.time_ms);
                self.reconfigured(members, self.time_ms, &mut out);
                out
            }
            (_, MirrorPhase::Following) => refused(self.zxid, ErrorCode::NOT_READ_ONLY),
            _ => return None,
        })
    }

    /// ZooKeeper's tree replaces the state, but for Warden's own membership in
    /// /zookeeper/config.
    fn reset_to(&mut self, tree: &ZkTree) {
        let mut state = (*tree.state).clone();
        state.config = self.config;
        state.mirror = MirrorPhase::Following;
        state.zxid = tree.zxid;
        state.time_ms = state.time_ms.max(self.time_ms);
        let ours = self.tree.get(system::CONFIG).expect("system node");
        let (data, stat, acl) = (ours.data().map(<[u8]>::to_vec), ours.stat(), ours.acl());
        let id = state.tree.lookup(system::CONFIG).expect("system node");
        let t = &mut state.tree;
        t.set_data(system::CONFIG, id, data.as_deref(), stat.mzxid, stat.mtime);
        t.set_acl(system::CONFIG, id, acl);
        t.set_stat(system::CONFIG, id, stat);
        *self = state;
    }

    fn apply_logged(&mut self, logged: &LoggedTxn) -> Outcome {
        let config = self.config;
        let state = std::mem::replace(self, State::new(config));
        let mut restore = Restore::resume(state);
        let err = restore.apply(logged);
        let (state, triggers) = restore.into_parts();
        *self = state;
        let mut out = Outcome::new(self.zxid);
        out.triggers = triggers;
        if !err.is_ok() {
            // NoNode or NodeExists: the change was already in the snapshot the mirror
            // started from (ZooKeeper's snapshots are fuzzy), as in ZooKeeper's own replay.
            out.err = err;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use warden_proto::Acl;

    use super::*;
    use crate::StateConfig;
    use crate::restore::LoggedOp;
    use crate::txn::Trigger;

    fn txn(kind: TxnKind) -> Txn {
        Txn {
            session_id: 0,
            time_ms: 1,
            auth: Vec::new(),
            enforce_quota: false,
            kind,
        }
    }

    fn mirrored(session_id: i64, zxid: i64, op: LoggedOp) -> TxnKind {
        TxnKind::Mirrored(MirroredTxn {
            txn: LoggedTxn {
                session_id,
                zxid,
                time_ms: 1000,
                op,
            },
            wire: Arc::from(&b""[..]),
        })
    }

    fn zk_tree(zxid: i64) -> ZkTree {
        let mut restore = Restore::empty(StateConfig::default());
        restore.set_zxid(zxid);
        ZkTree::new(Arc::from(&b""[..]), restore)
    }

    #[test]
    fn a_mirror_takes_zookeepers_zxids_and_refuses_wardens_own_writes() {
        let mut state = State::new(StateConfig::default());
        state.apply(&txn(TxnKind::MirrorReset(zk_tree(0x1_0000_0004))));
        assert!(state.mirroring());
        assert_eq!(state.last_zxid(), 0x1_0000_0004);
        assert!(
            state.tree().get(system::KEEPER).is_none(),
            "ZooKeeper's tree, not Warden's"
        );
        let session = 0x0100_0000_0000_0007;
        let create = LoggedOp::Create {
            path: "/a".into(),
            data: Some(b"x".to_vec()),
            acl: Acl::open(),
            ephemeral_owner: 0,
            parent_cversion: 1,
            fix_parent_if_exists: true,
        };
        let session_txn = LoggedOp::CreateSession { timeout_ms: 30_000 };
        state.apply(&txn(mirrored(session, 0x1_0000_0005, session_txn)));
        let out = state.apply(&txn(mirrored(session, 0x1_0000_0006, create.clone())));
        assert_eq!(out.zxid, 0x1_0000_0006);
        let again = state.apply(&txn(mirrored(session, 0x1_0000_0006, create)));
        assert_eq!(
            (again.err, again.zxid),
            (ErrorCode::BAD_ARGUMENTS, 0x1_0000_0006),
            "a transaction mirrored twice is applied once"
        );
        let created: Vec<&Trigger> = out.triggers.iter().collect();
        assert_eq!(
            created.len(),
            2,
            "NodeCreated and the parent's NodeChildrenChanged"
        );
        let stat = state.tree().get("/a").unwrap().stat();
        assert_eq!((stat.czxid, stat.ctime), (0x1_0000_0006, 1000));
        assert_eq!(
            state.session(session).unwrap().password,
            crate::restore::zookeeper_password(session),
            "a moved client's password is ZooKeeper's"
        );
        let gap = state.apply(&txn(mirrored(session, 0x1_0000_0008, LoggedOp::Check)));
        assert_eq!(
            gap.err,
            ErrorCode::BAD_ARGUMENTS,
            "a transaction after a gap"
        );
        let refused = state.apply(&txn(TxnKind::CloseSession));
        assert_eq!(refused.err, ErrorCode::NOT_READ_ONLY);
        assert_eq!(
            state.last_zxid(),
            0x1_0000_0006,
            "a refused write takes no zxid"
        );

        state.apply(&txn(TxnKind::Promote));
        assert_eq!(state.mirror_phase(), MirrorPhase::Promoted);
        let late = state.apply(&txn(mirrored(
            session,
            0x1_0000_0007,
            LoggedOp::Delete { path: "/a".into() },
        )));
        assert_eq!(late.err, ErrorCode::BAD_ARGUMENTS);
        assert!(
            state.tree().get("/a").is_some(),
            "nothing mirrored after promotion"
        );
        let own = state.apply(&txn(TxnKind::CloseSession));
        assert_eq!(
            own.zxid, 0x1_0000_0007,
            "Warden continues from ZooKeeper's zxid"
        );
        let back = crate::snapshot::decode(&crate::snapshot::encode(&state)).unwrap();
        assert_eq!(back.mirror_phase(), MirrorPhase::Promoted);
    }

    #[test]
    fn a_mirror_keeps_wardens_membership_in_the_config_node() {
        let mut state = State::new(StateConfig::default());
        let members = "server.1=a:2888:3888:participant;0.0.0.0:2181\n".to_owned();
        state.apply(&txn(TxnKind::Reconfigured { members }));
        let ours = state
            .tree()
            .get(system::CONFIG)
            .unwrap()
            .data()
            .unwrap()
            .to_vec();
        state.apply(&txn(TxnKind::MirrorReset(zk_tree(9))));
        let reconfig = LoggedOp::SetData {
            path: system::CONFIG.into(),
            data: Some(b"server.1=zk:2888:3888:participant".to_vec()),
            version: -1,
        };
        let out = state.apply(&txn(mirrored(0, 10, reconfig)));
        assert_eq!(out.zxid, 10, "the reconfig still takes its zxid");
        let node = state.tree().get(system::CONFIG).unwrap();
        assert_eq!(node.data(), Some(&ours[..]));
    }
}
