//! The founding snapshot of a data directory whose state was made elsewhere (`warden
//! import`): the state at log index 0 with the membership `initialize` would write there, so
//! that a server started on it loads it like any snapshot, counts itself initialized, and
//! elects a leader; every founding member of a cluster gets the same file.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use openraft::alias::{CommittedLeaderIdOf, SnapshotMetaOf, StoredMembershipOf};
use openraft::{LogId, Membership};
use warden_state::State;

use super::snapshot_store::SnapshotStore;
use super::types::{PeerNode, WardenRaft};
use super::{MemberAddr, peer_node};

/// Writes `state` as the first snapshot in `snapshot_dir` for a cluster founded by the voters
/// among `members`; returns the file written.
pub fn write(snapshot_dir: &Path, members: &[MemberAddr], state: &State) -> io::Result<PathBuf> {
    // Where `initialize` puts the first membership: term 0, index 0.
    let log_id = LogId::new(CommittedLeaderIdOf::<WardenRaft>::new(0), 0);
    let voters: BTreeMap<u64, PeerNode> = members
        .iter()
        .filter(|m| m.voter)
        .map(|m| (m.id, peer_node(m)))
        .collect();
    let meta = SnapshotMetaOf::<WardenRaft> {
        last_log_id: Some(log_id),
        last_membership: StoredMembershipOf::<WardenRaft>::new(
            Some(log_id),
            Membership::from(voters),
        ),
    };
    let store = SnapshotStore::open(snapshot_dir.to_path_buf(), 1)?;
    store.write(&meta, state)?;
    Ok(store.path_of(&meta))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use warden_state::restore::{LoggedOp, LoggedTxn, Restore};
    use warden_state::{StateConfig, TxnKind};

    use super::super::tests::{only_member, test_options};
    use super::super::{Consensus, Options, Proposal};
    use super::*;
    use crate::replica::Replica;

    #[tokio::test]
    async fn a_server_starts_from_the_founding_snapshot_and_goes_on_from_its_zxid() {
        let mut restore = Restore::empty(StateConfig::default());
        restore.apply(&LoggedTxn {
            session_id: 0,
            zxid: 41,
            time_ms: 1,
            op: LoggedOp::Create {
                path: "/imported".into(),
                data: Some(b"zk".to_vec()),
                acl: warden_proto::Acl::open(),
                ephemeral_owner: 0,
                parent_cversion: 1,
                fix_parent_if_exists: true,
            },
        });
        let (state, _) = restore.finish();
        let dir = tempfile::tempdir().unwrap();
        let me = only_member();
        write(
            &dir.path().join("snapshots"),
            std::slice::from_ref(&me),
            &state,
        )
        .unwrap();
        let replica = Arc::new(Mutex::new(Replica::new(
            1,
            1,
            warden_state::State::new(StateConfig::default()),
        )));
        let consensus = Consensus::start(
            Options {
                snapshot_on_exit: false,
                ..test_options(dir.path(), vec![me])
            },
            replica.clone(),
        )
        .await
        .unwrap();
        let zxid = || replica.lock().unwrap().state().last_zxid();
        assert_eq!(zxid(), 41);
        let node = replica
            .lock()
            .unwrap()
            .state()
            .tree()
            .get("/imported")
            .map(|n| n.data().map(<[u8]>::to_vec));
        assert_eq!(node, Some(Some(b"zk".to_vec())));
        let create_session = Proposal::own(
            0,
            TxnKind::CreateSession {
                timeout_ms: 10_000,
                password: vec![0; 16],
            },
        );
        consensus
            .propose(create_session, None, |e| panic!("{e}"))
            .await;
        tokio::time::timeout(Duration::from_secs(10), async {
            while zxid() != 42 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the next transaction takes the imported zxid + 1");
        consensus.shutdown().await;
    }
}
