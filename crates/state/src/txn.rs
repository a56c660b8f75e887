//! What the state machine consumes and what it answers.

use std::sync::Arc;

use warden_proto::{Acl, ErrorCode, EventType, Id, Request, Response};

use crate::mirror::{MirroredTxn, ZkTree};
use crate::quota::QuotaBreach;

/// One replicated transaction. Everything `apply` needs arrives inside it: the session, the
/// identities the connection authenticated as, and the time, stamped by the leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    pub session_id: i64,
    /// Milliseconds since the Unix epoch, as ZooKeeper's ctime/mtime.
    pub time_ms: i64,
    /// The connection's identities (ip, digest, super), checked against ACLs.
    pub auth: Vec<Id>,
    /// Whether hard quota limits hold for this write: the `enforceQuota` of the leader that
    /// proposed it, stamped as it proposes (ZooKeeper checks quotas in its leader's prep
    /// step), so that every replica decides alike whatever its own setting.
    pub enforce_quota: bool,
    pub kind: TxnKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnKind {
    /// A new session; the state machine assigns its id.
    CreateSession { timeout_ms: i32, password: Vec<u8> },
    /// A client's closeSession or the leader's expiry of a silent session.
    CloseSession,
    /// A client's write request (create, delete, setData, setACL, multi, check, ...).
    Request(Request),
    /// The leader's cleanup of an empty container or an expired TTL node.
    DeleteContainer { path: String },
    /// The leader changed the cluster's membership (a client's reconfig, or its own
    /// reconciliation): `members` is the new membership in ZooKeeper's dynamic-config text, one
    /// `server.N=...` line each; /zookeeper/config gets it with a `version=` line (the zxid of
    /// this transaction, in hex), and a client that asked gets the new config and its Stat.
    Reconfigured { members: String },
    /// A write the leader refused before the state machine saw it (a reconfig that could not be
    /// carried out): it takes a zxid and answers `err`, as ZooKeeper's error transactions do.
    Refused { err: ErrorCode },
    /// The whole state replaced by another (the admin `restore` command): `snapshot` is that
    /// state in Warden's snapshot encoding ([`crate::snapshot::encode`]), which the leader
    /// decoded before it proposed it. The running cluster keeps its own membership
    /// (/zookeeper/config), the zxid never goes back, and a session in both tables keeps its
    /// password, so its client can resume it.
    Restore { snapshot: Vec<u8> },
    /// The tree of the ZooKeeper ensemble the leader follows replaces the state: mirroring
    /// starts (crate::mirror).
    MirrorReset(ZkTree),
    /// A transaction the followed ensemble committed.
    Mirrored(MirroredTxn),
    /// Mirroring ends; Warden takes writes from ZooKeeper's next zxid on.
    Promote,
}

/// A change a client may be watching: the event type, the path it happened at, and the ACL of
/// the node at that path when it happened (for a deletion, the deleted node's). Since
/// ZooKeeper 3.9.2 (CVE-2024-23944) a watcher is only told of a change to a node it may READ.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Trigger {
    pub event: EventType,
    pub path: String,
    pub acl: Arc<[Acl]>,
}

/// The answer to one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The zxid this transaction was given.
    pub zxid: i64,
    /// The reply header's error code; the body is only sent when it is OK, or for a multi.
    pub err: ErrorCode,
    pub body: Response,
    /// The id given to a new session.
    pub created_session: Option<i64>,
    /// Changes watchers may be told of, in the order they happened.
    pub triggers: Vec<Trigger>,
    /// Container nodes whose last child went in this transaction: cleanup candidates.
    pub emptied_containers: Vec<String>,
    /// Quota limits the transaction's writes went over (refused if hard), for the log and
    /// the metrics of the server that answers the client.
    pub quota_breaches: Vec<QuotaBreach>,
}

impl Outcome {
    pub(crate) fn new(zxid: i64) -> Self {
        Outcome {
            zxid,
            err: ErrorCode::OK,
            body: Response::Empty,
            created_session: None,
            triggers: Vec::new(),
            emptied_containers: Vec::new(),
            quota_breaches: Vec::new(),
        }
    }
}
