//! The tree as the console browses it. Every answer is bounded: children come in pages,
//! data is cut at a maximum, searches and subtree sizes stop after a number of nodes and say
//! so. A node's ACL applies to the console as to a client with the caller's ids: a node's data
//! and children need READ on it, its ACL READ or ADMIN (`State::read` answers both).

use std::collections::BinaryHeap;
use std::sync::Arc;

use axum::extract::{Extension, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use base64::Engine;
use serde_json::{Value, json};
use warden_proto::request::PathWatchRequest;
use warden_proto::{ErrorCode, Id, Request, Response as ZkResponse};
use warden_state::State as ZkState;
use warden_state::acl;
use warden_state::tree::{DataTree, NodeKind, NodeRef};

use super::{ApiError, Caller, Peer, Query, answer, stat_json};
use crate::server::Context;

/// Children listed in one page at most.
pub const CHILDREN_PAGE_MAX: usize = 1000;
const CHILDREN_PAGE_DEFAULT: usize = 100;
/// Bytes of a node's data sent at most (ZooKeeper's own default limit is 1 MiB).
pub const DATA_SHOWN_BYTES_MAX: usize = 1024 * 1024;
const DATA_SHOWN_BYTES_DEFAULT: usize = 64 * 1024;
/// Paths a search returns at most.
pub const SEARCH_RESULTS_MAX: usize = 500;
const SEARCH_RESULTS_DEFAULT: usize = 50;
/// Nodes a search or a subtree sizing looks at, at most, under the replica's lock.
pub const SCAN_NODES_MAX: usize = 200_000;
/// Subtrees each ranking of `biggest` lists at most.
pub const BIGGEST_MAX: usize = 100;
const BIGGEST_DEFAULT: usize = 10;

/// A ZooKeeper error as an HTTP answer: its name and code, with the status that fits it.
pub(super) fn zk_error(err: ErrorCode, path: &str) -> ApiError {
    let status = match err {
        ErrorCode::NO_NODE => StatusCode::NOT_FOUND,
        ErrorCode::NO_AUTH => StatusCode::FORBIDDEN,
        _ => StatusCode::CONFLICT,
    };
    ApiError::new(status, format!("{} ({}): {path}", err.name(), err.0))
}

/// A node the caller may read, or why not.
fn readable<'a>(state: &'a ZkState, path: &str, ids: &[Id]) -> Result<NodeRef<'a>, ApiError> {
    let node = state
        .tree()
        .get(path)
        .ok_or_else(|| zk_error(ErrorCode::NO_NODE, path))?;
    if !acl::permits(node.acl(), acl::READ, ids) {
        return Err(zk_error(ErrorCode::NO_AUTH, path));
    }
    Ok(node)
}

/// `GET /console/api/children?path=&after=&limit=`: a page of a node's children in name
/// order, after the name `after`, each with its Stat (null where the caller may not read it).
pub async fn children(
    State(ctx): State<Arc<Context>>,
    Extension(Peer(peer)): Extension<Peer>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let run = || -> Result<Value, ApiError> {
        let q = Query::parse(raw, &["path", "after", "limit"])?;
        let path = q.path("path", Some("/"))?;
        let after = q.get("after").unwrap_or("");
        let limit = q.count("limit", CHILDREN_PAGE_DEFAULT, CHILDREN_PAGE_MAX)?;
        let caller = Caller::from_request(&ctx, peer, &headers)?;
        let r = ctx.replica();
        let node = readable(r.state(), &path, &caller.ids)?;
        let page = page_after(r.state().tree(), node, after, limit);
        let next = (page.len() > limit).then(|| page[limit - 1].name().to_owned());
        let children: Vec<Value> = page
            .iter()
            .take(limit)
            .map(|c| {
                let stat = acl::permits(c.acl(), acl::READ, &caller.ids)
                    .then(|| stat_json(&c.wire_stat()));
                json!({
                    "name": c.name(),
                    "numChildren": c.num_children(),
                    "ephemeral": matches!(c.kind(), NodeKind::Ephemeral(_)),
                    "stat": stat,
                })
            })
            .collect();
        Ok(json!({
            "path": path,
            "stat": stat_json(&node.wire_stat()),
            "total": node.num_children(),
            "children": children,
            "next": next,
        }))
    };
    answer(run())
}

/// The first `limit + 1` children named after `after`, in name order, found without sorting
/// them all (a node may have millions).
fn page_after<'a>(
    tree: &'a DataTree,
    node: NodeRef<'a>,
    after: &str,
    limit: usize,
) -> Vec<NodeRef<'a>> {
    let mut smallest: BinaryHeap<(&str, u32)> = BinaryHeap::with_capacity(limit + 2);
    for child in node.children() {
        let name = child.name();
        if name <= after {
            continue;
        }
        smallest.push((name, child.id()));
        if smallest.len() > limit + 1 {
            smallest.pop();
        }
    }
    smallest
        .into_sorted_vec()
        .into_iter()
        .map(|(_, id)| tree.node(id))
        .collect()
}

/// `GET /console/api/node?path=&bytes=`: a node's Stat, its data (base64, the first `bytes`
/// bytes at most) and its ACL, as getData and getACL answer the caller.
pub async fn node(
    State(ctx): State<Arc<Context>>,
    Extension(Peer(peer)): Extension<Peer>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let run = || -> Result<Value, ApiError> {
        let q = Query::parse(raw, &["path", "bytes"])?;
        let path = q.path("path", None)?;
        let shown_max = q.count("bytes", DATA_SHOWN_BYTES_DEFAULT, DATA_SHOWN_BYTES_MAX)?;
        let caller = Caller::from_request(&ctx, peer, &headers)?;
        let r = ctx.replica();
        let state = r.state();
        let read = |request| state.read(0, &caller.ids, &request);
        let got = read(Request::GetData(PathWatchRequest {
            path: path.clone(),
            watch: false,
        }));
        let ZkResponse::GetData { data, stat } = got.body else {
            return Err(zk_error(got.err, &path));
        };
        let got = read(Request::GetAcl(warden_proto::request::PathRequest {
            path: path.clone(),
        }));
        let acl = match got.body {
            ZkResponse::GetAcl { acl, .. } => json!(
                acl.iter()
                    .map(|a| json!({
                        "scheme": a.id.scheme,
                        "id": a.id.id,
                        "perms": perms_letters(a.perms),
                    }))
                    .collect::<Vec<_>>()
            ),
            _ => json!(format!("{} ({})", got.err.name(), got.err.0)),
        };
        let shown = data.as_deref().map(|d| &d[..d.len().min(shown_max)]);
        Ok(json!({
            "path": path,
            "stat": stat_json(&stat),
            "null": data.is_none(),
            "data": shown.map(|d| base64::engine::general_purpose::STANDARD.encode(d)),
            "truncated": data.as_ref().is_some_and(|d| d.len() > shown_max),
            "acl": acl,
        }))
    };
    answer(run())
}

/// ZooKeeper's `cdrwa` letters, as zkCli's getAcl prints them.
fn perms_letters(perms: i32) -> String {
    use warden_proto::types::perms::{ADMIN, CREATE, DELETE, READ, WRITE};
    [
        (CREATE, 'c'),
        (DELETE, 'd'),
        (READ, 'r'),
        (WRITE, 'w'),
        (ADMIN, 'a'),
    ]
    .iter()
    .filter(|(bit, _)| perms & bit != 0)
    .map(|(_, c)| *c)
    .collect()
}

/// `GET /console/api/search?prefix=&limit=`: paths that start with `prefix` (`/app/con`
/// finds `/app/config` and everything below it), in path order, at most `limit`, after
/// looking at [`SCAN_NODES_MAX`] nodes at most. The children of a node the caller may not
/// read are not looked at.
pub async fn search(
    State(ctx): State<Arc<Context>>,
    Extension(Peer(peer)): Extension<Peer>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let run = || -> Result<Value, ApiError> {
        let q = Query::parse(raw, &["prefix", "limit"])?;
        let prefix = q
            .get("prefix")
            .ok_or_else(|| ApiError::bad_request("missing parameter prefix"))?
            .to_owned();
        let limit = q.count("limit", SEARCH_RESULTS_DEFAULT, SEARCH_RESULTS_MAX)?;
        let (parent, partial) = warden_state::path::split_parent(&prefix)
            .filter(|_| prefix.starts_with('/'))
            .ok_or_else(|| {
                ApiError::bad_request(format!("prefix={prefix:?}: a path prefix starts with /"))
            })?;
        warden_state::path::validate(parent).map_err(|why| {
            ApiError::bad_request(format!(
                "prefix={prefix:?}: {parent:?} is not a path: {why:?}"
            ))
        })?;
        let caller = Caller::from_request(&ctx, peer, &headers)?;
        let r = ctx.replica();
        let tree = r.state().tree();
        let start = readable(r.state(), parent, &caller.ids)?;
        let mut found = Vec::new();
        let mut scanned = 0usize;
        let mut stack: Vec<u32> = start
            .children()
            .filter(|c| c.name().starts_with(partial))
            .map(|c| c.id())
            .collect();
        let mut complete = true;
        while let Some(id) = stack.pop() {
            if found.len() == limit || scanned == SCAN_NODES_MAX {
                complete = false;
                break;
            }
            scanned += 1;
            let node = tree.node(id);
            found.push(tree.path_of(id));
            if acl::permits(node.acl(), acl::READ, &caller.ids) {
                stack.extend(node.child_ids());
            }
        }
        found.sort();
        Ok(json!({
            "prefix": prefix,
            "paths": found,
            "scanned": scanned,
            "complete": complete,
            "limit": limit,
            "scan_max": SCAN_NODES_MAX,
        }))
    };
    answer(run())
}

/// One child's subtree as `biggest` sizes it.
struct Subtree {
    path: String,
    nodes: u64,
    bytes: u64,
}

/// `GET /console/api/biggest?path=&limit=`: the children of `path` whose subtrees hold the
/// most znodes, and the most bytes of data, after looking at [`SCAN_NODES_MAX`] nodes at
/// most (`complete` says whether every subtree was sized to its end).
pub async fn biggest(
    State(ctx): State<Arc<Context>>,
    Extension(Peer(peer)): Extension<Peer>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let run = || -> Result<Value, ApiError> {
        let q = Query::parse(raw, &["path", "limit"])?;
        let path = q.path("path", Some("/"))?;
        let limit = q.count("limit", BIGGEST_DEFAULT, BIGGEST_MAX)?;
        let caller = Caller::from_request(&ctx, peer, &headers)?;
        let r = ctx.replica();
        let tree = r.state().tree();
        let node = readable(r.state(), &path, &caller.ids)?;
        let mut scanned = 0usize;
        let mut subtrees = Vec::new();
        for child in node.children() {
            if scanned == SCAN_NODES_MAX {
                break;
            }
            let mut sized = Subtree {
                path: tree.path_of(child.id()),
                nodes: 0,
                bytes: 0,
            };
            let mut stack = vec![child.id()];
            while let Some(id) = stack.pop() {
                if scanned == SCAN_NODES_MAX {
                    break;
                }
                scanned += 1;
                let n = tree.node(id);
                sized.nodes += 1;
                sized.bytes += n.data().map_or(0, |d| d.len() as u64);
                stack.extend(n.child_ids());
            }
            subtrees.push(sized);
        }
        let complete = scanned < SCAN_NODES_MAX;
        let ranked = |key: fn(&Subtree) -> u64| -> Vec<Value> {
            let mut order: Vec<&Subtree> = subtrees.iter().collect();
            order.sort_by_key(|s| std::cmp::Reverse(key(s)));
            order
                .into_iter()
                .take(limit)
                .map(|s| json!({ "path": s.path, "nodes": s.nodes, "bytes": s.bytes }))
                .collect()
        };
        Ok(json!({
            "path": path,
            "by_nodes": ranked(|s| s.nodes),
            "by_bytes": ranked(|s| s.bytes),
            "scanned": scanned,
            "complete": complete,
            "scan_max": SCAN_NODES_MAX,
        }))
    };
    answer(run())
}

#[cfg(test)]
mod tests {
    use warden_proto::Acl;
    use warden_state::tree::NodeStat;

    use super::*;

    #[test]
    fn a_page_is_the_next_names_in_order_whatever_the_order_of_creation() {
        let mut tree = DataTree::new();
        let root = tree.root().id();
        for name in ["d", "a", "c", "e", "b"] {
            tree.create("/", root, name, None, &Acl::open(), NodeStat::default(), 0);
        }
        let names = |after: &str, limit| -> Vec<String> {
            page_after(&tree, tree.root(), after, limit)
                .iter()
                .map(|n| n.name().to_owned())
                .collect()
        };
        // One more than the limit: its presence says there is a next page.
        assert_eq!(names("", 2), ["a", "b", "c"]);
        assert_eq!(names("b", 2), ["c", "d", "e"]);
        assert_eq!(names("c", 2), ["d", "e"]);
        assert!(names("e", 2).is_empty());
    }

    #[test]
    fn permissions_read_as_zkcli_prints_them() {
        use warden_proto::types::perms;
        assert_eq!(perms_letters(perms::ALL), "cdrwa");
        assert_eq!(perms_letters(perms::READ | perms::ADMIN), "ra");
        assert_eq!(perms_letters(0), "");
    }
}
