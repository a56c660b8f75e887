//! ClickHouse Keeper's extension operations, as docs/clickhouse-extensions.md describes them.

use warden_proto::request::{
    CheckStatRequest, CheckVersionRequest, CreateRequest, DeleteRequest,
    FilteredListWithStatsAndDataRequest, ListRecursiveRequest, RemoveRecursiveRequest,
};
use warden_proto::{Acl, ErrorCode, OpCode, OpResult, Request, Response, Stat};
use warden_state::{Outcome, State, StateConfig, Txn, TxnKind};

struct Keeper {
    state: State,
    session: i64,
}

impl Keeper {
    fn new() -> Self {
        let mut state = State::new(StateConfig::default());
        let session = state
            .apply(&Txn {
                session_id: 0,
                time_ms: 1,
                auth: vec![],
                enforce_quota: false,
                kind: TxnKind::CreateSession {
                    timeout_ms: 10_000,
                    password: vec![0; 16],
                },
            })
            .created_session
            .unwrap();
        Keeper { state, session }
    }

    fn write(&mut self, req: Request) -> Outcome {
        self.state.apply(&Txn {
            session_id: self.session,
            time_ms: 2,
            auth: vec![],
            enforce_quota: false,
            kind: TxnKind::Request(req),
        })
    }

    fn create(&mut self, path: &str, flags: i32) -> Outcome {
        self.write(Request::Create(create_req(path, flags)))
    }

    fn read(&self, req: Request) -> (ErrorCode, Response) {
        let out = self.state.read(self.session, &[], &req);
        (out.err, out.body)
    }
}

fn create_req(path: &str, flags: i32) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: Some(path.as_bytes().to_vec()),
        acl: Acl::open(),
        flags,
    }
}

fn wildcard() -> Stat {
    Stat {
        czxid: -1,
        mzxid: -1,
        ctime: -1,
        mtime: -1,
        version: -1,
        cversion: -1,
        aversion: -1,
        ephemeral_owner: -1,
        data_length: -1,
        num_children: -1,
        pzxid: -1,
    }
}

/// 6.2: "ZNODEEXISTS if the node exists and version is -1 or matches; otherwise OK."
#[test]
fn check_not_exists() {
    let mut k = Keeper::new();
    k.create("/a", 0);
    let check = |path: &str, version| {
        Request::CheckNotExists(CheckVersionRequest {
            path: path.into(),
            version,
        })
    };
    assert_eq!(k.write(check("/a", -1)).err, ErrorCode::NODE_EXISTS);
    assert_eq!(k.write(check("/a", 0)).err, ErrorCode::NODE_EXISTS);
    assert_eq!(k.write(check("/a", 3)).err, ErrorCode::OK);
    assert_eq!(k.write(check("/b", -1)).err, ErrorCode::OK);
}

/// 6.3: "If the node exists: OK, path = requested path, nothing changes. Sequential flag →
/// ZBADARGUMENTS."
#[test]
fn create_if_not_exists() {
    let mut k = Keeper::new();
    let first = k.write(Request::CreateIfNotExists(create_req("/c", 0)));
    assert_eq!(first.body, Response::Create { path: "/c".into() });
    let before = k.state.digest();
    let again = k.write(Request::CreateIfNotExists(create_req("/c", 0)));
    assert_eq!(
        (again.err, again.body),
        (ErrorCode::OK, Response::Create { path: "/c".into() })
    );
    assert_eq!(k.state.digest(), before);
    let seq = k.write(Request::CreateIfNotExists(create_req("/c/s-", 2)));
    assert_eq!(seq.err, ErrorCode::BAD_ARGUMENTS);
}

/// 6.4: "Over the limit → ZNOTEMPTY and nothing is removed... Removes children before parents;
/// each removed node fires DELETED, and its parent gets CHILD."
#[test]
fn remove_recursive() {
    let mut k = Keeper::new();
    for p in ["/r", "/r/a", "/r/a/x", "/r/b"] {
        k.create(p, 0);
    }
    let rr = |limit| {
        Request::RemoveRecursive(RemoveRecursiveRequest {
            path: "/r".into(),
            remove_nodes_limit: limit,
        })
    };
    assert_eq!(k.write(rr(3)).err, ErrorCode::NOT_EMPTY);
    assert!(k.state.tree().get("/r/a/x").is_some());
    let out = k.write(rr(4));
    assert_eq!(out.err, ErrorCode::OK);
    assert!(k.state.tree().get("/r").is_none());
    let deleted: Vec<&str> = out
        .triggers
        .iter()
        .filter(|t| t.event == warden_proto::EventType::NodeDeleted)
        .map(|t| t.path.as_str())
        .collect();
    assert_eq!(deleted.len(), 4);
    assert_eq!(*deleted.last().unwrap(), "/r", "parents after children");
}

/// 6.5: "Any Stat field set to -1 is a wildcard; a mismatch gives ZBADVERSION."
#[test]
fn check_stat() {
    let mut k = Keeper::new();
    k.create("/s", 0);
    k.create("/s/child", 0);
    let check = |stat| {
        Request::CheckStat(CheckStatRequest {
            path: "/s".into(),
            version: -1,
            stat,
        })
    };
    assert_eq!(k.write(check(wildcard())).err, ErrorCode::OK);
    let want_children = Stat {
        num_children: 1,
        ..wildcard()
    };
    assert_eq!(k.write(check(want_children)).err, ErrorCode::OK);
    let wrong = Stat {
        num_children: 2,
        ..wildcard()
    };
    assert_eq!(k.write(check(wrong)).err, ErrorCode::BAD_VERSION);
    let missing = Request::CheckStat(CheckStatRequest {
        path: "/nope".into(),
        version: -1,
        stat: wildcard(),
    });
    assert_eq!(k.write(missing).err, ErrorCode::NO_NODE);
}

/// 6.6: "Missing node, wrong version or having children → silent OK."
#[test]
fn try_remove_inside_multi() {
    let mut k = Keeper::new();
    k.create("/t", 0);
    k.create("/t/kid", 0);
    let tr = |path: &str, version| {
        Request::TryRemove(DeleteRequest {
            path: path.into(),
            version,
        })
    };
    let out = k.write(Request::Multi(vec![
        tr("/missing", -1),
        tr("/t", -1),
        tr("/t/kid", 7),
        tr("/t/kid", 0),
    ]));
    let Response::Multi(results) = out.body else {
        panic!()
    };
    assert!(results.iter().all(|r| matches!(
        r,
        OpResult::Ok {
            op: OpCode::TryRemove,
            ..
        }
    )));
    assert!(k.state.tree().get("/t/kid").is_none());
    assert!(k.state.tree().get("/t").is_some());
}

/// 6.7 and 6.8: the list with children's stats and data, and the breadth-first recursive list.
#[test]
fn lists() {
    let mut k = Keeper::new();
    for p in ["/l", "/l/a", "/l/b", "/l/a/x"] {
        k.create(p, 0);
    }
    k.create("/l/e", 1);
    let (err, body) = k.read(Request::FilteredListWithStatsAndData(
        FilteredListWithStatsAndDataRequest {
            path: "/l".into(),
            watch: false,
            list_type: 1,
            with_stat: true,
            with_data: true,
        },
    ));
    assert_eq!(err, ErrorCode::OK);
    let Response::ListWithStatsAndData {
        children,
        stats,
        data,
        ..
    } = body
    else {
        panic!()
    };
    assert_eq!(children.iter().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(stats[0].num_children, 1);
    assert_eq!(data[1].as_deref(), Some(&b"/l/b"[..]));
    let (_, body) = k.read(Request::ListRecursive(ListRecursiveRequest {
        path: "/l".into(),
        limit: u32::MAX,
    }));
    assert_eq!(
        body,
        Response::GetChildren {
            children: ["/l/a", "/l/b", "/l/e", "/l/a/x"].into_iter().collect()
        }
    );
    let (_, body) = k.read(Request::ListRecursive(ListRecursiveRequest {
        path: "/l".into(),
        limit: 2,
    }));
    assert_eq!(
        body,
        Response::GetChildren {
            children: ["/l/a", "/l/b"].into_iter().collect()
        }
    );
}
