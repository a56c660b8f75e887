//! The replicated state: the tree, the sessions and the zxid counter, changed only by
//! [`State::apply`], which gives every replica the same answer for the same transaction.

use std::collections::BTreeMap;

use warden_proto::{ErrorCode, EventType, OpCode, OpResult, Request, Response};

use crate::mirror::MirrorPhase;
use crate::prepare::{Caller, Change, View, prepare};
use crate::tree::{DataTree, NodeKind, NodeStat};
use crate::txn::{Outcome, Trigger, Txn, TxnKind};
use crate::{path, system};

/// Settings every replica must share, fixed for the life of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateConfig {
    /// Whether TTL nodes may be created (ZooKeeper's `zookeeper.extendedTypesEnabled`).
    pub ttl_enabled: bool,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig { ttl_enabled: true }
    }
}

/// A live session as every replica knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub timeout_ms: i32,
    pub password: Vec<u8>,
}

/// The whole replicated state.
#[derive(Clone)]
pub struct State {
    pub(crate) config: StateConfig,
    pub(crate) tree: DataTree,
    pub(crate) sessions: BTreeMap<i64, Session>,
    pub(crate) zxid: i64,
    pub(crate) next_session_id: i64,
    /// The time of the last applied transaction: a transaction's time is never earlier, so
    /// ctime and mtime never go backwards in log order whatever the leaders' clocks did.
    pub(crate) time_ms: i64,
    /// Whether the state mirrors a ZooKeeper ensemble (crate::mirror).
    pub(crate) mirror: MirrorPhase,
}

impl State {
    pub fn new(config: StateConfig) -> Self {
        let mut tree = DataTree::new();
        system::install(&mut tree);
        State {
            config,
            tree,
            sessions: BTreeMap::new(),
            zxid: 0,
            next_session_id: 0,
            time_ms: 0,
            mirror: MirrorPhase::Off,
        }
    }

    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    /// The zxid of the last applied transaction.
    pub fn last_zxid(&self) -> i64 {
        self.zxid
    }

    pub fn session(&self, id: i64) -> Option<&Session> {
        self.sessions.get(&id)
    }

    pub fn sessions(&self) -> impl Iterator<Item = (i64, &Session)> {
        self.sessions.iter().map(|(id, s)| (*id, s))
    }

    /// A digest of the tree, equal on replicas that applied the same transactions.
    pub fn digest(&self) -> u64 {
        self.tree.digest()
    }

    /// Applies one committed transaction. Every transaction takes the next zxid, failed ones
    /// included, as in ZooKeeper.
    pub fn apply(&mut self, txn: &Txn) -> Outcome {
        if let Some(out) = self.apply_mirror(txn) {
            return out;
        }
        self.zxid += 1;
        self.time_ms = self.time_ms.max(txn.time_ms);
        let time = self.time_ms;
        let mut out = Outcome::new(self.zxid);
        match &txn.kind {
            TxnKind::CreateSession {
                timeout_ms,
                password,
            } => self.create_session(time, *timeout_ms, password, &mut out),
            TxnKind::CloseSession => self.close_session(txn.session_id, &mut out),
            TxnKind::DeleteContainer { path } => self.delete_container(path, time, &mut out),
            TxnKind::Reconfigured { members } => self.reconfigured(members, time, &mut out),
            TxnKind::Refused { err } => out.err = *err,
            TxnKind::Restore { snapshot } => self.restore(snapshot, &mut out),
            TxnKind::MirrorReset(_) | TxnKind::Mirrored(_) | TxnKind::Promote => {
                unreachable!("apply_mirror takes every mirror entry")
            }
            TxnKind::Request(_) if !self.sessions.contains_key(&txn.session_id) => {
                out.err = ErrorCode::SESSION_EXPIRED;
            }
            TxnKind::Request(Request::Multi(ops)) => self.apply_multi(txn, ops, time, &mut out),
            TxnKind::Request(req) => {
                let caller = self.caller(txn);
                let mut view = View::new(&self.tree);
                let prepared = prepare(req, &caller, &mut view);
                out.quota_breaches = view.quota_breaches;
                match prepared {
                    Ok(change) => {
                        let (_, body) = self.commit(change, time, &mut out);
                        out.body = body;
                    }
                    Err(err) => out.err = err,
                }
            }
        }
        out
    }

    /// Writes the new membership into /zookeeper/config, as ZooKeeper's leader does when a
    /// reconfiguration commits; watchers of the node are told.
    pub(crate) fn reconfigured(&mut self, members: &str, time: i64, out: &mut Outcome) {
        let data = format!("{members}version={:x}", out.zxid).into_bytes();
        let change = Change::SetData {
            path: crate::system::CONFIG.to_owned(),
            data: Some(data.clone()),
        };
        let (_, answer) = self.commit(change, time, out);
        assert!(
            matches!(answer, Response::Stat(_)),
            "setData answers a Stat"
        );
        // ZooKeeper writes the config with version -1: its dataVersion is always -1.
        let id = self
            .tree
            .lookup(crate::system::CONFIG)
            .expect("system node");
        self.tree.set_version(crate::system::CONFIG, id, -1);
        out.body = Response::GetData {
            data: Some(data),
            stat: self.tree.node(id).wire_stat(),
        };
    }

    fn caller<'a>(&self, txn: &'a Txn) -> Caller<'a> {
        Caller {
            session_id: txn.session_id,
            auth: &txn.auth,
            ttl_enabled: self.config.ttl_enabled,
            enforce_quota: txn.enforce_quota,
        }
    }

    /// All or nothing: every operation is validated against the tree as the earlier ones
    /// would leave it; only if all pass are they committed, in order. On failure the failed
    /// operation reports its error, those before it OK and those after it
    /// RuntimeInconsistency (`DataTree.processTxn` for multi).
    fn apply_multi(&mut self, txn: &Txn, ops: &[Request], time: i64, out: &mut Outcome) {
        let caller = self.caller(txn);
        let mut view = View::new(&self.tree);
        let mut changes = Vec::with_capacity(ops.len());
        let mut failure = None;
        for (i, op) in ops.iter().enumerate() {
            let prepared = if op.is_write() && !matches!(op, Request::Multi(_)) {
                prepare(op, &caller, &mut view)
            } else {
                Err(ErrorCode::BAD_ARGUMENTS)
            };
            match prepared {
                Ok(change) => changes.push(change),
                Err(err) => {
                    failure = Some((i, err));
                    break;
                }
            }
        }
        out.quota_breaches = view.quota_breaches;
        if let Some((failed, err)) = failure {
            let results = (0..ops.len())
                .map(|i| match i.cmp(&failed) {
                    std::cmp::Ordering::Less => OpResult::Error(ErrorCode::OK),
                    std::cmp::Ordering::Equal => OpResult::Error(err),
                    std::cmp::Ordering::Greater => {
                        OpResult::Error(ErrorCode::RUNTIME_INCONSISTENCY)
                    }
                })
                .collect();
            out.body = Response::Multi(results);
            return;
        }
        let results = changes
            .into_iter()
            .map(|change| {
                let (op, response) = self.commit(change, time, out);
                OpResult::Ok { op, response }
            })
            .collect();
        out.body = Response::Multi(results);
    }

    /// Commits a validated change; returns the result's op type (as a multi reports it) and
    /// the reply body.
    fn commit(&mut self, change: Change, time: i64, out: &mut Outcome) -> (OpCode, Response) {
        let zxid = out.zxid;
        match change {
            Change::Create {
                op,
                path,
                data,
                acl,
                ephemeral_owner,
                parent_cversion,
                parent,
            } => {
                let (parent_path, name) = path::split_parent(&path).expect("validated path");
                debug_assert!(parent.is_none() || parent == self.tree.lookup(parent_path));
                let parent = parent
                    .or_else(|| self.tree.lookup(parent_path))
                    .expect("validated parent");
                let stat = NodeStat {
                    czxid: zxid,
                    mzxid: zxid,
                    pzxid: zxid,
                    ctime: time,
                    mtime: time,
                    version: 0,
                    cversion: 0,
                    aversion: 0,
                    ephemeral_owner,
                };
                let id = self.tree.create(
                    parent_path,
                    parent,
                    name,
                    data.as_deref(),
                    &acl,
                    stat,
                    parent_cversion,
                );
                out.triggers.push(Trigger {
                    event: EventType::NodeCreated,
                    path: path.clone(),
                    acl: self.tree.shared_acl(id),
                });
                out.triggers.push(Trigger {
                    event: EventType::NodeChildrenChanged,
                    path: parent_path.to_owned(),
                    acl: self.tree.shared_acl(parent),
                });
                match op {
                    OpCode::Create | OpCode::CreateIfNotExists => (op, Response::Create { path }),
                    _ => {
                        let stat = self.tree.node(id).wire_stat();
                        (OpCode::Create2, Response::Create2 { path, stat })
                    }
                }
            }
            Change::Delete { op, path } => {
                self.delete_node(&path, zxid, out);
                (op, Response::Empty)
            }
            Change::SetData { path, data } => {
                let id = self.tree.lookup(&path).expect("validated node");
                self.tree.set_data(&path, id, data.as_deref(), zxid, time);
                out.triggers.push(Trigger {
                    event: EventType::NodeDataChanged,
                    path,
                    acl: self.tree.shared_acl(id),
                });
                (
                    OpCode::SetData,
                    Response::Stat(self.tree.node(id).wire_stat()),
                )
            }
            Change::SetAcl { path, acl } => {
                let id = self.tree.lookup(&path).expect("validated node");
                self.tree.set_acl(&path, id, &acl);
                (
                    OpCode::SetAcl,
                    Response::Stat(self.tree.node(id).wire_stat()),
                )
            }
            Change::Nothing { op, path } => match op {
                OpCode::CreateIfNotExists => (op, Response::Create { path }),
                _ => (op, Response::Empty),
            },
            Change::RemoveRecursive { path } => {
                let id = self.tree.lookup(&path).expect("validated node");
                // Children before parents, so each delete removes a leaf.
                let mut order = Vec::new();
                let mut stack = vec![id];
                while let Some(id) = stack.pop() {
                    order.push(id);
                    stack.extend(self.tree.node(id).child_ids());
                }
                let paths: Vec<String> = order.iter().map(|&n| self.tree.path_of(n)).collect();
                for p in paths.iter().rev() {
                    self.delete_node(p, zxid, out);
                }
                (OpCode::RemoveRecursive, Response::Empty)
            }
        }
    }

    /// Deletes a leaf and reports what watchers and the container sweeper need to know.
    fn delete_node(&mut self, path: &str, zxid: i64, out: &mut Outcome) {
        let id = self.tree.lookup(path).expect("deleted node exists");
        let (parent_path, _) = path::split_parent(path).expect("absolute path");
        let acl = self.tree.shared_acl(id);
        let parent_acl = self.tree.node(id).parent().map(|p| self.tree.shared_acl(p));
        self.tree.delete(path, id, zxid);
        out.triggers.push(Trigger {
            event: EventType::NodeDeleted,
            path: path.to_owned(),
            acl,
        });
        out.triggers.push(Trigger {
            event: EventType::NodeChildrenChanged,
            path: parent_path.to_owned(),
            acl: parent_acl.expect("a deleted node has a parent"),
        });
        let parent = self
            .tree
            .get(parent_path)
            .expect("parent of a deleted node");
        if parent.kind() == NodeKind::Container && parent.num_children() == 0 {
            out.emptied_containers.push(parent_path.to_owned());
        }
    }

    /// Replaces the whole state with the one in `snapshot` (the admin `restore` command).
    fn restore(&mut self, snapshot: &[u8], out: &mut Outcome) {
        // The leader decoded these bytes before proposing them and the log checksums them:
        // a replica that cannot decode them holds corrupt data.
        let mut new = crate::snapshot::decode(snapshot)
            .unwrap_or_else(|e| panic!("a committed restore does not decode: {e}"));
        // Clients have seen zxids up to this one: it is never taken back.
        new.zxid = new.zxid.max(self.zxid);
        out.zxid = new.zxid;
        new.time_ms = new.time_ms.max(self.time_ms);
        new.config = self.config;
        new.next_session_id = new.next_session_id.max(self.next_session_id);
        for (id, session) in new.sessions.iter_mut() {
            if let Some(now) = self.sessions.get(id) {
                session.password.clone_from(&now.password);
            }
        }
        // The ensemble serving the state is this one, whatever the snapshot's was.
        let config = system::CONFIG;
        if let (Some(old), Some(id)) = (self.tree.get(config), new.tree.lookup(config)) {
            let (data, stat) = (old.data().map(<[u8]>::to_vec), old.stat());
            new.tree
                .set_data(config, id, data.as_deref(), stat.mzxid, stat.mtime);
            new.tree.set_stat(config, id, stat);
        }
        *self = new;
    }

    fn create_session(&mut self, time: i64, timeout_ms: i32, password: &[u8], out: &mut Outcome) {
        if self.next_session_id == 0 {
            // As ZooKeeper's SessionTrackerImpl: the time in the middle bits, so ids differ
            // across a wiped data directory, and a high byte (1) that is neither the container
            // (0x80) nor the TTL (0xff) marker of ephemeralOwner.
            self.next_session_id = (((time << 24) as u64 >> 8) as i64) | (1 << 56);
        }
        // A restored session table may hold ids from another server's history, and mirrored
        // sessions keep ZooKeeper's ids, which carry a time too: skip any in use.
        while self.sessions.contains_key(&self.next_session_id) {
            self.next_session_id += 1;
        }
        let id = self.next_session_id;
        self.next_session_id += 1;
        self.sessions.insert(
            id,
            Session {
                timeout_ms,
                password: password.to_vec(),
            },
        );
        out.created_session = Some(id);
    }

    /// Ends a session and deletes its ephemeral nodes, in path order.
    fn close_session(&mut self, session: i64, out: &mut Outcome) {
        if self.sessions.remove(&session).is_none() {
            return;
        }
        let mut paths: Vec<String> = self
            .tree
            .ephemerals_of(session)
            .map(|id| self.tree.path_of(id))
            .collect();
        paths.sort();
        for p in paths {
            self.delete_node(&p, out.zxid, out);
        }
    }

    /// The cleanup of an empty container or expired TTL node, re-checked at apply time so a
    /// node that gained a child or was touched since it was proposed survives.
    fn delete_container(&mut self, path: &str, time: i64, out: &mut Outcome) {
        let Some(node) = self.tree.get(path) else {
            out.err = ErrorCode::NO_NODE;
            return;
        };
        if node.num_children() > 0 {
            out.err = ErrorCode::NOT_EMPTY;
            return;
        }
        let expired = match node.kind() {
            NodeKind::Container => true,
            NodeKind::Ttl(ttl) => time - node.stat().mtime > ttl,
            NodeKind::Persistent | NodeKind::Ephemeral(_) => false,
        };
        if !expired {
            out.err = ErrorCode::BAD_VERSION;
            return;
        }
        self.delete_node(path, out.zxid, out);
    }

    /// Containers that had children and have none left (or were never used for longer than
    /// `never_used_ms`, if non-zero), and TTL nodes without children whose TTL has passed
    /// since their last change: what the leader should propose to delete
    /// (`ContainerManager.getCandidates`).
    pub fn cleanup_candidates(&self, now_ms: i64, never_used_ms: i64) -> Vec<String> {
        let tree = &self.tree;
        let containers = tree.containers().filter(|&id| {
            let n = tree.node(id);
            n.num_children() == 0
                && (n.stat().cversion > 0
                    || (never_used_ms != 0 && now_ms - n.stat().mtime > never_used_ms))
        });
        let ttls = tree.ttls().filter(|&id| {
            let n = tree.node(id);
            matches!(n.kind(), NodeKind::Ttl(ttl) if ttl != 0 && n.num_children() == 0 && now_ms - n.stat().mtime > ttl)
        });
        containers.chain(ttls).map(|id| tree.path_of(id)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_proto::request::{CreateRequest, SetDataRequest};
    use warden_proto::{Acl, Response};

    fn txn(session_id: i64, time_ms: i64, kind: TxnKind) -> Txn {
        Txn {
            session_id,
            time_ms,
            auth: Vec::new(),
            enforce_quota: false,
            kind,
        }
    }

    #[test]
    fn time_never_goes_backwards_in_log_order() {
        // Review finding 11: two leaders' clocks may disagree; mtime must not go back.
        let mut state = State::new(StateConfig::default());
        let create_session = TxnKind::CreateSession {
            timeout_ms: 10_000,
            password: vec![0; 16],
        };
        let session = state
            .apply(&txn(0, 5_000, create_session))
            .created_session
            .unwrap();
        let create = TxnKind::Request(Request::Create(CreateRequest {
            path: "/n".into(),
            data: Some(Vec::new()),
            acl: Acl::open(),
            flags: 0,
        }));
        state.apply(&txn(session, 9_000, create));
        let set = TxnKind::Request(Request::SetData(SetDataRequest {
            path: "/n".into(),
            data: Some(b"later".to_vec()),
            version: -1,
        }));
        let outcome = state.apply(&txn(session, 7_000, set));
        let Response::Stat(stat) = outcome.body else {
            panic!("setData answers a Stat: {:?}", outcome.body);
        };
        assert_eq!(stat.ctime, 9_000);
        assert_eq!(
            stat.mtime, 9_000,
            "a stamp older than the last one is raised to it"
        );
        let back = crate::snapshot::decode(&crate::snapshot::encode(&state)).unwrap();
        assert_eq!(back.time_ms, 9_000, "the floor survives a snapshot");
    }

    #[test]
    fn a_reconfiguration_rewrites_the_config_node_with_its_zxid_as_version() {
        let mut state = State::new(StateConfig::default());
        let members = "server.1=a:2888:3888:participant;0.0.0.0:2181\n".to_owned();
        let outcome = state.apply(&txn(0, 1, TxnKind::Reconfigured { members }));
        let Response::GetData { data, stat } = outcome.body else {
            panic!("reconfig answers the new config: {:?}", outcome.body);
        };
        let expected = format!(
            "server.1=a:2888:3888:participant;0.0.0.0:2181\nversion={:x}",
            outcome.zxid
        );
        assert_eq!(data.as_deref(), Some(expected.as_bytes()));
        assert_eq!(stat.mzxid, outcome.zxid);
        assert_eq!(
            stat.version, -1,
            "ZooKeeper's config node keeps dataVersion -1"
        );
        assert!(outcome.triggers.iter().any(|t| t.path == system::CONFIG));
        let node = state.tree().get(system::CONFIG).unwrap();
        assert_eq!(node.data(), Some(expected.as_bytes()));
        let refused = state.apply(&txn(
            0,
            2,
            TxnKind::Refused {
                err: warden_proto::ErrorCode::NEW_CONFIG_NO_QUORUM,
            },
        ));
        assert_eq!(refused.err, warden_proto::ErrorCode::NEW_CONFIG_NO_QUORUM);
        assert_eq!(
            refused.zxid,
            outcome.zxid + 1,
            "a refused write takes a zxid"
        );
    }

    fn session(state: &mut State, time_ms: i64, password: u8) -> i64 {
        let create = TxnKind::CreateSession {
            timeout_ms: 10_000,
            password: vec![password; 16],
        };
        state
            .apply(&txn(0, time_ms, create))
            .created_session
            .unwrap()
    }

    fn create(state: &mut State, session: i64, path: &str) {
        let create = TxnKind::Request(Request::Create(CreateRequest {
            path: path.into(),
            data: Some(b"d".to_vec()),
            acl: Acl::open(),
            flags: 0,
        }));
        assert!(state.apply(&txn(session, 9_000, create)).err.is_ok());
    }

    #[test]
    fn a_restore_replaces_the_state_but_keeps_what_belongs_to_the_running_cluster() {
        // The snapshot: a session shared with the running state, one of its own, and /old.
        let mut snapshot = State::new(StateConfig { ttl_enabled: false });
        let shared = session(&mut snapshot, 1_000, 1);
        let own = session(&mut snapshot, 1_000, 2);
        create(&mut snapshot, own, "/old");
        let mut state = State::new(StateConfig::default());
        assert_eq!(
            session(&mut state, 1_000, 9),
            shared,
            "the same clock: the same id"
        );
        for p in ["/a", "/b", "/c", "/d"] {
            create(&mut state, shared, p);
        }
        let members = TxnKind::Reconfigured {
            members: "server.1=h:2888:3888:participant;2181\n".into(),
        };
        state.apply(&txn(0, 9_000, members));
        let config = state.tree().get(system::CONFIG).unwrap();
        let (config_data, config_stat) = (config.data().map(<[u8]>::to_vec), config.stat());
        let before = state.last_zxid();
        assert!(snapshot.last_zxid() < before);

        let restore = TxnKind::Restore {
            snapshot: crate::snapshot::encode(&snapshot),
        };
        let out = state.apply(&txn(0, 9_500, restore));
        assert_eq!(
            out.zxid,
            before + 1,
            "the zxid goes on from the running state's"
        );
        assert_eq!(state.last_zxid(), before + 1);
        assert!(state.tree().get("/old").is_some() && state.tree().get("/a").is_none());
        assert_eq!(state.session(shared).unwrap().password, vec![9; 16]);
        assert_eq!(state.session(own).unwrap().password, vec![2; 16]);
        let config = state.tree().get(system::CONFIG).unwrap();
        assert_eq!(config.data().map(<[u8]>::to_vec), config_data);
        assert_eq!(config.stat(), config_stat);
        assert!(
            state.config.ttl_enabled,
            "the cluster's settings, not the snapshot's"
        );
        // A new session never takes an id the restored table holds.
        let next = session(&mut state, 1_000, 3);
        assert!(next != shared && next != own);
        assert_eq!(state.sessions().count(), 3);
    }
}
