//! Snapshots at scale: 1,000,000 znodes round trip exactly, and a corrupted byte anywhere is
//! refused rather than loaded (whether checked in memory or streamed from a file, and whether
//! decoded from memory or as it streams).

use warden_proto::request::{CreateRequest, DeleteRequest};
use warden_proto::{Acl, ErrorCode, Request};
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
    // Streamed as from its file: the same state, and the same encoding when written as it goes.
    let streamed = snapshot::decode_from(&bytes[..], bytes.len() as u64).expect("streams");
    assert_eq!(streamed.digest(), state.digest());
    assert_eq!(streamed.tree().len(), state.tree().len());
    drop(streamed);
    let mut written = Vec::new();
    snapshot::encode_to(&state, &mut written).unwrap();
    assert!(written == bytes, "encode_to writes what encode returns");
    drop(written);
    assert_eq!(loaded.digest(), state.digest());
    assert_eq!(loaded.tree().len(), state.tree().len());
    assert_eq!(
        loaded.tree().approximate_data_size(),
        state.tree().approximate_data_size()
    );
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

/// A list of children long enough to be kept out of its node lists the same order after a
/// reload, and its deletes move the same children on both sides.
#[test]
fn a_long_list_of_children_keeps_its_order_through_a_reload() {
    let delete = |state: &mut State, c: usize| {
        let session = state.sessions().next().unwrap().0;
        let path = format!("/bench/p0/n{c:06}");
        let kind = TxnKind::Request(Request::Delete(DeleteRequest { path, version: -1 }));
        let outcome = state.apply(&Txn {
            session_id: session,
            time_ms: 1,
            auth: vec![],
            enforce_quota: false,
            kind,
        });
        assert_eq!(outcome.err, ErrorCode::OK, "deleted child {c}");
    };
    let listed = |state: &State| -> Vec<String> {
        let parent = state.tree().get("/bench/p0").unwrap();
        parent.children().map(|c| c.name().to_owned()).collect()
    };
    let mut a = populated(1, 6_000);
    for c in (0..6_000).step_by(3) {
        delete(&mut a, c);
    }
    let mut b = snapshot::decode(&snapshot::encode(&a)).unwrap();
    assert_eq!(listed(&b), listed(&a));
    for c in (1..6_000).step_by(3) {
        delete(&mut a, c);
        delete(&mut b, c);
    }
    assert_eq!(listed(&a).len(), 2_000);
    assert_eq!(listed(&b), listed(&a));
    assert_eq!(a.digest(), b.digest());
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
    let len = bytes.len() as u64;
    assert!(snapshot::verify_stream(&mut &bytes[..], len).is_ok());
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x01;
        assert!(
            snapshot::decode(&bad).is_err(),
            "flipped byte {i} went unnoticed"
        );
        assert!(
            snapshot::decode_from(&bad[..], len).is_err(),
            "flipped byte {i} went unnoticed while streaming"
        );
        // The check a restart makes while streaming the file agrees with the one in memory.
        assert_eq!(
            snapshot::verify_stream(&mut &bad[..], len).ok(),
            snapshot::verify(&bad).ok().map(|(_, version)| version),
            "flipped byte {i}"
        );
    }
    assert!(snapshot::verify_stream(&mut &bytes[..bytes.len() - 1], len).is_err());
    assert!(matches!(
        snapshot::decode_from(&bytes[..bytes.len() - 1], len),
        Err(SnapshotError::Truncated)
    ));
    assert!(snapshot::decode_from(&bytes[..], len).is_ok());
    assert!(matches!(
        snapshot::decode_from(&b"nonsense"[..], 8),
        Err(SnapshotError::Truncated)
    ));
    assert!(matches!(
        snapshot::decode(&bytes[..bytes.len() - 1]),
        Err(SnapshotError::Truncated | SnapshotError::Checksum { .. })
    ));
    assert!(matches!(
        snapshot::decode(b"nonsense"),
        Err(SnapshotError::Truncated)
    ));
}

/// A snapshot whose body `change` altered, framed again with a good checksum: damage that only
/// the decoder itself can find.
fn reframed(bytes: &[u8], change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let (header, rest) = bytes.split_at(12);
    let mut body = zstd::decode_all(&rest[..rest.len() - 12]).unwrap();
    change(&mut body);
    let mut out = header.to_vec();
    out.extend(zstd::encode_all(&body[..], 3).unwrap());
    let len = out.len() as u64;
    out.extend(crc32c::crc32c(&out).to_le_bytes());
    out.extend(len.to_le_bytes());
    out
}

/// Where the record of the first node named `name` starts: its parent's ordinal.
fn record_of(body: &[u8], name: &str) -> usize {
    let mut needle = (name.len() as u64).to_le_bytes().to_vec();
    needle.extend(name.as_bytes());
    let at = body
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the name is in the body");
    at - 4
}

/// Damage inside a well-framed body is refused with what is wrong, whichever of the loader's
/// two threads (the one parsing nodes, the one building the tree) meets it.
#[test]
fn a_body_that_does_not_make_a_tree_is_refused() {
    let bytes = snapshot::encode(&populated(2, 3));
    assert!(snapshot::decode(&reframed(&bytes, |_| {})).is_ok());
    let corrupt = |bytes: &[u8]| match (
        snapshot::decode(bytes),
        snapshot::decode_from(bytes, bytes.len() as u64),
    ) {
        (Err(SnapshotError::Corrupt(what)), Err(SnapshotError::Corrupt(streamed))) => {
            assert_eq!(what, streamed, "streamed and in memory agree");
            what
        }
        (other, streamed) => panic!(
            "expected a corrupt body, got {:?} and {:?} streamed",
            other.map(|_| ()),
            streamed.map(|_| ())
        ),
    };
    // Two children of one parent with one name: found while building the tree.
    let twin = reframed(&bytes, |body| {
        let at = record_of(body, "n000001");
        body[at + 4 + 8..at + 4 + 8 + 7].copy_from_slice(b"n000000");
    });
    assert_eq!(corrupt(&twin), "node name");
    // A parent that is not an open node before it: found while parsing.
    let orphan = reframed(&bytes, |body| {
        let at = record_of(body, "n000001");
        body[at..at + 4].copy_from_slice(&0xFFFF_FF00u32.to_le_bytes());
    });
    assert_eq!(corrupt(&orphan), "parent ordinal");
    // Nodes missing at the end.
    let short = reframed(&bytes, |body| {
        let at = record_of(body, "n000002");
        body.truncate(at);
    });
    assert_eq!(corrupt(&short), "body ends early");
    // A node changed after it was hashed: every node is sound, the digest is not.
    let changed = reframed(&bytes, |body| {
        let at = record_of(body, "n000002");
        body[at + 4 + 8 + 7 + 1 + 8] ^= 1;
    });
    assert!(matches!(
        snapshot::decode(&changed),
        Err(SnapshotError::Digest { .. })
    ));
    assert!(matches!(
        snapshot::decode_from(&changed[..], changed.len() as u64),
        Err(SnapshotError::Digest { .. })
    ));
}
