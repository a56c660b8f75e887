//! Reads, served by any replica from its own tree (`FinalRequestProcessor`'s read cases):
//! the answer, and the watch the read leaves behind.

use warden_proto::request::PathWatchRequest;
use warden_proto::{ErrorCode, Id, Names, OpResult, Request, Response};

use crate::acl;
use crate::state::State;
use crate::tree::{NodeKind, NodeRef};
use crate::watch::WatchKind;

/// A watch a read asks to leave on a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchRequest {
    pub path: String,
    pub kind: WatchKind,
}

/// The answer to a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOutcome {
    pub err: ErrorCode,
    pub body: Response,
    /// Watches to register for the caller, in the same step as the read.
    pub watches: Vec<WatchRequest>,
}

type ReadResult = Result<Response, ErrorCode>;

impl State {
    /// Whether `req` is answered by [`State::read`] rather than through consensus or by the
    /// connection itself.
    pub fn is_read(req: &Request) -> bool {
        matches!(
            req,
            Request::Exists(_)
                | Request::GetData(_)
                | Request::GetChildren(_)
                | Request::GetChildren2(_)
                | Request::GetAcl(_)
                | Request::GetAllChildrenNumber(_)
                | Request::GetEphemerals(_)
                | Request::MultiRead(_)
                | Request::FilteredList(_)
                | Request::FilteredListWithStatsAndData(_)
                | Request::ListRecursive(_)
        )
    }

    /// Answers a read for `session_id`, authenticated as `auth`.
    pub fn read(&self, session_id: i64, auth: &[Id], req: &Request) -> ReadOutcome {
        let mut watches = Vec::new();
        let result = match req {
            Request::MultiRead(ops) => Ok(Response::Multi(
                ops.iter()
                    .map(
                        |op| match self.read_one(session_id, auth, op, &mut watches) {
                            Ok(response) => OpResult::Ok {
                                op: op.op(),
                                response,
                            },
                            Err(err) => OpResult::Error(err),
                        },
                    )
                    .collect(),
            )),
            _ => self.read_one(session_id, auth, req, &mut watches),
        };
        let (err, body) = match result {
            Ok(body) => (ErrorCode::OK, body),
            Err(err) => (err, Response::Empty),
        };
        ReadOutcome { err, body, watches }
    }

    fn readable(&self, path: &str, auth: &[Id]) -> Result<NodeRef<'_>, ErrorCode> {
        let node = self.tree.get(path).ok_or(ErrorCode::NO_NODE)?;
        if acl::permits(node.acl(), acl::READ, auth) {
            Ok(node)
        } else {
            Err(ErrorCode::NO_AUTH)
        }
    }

    fn read_one(
        &self,
        session_id: i64,
        auth: &[Id],
        req: &Request,
        watches: &mut Vec<WatchRequest>,
    ) -> ReadResult {
        let mut watch = |r: &PathWatchRequest, kind| {
            if r.watch {
                watches.push(WatchRequest {
                    path: r.path.clone(),
                    kind,
                });
            }
        };
        match req {
            Request::Exists(r) => {
                if r.path.contains('\0') {
                    return Err(ErrorCode::BAD_ARGUMENTS);
                }
                // An existing node needs READ, checked before the watch is left; a missing one
                // leaves the watch, which fires on creation (golden vector java_acl).
                let node = self.tree.get(&r.path);
                if let Some(n) = node
                    && !acl::permits(n.acl(), acl::READ, auth)
                {
                    return Err(ErrorCode::NO_AUTH);
                }
                watch(r, WatchKind::Data);
                Ok(Response::Stat(node.ok_or(ErrorCode::NO_NODE)?.wire_stat()))
            }
            Request::GetData(r) => {
                let node = self.readable(&r.path, auth)?;
                watch(r, WatchKind::Data);
                Ok(Response::GetData {
                    data: node.data().map(<[u8]>::to_vec),
                    stat: node.wire_stat(),
                })
            }
            Request::GetChildren(r) => {
                let node = self.readable(&r.path, auth)?;
                watch(r, WatchKind::Child);
                Ok(Response::GetChildren {
                    children: node.children().map(|c| c.name()).collect(),
                })
            }
            Request::GetChildren2(r) => {
                let node = self.readable(&r.path, auth)?;
                watch(r, WatchKind::Child);
                Ok(Response::GetChildren2 {
                    children: node.children().map(|c| c.name()).collect(),
                    stat: node.wire_stat(),
                })
            }
            Request::FilteredList(r) => {
                let (node, children) = self.filtered_children(&r.path, r.list_type, auth)?;
                if r.watch {
                    watches.push(WatchRequest {
                        path: r.path.clone(),
                        kind: WatchKind::Child,
                    });
                }
                Ok(Response::GetChildren2 {
                    children: children.iter().map(|c| c.name()).collect(),
                    stat: node.wire_stat(),
                })
            }
            Request::FilteredListWithStatsAndData(r) => {
                let (node, children) = self.filtered_children(&r.path, r.list_type, auth)?;
                // Each child's Stat or data is only handed out if the child is readable.
                if (r.with_stat || r.with_data)
                    && !children
                        .iter()
                        .all(|c| acl::permits(c.acl(), acl::READ, auth))
                {
                    return Err(ErrorCode::NO_AUTH);
                }
                if r.watch {
                    watches.push(WatchRequest {
                        path: r.path.clone(),
                        kind: WatchKind::Child,
                    });
                }
                Ok(Response::ListWithStatsAndData {
                    children: children.iter().map(|c| c.name()).collect(),
                    stat: node.wire_stat(),
                    stats: if r.with_stat {
                        children.iter().map(NodeRef::wire_stat).collect()
                    } else {
                        Vec::new()
                    },
                    data: if r.with_data {
                        children
                            .iter()
                            .map(|c| c.data().map(<[u8]>::to_vec))
                            .collect()
                    } else {
                        Vec::new()
                    },
                })
            }
            Request::ListRecursive(r) => {
                // Breadth first, skipping unreadable subtrees, stopping at the limit.
                let root = self.readable(&r.path, auth)?;
                let mut paths = Names::new();
                let mut queue: std::collections::VecDeque<(NodeRef<'_>, String)> =
                    [(root, r.path.clone())].into();
                'walk: while let Some((node, at)) = queue.pop_front() {
                    for child in node.children() {
                        if !acl::permits(child.acl(), acl::READ, auth) {
                            continue;
                        }
                        if paths.len() >= r.limit as usize {
                            break 'walk;
                        }
                        let child_path = crate::path::join(&at, child.name());
                        paths.push(&child_path);
                        queue.push_back((child, child_path));
                    }
                }
                Ok(Response::GetChildren { children: paths })
            }
            Request::GetAcl(r) => {
                let node = self.tree.get(&r.path).ok_or(ErrorCode::NO_NODE)?;
                if !acl::permits(node.acl(), acl::READ | acl::ADMIN, auth) {
                    return Err(ErrorCode::NO_AUTH);
                }
                let acl = if acl::permits(node.acl(), acl::ADMIN, auth) {
                    node.acl().to_vec()
                } else {
                    acl::masked(node.acl())
                };
                Ok(Response::GetAcl {
                    acl,
                    stat: node.wire_stat(),
                })
            }
            Request::GetAllChildrenNumber(r) => {
                let node = self.readable(&r.path, auth)?;
                let mut total = 0i32;
                let mut stack: Vec<u32> = node.child_ids().collect();
                while let Some(id) = stack.pop() {
                    total += 1;
                    stack.extend(self.tree.node(id).child_ids());
                }
                Ok(Response::AllChildrenNumber { total })
            }
            Request::GetEphemerals(r) => {
                // As `FinalRequestProcessor`: the trimmed prefix only decides whether to list
                // everything ("" or "/"); other prefixes are matched as sent, spaces included.
                let trimmed = r.path.trim();
                let mut paths: Vec<String> = self
                    .tree
                    .ephemerals_of(session_id)
                    .map(|id| self.tree.path_of(id))
                    .filter(|p| trimmed.is_empty() || trimmed == "/" || p.starts_with(&r.path))
                    .collect();
                paths.sort();
                Ok(Response::GetEphemerals { paths })
            }
            _ => Err(ErrorCode::BAD_ARGUMENTS),
        }
    }

    /// ClickHouse's list filter: all (0), persistent-only (1) or ephemeral-only (2) children
    /// of a readable node.
    fn filtered_children(
        &self,
        path: &str,
        list_type: u8,
        auth: &[Id],
    ) -> Result<(NodeRef<'_>, Vec<NodeRef<'_>>), ErrorCode> {
        let node = self.readable(path, auth)?;
        let children = node
            .children()
            .filter(|c| {
                let ephemeral = matches!(c.kind(), NodeKind::Ephemeral(_));
                match list_type {
                    1 => !ephemeral,
                    2 => ephemeral,
                    _ => true,
                }
            })
            .collect();
        Ok((node, children))
    }
}
