//! The ZooKeeper Programmer's Guide, sentence by sentence, against `State`.

use warden_proto::request::{
    CheckVersionRequest, CreateRequest, CreateTtlRequest, DeleteRequest, PathRequest,
    PathWatchRequest, SetAclRequest, SetDataRequest,
};
use warden_proto::types::perms;
use warden_proto::{Acl, ErrorCode, EventType, Id, OpResult, Request, Response, Stat};
use warden_state::acl::digest;
use warden_state::{Outcome, State, StateConfig, Txn, TxnKind, WatchKind};

struct Harness {
    state: State,
    time: i64,
}

impl Harness {
    fn new() -> Self {
        Harness {
            state: State::new(StateConfig::default()),
            time: 1_700_000_000_000,
        }
    }

    fn txn(&mut self, session_id: i64, auth: &[Id], kind: TxnKind) -> Outcome {
        self.time += 1;
        self.state.apply(&Txn {
            session_id,
            time_ms: self.time,
            auth: auth.to_vec(),
            enforce_quota: false,
            kind,
        })
    }

    fn session(&mut self) -> i64 {
        self.txn(
            0,
            &[],
            TxnKind::CreateSession {
                timeout_ms: 30_000,
                password: vec![0; 16],
            },
        )
        .created_session
        .expect("session created")
    }

    fn write(&mut self, session: i64, req: Request) -> Outcome {
        self.txn(session, &[], TxnKind::Request(req))
    }

    fn write_as(&mut self, session: i64, auth: &[Id], req: Request) -> Outcome {
        self.txn(session, auth, TxnKind::Request(req))
    }

    fn create(&mut self, session: i64, path: &str, flags: i32) -> Outcome {
        self.write(session, create(path, flags))
    }

    fn stat(&self, path: &str) -> Option<Stat> {
        match self.state.read(0, &[], &exists(path)).body {
            Response::Stat(s) => Some(s),
            _ => None,
        }
    }
}

fn create(path: &str, flags: i32) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(b"d".to_vec()),
        acl: Acl::open(),
        flags,
    })
}

fn create_with_acl(path: &str, acl: Vec<Acl>) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: None,
        acl,
        flags: 0,
    })
}

fn delete(path: &str, version: i32) -> Request {
    Request::Delete(DeleteRequest {
        path: path.into(),
        version,
    })
}

fn set(path: &str, data: &[u8], version: i32) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: Some(data.to_vec()),
        version,
    })
}

fn exists(path: &str) -> Request {
    Request::Exists(PathWatchRequest {
        path: path.into(),
        watch: true,
    })
}

fn get(path: &str) -> Request {
    Request::GetData(PathWatchRequest {
        path: path.into(),
        watch: false,
    })
}

fn created_path(out: &Outcome) -> &str {
    match &out.body {
        Response::Create { path } => path,
        other => panic!("not a create answer: {other:?} ({})", out.err),
    }
}

/// "Ephemeral Nodes: ... These znodes exists as long as the session that created the znode is
/// active. When the session ends the znode is deleted. Because of this behavior ephemeral
/// znodes are not allowed to have children."
#[test]
fn ephemeral_nodes_live_and_die_with_their_session() {
    let mut h = Harness::new();
    let s = h.session();
    h.create(s, "/e", 1);
    assert_eq!(h.stat("/e").unwrap().ephemeral_owner, s);
    assert_eq!(
        h.create(s, "/e/child", 0).err,
        ErrorCode::NO_CHILDREN_FOR_EPHEMERALS
    );
    let out = h.txn(s, &[], TxnKind::CloseSession);
    assert!(h.stat("/e").is_none());
    assert!(
        out.triggers
            .iter()
            .any(|t| t.event == EventType::NodeDeleted && t.path == "/e")
    );
    assert!(h.state.session(s).is_none());
    assert_eq!(h.create(s, "/x", 0).err, ErrorCode::SESSION_EXPIRED);
}

/// "When creating a znode you can also request that ZooKeeper append a monotonically
/// increasing counter to the end of path. This counter is unique to the parent znode."
#[test]
fn sequence_numbers_come_from_the_parent() {
    let mut h = Harness::new();
    let s = h.session();
    h.create(s, "/p", 0);
    h.create(s, "/q", 0);
    assert_eq!(created_path(&h.create(s, "/p/n-", 2)), "/p/n-0000000000");
    assert_eq!(created_path(&h.create(s, "/p/n-", 2)), "/p/n-0000000001");
    assert_eq!(created_path(&h.create(s, "/q/", 2)), "/q/0000000000");
    h.create(s, "/p/plain", 0);
    assert_eq!(created_path(&h.create(s, "/p/n-", 3)), "/p/n-0000000003");
    // The counter counts creations only: a delete does not advance it, though it does show
    // in the cversion clients see (golden vector java_seq).
    h.write(s, delete("/p/plain", -1));
    assert_eq!(created_path(&h.create(s, "/p/n-", 2)), "/p/n-0000000004");
    assert_eq!(h.stat("/p").unwrap().cversion, 2 * 5 - 4);
}

/// "czxid The zxid of the change that caused this znode to be created. mzxid The zxid of the
/// change that last modified this znode. pzxid The zxid of the change that last modified
/// children of this znode. ... version The number of changes to the data of this znode. ...
/// aversion The number of changes to the ACL of this znode. ... dataLength The length of the
/// data field of this znode. numChildren The number of children of this znode."
#[test]
fn stat_fields() {
    let mut h = Harness::new();
    let s = h.session();
    let created = h.create(s, "/a", 0).zxid;
    let st = h.stat("/a").unwrap();
    assert_eq!((st.czxid, st.mzxid, st.pzxid), (created, created, created));
    assert_eq!(
        (st.version, st.cversion, st.aversion, st.ephemeral_owner),
        (0, 0, 0, 0)
    );
    assert_eq!((st.data_length, st.num_children), (1, 0));
    let modified = h.write(s, set("/a", b"four", 0)).zxid;
    let child = h.create(s, "/a/b", 0).zxid;
    let st = h.stat("/a").unwrap();
    assert_eq!((st.czxid, st.mzxid, st.pzxid), (created, modified, child));
    assert_eq!(
        (st.version, st.cversion, st.data_length, st.num_children),
        (1, 1, 4, 1)
    );
    let acl_change = h.write(
        s,
        Request::SetAcl(SetAclRequest {
            path: "/a".into(),
            acl: Acl::open(),
            version: 0,
        }),
    );
    assert_eq!(acl_change.err, ErrorCode::OK);
    let st = h.stat("/a").unwrap();
    assert_eq!((st.aversion, st.mzxid), (1, modified));
    // ZooKeeper reports cversion as creations plus deletions of children.
    let deleted = h.write(s, delete("/a/b", -1)).zxid;
    let st = h.stat("/a").unwrap();
    assert_eq!((st.pzxid, st.cversion, st.num_children), (deleted, 2, 0));
}

/// "The version number, together with the timestamp, allows ZooKeeper to validate the cache
/// and to coordinate updates... if the version it supplies doesn't match the actual version of
/// the data, the update will fail."
#[test]
fn conditional_updates() {
    let mut h = Harness::new();
    let s = h.session();
    h.create(s, "/v", 0);
    assert_eq!(h.write(s, set("/v", b"x", 5)).err, ErrorCode::BAD_VERSION);
    assert_eq!(h.write(s, set("/v", b"x", 0)).err, ErrorCode::OK);
    assert_eq!(h.write(s, delete("/v", 0)).err, ErrorCode::BAD_VERSION);
    assert_eq!(h.write(s, delete("/v", 1)).err, ErrorCode::OK);
    assert_eq!(h.write(s, delete("/v", -1)).err, ErrorCode::NO_NODE);
}

/// "Container Nodes ... When the last child of a container is deleted, the container becomes
/// a candidate to be deleted by the server at some point in the future."
#[test]
fn containers_become_candidates_when_emptied() {
    let mut h = Harness::new();
    let s = h.session();
    let out = h.write(
        s,
        Request::CreateContainer(CreateRequest {
            path: "/c".into(),
            data: None,
            acl: Acl::open(),
            flags: 4,
        }),
    );
    assert!(matches!(out.body, Response::Create2 { .. }));
    // The container marker (Long.MIN_VALUE) is kept on the server; clients see 0.
    assert_eq!(h.stat("/c").unwrap().ephemeral_owner, 0);
    assert!(
        h.state.cleanup_candidates(h.time, 0).is_empty(),
        "never used: kept"
    );
    h.create(s, "/c/x", 0);
    let out = h.write(s, delete("/c/x", -1));
    assert_eq!(out.emptied_containers, ["/c"]);
    assert_eq!(h.state.cleanup_candidates(h.time, 0), ["/c"]);
    let out = h.txn(0, &[], TxnKind::DeleteContainer { path: "/c".into() });
    assert_eq!(out.err, ErrorCode::OK);
    assert!(h.stat("/c").is_none());
}

/// "TTL Nodes: When creating PERSISTENT or PERSISTENT_SEQUENTIAL znodes, you can optionally set
/// a TTL in milliseconds for the znode. If the znode is not modified within the TTL and has no
/// children it will become a candidate to be deleted by the server at some point in the
/// future." "Note: TTL Nodes must be enabled via System property as they are disabled by
/// default."
#[test]
fn ttl_nodes() {
    let ttl = |path: &str, flags, ttl| {
        Request::CreateTtl(CreateTtlRequest {
            path: path.into(),
            data: None,
            acl: Acl::open(),
            flags,
            ttl,
        })
    };
    let mut h = Harness::new();
    let s = h.session();
    assert_eq!(h.write(s, ttl("/t", 5, 1000)).err, ErrorCode::OK);
    // The TTL lives in the server's ephemeralOwner (0xff00...|ttl); clients see 0.
    assert_eq!(h.stat("/t").unwrap().ephemeral_owner, 0);
    assert_eq!(h.write(s, ttl("/u", 0, 1000)).err, ErrorCode::BAD_ARGUMENTS);
    assert_eq!(h.write(s, ttl("/u", 5, 0)).err, ErrorCode::BAD_ARGUMENTS);
    assert_eq!(
        h.create(s, "/u", 5).err,
        ErrorCode::BAD_ARGUMENTS,
        "create without a TTL"
    );
    let start = h.time;
    assert!(h.state.cleanup_candidates(start + 500, 0).is_empty());
    assert_eq!(h.state.cleanup_candidates(start + 1001, 0), ["/t"]);

    let mut off = Harness {
        state: State::new(StateConfig { ttl_enabled: false }),
        time: 0,
    };
    let s = off.session();
    assert_eq!(
        off.write(s, ttl("/t", 5, 1000)).err,
        ErrorCode::UNIMPLEMENTED
    );
}

/// "CREATE: you can create a child node. READ: you can get data from a node and list its
/// children. WRITE: you can set data for a node. DELETE: you can delete a child node. ADMIN:
/// you can set permissions."
#[test]
fn acl_permissions() {
    let mut h = Harness::new();
    let s = h.session();
    let bob = Id::new("digest", digest("bob:secret"));
    let only_bob = vec![Acl {
        perms: perms::ALL,
        id: bob.clone(),
    }];
    h.write(s, create_with_acl("/locked", only_bob));
    let anon: &[Id] = &[Id::new("ip", "127.0.0.1")];
    let as_bob = std::slice::from_ref(&bob);
    assert_eq!(
        h.state.read(s, anon, &get("/locked")).err,
        ErrorCode::NO_AUTH
    );
    assert_eq!(h.state.read(s, as_bob, &get("/locked")).err, ErrorCode::OK);
    assert_eq!(
        h.write_as(s, anon, set("/locked", b"x", -1)).err,
        ErrorCode::NO_AUTH
    );
    assert_eq!(
        h.write_as(s, anon, create("/locked/c", 0)).err,
        ErrorCode::NO_AUTH
    );
    assert_eq!(
        h.write_as(s, as_bob, create("/locked/c", 0)).err,
        ErrorCode::OK
    );
    assert_eq!(
        h.write_as(s, anon, delete("/locked/c", -1)).err,
        ErrorCode::NO_AUTH
    );
    // getACL needs READ or ADMIN; only ADMIN sees digest hashes.
    let read_only = vec![
        Acl {
            perms: perms::READ,
            id: Id::new("world", "anyone"),
        },
        Acl {
            perms: perms::ADMIN,
            id: bob.clone(),
        },
    ];
    h.write_as(s, as_bob, create_with_acl("/r", read_only));
    let acl_of = |h: &Harness, auth: &[Id]| match h
        .state
        .read(s, auth, &Request::GetAcl(PathRequest { path: "/r".into() }))
        .body
    {
        Response::GetAcl { acl, .. } => acl,
        other => panic!("{other:?}"),
    };
    assert_eq!(acl_of(&h, anon)[1].id.id, "bob:x");
    assert_eq!(acl_of(&h, as_bob)[1].id, bob);
    // The super identity passes every check.
    let su = &[warden_state::acl::super_id()];
    assert_eq!(
        h.write_as(s, su, delete("/locked/c", -1)).err,
        ErrorCode::OK
    );
}

/// "auth ... uses the current user, credentials, and scheme."
#[test]
fn auth_scheme_needs_an_authenticated_identity() {
    let mut h = Harness::new();
    let s = h.session();
    let auth_acl = vec![Acl {
        perms: perms::ALL,
        id: Id::new("auth", ""),
    }];
    assert_eq!(
        h.write(s, create_with_acl("/x", auth_acl.clone())).err,
        ErrorCode::INVALID_ACL
    );
    let me = Id::new("digest", digest("me:pw"));
    assert_eq!(
        h.write_as(
            s,
            std::slice::from_ref(&me),
            create_with_acl("/x", auth_acl)
        )
        .err,
        ErrorCode::OK
    );
    let acl = match h
        .state
        .read(
            s,
            std::slice::from_ref(&me),
            &Request::GetAcl(PathRequest { path: "/x".into() }),
        )
        .body
    {
        Response::GetAcl { acl, .. } => acl,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        acl,
        vec![Acl {
            perms: perms::ALL,
            id: me
        }]
    );
}

/// "multi ... Atomicity: Updates either succeed or fail. No partial results."
#[test]
fn multi_is_all_or_nothing() {
    let mut h = Harness::new();
    let s = h.session();
    h.create(s, "/m", 0);
    let before = h.state.digest();
    let out = h.write(
        s,
        Request::Multi(vec![
            create("/m/a", 0),
            set("/m", b"x", -1),
            create("/m/a", 0),
            delete("/m", -1),
        ]),
    );
    assert_eq!(out.err, ErrorCode::OK);
    assert_eq!(
        out.body,
        Response::Multi(vec![
            OpResult::Error(ErrorCode::OK),
            OpResult::Error(ErrorCode::OK),
            OpResult::Error(ErrorCode::NODE_EXISTS),
            OpResult::Error(ErrorCode::RUNTIME_INCONSISTENCY),
        ])
    );
    assert!(out.triggers.is_empty());
    assert_eq!(h.state.digest(), before, "nothing changed");
    let out = h.write(
        s,
        Request::Multi(vec![
            create("/m/a", 0),
            Request::Check(CheckVersionRequest {
                path: "/m/a".into(),
                version: 0,
            }),
            set("/m/a", b"y", 0),
            delete("/m/a", 1),
        ]),
    );
    let Response::Multi(results) = &out.body else {
        panic!("{out:?}")
    };
    assert!(
        results.iter().all(|r| matches!(r, OpResult::Ok { .. })),
        "{results:?}"
    );
    assert!(h.stat("/m/a").is_none());
}

/// "A watch set with exists on a znode that does not exist ... will be triggered when the
/// znode is created." (Watches: "Created event: Enabled with a call to exists.")
#[test]
fn exists_on_a_missing_node_leaves_a_watch() {
    let h = Harness::new();
    let out = h.state.read(7, &[], &exists("/nope"));
    assert_eq!(out.err, ErrorCode::NO_NODE);
    assert_eq!(out.watches.len(), 1);
    assert_eq!(out.watches[0].kind, WatchKind::Data);
    // getData on a missing node leaves none.
    let out = h.state.read(
        7,
        &[],
        &Request::GetData(PathWatchRequest {
            path: "/nope".into(),
            watch: true,
        }),
    );
    assert!(out.watches.is_empty());
}

/// "The token "zookeeper" is reserved": /zookeeper cannot be deleted, nor can /keeper, the
/// nodes ClickHouse reads its feature flags from.
#[test]
fn system_nodes_stay() {
    let mut h = Harness::new();
    let s = h.session();
    for p in [
        "/",
        "/zookeeper",
        "/zookeeper/config",
        "/keeper/api_version",
    ] {
        assert_eq!(
            h.write(s, delete(p, -1)).err,
            ErrorCode::BAD_ARGUMENTS,
            "{p}"
        );
    }
    assert!(h.stat("/keeper/feature_flags").is_some());
}

/// "Every change to the ZooKeeper state receives a stamp in the form of a zxid ... If zxid1
/// is smaller than zxid2 then zxid1 happened before zxid2." Failed writes take one as well,
/// as in ZooKeeper.
#[test]
fn zxids_increase_by_one_per_transaction() {
    let mut h = Harness::new();
    let s = h.session();
    let a = h.create(s, "/z", 0).zxid;
    let b = h.create(s, "/z", 0).zxid;
    assert_eq!(b, a + 1);
    assert_eq!(h.state.last_zxid(), b);
}

/// Same sequence, same digest: replicas agree.
#[test]
fn replicas_agree_on_the_digest() {
    let run = || {
        let mut h = Harness::new();
        let s = h.session();
        for i in 0..50 {
            h.create(s, &format!("/n{}", i % 7), i % 4);
            h.write(s, set(&format!("/n{}", i % 5), b"v", -1));
        }
        h.state.digest()
    };
    assert_eq!(run(), run());
}
