//! Snapshots at scale: 1,000,000 znodes round trip exactly, and a corrupted byte anywhere is
//! refused rather than loaded.

use warden_proto::request::CreateRequest;
use warden_proto::{Acl, Request};
use warden_state::snapshot::{self, SnapshotError};
use warden_state::{State, StateConfig, Txn, TxnKind};

fn populated(parents: usize, per_parent: usize) -> State {
    let mut state = State::new(StateConfig::default());
    let mut time = 1_700_000_000_000;
    let mut txn = |state: &mut State, session_id, kind| {
        time += 1;
        state.apply(&Txn {
            session_id,
            time_ms: time,
            auth: vec![],
            enforce_quota: false,
            kind,
        })
    };
    let session = txn(
        &mut state,
        0,
        TxnKind::CreateSession {
            timeout_ms: 10_000,
            password: vec![7; 16],
        },
    )
    .created_session
    .unwrap();
    let value = vec![b'v'; 100];
    let create = |path: String, flags| {
        TxnKind::Request(Request::Create(CreateRequest {
            path,
            data: Some(value.clone()),
            acl: Acl::open(),
            flags,
        }))
    };
    txn(&mut state, session, create("/bench".into(), 0));
    for p in 0..parents {
        txn(&mut state, session, create(format!("/bench/p{p}"), 0));
        for c in 0..per_parent {
            // A few ephemerals, so the session table's links survive the trip too.
            let flags = if c == 0 { 1 } else { 0 };
            txn(
                &mut state,
                session,
                create(format!("/bench/p{p}/n{c:06}"), flags),
            );
        }
    }
    state
}

#[test]
fn a_million_znodes_round_trip() {
    let state = populated(1_000, 1_000);
    assert!(state.tree().len() > 1_000_000);
    let bytes = snapshot::encode(&state);
    let loaded = snapshot::decode(&bytes).expect("snapshot loads");
    assert_eq!(loaded.digest(), state.digest());
    assert_eq!(loaded.tree().len(), state.tree().len());
    assert_eq!(loaded.last_zxid(), state.last_zxid());
    assert_eq!(loaded.sessions().count(), 1);
    let (session, _) = loaded.sessions().next().unwrap();
    assert_eq!(loaded.tree().ephemerals_of(session).count(), 1_000);
    let node = loaded
        .tree()
        .get("/bench/p999/n000999")
        .expect("node survives");
    assert_eq!(node.data(), Some(&[b'v'; 100][..]));
    eprintln!(
        "{} znodes -> snapshot of {} bytes ({:.1} bytes/znode)",
        state.tree().len(),
        bytes.len(),
        bytes.len() as f64 / state.tree().len() as f64
    );
}

#[test]
fn applying_after_a_reload_matches_applying_without_one() {
    let mut a = populated(3, 20);
    let mut b = snapshot::decode(&snapshot::encode(&a)).unwrap();
    for state in [&mut a, &mut b] {
        let session = state.sessions().next().unwrap().0;
        state.apply(&Txn {
            session_id: session,
            time_ms: 1,
            auth: vec![],
            enforce_quota: false,
            kind: TxnKind::CloseSession,
        });
    }
    assert_eq!(a.digest(), b.digest());
    assert_eq!(a.last_zxid(), b.last_zxid());
}

/// `last_snapshot` reads a snapshot's zxid from its first bytes, as ZooKeeper reads it from
/// the file name.
#[test]
fn the_zxid_is_read_without_decoding_the_rest() {
    let state = populated(2, 10);
    assert!(state.last_zxid() > 0);
    let bytes = snapshot::encode(&state);
    assert_eq!(snapshot::read_zxid(&bytes[..]).unwrap(), state.last_zxid());
    assert!(snapshot::read_zxid(&bytes[..20]).is_err());
    assert!(snapshot::read_zxid(&b"not a snapshot at all"[..]).is_err());
}

#[test]
fn every_corrupted_byte_is_detected() {
    let bytes = snapshot::encode(&populated(2, 10));
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x01;
        assert!(
            snapshot::decode(&bad).is_err(),
            "flipped byte {i} went unnoticed"
        );
    }
    assert!(matches!(
        snapshot::decode(&bytes[..bytes.len() - 1]),
        Err(SnapshotError::Truncated | SnapshotError::Checksum { .. })
    ));
    assert!(matches!(
        snapshot::decode(b"nonsense"),
        Err(SnapshotError::Truncated)
    ));
}
