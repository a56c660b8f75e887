//! openraft's state machine over the [`Replica`]: committed entries are applied in log order;
//! snapshots are taken from a copy of the state made between two applies and encoded off the
//! apply path.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use openraft::EntryPayload;
use openraft::alias::{LogIdOf, SnapshotMetaOf, StoredMembershipOf};
use openraft::entry::RaftEntry;
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use warden_state::{State, snapshot};

use super::snapshot_due::LogSinceSnapshot;
use super::snapshot_store::{Snapshot, SnapshotStore, StateBytes};
use super::types::{Applied, WardenRaft};
use crate::replica::Replica;
use crate::stats::ServerStats;

pub struct StateMachine {
    replica: Arc<Mutex<Replica>>,
    applied: Option<LogIdOf<WardenRaft>>,
    membership: StoredMembershipOf<WardenRaft>,
    store: SnapshotStore,
    log_since_snapshot: LogSinceSnapshot,
}

impl StateMachine {
    pub fn new(
        replica: Arc<Mutex<Replica>>,
        store: SnapshotStore,
        log_since_snapshot: LogSinceSnapshot,
    ) -> StateMachine {
        StateMachine {
            replica,
            applied: None,
            membership: StoredMembershipOf::<WardenRaft>::default(),
            store,
            log_since_snapshot,
        }
    }

    fn replica(&self) -> std::sync::MutexGuard<'_, Replica> {
        self.replica.lock().expect("replica lock poisoned")
    }
}

/// Builds one snapshot from a copy of the state taken at a known log position.
pub struct SnapshotBuilder {
    state: State,
    /// How long taking `state` held applies and reads.
    copy: Duration,
    meta: SnapshotMetaOf<WardenRaft>,
    store: SnapshotStore,
    stats: Arc<ServerStats>,
}

impl RaftSnapshotBuilder<WardenRaft> for SnapshotBuilder {
    type SnapshotData = StateBytes;

    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let state = std::mem::replace(&mut self.state, State::new(Default::default()));
        let meta = self.meta.clone();
        let store = self.store.clone();
        let stats = self.stats.clone();
        let copy = self.copy;
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let snapshot = store.write(&meta, &state)?;
            let ms = started.elapsed().as_millis() as u64;
            let bytes = snapshot.snapshot.len();
            stats.snapshot_written(ms, bytes);
            tracing::info!(
                path = %store.path_of(&meta).display(),
                bytes,
                znodes = state.tree().len(),
                copy_us = copy.as_micros() as u64,
                ms,
                "snapshot written"
            );
            Ok(snapshot)
        })
        .await
        .map_err(io::Error::other)?
    }
}

impl RaftStateMachine<WardenRaft> for StateMachine {
    type SnapshotData = StateBytes;
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogIdOf<WardenRaft>>, StoredMembershipOf<WardenRaft>), io::Error> {
        Ok((self.applied, self.membership.clone()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> Result<(), io::Error>
    where
        S: futures_util::Stream<Item = Result<EntryResponder<WardenRaft>, io::Error>>
            + Unpin
            + Send,
    {
        while let Some(item) = entries.next().await {
            let (entry, responder) = item?;
            let log_id = entry.log_id();
            let zxid = {
                let mut replica = self.replica.lock().expect("replica lock poisoned");
                let now = Instant::now();
                replica.entering_term(log_id.leader_id.term);
                let zxid = match &entry.payload {
                    EntryPayload::Normal(proposal) => {
                        let zxid = replica.apply(proposal, now);
                        self.log_since_snapshot.applied(
                            proposal.encoded().len() as u64,
                            replica.state().tree().approximate_data_size(),
                        );
                        zxid
                    }
                    EntryPayload::Membership(m) => {
                        self.membership =
                            StoredMembershipOf::<WardenRaft>::new(Some(log_id), m.clone());
                        replica.state().last_zxid()
                    }
                    EntryPayload::Blank => replica.state().last_zxid(),
                };
                replica.stats.apply.record(now.elapsed());
                zxid
            };
            self.applied = Some(log_id);
            if let Some(responder) = responder {
                responder.send(Applied { zxid });
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        // The copy is taken here, on the apply path, so it matches `applied` exactly; the
        // encoding and the write happen in `build_snapshot` while applies go on.
        self.log_since_snapshot.snapshotted();
        let replica = self.replica();
        let copying = Instant::now();
        let state = replica.state().clone();
        let copy = copying.elapsed();
        replica.stats.snapshot_copy.record(copy);
        SnapshotBuilder {
            state,
            copy,
            stats: replica.stats.clone(),
            meta: SnapshotMetaOf::<WardenRaft> {
                last_log_id: self.applied,
                last_membership: self.membership.clone(),
            },
            store: self.store.clone(),
        }
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMetaOf<WardenRaft>,
        data: StateBytes,
    ) -> Result<(), io::Error> {
        let started = Instant::now();
        let store = self.store.clone();
        let owned_meta = meta.clone();
        let state = tokio::task::spawn_blocking(move || {
            let invalid = |e| io::Error::new(io::ErrorKind::InvalidData, e);
            match data {
                // Ours (a restart): decoded as it streams from the file.
                StateBytes::Stored { file, len } => {
                    snapshot::decode_from(file, len).map_err(invalid)
                }
                // A leader's: checked whole before it is decoded, then kept.
                StateBytes::Received(bytes) => {
                    let bytes = bytes.into_inner();
                    let state = snapshot::decode(&bytes).map_err(invalid)?;
                    if !store.contains(&owned_meta) {
                        store.save(&owned_meta, &bytes)?;
                    }
                    Ok(state)
                }
            }
        })
        .await
        .map_err(io::Error::other)??;
        let ms = started.elapsed().as_millis() as u64;
        tracing::info!(
            znodes = state.tree().len(),
            zxid = state.last_zxid(),
            ms,
            "snapshot loaded"
        );
        {
            let mut replica = self.replica();
            replica.stats.snapshot_loaded(ms);
            replica.install(state);
        }
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        self.log_since_snapshot.snapshotted();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.latest())
            .await
            .map_err(io::Error::other)?
    }
}
