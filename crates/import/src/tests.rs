//! The importer on files written by a real ZooKeeper 3.9.5 (../shared/reference/
//! zookeeper-3.9.5-samples: `snapshot.0` of an empty server, `log.1.head4k` with the nine
//! transactions that followed, `snapshot.9` taken after them), and on damaged copies.

use std::fs;
use std::path::Path;

use warden_state::tree::NodeKind;

use super::*;

fn sample(name: &str) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/zookeeper-3.9.5-samples");
    fs::read(dir.join(name)).unwrap_or_else(|e| panic!("sample {name}: {e}"))
}

/// A ZooKeeper dataDir holding the given files in version-2.
fn data_dir(files: &[(&str, Vec<u8>)]) -> (tempfile::TempDir, Source) {
    let dir = tempfile::tempdir().unwrap();
    let version = dir.path().join(files::VERSION_DIR);
    fs::create_dir(&version).unwrap();
    for (name, bytes) in files {
        fs::write(version.join(name), bytes).unwrap();
    }
    let source = Source {
        data_dir: dir.path().to_owned(),
        data_log_dir: None,
    };
    (dir, source)
}

fn run(source: &Source) -> Result<Imported, ImportError> {
    import(source, StateConfig::default())
}

/// Every node's path, data and stored stat, and its ACL, in path order.
fn nodes(state: &State) -> Vec<(String, Option<Vec<u8>>, String)> {
    let tree = state.tree();
    let mut out = Vec::new();
    let mut stack = vec![warden_state::tree::ROOT];
    while let Some(id) = stack.pop() {
        let n = tree.node(id);
        out.push((
            tree.path_of(id),
            n.data().map(<[u8]>::to_vec),
            format!("{:?} {:?}", n.stat(), n.acl()),
        ));
        stack.extend(n.child_ids());
    }
    out.sort();
    out
}

#[test]
fn snapshot_9_loads_with_its_digest_checked() {
    let (_dir, source) = data_dir(&[("snapshot.9", sample("snapshot.9"))]);
    let imported = run(&source).unwrap();
    assert_eq!(imported.digests_checked, 1, "the snapshot's own digest");
    let state = &imported.state;
    assert_eq!(state.last_zxid(), 9);
    let session = 0x0100_000c_c01f_0000;
    assert_eq!(state.session(session).unwrap().timeout_ms, 10_000);
    let tree = state.tree();
    let eph = tree.get("/app/eph").unwrap();
    assert_eq!(eph.kind(), NodeKind::Ephemeral(session));
    assert_eq!(eph.data(), Some(&b"hello"[..]));
    assert_eq!(tree.get("/app/x").unwrap().data(), Some(&b"v4"[..]));
    assert_eq!(tree.get("/app/x").unwrap().stat().version, 5);
    let config = tree.get("/zookeeper/config").unwrap();
    assert_eq!(config.stat().aversion, -1);
    assert_eq!(config.acl(), warden_proto::Acl::read_only().as_slice());
    assert!(tree.get("/keeper").is_none(), "exactly ZooKeeper's tree");
}

/// Offsets of the log's entries (zxids 1 to 10; 10 closes the session).
const ENTRY_ZXID_3: usize = 0xb2;
const ENTRY_ZXID_4: usize = 0x119;
const ENTRY_ZXID_5: usize = 0x187;
const ENTRY_ZXID_10: usize = 0x308;

/// The log up to and including zxid 9: the rest zeroed, as ZooKeeper's padding.
fn log_to_9() -> Vec<u8> {
    let mut log = sample("log.1.head4k");
    log[ENTRY_ZXID_10..].fill(0);
    log
}

#[test]
fn snapshot_0_and_its_log_replay_to_snapshot_9() {
    let (_dir, source) = data_dir(&[("snapshot.0", sample("snapshot.0")), ("log.1", log_to_9())]);
    let replayed = run(&source).unwrap();
    assert_eq!(replayed.txns_replayed, 9);
    assert_eq!(replayed.digests_checked, 9, "every logged digest");
    assert_eq!(replayed.torn_tail, None);
    let (_dir9, source9) = data_dir(&[("snapshot.9", sample("snapshot.9"))]);
    let snapshot = run(&source9).unwrap();
    assert_eq!(nodes(&replayed.state), nodes(&snapshot.state));
    assert_eq!(
        replayed.state.sessions().collect::<Vec<_>>(),
        snapshot.state.sessions().collect::<Vec<_>>()
    );
}

#[test]
fn every_start_replays_to_the_same_state() {
    let log = || ("log.1", sample("log.1.head4k"));
    let starts = [
        vec![log()],
        vec![("snapshot.0", sample("snapshot.0")), log()],
        vec![("snapshot.9", sample("snapshot.9")), log()],
    ];
    let states: Vec<State> = starts
        .into_iter()
        .map(|files| {
            let (_dir, source) = data_dir(&files);
            run(&source).unwrap().state
        })
        .collect();
    for state in &states {
        assert_eq!(state.last_zxid(), 10);
        assert_eq!(state.sessions().count(), 0, "zxid 10 closed the session");
        assert!(
            state.tree().get("/app/eph").is_none(),
            "and deleted its ephemeral"
        );
        assert_eq!(nodes(state), nodes(&states[0]));
    }
}

#[test]
fn the_newest_snapshot_wins_and_a_damaged_one_is_passed_over() {
    let mut damaged = sample("snapshot.9");
    damaged[100] ^= 0x40;
    let (_dir, source) = data_dir(&[
        ("snapshot.0", sample("snapshot.0")),
        ("snapshot.9", damaged),
        ("log.1", log_to_9()),
    ]);
    let imported = run(&source).unwrap();
    assert_eq!(imported.snapshot.unwrap().1, 0);
    assert_eq!(imported.skipped_snapshots.len(), 1);
    assert!(
        imported.skipped_snapshots[0].contains("snapshot.9"),
        "{:?}",
        imported.skipped_snapshots
    );
    assert_eq!(imported.state.last_zxid(), 9);
}

#[test]
fn every_flipped_byte_of_a_snapshot_is_an_error_naming_file_and_offset() {
    let good = sample("snapshot.9");
    for at in 0..good.len() {
        let mut bytes = good.clone();
        bytes[at] ^= 0x01;
        let (_dir, source) = data_dir(&[("snapshot.9", bytes)]);
        let err = match run(&source) {
            Ok(_) => panic!("byte {at} flipped went unnoticed"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains("snapshot.9") && err.contains("byte"),
            "{at}: {err}"
        );
    }
}

#[test]
fn every_truncation_of_a_snapshot_is_an_error_but_after_a_seal() {
    let good = sample("snapshot.9");
    // The digest and last-zxid sections are optional: ZooKeeper reads a snapshot that ends
    // right after its first or second seal (a string "/" ends every seal).
    let mut readable = Vec::new();
    for len in 0..good.len() {
        let (_dir, source) = data_dir(&[("snapshot.9", good[..len].to_vec())]);
        if run(&source).is_ok() {
            assert!(good[..len].ends_with(b"\0\0\0\x01/"), "{len}");
            readable.push(len);
        }
    }
    assert_eq!(readable.len(), 2, "after seals 1 and 2: {readable:?}");
}

#[test]
fn a_flipped_byte_in_a_logged_record_is_an_error_naming_its_entry() {
    let good = sample("log.1.head4k");
    for at in ENTRY_ZXID_3 + 12..ENTRY_ZXID_4 - 1 {
        let mut bytes = good.clone();
        bytes[at] ^= 0x10;
        let (_dir, source) = data_dir(&[("snapshot.0", sample("snapshot.0")), ("log.1", bytes)]);
        let err = run(&source)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains(&format!(
                "log.1 is damaged at byte {ENTRY_ZXID_3}: checksum mismatch"
            )),
            "{at}: {err}"
        );
    }
}

#[test]
fn no_flip_or_cut_of_a_log_panics() {
    let good = sample("log.1.head4k");
    let boundaries = [
        0x10,
        0x4d,
        ENTRY_ZXID_3,
        ENTRY_ZXID_4,
        ENTRY_ZXID_5,
        0x1d4,
        0x221,
        0x26e,
        0x2bb,
        ENTRY_ZXID_10,
    ];
    let end = 0x351;
    for at in 0..0x400 {
        // Cut inside an entry, after some of its bytes that are not zeros (zeros alone are
        // ZooKeeper's padding).
        let entry = boundaries
            .iter()
            .rev()
            .find(|&&b| b <= at)
            .copied()
            .unwrap_or(0);
        let cut = at < end && good[entry.max(16).min(at)..at].iter().any(|&b| b != 0);
        let (_dir, source) = data_dir(&[
            ("snapshot.0", sample("snapshot.0")),
            ("log.1", good[..at].to_vec()),
        ]);
        if let Ok(imported) = run(&source) {
            assert_eq!(imported.torn_tail.is_some(), cut, "cut at {at}");
        }
        // ZooKeeper does not check the dbid of a log (bytes 8 to 15), nor the padding past a
        // zero length.
        if (8..16).contains(&at) || at >= end + 12 {
            continue;
        }
        let mut bytes = good.clone();
        bytes[at] ^= 0xff;
        let (_dir, source) = data_dir(&[("snapshot.0", sample("snapshot.0")), ("log.1", bytes)]);
        if let Ok(imported) = run(&source) {
            // Only a cut-short ending can pass: the entries before it are kept.
            assert!(
                imported.torn_tail.is_some(),
                "byte {at} flipped went unnoticed"
            );
        }
    }
}

#[test]
fn a_torn_last_entry_ends_the_log_cleanly() {
    let mut bytes = sample("log.1.head4k");
    // Cut the entry of zxid 4 short: its tail and 'B' are zeros, as after a crash in the
    // middle of a write to the preallocated file.
    bytes[ENTRY_ZXID_4 + 40..].fill(0);
    let (_dir, source) = data_dir(&[("snapshot.0", sample("snapshot.0")), ("log.1", bytes)]);
    let imported = run(&source).unwrap();
    let (path, at) = imported.torn_tail.unwrap();
    assert!(path.ends_with("log.1"));
    assert_eq!(at, ENTRY_ZXID_4 as u64);
    assert_eq!(imported.state.last_zxid(), 3);
}

#[test]
fn a_missing_log_is_a_gap() {
    let (_dir, source) = data_dir(&[
        ("snapshot.0", sample("snapshot.0")),
        ("log.5", {
            // The entries from zxid 5 on, as if log.1 had been lost after a roll at zxid 5.
            let log = sample("log.1.head4k");
            let mut file = log[..16].to_vec();
            file.extend_from_slice(&log[ENTRY_ZXID_5..]);
            file
        }),
    ]);
    let err = run(&source).err().expect("a gap").to_string();
    assert!(err.contains("transactions are missing"), "{err}");
}

#[test]
fn an_empty_directory_has_no_data() {
    let (_dir, source) = data_dir(&[]);
    assert!(matches!(run(&source), Err(ImportError::NoData { .. })));
}

#[test]
fn session_passwords_are_zookeepers() {
    // java.util.Random(0x0100000cc01f0000 ^ 0xB3415C00).nextBytes(new byte[16]), computed
    // with OpenJDK 17.
    let password = warden_state::restore::zookeeper_password(0x0100_000c_c01f_0000);
    let hex: String = password.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, "13ebbc78a45abc1fa9bbd22b8d05c220");
}

/// `bytes` as ZooKeeper writes a `.gz` snapshot (java.util.zip's GZIPOutputStream).
fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(bytes).unwrap();
    z.finish().unwrap()
}

/// `bytes` as ZooKeeper writes a `.snappy` snapshot (snappy-java's SnappyOutputStream: its
/// header, then length-prefixed raw blocks of at most 32 KiB).
fn snappy(bytes: &[u8]) -> Vec<u8> {
    let mut out = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
    for block in bytes.chunks(32 << 10) {
        let compressed = snap::raw::Encoder::new().compress_vec(block).unwrap();
        out.extend_from_slice(&(compressed.len() as i32).to_be_bytes());
        out.extend_from_slice(&compressed);
    }
    out
}

#[test]
fn compressed_snapshots_read_as_the_plain_one_and_damage_is_an_error() {
    let plain = sample("snapshot.9");
    for (name, bytes) in [
        ("snapshot.9.gz", gzip(&plain)),
        ("snapshot.9.snappy", snappy(&plain)),
    ] {
        let (_dir, source) = data_dir(&[(name, bytes.clone())]);
        let imported = run(&source).unwrap();
        assert_eq!(imported.digests_checked, 1, "{name}");
        assert!(imported.state.tree().get("/app/eph").is_some(), "{name}");
        for at in (2..bytes.len()).step_by(7) {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x20;
            let (_dir, source) = data_dir(&[(name, flipped)]);
            // A flip the format does not cover (gzip's header time) changes nothing.
            match run(&source) {
                Ok(other) => assert_eq!(nodes(&other.state), nodes(&imported.state)),
                Err(e) => assert!(e.to_string().contains(name), "{e}"),
            }
            let (_dir, source) = data_dir(&[(name, bytes[..at].to_vec())]);
            let err = run(&source).err().map(|e| e.to_string());
            assert!(err.is_some_and(|e| e.contains(name)), "{name} cut at {at}");
        }
    }
}

/// The admin `restore` command's body: ZooKeeper's snapshot.9 as its `snapshot` command
/// streams it.
#[test]
fn a_received_snapshot_takes_its_zxid_from_its_end_and_reads_as_the_file() {
    let plain = sample("snapshot.9");
    let (_dir, source) = data_dir(&[("snapshot.9", plain.clone())]);
    let from_file = run(&source).unwrap();
    for body in [plain.clone(), gzip(&plain)] {
        let restore = snapshot::parse_received(&body, 1 << 20, StateConfig::default()).unwrap();
        assert_eq!(restore.zxid(), 9, "the last processed zxid");
        let (state, _) = restore.finish();
        assert_eq!(nodes(&state), nodes(&from_file.state));
    }
    // Bounded: a body that decompresses past the limit is refused, not read on.
    let err = snapshot::parse_received(&gzip(&plain), plain.len() - 1, StateConfig::default());
    assert!(err.err().unwrap().to_string().contains("decompressed"));
}

#[test]
fn every_cut_or_flip_of_a_received_snapshot_is_an_error_naming_the_offset() {
    let plain = sample("snapshot.9");
    for at in 0..plain.len() {
        let err = snapshot::parse_received(&plain[..at], 1 << 20, StateConfig::default());
        let err = err
            .err()
            .unwrap_or_else(|| panic!("cut at {at} read"))
            .to_string();
        assert!(err.contains("the snapshot received"), "{err}");
        let mut flipped = plain.clone();
        flipped[at] ^= 0x01;
        // Every byte is under a seal, so no flip goes unnoticed.
        assert!(
            snapshot::parse_received(&flipped, 1 << 20, StateConfig::default()).is_err(),
            "flip at {at}"
        );
    }
}
