//! Warden's state written as one ZooKeeper snapshot, byte for byte as ZooKeeper 3.9's
//! `FileSnap.serialize` writes its own, with digest and last processed zxid (the layout
//! [`crate::snapshot`] reads, drawn in docs/migration.md). ZooKeeper 3.9 loads it from a data
//! directory (`snapshot.<zxid in hex>`) or through its admin `restore` command; `warden
//! import` and Warden's `restore` read it back.
//!
//! The state is one consistent copy, so the snapshot is not fuzzy: its name zxid, its
//! digest's zxid and its last processed zxid are the same, and the digest is the tree's.
//!
//! ClickHouse Keeper's /keeper subtree is left out: it is Warden's own system nodes, and a
//! ZooKeeper holding /keeper/api_version would tell ClickHouse it speaks Keeper's extensions.

use std::collections::BTreeMap;

use warden_proto::{Acl, Record, Writer};
use warden_state::State;
use warden_state::restore::zookeeper_node_digest;
use warden_state::tree::{DataTree, NodeRef, NodeStat, ROOT};

use crate::snapshot::{DBID, DIGEST_VERSION, MAGIC, VERSION, seal_checksum};

/// Warden's own system subtree, not written.
const LEFT_OUT: &str = warden_state::system::KEEPER;

/// A snapshot in ZooKeeper's format.
pub struct Written {
    pub bytes: Vec<u8>,
    /// The state's zxid: the one ZooKeeper puts in the file's name.
    pub zxid: i64,
    pub znodes: usize,
}

impl Written {
    /// `snapshot.<zxid in hex>`, the name ZooKeeper looks for in its data directory.
    pub fn file_name(&self) -> String {
        format!("snapshot.{:x}", self.zxid)
    }
}

/// Writes `state` in ZooKeeper's snapshot format.
pub fn write(state: &State) -> Written {
    let tree = state.tree();
    let mut w =
        Writer::with_capacity(tree.approximate_data_size() as usize + tree.len() * 96 + 1024);
    w.write_i32(MAGIC);
    w.write_i32(VERSION);
    w.write_i64(DBID);
    let sessions: Vec<_> = state.sessions().collect();
    w.write_i32(count(sessions.len()));
    for (id, session) in sessions {
        w.write_i64(id);
        w.write_i32(session.timeout_ms);
    }
    // The ACL lists the written nodes use, under Warden's own ids as references.
    let mut acls: BTreeMap<i64, &[Acl]> = BTreeMap::new();
    preorder(tree, |_, node| {
        acls.insert(i64::from(node.acl_id()), node.acl());
    });
    w.write_i32(count(acls.len()));
    for (reference, list) in &acls {
        w.write_i64(*reference);
        w.write_vec(list, |w, acl| acl.encode(w));
    }
    let mut digest = 0u64;
    let mut znodes = 0;
    preorder(tree, |path, node| {
        // ZooKeeper writes the root under the empty path and hashes it so.
        let zk_path = if path == "/" { "" } else { path };
        w.write_string(zk_path);
        w.write_buffer(node.data());
        w.write_i64(i64::from(node.acl_id()));
        write_stat(&mut w, &node.stat());
        digest = digest.wrapping_add(zookeeper_node_digest(path, node));
        znodes += 1;
    });
    w.write_string("/");
    seal(&mut w);
    let zxid = state.last_zxid();
    w.write_i64(zxid);
    w.write_i32(DIGEST_VERSION);
    w.write_i64(digest as i64);
    seal(&mut w);
    w.write_i64(zxid);
    seal(&mut w);
    Written {
        bytes: w.into_bytes(),
        zxid,
        znodes,
    }
}

/// Every node but the left-out subtree, each after its parent (`DataTree.serializeNode`).
fn preorder<'t>(tree: &'t DataTree, mut visit: impl FnMut(&str, NodeRef<'t>)) {
    let mut stack = vec![(ROOT, "/".to_owned())];
    while let Some((id, path)) = stack.pop() {
        let node = tree.node(id);
        visit(&path, node);
        for child in node.child_ids().rev() {
            let child_path = warden_state::path::join(&path, tree.node(child).name());
            if child_path != LEFT_OUT {
                stack.push((child, child_path));
            }
        }
    }
}

/// `StatPersisted`, the 60 bytes [`crate::snapshot`] reads back.
fn write_stat(w: &mut Writer, s: &NodeStat) {
    for v in [s.czxid, s.mzxid, s.ctime, s.mtime] {
        w.write_i64(v);
    }
    for v in [s.version, s.cversion, s.aversion] {
        w.write_i32(v);
    }
    w.write_i64(s.ephemeral_owner);
    w.write_i64(s.pzxid);
}

/// `SnapStream.sealStream`: the Adler-32 of every byte so far, then the string "/".
fn seal(w: &mut Writer) {
    let checksum = seal_checksum(w.as_bytes());
    w.write_i64(checksum);
    w.write_string("/");
}

fn count(n: usize) -> i32 {
    i32::try_from(n).expect("fewer than 2^31 sessions, ACL lists and nodes")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use warden_proto::Request;
    use warden_proto::request::CreateRequest;
    use warden_state::{StateConfig, Txn, TxnKind};

    use super::*;
    use crate::snapshot;

    fn txn(session_id: i64, kind: TxnKind) -> Txn {
        Txn {
            session_id,
            time_ms: 1_700_000_000_000,
            auth: vec![],
            enforce_quota: false,
            kind,
        }
    }

    /// `flags`: ZooKeeper's create mode (0 persistent, 1 ephemeral, 4 container).
    fn create(state: &mut State, session: i64, path: &str, acl: Vec<Acl>, flags: i32) {
        let out = state.apply(&txn(
            session,
            TxnKind::Request(Request::Create(CreateRequest {
                path: path.into(),
                data: Some(path.as_bytes().to_vec()),
                acl,
                flags,
            })),
        ));
        assert!(out.err.is_ok(), "{path}: {:?}", out.err);
    }

    fn sample() -> State {
        let mut state = State::new(StateConfig::default());
        let session = state
            .apply(&txn(
                0,
                TxnKind::CreateSession {
                    timeout_ms: 10_000,
                    password: vec![7; 16],
                },
            ))
            .created_session
            .unwrap();
        create(&mut state, session, "/a", Acl::open(), 0);
        create(&mut state, session, "/a/b", Acl::read_only(), 0);
        create(&mut state, session, "/a/e", Acl::open(), 1);
        create(&mut state, session, "/c", Acl::open(), 4);
        state
    }

    #[test]
    fn the_reader_reads_back_every_node_and_session_and_the_digest_matches() {
        let state = sample();
        let written = write(&state);
        assert_eq!(
            written.file_name(),
            format!("snapshot.{:x}", state.last_zxid())
        );
        let loaded = snapshot::parse(
            Path::new("written"),
            written.zxid,
            &written.bytes,
            StateConfig::default(),
        )
        .unwrap();
        let digest = loaded.digest.expect("a digest of the snapshot's own zxid");
        assert_eq!(digest.zxid, state.last_zxid());
        assert_eq!(digest.digest, loaded.restore.zookeeper_digest());
        let tree = loaded.restore.tree();
        assert_eq!(written.znodes, tree.len());
        assert_eq!(
            tree.len(),
            state.tree().len() - 3,
            "/keeper and its two children"
        );
        for path in [
            "/",
            "/a",
            "/a/b",
            "/a/e",
            "/c",
            "/zookeeper",
            "/zookeeper/config",
        ] {
            let (ours, theirs) = (state.tree().get(path).unwrap(), tree.get(path).unwrap());
            assert_eq!(ours.stat(), theirs.stat(), "{path}");
            assert_eq!(ours.data(), theirs.data(), "{path}");
            assert_eq!(ours.acl(), theirs.acl(), "{path}");
            let left_out = usize::from(path == "/");
            assert_eq!(
                ours.num_children() - left_out,
                theirs.num_children(),
                "{path}"
            );
        }
        assert!(tree.get(LEFT_OUT).is_none());
        let (restored, _) = loaded.restore.finish();
        let sessions: Vec<_> = restored
            .sessions()
            .map(|(id, s)| (id, s.timeout_ms))
            .collect();
        let expected: Vec<_> = state.sessions().map(|(id, s)| (id, s.timeout_ms)).collect();
        assert_eq!(sessions, expected);
    }

    #[test]
    fn it_ends_as_zookeeper_checks_a_snapshot_file_ends() {
        let written = write(&sample());
        let files = crate::files::looks_complete(&written.bytes, crate::files::Compression::Plain);
        assert!(files);
        assert_eq!(&written.bytes[..4], b"ZKSN");
    }
}
