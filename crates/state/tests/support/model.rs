//! A deliberately simple reference model of ZooKeeper's data tree, written from ZooKeeper's own
//! rules (the Programmer's Guide, and the 3.9 sources of `PrepRequestProcessor`, `DataTree`,
//! `FinalRequestProcessor`, `PathUtils` and the authentication providers), not from
//! `warden-state`. Every node sits in one map keyed by its full path; children, data lengths
//! and descendant counts are found by scanning; a multi runs on a clone of the whole model and
//! is thrown away if any operation fails. Slow and obvious on purpose: it is the yardstick.

use std::collections::{BTreeMap, BTreeSet};

use warden_proto::request::{CheckVersionRequest, CreateRequest};
use warden_proto::types::perms::{ADMIN, CREATE, DELETE, READ, WRITE};
use warden_proto::{Acl, ErrorCode, EventType, Id, OpCode, OpResult, Request, Response, Stat};
use warden_state::{Txn, TxnKind, system};

/// What a node is, which ZooKeeper encodes in `ephemeralOwner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Persistent,
    Ephemeral(i64),
    Container,
    Ttl(i64),
}

impl Kind {
    /// The stored `ephemeralOwner` (`EphemeralType`): a container is `Long.MIN_VALUE`; a TTL
    /// node has 0xFF in the high byte, zero extended-type bits, and its TTL in the low 40 bits.
    pub fn ephemeral_owner(self) -> i64 {
        match self {
            Kind::Persistent => 0,
            Kind::Ephemeral(session) => session,
            Kind::Container => i64::MIN,
            Kind::Ttl(ttl) => (0xff00_0000_0000_0000_u64 as i64) | ttl,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Null and empty are different things on the wire.
    pub data: Option<Vec<u8>>,
    pub acl: Vec<Acl>,
    pub kind: Kind,
    pub czxid: i64,
    pub mzxid: i64,
    pub pzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    /// As stored: the number of children ever created, which is also the sequence counter.
    pub cversion: i32,
    pub aversion: i32,
}

impl Node {
    fn system(data: &[u8], acl: Vec<Acl>) -> Node {
        Node {
            data: Some(data.to_vec()),
            acl,
            kind: Kind::Persistent,
            czxid: 0,
            mzxid: 0,
            pzxid: 0,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
        }
    }
}

/// A live session as the model knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub timeout_ms: i32,
    pub password: Vec<u8>,
}

/// What a transaction must answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub zxid: i64,
    pub err: ErrorCode,
    pub body: Response,
    pub created_session: Option<i64>,
    /// Sorted: the model does not specify the order of events within one transaction.
    pub triggers: Vec<Trigger>,
}

#[derive(Debug, Clone)]
pub struct Model {
    pub nodes: BTreeMap<String, Node>,
    pub sessions: BTreeMap<i64, Session>,
    /// Every session id ever handed out: an id is never given twice.
    issued: BTreeSet<i64>,
    pub zxid: i64,
    ttl_enabled: bool,
}

type WriteResult = Result<(OpCode, Response), ErrorCode>;

impl Model {
    /// The tree every ZooKeeper starts with (`DataTree`'s constructor and `addConfigNode`),
    /// plus ClickHouse Keeper's /keeper nodes with the values Warden advertises.
    pub fn new(ttl_enabled: bool) -> Model {
        let open = || vec![acl(ALL, "world", "anyone")];
        let read_only = || vec![acl(READ, "world", "anyone")];
        let mut nodes = BTreeMap::new();
        nodes.insert("/".to_owned(), Node::system(b"", open()));
        nodes.insert("/zookeeper".to_owned(), Node::system(b"", open()));
        nodes.insert("/zookeeper/quota".to_owned(), Node::system(b"", open()));
        // `addConfigNode` sets the ACL with `setACL(path, READ_ACL_UNSAFE, -1)`, and
        // `DataTree.setACL` stores the version it is given as the aversion.
        let mut config = Node::system(b"", read_only());
        config.aversion = -1;
        nodes.insert("/zookeeper/config".to_owned(), config);
        nodes.insert("/keeper".to_owned(), Node::system(b"", read_only()));
        nodes.insert(
            "/keeper/api_version".to_owned(),
            Node::system(system::API_VERSION_VALUE, read_only()),
        );
        nodes.insert(
            "/keeper/feature_flags".to_owned(),
            Node::system(&system::feature_flags(system::FEATURES), read_only()),
        );
        Model {
            nodes,
            sessions: BTreeMap::new(),
            issued: BTreeSet::new(),
            zxid: 0,
            ttl_enabled,
        }
    }

    /// Names of the direct children of `path`, sorted.
    pub fn children(&self, path: &str) -> Vec<String> {
        let prefix = if path == "/" {
            "/".to_owned()
        } else {
            format!("{path}/")
        };
        self.nodes
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .map(|(p, _)| &p[prefix.len()..])
            .filter(|rest| !rest.is_empty() && !rest.contains('/'))
            .map(str::to_owned)
            .collect()
    }

    fn descendants(&self, path: &str) -> usize {
        self.nodes
            .keys()
            .filter(|p| *p != path && is_within(p, path))
            .count()
    }

    /// The Stat a client sees, as `DataNode.copyStat` makes it: dataLength and numChildren
    /// counted afresh; cversion translated from creations to changes ("for every create there
    /// is a delete except for the children still present"); ephemeralOwner shown only for
    /// plain ephemerals, never the container or TTL markers.
    pub fn stat(&self, path: &str) -> Stat {
        let n = &self.nodes[path];
        let num_children = self.children(path).len() as i32;
        Stat {
            czxid: n.czxid,
            mzxid: n.mzxid,
            ctime: n.ctime,
            mtime: n.mtime,
            version: n.version,
            cversion: n.cversion * 2 - num_children,
            aversion: n.aversion,
            ephemeral_owner: match n.kind {
                Kind::Ephemeral(session) => session,
                _ => 0,
            },
            data_length: n.data.as_ref().map_or(0, |d| d.len() as i32),
            num_children,
            pzxid: n.pzxid,
        }
    }

    /// Applies one committed transaction. `assigned_session` is the id the implementation
    /// gave a new session: choosing ids is not ZooKeeper semantics, so the model only checks
    /// that the id is fresh and usable as an ephemeral owner.
    pub fn apply(&mut self, txn: &Txn, assigned_session: Option<i64>) -> Expected {
        // Every transaction takes the next zxid, whether it succeeds or not.
        self.zxid += 1;
        let zxid = self.zxid;
        let mut triggers = Vec::new();
        let mut created_session = None;
        let (err, body) = match &txn.kind {
            TxnKind::CreateSession {
                timeout_ms,
                password,
            } => {
                let id = assigned_session.expect("createSession assigns a session id");
                assert!(
                    self.issued.insert(id),
                    "session id {id:#x} was handed out twice"
                );
                // An ephemeral node stores its session as ephemeralOwner, where 0 means
                // persistent, Long.MIN_VALUE a container and a 0xFF high byte a TTL node.
                assert!(
                    id != 0 && id != i64::MIN && (id as u64) >> 56 != 0xff,
                    "session id {id:#x} would not read as an ephemeral owner"
                );
                self.sessions.insert(
                    id,
                    Session {
                        timeout_ms: *timeout_ms,
                        password: password.clone(),
                    },
                );
                created_session = Some(id);
                (ErrorCode::OK, Response::Empty)
            }
            TxnKind::CloseSession => {
                self.close_session(txn.session_id, zxid, &mut triggers);
                (ErrorCode::OK, Response::Empty)
            }
            TxnKind::DeleteContainer { path } => {
                match self.delete_container(path, txn.time_ms, zxid, &mut triggers) {
                    Ok(()) => (ErrorCode::OK, Response::Empty),
                    Err(err) => (err, Response::Empty),
                }
            }
            TxnKind::Refused { err } => (*err, Response::Empty),
            TxnKind::Reconfigured { .. }
            | TxnKind::MirrorReset(_)
            | TxnKind::Mirrored(_)
            | TxnKind::Promote => {
                unreachable!("the generated sequences change no membership and mirror nothing")
            }
            TxnKind::Restore { .. } => {
                unreachable!("the generated sequences restore no snapshot")
            }
            TxnKind::Request(_) if !self.sessions.contains_key(&txn.session_id) => {
                (ErrorCode::SESSION_EXPIRED, Response::Empty)
            }
            TxnKind::Request(Request::Multi(ops)) => {
                (ErrorCode::OK, self.multi(ops, txn, zxid, &mut triggers))
            }
            TxnKind::Request(req) => match self.write(req, txn, zxid, &mut triggers) {
                Ok((_, body)) => (ErrorCode::OK, body),
                Err(err) => (err, Response::Empty),
            },
        };
        triggers.sort();
        Expected {
            zxid,
            err,
            body,
            created_session,
            triggers,
        }
    }

    /// Multi is all or nothing: the operations run in order on a copy, each seeing what the
    /// earlier ones did; the copy replaces the model only if every one of them succeeded.
    fn multi(
        &mut self,
        ops: &[Request],
        txn: &Txn,
        zxid: i64,
        triggers: &mut Vec<Trigger>,
    ) -> Response {
        let mut scratch = self.clone();
        let mut scratch_triggers = Vec::new();
        let mut results = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            match scratch.write(op, txn, zxid, &mut scratch_triggers) {
                Ok((op, response)) => results.push(OpResult::Ok { op, response }),
                Err(err) => {
                    // `DataTree.processTxn`: OK for the operations before the one that failed,
                    // its own error for it, RuntimeInconsistency for those after.
                    let failed = (0..ops.len())
                        .map(|j| {
                            OpResult::Error(match j.cmp(&i) {
                                std::cmp::Ordering::Less => ErrorCode::OK,
                                std::cmp::Ordering::Equal => err,
                                std::cmp::Ordering::Greater => ErrorCode::RUNTIME_INCONSISTENCY,
                            })
                        })
                        .collect();
                    return Response::Multi(failed);
                }
            }
        }
        *self = scratch;
        triggers.append(&mut scratch_triggers);
        Response::Multi(results)
    }

    /// One write: its result type (as a multi reports it) and its reply body. A failing write
    /// changes nothing: every check comes before the first change.
    fn write(
        &mut self,
        req: &Request,
        txn: &Txn,
        zxid: i64,
        triggers: &mut Vec<Trigger>,
    ) -> WriteResult {
        match req {
            Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) => {
                self.create(req.op(), r, -1, txn, zxid, triggers)
            }
            Request::CreateTtl(r) => {
                let plain = CreateRequest {
                    path: r.path.clone(),
                    data: r.data.clone(),
                    acl: r.acl.clone(),
                    flags: r.flags,
                };
                self.create(OpCode::CreateTtl, &plain, r.ttl, txn, zxid, triggers)
            }
            Request::Delete(r) => {
                self.delete(&r.path, r.version, &txn.auth, zxid, triggers)?;
                Ok((OpCode::Delete, Response::Empty))
            }
            Request::SetData(r) => {
                if !valid_path(&r.path) {
                    return Err(ErrorCode::BAD_ARGUMENTS);
                }
                let n = self.nodes.get(&r.path).ok_or(ErrorCode::NO_NODE)?;
                if !permits(&n.acl, WRITE, &txn.auth) {
                    return Err(ErrorCode::NO_AUTH);
                }
                check_version(r.version, n.version)?;
                let n = self.nodes.get_mut(&r.path).expect("checked above");
                n.data = r.data.clone();
                n.version += 1;
                n.mzxid = zxid;
                n.mtime = txn.time_ms;
                triggers.push(trigger(EventType::NodeDataChanged, &r.path));
                Ok((OpCode::SetData, Response::Stat(self.stat(&r.path))))
            }
            Request::SetAcl(r) => {
                if !valid_path(&r.path) {
                    return Err(ErrorCode::BAD_ARGUMENTS);
                }
                let fixed = fixup_acl(&r.acl, &txn.auth)?;
                let n = self.nodes.get(&r.path).ok_or(ErrorCode::NO_NODE)?;
                if !permits(&n.acl, ADMIN, &txn.auth) {
                    return Err(ErrorCode::NO_AUTH);
                }
                check_version(r.version, n.aversion)?;
                let n = self.nodes.get_mut(&r.path).expect("checked above");
                n.acl = fixed;
                n.aversion += 1;
                Ok((OpCode::SetAcl, Response::Stat(self.stat(&r.path))))
            }
            Request::Check(r) => {
                self.check(r, &txn.auth)?;
                Ok((OpCode::Check, Response::Empty))
            }
            other => unreachable!("the model test never sends {other:?} as a write"),
        }
    }

    /// `pRequest2TxnCreate`, its checks in ZooKeeper's order.
    fn create(
        &mut self,
        op: OpCode,
        r: &CreateRequest,
        ttl: i64,
        txn: &Txn,
        zxid: i64,
        triggers: &mut Vec<Trigger>,
    ) -> WriteResult {
        let mode = Mode::from_flags(r.flags).ok_or(ErrorCode::BAD_ARGUMENTS)?;
        if mode.ttl && !self.ttl_enabled {
            return Err(ErrorCode::UNIMPLEMENTED);
        }
        // `EphemeralType.validateTTL`: a TTL mode needs a TTL in 1..2^40, any other mode none;
        // and createTTL makes TTL nodes only.
        let ttl_ok = if mode.ttl {
            (1..1 << 40).contains(&ttl)
        } else {
            ttl < 0
        };
        if !ttl_ok || (op == OpCode::CreateTtl && !mode.ttl) {
            return Err(ErrorCode::BAD_ARGUMENTS);
        }
        // `validatePathForCreate`.
        if !r.path.contains('/') || r.path.contains('\0') {
            return Err(ErrorCode::BAD_ARGUMENTS);
        }
        let acl = fixup_acl(&r.acl, &txn.auth)?;
        let parent_path = parent_of(&r.path).to_owned();
        let parent = self.nodes.get(&parent_path).ok_or(ErrorCode::NO_NODE)?;
        if !permits(&parent.acl, CREATE, &txn.auth) {
            return Err(ErrorCode::NO_AUTH);
        }
        let mut path = r.path.clone();
        if mode.sequential {
            path.push_str(&format!("{:010}", parent.cversion));
        }
        if !valid_path(&path) {
            return Err(ErrorCode::BAD_ARGUMENTS);
        }
        if self.nodes.contains_key(&path) {
            return Err(ErrorCode::NODE_EXISTS);
        }
        if matches!(parent.kind, Kind::Ephemeral(_)) {
            return Err(ErrorCode::NO_CHILDREN_FOR_EPHEMERALS);
        }
        // Warden keeps ClickHouse Keeper's rule that /keeper belongs to the server (only a
        // super user gets this far: the nodes there are read-only).
        if is_within(&parent_path, "/keeper") {
            return Err(ErrorCode::BAD_ARGUMENTS);
        }
        // The node's type follows the opcode, as `DataTree.processTxn` does for each txn type.
        let kind = match op {
            OpCode::CreateContainer => Kind::Container,
            OpCode::CreateTtl => Kind::Ttl(ttl),
            _ if mode.ephemeral => Kind::Ephemeral(txn.session_id),
            _ => Kind::Persistent,
        };
        let parent = self.nodes.get_mut(&parent_path).expect("checked above");
        parent.cversion += 1;
        parent.pzxid = zxid;
        self.nodes.insert(
            path.clone(),
            Node {
                data: r.data.clone(),
                acl,
                kind,
                czxid: zxid,
                mzxid: zxid,
                pzxid: zxid,
                ctime: txn.time_ms,
                mtime: txn.time_ms,
                version: 0,
                cversion: 0,
                aversion: 0,
            },
        );
        triggers.push(trigger(EventType::NodeCreated, &path));
        triggers.push(trigger(EventType::NodeChildrenChanged, &parent_path));
        Ok(match op {
            OpCode::Create => (OpCode::Create, Response::Create { path }),
            // create2, createContainer and createTTL all answer with a Stat, and a multi
            // reports their results as create2.
            _ => {
                let stat = self.stat(&path);
                (OpCode::Create2, Response::Create2 { path, stat })
            }
        })
    }

    fn delete(
        &mut self,
        path: &str,
        version: i32,
        auth: &[Id],
        zxid: i64,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ErrorCode> {
        if !valid_path(path) || is_undeletable(path) {
            return Err(ErrorCode::BAD_ARGUMENTS);
        }
        let parent = self.nodes.get(parent_of(path)).ok_or(ErrorCode::NO_NODE)?;
        if !permits(&parent.acl, DELETE, auth) {
            return Err(ErrorCode::NO_AUTH);
        }
        let node = self.nodes.get(path).ok_or(ErrorCode::NO_NODE)?;
        check_version(version, node.version)?;
        if !self.children(path).is_empty() {
            return Err(ErrorCode::NOT_EMPTY);
        }
        self.remove(path, zxid, triggers);
        Ok(())
    }

    fn check(&self, r: &CheckVersionRequest, auth: &[Id]) -> Result<(), ErrorCode> {
        if !valid_path(&r.path) {
            return Err(ErrorCode::BAD_ARGUMENTS);
        }
        let n = self.nodes.get(&r.path).ok_or(ErrorCode::NO_NODE)?;
        if !permits(&n.acl, READ, auth) {
            return Err(ErrorCode::NO_AUTH);
        }
        check_version(r.version, n.version)
    }

    /// `DataTree.deleteNode`: the parent's pzxid moves, its cversion does not (3.5+).
    fn remove(&mut self, path: &str, zxid: i64, triggers: &mut Vec<Trigger>) {
        self.nodes.remove(path).expect("removed node exists");
        let parent_path = parent_of(path).to_owned();
        self.nodes
            .get_mut(&parent_path)
            .expect("a node's parent exists")
            .pzxid = zxid;
        triggers.push(trigger(EventType::NodeDeleted, path));
        triggers.push(trigger(EventType::NodeChildrenChanged, &parent_path));
    }

    /// The session goes, and every ephemeral node it owns goes with it, all under one zxid.
    fn close_session(&mut self, session: i64, zxid: i64, triggers: &mut Vec<Trigger>) {
        if self.sessions.remove(&session).is_none() {
            return;
        }
        let owned: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.kind == Kind::Ephemeral(session))
            .map(|(p, _)| p.clone())
            .collect();
        for p in owned {
            self.remove(&p, zxid, triggers);
        }
    }

    /// The leader's cleanup of a container or TTL node. Raft commits it some time after the
    /// leader proposed it, so the node is judged again as it is now: it must still be there,
    /// still childless, and a container or a TTL node whose TTL has passed since its last
    /// change (`ContainerManager`'s test); otherwise nothing happens.
    fn delete_container(
        &mut self,
        path: &str,
        now: i64,
        zxid: i64,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ErrorCode> {
        let n = self.nodes.get(path).ok_or(ErrorCode::NO_NODE)?;
        if !self.children(path).is_empty() {
            return Err(ErrorCode::NOT_EMPTY);
        }
        let due = match n.kind {
            Kind::Container => true,
            Kind::Ttl(ttl) => now - n.mtime > ttl,
            Kind::Persistent | Kind::Ephemeral(_) => false,
        };
        if !due {
            return Err(ErrorCode::BAD_VERSION);
        }
        self.remove(path, zxid, triggers);
        Ok(())
    }

    /// `FinalRequestProcessor`'s read cases. A read takes no zxid.
    pub fn read(&self, session: i64, auth: &[Id], req: &Request) -> (ErrorCode, Response) {
        match self.read_one(session, auth, req) {
            Ok(body) => (ErrorCode::OK, body),
            Err(err) => (err, Response::Empty),
        }
    }

    fn read_one(&self, session: i64, auth: &[Id], req: &Request) -> Result<Response, ErrorCode> {
        match req {
            // exists needs READ on a node that is there (ZooKeeper 3.9.5 answers NoAuth, golden
            // vector java_acl); a missing node is NoNode with nothing to check.
            Request::Exists(r) => {
                if r.path.contains('\0') {
                    return Err(ErrorCode::BAD_ARGUMENTS);
                }
                self.readable(&r.path, auth)?;
                Ok(Response::Stat(self.stat(&r.path)))
            }
            Request::GetData(r) => {
                let n = self.readable(&r.path, auth)?;
                Ok(Response::GetData {
                    data: n.data.clone(),
                    stat: self.stat(&r.path),
                })
            }
            Request::GetChildren(r) => {
                self.readable(&r.path, auth)?;
                Ok(Response::GetChildren {
                    children: self.children(&r.path).into_iter().collect(),
                })
            }
            Request::GetChildren2(r) => {
                self.readable(&r.path, auth)?;
                Ok(Response::GetChildren2 {
                    children: self.children(&r.path).into_iter().collect(),
                    stat: self.stat(&r.path),
                })
            }
            // READ or ADMIN lets a caller see the ACL; without ADMIN digest hashes are hidden
            // (`id.replaceAll(":.*", ":x")`).
            Request::GetAcl(r) => {
                let n = self.nodes.get(&r.path).ok_or(ErrorCode::NO_NODE)?;
                if !permits(&n.acl, READ | ADMIN, auth) {
                    return Err(ErrorCode::NO_AUTH);
                }
                let acl = if permits(&n.acl, ADMIN, auth) {
                    n.acl.clone()
                } else {
                    n.acl
                        .iter()
                        .map(|a| match (a.id.scheme.as_str(), a.id.id.find(':')) {
                            ("digest", Some(colon)) => Acl {
                                perms: a.perms,
                                id: Id::new("digest", format!("{}:x", &a.id.id[..colon])),
                            },
                            _ => a.clone(),
                        })
                        .collect()
                };
                Ok(Response::GetAcl {
                    acl,
                    stat: self.stat(&r.path),
                })
            }
            Request::GetAllChildrenNumber(r) => {
                self.readable(&r.path, auth)?;
                Ok(Response::AllChildrenNumber {
                    total: self.descendants(&r.path) as i32,
                })
            }
            // A blank prefix or "/" (after Java's trim) means all; any other prefix is
            // matched as sent, untrimmed (`p.startsWith(prefixPath)`).
            Request::GetEphemerals(r) => {
                let trimmed = r.path.trim_matches(|c: char| c <= ' ');
                let paths = self
                    .nodes
                    .iter()
                    .filter(|(_, n)| n.kind == Kind::Ephemeral(session))
                    .map(|(p, _)| p.clone())
                    .filter(|p| trimmed.is_empty() || trimmed == "/" || p.starts_with(&r.path))
                    .collect();
                Ok(Response::GetEphemerals { paths })
            }
            other => unreachable!("the model test never sends {other:?} as a read"),
        }
    }

    /// NoNode before NoAuth; READ needed.
    fn readable(&self, path: &str, auth: &[Id]) -> Result<&Node, ErrorCode> {
        let n = self.nodes.get(path).ok_or(ErrorCode::NO_NODE)?;
        if permits(&n.acl, READ, auth) {
            Ok(n)
        } else {
            Err(ErrorCode::NO_AUTH)
        }
    }
}

const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;

fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
    Acl {
        perms,
        id: Id::new(scheme, id),
    }
}

/// A change watchers may be told of, as the model sees it: the event and the path. (Which
/// ACL governs its delivery is the server's business, checked by the differential test.)
pub type Trigger = (EventType, String);

fn trigger(event: EventType, path: &str) -> Trigger {
    (event, path.to_owned())
}

/// `CreateMode.fromFlag`, reduced to the three properties that matter here.
struct Mode {
    sequential: bool,
    ephemeral: bool,
    ttl: bool,
}

impl Mode {
    fn from_flags(flags: i32) -> Option<Mode> {
        let (sequential, ephemeral, ttl) = match flags {
            0 | 4 => (false, false, false),
            1 => (false, true, false),
            2 => (true, false, false),
            3 => (true, true, false),
            5 => (false, false, true),
            6 => (true, false, true),
            _ => return None,
        };
        Some(Mode {
            sequential,
            ephemeral,
            ttl,
        })
    }
}

fn check_version(expected: i32, current: i32) -> Result<(), ErrorCode> {
    if expected == -1 || expected == current {
        Ok(())
    } else {
        Err(ErrorCode::BAD_VERSION)
    }
}

/// Java's `path.substring(0, path.lastIndexOf('/'))`, where the empty string is the root's
/// alias. The caller has made sure there is a slash.
fn parent_of(path: &str) -> &str {
    match path.rfind('/').expect("a path with a slash") {
        0 => "/",
        i => &path[..i],
    }
}

fn is_within(path: &str, root: &str) -> bool {
    root == "/" || path == root || path.starts_with(&format!("{root}/"))
}

/// `DataTree.isSpecialPath`, plus everything under ClickHouse Keeper's /keeper.
fn is_undeletable(path: &str) -> bool {
    ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"].contains(&path)
        || is_within(path, "/keeper")
}

/// `PathUtils.validatePath`, character by character over UTF-16 units as Java sees them.
fn valid_path(path: &str) -> bool {
    let c: Vec<u16> = path.encode_utf16().collect();
    let slash = u16::from(b'/');
    let dot = u16::from(b'.');
    if c.is_empty() || c[0] != slash {
        return false;
    }
    if c.len() == 1 {
        return true;
    }
    if c[c.len() - 1] == slash {
        return false;
    }
    let ends_name = |i: usize| i + 1 == c.len() || c[i + 1] == slash;
    for i in 1..c.len() {
        let (ch, last) = (c[i], c[i - 1]);
        let bad = if ch == 0 || (ch == slash && last == slash) {
            true
        } else if ch == dot && last == dot {
            c[i - 2] == slash && ends_name(i)
        } else if ch == dot {
            last == slash && ends_name(i)
        } else {
            (0x01..=0x1f).contains(&ch)
                || (0x7f..=0x9f).contains(&ch)
                || (0xd800..=0xf8ff).contains(&ch)
                || ch >= 0xfff0
        };
        if bad {
            return false;
        }
    }
    true
}

/// `PrepRequestProcessor.fixupACL`.
fn fixup_acl(requested: &[Acl], auth: &[Id]) -> Result<Vec<Acl>, ErrorCode> {
    let mut unique: Vec<&Acl> = Vec::new();
    for a in requested {
        if !unique.contains(&a) {
            unique.push(a);
        }
    }
    if unique.is_empty() {
        return Err(ErrorCode::INVALID_ACL);
    }
    let mut out = Vec::new();
    for a in unique {
        let id = &a.id;
        if id.scheme == "world" && id.id == "anyone" {
            out.push(a.clone());
        } else if id.scheme == "auth" {
            // Expands to every id whose provider says it was authenticated: digest and sasl
            // yes; ip no; super has no provider at all.
            let proved: Vec<&Id> = auth
                .iter()
                .filter(|who| who.scheme == "digest" || who.scheme == "sasl")
                .collect();
            if proved.is_empty() {
                return Err(ErrorCode::INVALID_ACL);
            }
            out.extend(proved.into_iter().map(|who| Acl {
                perms: a.perms,
                id: who.clone(),
            }));
        } else {
            // The ip, digest and SASL providers are installed (the server refuses sasl ids
            // before the state machine when SASL is not configured); each judges its own ids.
            let valid = match id.scheme.as_str() {
                "digest" => java_split_colon(&id.id).len() == 2,
                "ip" => ip_expression(&id.id).is_some(),
                "sasl" => kerberos_name(&id.id),
                _ => false,
            };
            if !valid {
                return Err(ErrorCode::INVALID_ACL);
            }
            out.push(a.clone());
        }
    }
    Ok(out)
}

/// `new KerberosName(id)` does not throw: no '@' at all, or the whole id matches
/// `([^/@]*)(/([^/@]*))?@([^/@]*)`.
fn kerberos_name(id: &str) -> bool {
    if !id.contains('@') {
        return true;
    }
    let (principal, realm) = id.split_once('@').expect("has '@'");
    let service_and_host: Vec<&str> = principal.split('/').collect();
    service_and_host.len() <= 2 && !realm.contains(['/', '@'])
}

/// Java's `s.split(":")`: trailing empty strings are dropped.
fn java_split_colon(s: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split(':').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    parts
}

/// `ZooKeeperServer.checkACL`.
fn permits(acl: &[Acl], perm: i32, auth: &[Id]) -> bool {
    if auth.iter().any(|who| who.scheme == "super") {
        return true;
    }
    acl.iter().filter(|a| a.perms & perm != 0).any(|a| {
        if a.id.scheme == "world" && a.id.id == "anyone" {
            return true;
        }
        auth.iter()
            .filter(|who| who.scheme == a.id.scheme)
            .any(|who| match a.id.scheme.as_str() {
                "digest" => who.id == a.id.id,
                "ip" => ip_matches(&a.id.id, &who.id),
                "sasl" => who.id == "super" || who.id == a.id.id,
                _ => false,
            })
    })
}

/// `IPAuthenticationProvider.isValid`: an IPv4 address and an optional prefix length, each
/// number read by Java's `Integer.parseInt`.
fn ip_expression(expr: &str) -> Option<([u8; 4], u32)> {
    let (addr, bits) = match expr.split_once('/') {
        Some((addr, bits)) => (addr, Some(bits)),
        None => (expr, None),
    };
    let addr = ipv4(addr)?;
    let bits = match bits {
        None => 32,
        Some(b) => u32::try_from(java_parse_int(b)?)
            .ok()
            .filter(|b| *b <= 32)?,
    };
    Some((addr, bits))
}

fn ipv4(s: &str) -> Option<[u8; 4]> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut out = [0u8; 4];
    for (o, p) in out.iter_mut().zip(parts) {
        *o = u8::try_from(java_parse_int(p)?).ok()?;
    }
    Some(out)
}

/// `Integer.parseInt` for ASCII input: an optional sign, then at least one digit.
fn java_parse_int(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i32>().ok()
}

/// `IPAuthenticationProvider.matches`: both addresses masked to the prefix length.
fn ip_matches(expr: &str, who: &str) -> bool {
    let (Some((net, bits)), Some(addr)) = (ip_expression(expr), ipv4(who)) else {
        return false;
    };
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    u32::from_be_bytes(net) & mask == u32::from_be_bytes(addr) & mask
}
