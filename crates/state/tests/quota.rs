//! Quotas as ZooKeeper 3.9 keeps them (ZooKeeper Quota's Guide; docs/ecosystem.md section 7):
//! the stats node follows every write under its root in place, and hard limits refuse writes
//! only when the transaction says they are enforced.

use warden_proto::request::{CreateRequest, DeleteRequest, SetDataRequest};
use warden_proto::{Acl, ErrorCode, OpResult, Request, Response};
use warden_state::quota::Measure;
use warden_state::restore::Restore;
use warden_state::snapshot;
use warden_state::tree::NodeStat;
use warden_state::{Outcome, State, StateConfig, Txn, TxnKind};

const LIMITS: &str = "/zookeeper/quota/q/zookeeper_limits";
const STATS: &str = "/zookeeper/quota/q/zookeeper_stats";

struct Harness {
    state: State,
    session: i64,
    enforce_quota: bool,
}

impl Harness {
    fn new(enforce_quota: bool) -> Harness {
        let mut state = State::new(StateConfig::default());
        let session = state
            .apply(&txn(
                0,
                false,
                TxnKind::CreateSession {
                    timeout_ms: 10_000,
                    password: vec![0; 16],
                },
            ))
            .created_session
            .unwrap();
        Harness {
            state,
            session,
            enforce_quota,
        }
    }

    fn write(&mut self, req: Request) -> Outcome {
        self.state.apply(&txn(
            self.session,
            self.enforce_quota,
            TxnKind::Request(req),
        ))
    }

    fn create(&mut self, path: &str, data: &[u8]) -> Outcome {
        self.write(create(path, data))
    }

    fn set(&mut self, path: &str, data: &[u8]) -> Outcome {
        self.write(Request::SetData(SetDataRequest {
            path: path.into(),
            data: Some(data.to_vec()),
            version: -1,
        }))
    }

    fn delete(&mut self, path: &str) -> Outcome {
        self.write(Request::Delete(DeleteRequest {
            path: path.into(),
            version: -1,
        }))
    }

    /// What zkCli's `setquota` writes for a new quota on /q.
    fn set_quota(&mut self, limits: &str) {
        assert!(self.create("/zookeeper/quota/q", b"").err.is_ok());
        assert!(self.create(LIMITS, limits.as_bytes()).err.is_ok());
        assert!(self.create(STATS, b"count=0,bytes=0").err.is_ok());
    }

    fn data(&self, path: &str) -> String {
        let node = self.state.tree().get(path).expect("node exists");
        String::from_utf8(node.data().unwrap().to_vec()).unwrap()
    }

    fn stat(&self, path: &str) -> NodeStat {
        self.state.tree().get(path).unwrap().stat()
    }
}

fn txn(session_id: i64, enforce_quota: bool, kind: TxnKind) -> Txn {
    Txn {
        session_id,
        time_ms: 1_700_000_000_000,
        auth: vec![],
        enforce_quota,
        kind,
    }
}

fn create(path: &str, data: &[u8]) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(data.to_vec()),
        acl: Acl::open(),
        flags: 0,
    })
}

/// "count=<soft>,bytes=<soft>=;byteHardLimit=<hard>;countHardLimit=<hard>", as setquota
/// writes it.
fn limits(count: i64, bytes: i64, count_hard: i64, byte_hard: i64) -> String {
    format!("count={count},bytes={bytes}=;byteHardLimit={byte_hard};countHardLimit={count_hard}")
}

#[test]
fn a_new_stats_node_counts_the_subtree_the_quota_root_included() {
    let mut h = Harness::new(false);
    h.create("/q", b"x");
    h.create("/q/a", b"yy");
    h.set_quota(&limits(3, -1, -1, -1));
    assert_eq!(h.data(STATS), "count=2,bytes=3");
    assert_eq!(h.state.tree().quota_roots().covering("/q/a"), Some("/q"));
}

#[test]
fn writes_under_the_root_update_the_stats_in_place() {
    let mut h = Harness::new(false);
    h.create("/q", b"");
    h.set_quota(&limits(-1, -1, -1, -1));
    let before = h.stat(STATS);
    let digest_before = h.state.digest();
    h.create("/q/a", b"12345");
    assert_eq!(h.data(STATS), "count=2,bytes=5");
    h.set("/q/a", b"12");
    assert_eq!(h.data(STATS), "count=2,bytes=2");
    h.create("/q/a/b", b"");
    h.delete("/q/a/b");
    h.create("/elsewhere", b"not counted");
    assert_eq!(h.data(STATS), "count=2,bytes=2");
    let after = h.stat(STATS);
    assert_eq!(after, before, "no version, mzxid or mtime moves");
    assert_ne!(
        h.state.digest(),
        digest_before,
        "the digest follows the data"
    );
}

#[test]
fn a_deleted_limits_node_ends_the_quota() {
    let mut h = Harness::new(true);
    h.create("/q", b"");
    h.set_quota(&limits(-1, -1, 1, -1));
    assert!(h.delete(LIMITS).err.is_ok());
    assert!(h.create("/q/a", b"").err.is_ok(), "no limit is left");
    assert_eq!(h.data(STATS), "count=1,bytes=0", "nor any accounting");
}

#[test]
fn hard_limits_refuse_only_when_enforced() {
    for enforce in [false, true] {
        let mut h = Harness::new(enforce);
        h.create("/q", b"");
        h.set_quota(&limits(-1, -1, 2, 10));
        assert!(h.create("/q/a", b"").err.is_ok());
        let over_count = h.create("/q/b", b"");
        let over_bytes = h.set("/q/a", b"12345678901");
        if enforce {
            assert_eq!(over_count.err, ErrorCode::QUOTA_EXCEEDED);
            assert_eq!(over_bytes.err, ErrorCode::QUOTA_EXCEEDED);
            assert!(h.state.tree().get("/q/b").is_none());
            assert_eq!(h.data(STATS), "count=2,bytes=0");
            let breach = &over_count.quota_breaches[0];
            assert!(breach.hard);
            assert_eq!(breach.measure, Measure::Count);
            assert_eq!(breach.namespace.as_deref(), Some("q"));
            assert_eq!(
                breach.to_string(),
                "Quota exceeded: /q [current count=3, hardCountLimit=2]"
            );
            assert_eq!(
                over_bytes.quota_breaches[0].to_string(),
                "Quota exceeded: /q [current bytes=11, hardByteLimit=10]"
            );
            // Shrinking data is always allowed; so is a write that stays within the limit.
            assert!(h.set("/q/a", b"1234567890").err.is_ok());
            assert!(h.set("/q/a", b"").err.is_ok());
        } else {
            assert!(over_count.err.is_ok() && over_bytes.err.is_ok());
            assert!(over_count.quota_breaches.is_empty());
            assert_eq!(h.data(STATS), "count=3,bytes=11");
        }
    }
}

#[test]
fn soft_limits_are_noted_and_the_hard_limit_wins() {
    let mut h = Harness::new(true);
    h.create("/q", b"");
    h.set_quota(&limits(1, 2, -1, -1));
    let out = h.create("/q/a", b"abc");
    assert!(out.err.is_ok(), "a soft limit refuses nothing");
    let lines: Vec<String> = out.quota_breaches.iter().map(|b| b.to_string()).collect();
    assert_eq!(
        lines,
        [
            "Quota exceeded: /q [current count=2, softCountLimit=1]",
            "Quota exceeded: /q [current bytes=3, softByteLimit=2]",
        ]
    );
    // A hard limit set beside a soft one is the one that counts.
    h.set(LIMITS, limits(1, 2, 5, -1).as_bytes());
    let out = h.create("/q/b", b"");
    assert!(out.err.is_ok());
    assert!(out.quota_breaches.is_empty(), "{:?}", out.quota_breaches);
}

#[test]
fn a_multi_counts_its_own_earlier_operations() {
    let mut h = Harness::new(true);
    h.create("/q", b"");
    h.set_quota(&limits(-1, -1, 2, -1));
    let out = h.write(Request::Multi(vec![
        create("/q/a", b""),
        create("/q/b", b""),
    ]));
    let Response::Multi(results) = out.body else {
        panic!("a multi answers a multi: {:?}", out.body);
    };
    assert_eq!(
        results,
        [
            OpResult::Error(ErrorCode::OK),
            OpResult::Error(ErrorCode::QUOTA_EXCEEDED)
        ]
    );
    assert!(h.state.tree().get("/q/a").is_none(), "all or nothing");
    assert_eq!(h.data(STATS), "count=1,bytes=0");
    // A delete earlier in the multi makes room.
    h.create("/q/a", b"");
    let out = h.write(Request::Multi(vec![
        Request::Delete(DeleteRequest {
            path: "/q/a".into(),
            version: -1,
        }),
        create("/q/b", b""),
    ]));
    assert!(matches!(&out.body, Response::Multi(r) if matches!(r[1], OpResult::Ok { .. })));
    assert_eq!(h.data(STATS), "count=2,bytes=0");
    assert_eq!(out.quota_breaches.len(), 0);
}

#[test]
fn a_loaded_snapshot_keeps_the_stats_and_goes_on_counting() {
    let mut h = Harness::new(true);
    h.create("/q", b"");
    h.set_quota(&limits(-1, -1, 3, -1));
    h.create("/q/a", b"zz");
    let loaded = snapshot::decode(&snapshot::encode(&h.state)).expect("loads");
    assert_eq!(loaded.digest(), h.state.digest());
    let mut follower = Harness {
        state: loaded,
        session: h.session,
        enforce_quota: true,
    };
    for replica in [&mut h, &mut follower] {
        assert!(replica.create("/q/b", b"1").err.is_ok());
        assert_eq!(
            replica.create("/q/c", b"").err,
            ErrorCode::QUOTA_EXCEEDED,
            "the quota root is known again after the load"
        );
        assert_eq!(replica.data(STATS), "count=3,bytes=3");
    }
    assert_eq!(follower.state.digest(), h.state.digest());
}

#[test]
fn an_import_recounts_stale_stats_as_zookeeper_does_on_load() {
    let mut r = Restore::empty(StateConfig::default());
    let stat = NodeStat::default();
    for (path, data) in [
        ("/q", &b"abc"[..]),
        ("/q/a", b"de"),
        ("/zookeeper/quota/q", b""),
        (LIMITS, limits(-1, -1, 3, -1).as_bytes()),
        // A fuzzy snapshot may hold a usage from before or after the nodes it saved.
        (STATS, b"count=9,bytes=99"),
    ] {
        r.add_node(path, Some(data), &Acl::open(), stat).unwrap();
    }
    let (state, _) = r.finish();
    let stats = state.tree().get(STATS).unwrap();
    assert_eq!(stats.data(), Some(&b"count=2,bytes=5"[..]));
    assert_eq!(state.tree().quota_roots().covering("/q/a"), Some("/q"));
}

/// ZooKeeper's `QuotaMetricsUtilsTest`: quotas under one top-level namespace are summed, a
/// limit is the hard one if set, else the soft one.
#[test]
fn figures_are_summed_per_top_level_namespace() {
    let mut h = Harness::new(false);
    for path in [
        "/ns",
        "/ns/a",
        "/ns/a/b",
        "/ns/c",
        "/other",
        "/zookeeper/quota/ns",
    ] {
        h.create(path, b"");
    }
    h.create("/ns/a/b/x", b"1234");
    for (parent, root, limits) in [
        ("/zookeeper/quota/ns/a", "/ns/a/b", limits(10, 100, 5, 50)),
        ("/zookeeper/quota/ns", "/ns/c", limits(20, 200, -1, -1)),
    ] {
        let quota = format!("/zookeeper/quota{root}");
        h.create(parent, b"");
        h.create(&quota, b"");
        h.create(&format!("{quota}/zookeeper_limits"), limits.as_bytes());
        h.create(&format!("{quota}/zookeeper_stats"), b"");
    }
    let f = h.state.tree().quota_figures();
    let ns = |m: &std::collections::BTreeMap<String, i64>| m.get("ns").copied();
    assert_eq!(ns(&f.count_limit), Some(5 + 20));
    assert_eq!(ns(&f.bytes_limit), Some(50 + 200));
    assert_eq!(ns(&f.count_usage), Some(2 + 1));
    assert_eq!(ns(&f.bytes_usage), Some(4));
    assert!(!f.count_limit.contains_key("other"));
}

/// The limits and stats nodes are ordinary nodes a client may write anything into.
#[test]
fn numbers_a_client_wrote_never_overflow() {
    let mut h = Harness::new(true);
    h.create("/q", b"");
    h.set_quota(&limits(-1, -1, i64::MAX - 1, i64::MAX - 1));
    let max = format!("count={},bytes={}", i64::MAX, i64::MAX);
    h.set(STATS, max.as_bytes());
    assert_eq!(h.create("/q/a", b"x").err, ErrorCode::QUOTA_EXCEEDED);
    h.set(LIMITS, limits(-1, -1, -1, -1).as_bytes());
    assert!(h.create("/q/a", b"x").err.is_ok());
    assert_eq!(h.data(STATS), max, "the usage stays at the largest number");
    let figures = h.state.tree().quota_figures();
    assert_eq!(figures.count_usage.get("q"), Some(&i64::MAX));
}
