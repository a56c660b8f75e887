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

use super::snapshot_store::{Snapshot, SnapshotStore};
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
    let snapshot = Snapshot {
        meta: SnapshotMetaOf::<WardenRaft> {
            last_log_id: Some(log_id),
            last_membership: StoredMembershipOf::<WardenRaft>::new(
                Some(log_id),
                Membership::from(voters),
            ),
        },
        snapshot: warden_state::snapshot::encode(state),
    };
    SnapshotStore::open(snapshot_dir.to_path_buf(), 1)?.save(&snapshot)
}
