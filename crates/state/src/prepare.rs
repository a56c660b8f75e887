//! Validation of writes, as ZooKeeper's `PrepRequestProcessor` does it: each operation is
//! checked against the tree as earlier operations of the same multi would leave it (a
//! [`View`]), and turns into a resolved [`Change`] that cannot fail when committed.
//!
//! Quota hard limits are checked here too, where ZooKeeper's leader checks them; as every
//! replica validates the same transaction against the same tree, they all agree.

use std::sync::Arc;

use hashbrown::HashMap;
use warden_proto::request::{
    CheckStatRequest, CheckVersionRequest, CreateRequest, DeleteRequest, RemoveRecursiveRequest,
};
use warden_proto::{Acl, CreateMode, ErrorCode, Id, OpCode, Request};

use crate::acl;
use crate::path;
use crate::quota::{self, Measure, QuotaBreach, StatsTrack};
use crate::tree::{self, DataTree, NodeId, NodeKind};

/// What validation needs of a node.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeral_owner: i64,
    pub num_children: usize,
    pub acl: Arc<[Acl]>,
    /// Bytes of data, as a quota counts them.
    pub data_len: i64,
}

/// The tree as the operations prepared so far would leave it.
pub struct View<'a> {
    tree: &'a DataTree,
    pending: HashMap<String, Option<NodeInfo>>,
    removed_subtrees: Vec<String>,
    /// Nodes and bytes the operations prepared so far add to each quota root.
    quota_pending: HashMap<String, (i64, i64)>,
    /// Limits the operations prepared so far went over.
    pub quota_breaches: Vec<QuotaBreach>,
}

impl<'a> View<'a> {
    pub fn new(tree: &'a DataTree) -> Self {
        View {
            tree,
            pending: HashMap::new(),
            removed_subtrees: Vec::new(),
            quota_pending: HashMap::new(),
            quota_breaches: Vec::new(),
        }
    }

    pub fn get(&self, path: &str) -> Option<NodeInfo> {
        self.find(path).map(|(info, _)| info)
    }

    /// [`View::get`], with the node's id when the view takes it from the tree: a node no
    /// earlier operation of this multi changed, and which none of them can have moved or
    /// removed (that would have changed it in the view), so the id still names it when this
    /// operation commits after theirs.
    fn find(&self, path: &str) -> Option<(NodeInfo, Option<NodeId>)> {
        if let Some(p) = self.pending.get(path) {
            return p.clone().map(|info| (info, None));
        }
        if self.removed(path) {
            return None;
        }
        let id = self.tree.lookup(path)?;
        let n = self.tree.node(id);
        let s = n.stat();
        let info = NodeInfo {
            version: s.version,
            cversion: s.cversion,
            aversion: s.aversion,
            ephemeral_owner: s.ephemeral_owner,
            num_children: n.num_children(),
            acl: self.tree.acl_table().get(n.acl_id()).clone(),
            data_len: n.data().map_or(0, |d| d.len() as i64),
        };
        Some((info, Some(id)))
    }

    /// Whether the node at `path`, named `name`, exists in the view; `parent` is its parent's
    /// id from [`View::find`], if the view gave one, so that the tree is asked for one name
    /// rather than the whole path. ("/" splits into the root and an empty name: it is asked
    /// for as a path.)
    fn has_child(&self, parent: Option<NodeId>, path: &str, name: &str) -> bool {
        let Some(parent) = parent.filter(|_| !name.is_empty()) else {
            return self.get(path).is_some();
        };
        match self.pending.get(path) {
            Some(pending) => pending.is_some(),
            None => !self.removed(path) && self.tree.child(parent, name).is_some(),
        }
    }

    /// Whether an earlier removeRecursive of this multi took `path` away.
    fn removed(&self, path: &str) -> bool {
        self.removed_subtrees
            .iter()
            .any(|r| path::is_within(path, r))
    }

    /// The Stat clients see, for a node as committed and untouched by this multi; nodes the
    /// multi created or changed have no committed Stat yet.
    pub fn wire_stat(&self, path: &str) -> Option<warden_proto::Stat> {
        if self.pending.contains_key(path) || self.removed(path) {
            return None;
        }
        self.tree.get(path).map(|n| n.wire_stat())
    }

    /// Records `info`, the view's node at `path` as [`View::get`] gave it, changed by `f`.
    fn set(&mut self, path: &str, mut info: NodeInfo, f: impl FnOnce(&mut NodeInfo)) {
        f(&mut info);
        self.pending.insert(path.to_owned(), Some(info));
    }
}

/// Who is asking, and when.
pub struct Caller<'a> {
    pub session_id: i64,
    pub auth: &'a [Id],
    pub ttl_enabled: bool,
    /// Whether hard quota limits refuse writes (the transaction's `enforce_quota`).
    pub enforce_quota: bool,
}

/// A validated write, ready to commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Create {
        /// The opcode whose reply shape to use (create answers a path; the others a Stat too).
        op: OpCode,
        path: String,
        data: Option<Vec<u8>>,
        acl: Arc<[Acl]>,
        ephemeral_owner: i64,
        parent_cversion: i32,
        /// The parent's id, when validation took it from the tree ([`View::find`]); else
        /// the commit looks the parent up.
        parent: Option<NodeId>,
    },
    Delete {
        op: OpCode,
        path: String,
    },
    SetData {
        path: String,
        data: Option<Vec<u8>>,
    },
    SetAcl {
        path: String,
        acl: Vec<Acl>,
    },
    /// A check that passed, or a ClickHouse operation that found nothing to do.
    Nothing {
        op: OpCode,
        path: String,
    },
    RemoveRecursive {
        path: String,
    },
}

/// Paths no client may delete (`DataTree.isSpecialPath`, plus ClickHouse Keeper's /keeper).
pub fn is_system_path(path: &str) -> bool {
    matches!(
        path,
        "/" | "/zookeeper" | "/zookeeper/quota" | "/zookeeper/config"
    ) || path::is_within(path, crate::system::KEEPER)
}

fn valid(path: &str) -> Result<(), ErrorCode> {
    path::validate(path).map_err(|_| ErrorCode::BAD_ARGUMENTS)
}

fn check_acl(node: &NodeInfo, perm: i32, caller: &Caller<'_>) -> Result<(), ErrorCode> {
    if acl::permits(&node.acl, perm, caller.auth) {
        Ok(())
    } else {
        Err(ErrorCode::NO_AUTH)
    }
}

fn check_version(expected: i32, current: i32) -> Result<(), ErrorCode> {
    if expected == -1 || expected == current {
        Ok(())
    } else {
        Err(ErrorCode::BAD_VERSION)
    }
}

impl View<'_> {
    /// Records what a prepared write adds to the quota covering `path`.
    fn charge_quota(&mut self, path: &str, count: i64, bytes: i64) {
        if let Some(root) = self.tree.quota_roots().covering(path) {
            let pending = self.quota_pending.entry(root.to_owned()).or_default();
            *pending = (
                pending.0.saturating_add(count),
                pending.1.saturating_add(bytes),
            );
        }
    }
}

/// `ZooKeeperServer.checkQuota`: a write that adds `count` nodes and `bytes` bytes under a
/// quota is refused with QuotaExceeded if it takes the usage over a hard limit; over a soft
/// limit it goes ahead, noted. The usage is the stats node's plus what earlier operations of
/// the same multi add (ZooKeeper's leader reads only the committed stats, so a multi could
/// overshoot there). Nothing is checked unless the leader enforces quotas.
fn check_quota(
    path: &str,
    count: i64,
    bytes: i64,
    caller: &Caller<'_>,
    view: &mut View<'_>,
) -> Result<(), ErrorCode> {
    if !caller.enforce_quota {
        return Ok(());
    }
    let tree = view.tree;
    let Some(root) = tree.quota_roots().covering(path) else {
        return Ok(());
    };
    let read = |p: &str| {
        tree.get(p)
            .map(|n| StatsTrack::parse(n.data().unwrap_or_default()))
    };
    let (Some(limits), Some(usage)) = (
        read(&quota::limits_path(root)),
        read(&quota::stats_path(root)),
    ) else {
        return Ok(());
    };
    let (pending_count, pending_bytes) = view.quota_pending.get(root).copied().unwrap_or_default();
    let checks = [
        (
            Measure::Count,
            count,
            usage.count().saturating_add(pending_count),
            limits.count_hard_limit(),
            limits.count(),
        ),
        (
            Measure::Bytes,
            bytes,
            usage.bytes().saturating_add(pending_bytes),
            limits.byte_hard_limit(),
            limits.bytes(),
        ),
    ];
    for (measure, diff, current, hard_limit, soft_limit) in checks {
        if diff == 0 || (hard_limit < 0 && soft_limit < 0) {
            continue;
        }
        let hard = hard_limit > -1;
        let limit = if hard { hard_limit } else { soft_limit };
        // Saturating: the usage and the limits are whatever a client wrote there.
        let usage = current.saturating_add(diff);
        if usage > limit {
            view.quota_breaches.push(QuotaBreach {
                root: root.to_owned(),
                namespace: quota::top_namespace(path).map(str::to_owned),
                measure,
                usage,
                limit,
                hard,
            });
            if hard {
                return Err(ErrorCode::QUOTA_EXCEEDED);
            }
        }
    }
    view.charge_quota(path, count, bytes);
    Ok(())
}

/// Validates one write operation against `view` and records its effect there.
pub fn prepare(
    req: &Request,
    caller: &Caller<'_>,
    view: &mut View<'_>,
) -> Result<Change, ErrorCode> {
    match req {
        Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) => {
            create(req.op(), r, -1, caller, view)
        }
        Request::CreateTtl(r) => {
            let plain = CreateRequest {
                path: r.path.clone(),
                data: r.data.clone(),
                acl: r.acl.clone(),
                flags: r.flags,
            };
            create(OpCode::CreateTtl, &plain, r.ttl, caller, view)
        }
        Request::CreateIfNotExists(r)
            if CreateMode::from_flags(r.flags).is_some_and(CreateMode::is_sequential) =>
        {
            Err(ErrorCode::BAD_ARGUMENTS)
        }
        Request::CreateIfNotExists(r) => {
            match create(OpCode::CreateIfNotExists, r, -1, caller, view) {
                Err(ErrorCode::NODE_EXISTS) => Ok(Change::Nothing {
                    op: OpCode::CreateIfNotExists,
                    path: r.path.clone(),
                }),
                other => other,
            }
        }
        Request::Delete(r) => delete(OpCode::Delete, &r.path, r.version, caller, view),
        Request::SetData(r) => {
            valid(&r.path)?;
            let node = view.get(&r.path).ok_or(ErrorCode::NO_NODE)?;
            check_acl(&node, acl::WRITE, caller)?;
            let data_len = r.data.as_ref().map_or(0, |d| d.len() as i64);
            check_quota(&r.path, 0, data_len - node.data_len, caller, view)?;
            check_version(r.version, node.version)?;
            view.set(&r.path, node, |n| {
                n.version = n.version.wrapping_add(1);
                n.data_len = data_len;
            });
            Ok(Change::SetData {
                path: r.path.clone(),
                data: r.data.clone(),
            })
        }
        Request::SetAcl(r) => {
            valid(&r.path)?;
            let acl = acl::fixup(&r.acl, caller.auth).map_err(|_| ErrorCode::INVALID_ACL)?;
            let node = view.get(&r.path).ok_or(ErrorCode::NO_NODE)?;
            check_acl(&node, acl::ADMIN, caller)?;
            check_version(r.version, node.aversion)?;
            let shared: Arc<[Acl]> = acl.clone().into();
            view.set(&r.path, node, |n| {
                n.aversion = n.aversion.wrapping_add(1);
                n.acl = shared;
            });
            Ok(Change::SetAcl {
                path: r.path.clone(),
                acl,
            })
        }
        Request::Check(r) => check(r, caller, view),
        Request::CheckNotExists(r) => check_not_exists(r, view),
        Request::RemoveRecursive(r) => remove_recursive(r, caller, view),
        Request::CheckStat(r) => check_stat(r, caller, view),
        Request::TryRemove(r) => try_remove(r, caller, view),
        // Membership changes are not the state machine's; without dynamic reconfiguration a
        // ZooKeeper server answers exactly this (golden vector java_reconfig).
        Request::Reconfig(_) => Err(ErrorCode::RECONFIG_DISABLED),
        _ => Err(ErrorCode::BAD_ARGUMENTS),
    }
}

/// Java's `%010d`: zero-padded to ten characters, the sign counted, so the parent's counter
/// after its signed 32-bit wrap gives "-2147483648".
pub fn sequence_suffix(counter: i32) -> String {
    format!("{counter:010}")
}

fn validate_ttl(mode: CreateMode, ttl: i64) -> Result<(), ErrorCode> {
    let ok = if mode.is_ttl() {
        (1..=tree::TTL_MAX_MS).contains(&ttl)
    } else {
        ttl < 0
    };
    if ok {
        Ok(())
    } else {
        Err(ErrorCode::BAD_ARGUMENTS)
    }
}

/// `PrepRequestProcessor.pRequest2TxnCreate`, check for check, in ZooKeeper's order.
fn create(
    op: OpCode,
    r: &CreateRequest,
    ttl: i64,
    caller: &Caller<'_>,
    view: &mut View<'_>,
) -> Result<Change, ErrorCode> {
    let mode = CreateMode::from_flags(r.flags).ok_or(ErrorCode::BAD_ARGUMENTS)?;
    if mode.is_ttl() && !caller.ttl_enabled {
        return Err(ErrorCode::UNIMPLEMENTED);
    }
    validate_ttl(mode, ttl)?;
    // createTTL makes TTL nodes only. ZooKeeper's `validateTTL` lets a non-TTL mode through
    // with a negative ttl, and its apply then throws in `TTL.toEphemeralOwner`; here the
    // marker would be `0xff.. | ttl`, which reads as an ephemeral owned by no session.
    if op == OpCode::CreateTtl && !mode.is_ttl() {
        return Err(ErrorCode::BAD_ARGUMENTS);
    }
    if r.path.contains('\0') {
        return Err(ErrorCode::BAD_ARGUMENTS);
    }
    let (parent_path, _) = path::split_parent(&r.path).ok_or(ErrorCode::BAD_ARGUMENTS)?;
    let acl: Arc<[Acl]> = acl::fixup(&r.acl, caller.auth)
        .map_err(|_| ErrorCode::INVALID_ACL)?
        .into();
    let (parent, parent_id) = view.find(parent_path).ok_or(ErrorCode::NO_NODE)?;
    check_acl(&parent, acl::CREATE, caller)?;
    let mut path = r.path.clone();
    if mode.is_sequential() {
        path.push_str(&sequence_suffix(parent.cversion));
    }
    valid(&path)?;
    let (_, name) = path::split_parent(&path).ok_or(ErrorCode::BAD_ARGUMENTS)?;
    if view.has_child(parent_id, &path, name) {
        return Err(ErrorCode::NODE_EXISTS);
    }
    if matches!(
        NodeKind::of_owner(parent.ephemeral_owner),
        NodeKind::Ephemeral(_)
    ) {
        return Err(ErrorCode::NO_CHILDREN_FOR_EPHEMERALS);
    }
    if path::is_within(parent_path, crate::system::KEEPER) {
        return Err(ErrorCode::BAD_ARGUMENTS);
    }
    let data_len = r.data.as_ref().map_or(0, |d| d.len() as i64);
    check_quota(&path, 1, data_len, caller, view)?;
    let parent_cversion = parent.cversion.wrapping_add(1);
    let ephemeral_owner = match op {
        OpCode::CreateContainer => tree::CONTAINER_OWNER,
        OpCode::CreateTtl => tree::ttl_owner(ttl),
        _ if mode.is_ephemeral() => caller.session_id,
        _ => 0,
    };
    view.set(parent_path, parent, |p| {
        p.num_children += 1;
        p.cversion = parent_cversion;
    });
    view.pending.insert(
        path.clone(),
        Some(NodeInfo {
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner,
            num_children: 0,
            acl: acl.clone(),
            data_len,
        }),
    );
    Ok(Change::Create {
        op,
        path,
        data: r.data.clone(),
        acl,
        ephemeral_owner,
        parent_cversion,
        parent: parent_id,
    })
}

/// `PrepRequestProcessor` for delete (and ClickHouse's tryRemove shape).
fn delete(
    op: OpCode,
    path: &str,
    version: i32,
    caller: &Caller<'_>,
    view: &mut View<'_>,
) -> Result<Change, ErrorCode> {
    valid(path)?;
    if is_system_path(path) {
        return Err(ErrorCode::BAD_ARGUMENTS);
    }
    let (parent_path, _) = path::split_parent(path).ok_or(ErrorCode::BAD_ARGUMENTS)?;
    let parent = view.get(parent_path).ok_or(ErrorCode::NO_NODE)?;
    check_acl(&parent, acl::DELETE, caller)?;
    let node = view.get(path).ok_or(ErrorCode::NO_NODE)?;
    check_version(version, node.version)?;
    if node.num_children > 0 {
        return Err(ErrorCode::NOT_EMPTY);
    }
    if caller.enforce_quota {
        view.charge_quota(path, -1, -node.data_len);
    }
    view.set(parent_path, parent, |p| p.num_children -= 1);
    view.pending.insert(path.to_owned(), None);
    Ok(Change::Delete {
        op,
        path: path.to_owned(),
    })
}

fn check(
    r: &CheckVersionRequest,
    caller: &Caller<'_>,
    view: &View<'_>,
) -> Result<Change, ErrorCode> {
    valid(&r.path)?;
    let node = view.get(&r.path).ok_or(ErrorCode::NO_NODE)?;
    check_acl(&node, acl::READ, caller)?;
    check_version(r.version, node.version)?;
    Ok(Change::Nothing {
        op: OpCode::Check,
        path: r.path.clone(),
    })
}

/// ClickHouse's checkStat: the version as check does, then each field of the given Stat
/// that is not -1 (a wildcard) against the node's Stat as clients see it.
fn check_stat(
    r: &CheckStatRequest,
    caller: &Caller<'_>,
    view: &View<'_>,
) -> Result<Change, ErrorCode> {
    valid(&r.path)?;
    if path::is_within(&r.path, crate::system::KEEPER) {
        return Err(ErrorCode::BAD_ARGUMENTS);
    }
    check(
        &CheckVersionRequest {
            path: r.path.clone(),
            version: r.version,
        },
        caller,
        view,
    )?;
    // A node this multi already changed has no committed Stat to compare with yet.
    let actual = view.wire_stat(&r.path).ok_or(ErrorCode::BAD_VERSION)?;
    let e = &r.stat;
    let longs = [
        (e.czxid, actual.czxid),
        (e.mzxid, actual.mzxid),
        (e.ctime, actual.ctime),
        (e.mtime, actual.mtime),
        (e.ephemeral_owner, actual.ephemeral_owner),
        (e.pzxid, actual.pzxid),
    ];
    let ints = [
        (e.version, actual.version),
        (e.cversion, actual.cversion),
        (e.aversion, actual.aversion),
        (e.data_length, actual.data_length),
        (e.num_children, actual.num_children),
    ];
    let matches = longs.iter().all(|&(want, got)| want == -1 || want == got)
        && ints.iter().all(|&(want, got)| want == -1 || want == got);
    if matches {
        Ok(Change::Nothing {
            op: OpCode::CheckStat,
            path: r.path.clone(),
        })
    } else {
        Err(ErrorCode::BAD_VERSION)
    }
}

/// ClickHouse's tryRemove: delete, where a missing parent or node, a version mismatch or
/// children make a silent no-op; a path under /keeper and a missing DELETE permission on the
/// parent are still errors.
fn try_remove(
    r: &DeleteRequest,
    caller: &Caller<'_>,
    view: &mut View<'_>,
) -> Result<Change, ErrorCode> {
    if path::is_within(&r.path, crate::system::KEEPER) {
        return Err(ErrorCode::BAD_ARGUMENTS);
    }
    match delete(OpCode::TryRemove, &r.path, r.version, caller, view) {
        Err(ErrorCode::NO_NODE | ErrorCode::BAD_VERSION | ErrorCode::NOT_EMPTY) => {
            Ok(Change::Nothing {
                op: OpCode::TryRemove,
                path: r.path.clone(),
            })
        }
        other => other,
    }
}

/// ClickHouse's checkNotExists: fails with NodeExists if the node is there (at `version`,
/// when one is given).
fn check_not_exists(r: &CheckVersionRequest, view: &View<'_>) -> Result<Change, ErrorCode> {
    valid(&r.path)?;
    match view.get(&r.path) {
        Some(node) if r.version == -1 || r.version == node.version => Err(ErrorCode::NODE_EXISTS),
        _ => Ok(Change::Nothing {
            op: OpCode::CheckNotExists,
            path: r.path.clone(),
        }),
    }
}

/// ClickHouse's removeRecursive: deletes a node and everything below it, refused with
/// NotEmpty when the subtree holds more than `remove_nodes_limit` nodes.
fn remove_recursive(
    r: &RemoveRecursiveRequest,
    caller: &Caller<'_>,
    view: &mut View<'_>,
) -> Result<Change, ErrorCode> {
    valid(&r.path)?;
    if is_system_path(&r.path) {
        return Err(ErrorCode::BAD_ARGUMENTS);
    }
    let (parent_path, _) = path::split_parent(&r.path).ok_or(ErrorCode::BAD_ARGUMENTS)?;
    let parent = view.get(parent_path).ok_or(ErrorCode::NO_NODE)?;
    check_acl(&parent, acl::DELETE, caller)?;
    view.get(&r.path).ok_or(ErrorCode::NO_NODE)?;
    // The subtree as committed; nodes this multi created under it are counted too. The limit
    // is an unsigned 32-bit count on the wire.
    let limit = r.remove_nodes_limit as u32 as usize;
    let mut count = 0usize;
    if let Some(id) = view.tree.lookup(&r.path) {
        let mut stack = vec![id];
        while let Some(id) = stack.pop() {
            count += 1;
            if count > limit {
                return Err(ErrorCode::NOT_EMPTY);
            }
            let n = view.tree.node(id);
            // Children this multi already deleted do not count (rebuilding their paths only
            // when the multi has pending changes at all).
            stack.extend(n.child_ids().filter(|&c| {
                view.pending.is_empty()
                    || view
                        .pending
                        .get(&view.tree.path_of(c))
                        .is_none_or(Option::is_some)
            }));
        }
    }
    count += view
        .pending
        .iter()
        .filter(|(p, info)| {
            info.is_some() && path::is_within(p, &r.path) && view.tree.lookup(p).is_none()
        })
        .count();
    if count > limit {
        return Err(ErrorCode::NOT_EMPTY);
    }
    let doomed: Vec<String> = view
        .pending
        .keys()
        .filter(|p| path::is_within(p, &r.path))
        .cloned()
        .collect();
    for p in doomed {
        view.pending.insert(p, None);
    }
    view.removed_subtrees.push(r.path.clone());
    view.set(parent_path, parent, |p| p.num_children -= 1);
    Ok(Change::RemoveRecursive {
        path: r.path.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Programmer's Guide, "Sequence Nodes -- Unique Naming": "The sequence number is a 10
    /// digits number with leading zeros... the counter used to store the next sequence number is
    /// a signed int (4bytes) maintained by the parent node, the counter will overflow when
    /// incremented beyond 2147483647 (resulting in a name "<path>-2147483648")."
    #[test]
    fn sequence_suffix_matches_java_format() {
        assert_eq!(sequence_suffix(0), "0000000000");
        assert_eq!(sequence_suffix(42), "0000000042");
        assert_eq!(sequence_suffix(i32::MAX), "2147483647");
        assert_eq!(sequence_suffix(i32::MAX.wrapping_add(1)), "-2147483648");
        assert_eq!(sequence_suffix(-1), "-000000001");
    }
}
