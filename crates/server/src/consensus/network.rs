//! Raft messages to other members. A one-member cluster never sends one: openraft asks for
//! a connection only to members other than itself. The transport between members (vote,
//! pre-vote, append, snapshot streaming, leader transfer) arrives with multi-server clusters;
//! until then a configuration with other members is refused at start-up, so nothing can
//! depend on these answers.

use std::future::Future;
use std::io;

use openraft::alias::{SnapshotOf, VoteOf};
use openraft::errors::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};

use super::types::{PeerNode, WardenRaft};

pub struct Network;

pub struct Peer {
    target: u64,
}

impl RaftNetworkFactory<WardenRaft> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, _node: &PeerNode) -> Peer {
        Peer { target }
    }
}

impl Peer {
    fn unreachable(&self) -> Unreachable<WardenRaft> {
        Unreachable::new(&io::Error::other(format!(
            "no transport to member {}: this build serves one-member clusters",
            self.target
        )))
    }
}

impl RaftNetworkV2<WardenRaft> for Peer {
    type SnapshotData = Vec<u8>;

    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<WardenRaft>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<WardenRaft>, RPCError<WardenRaft>> {
        Err(RPCError::Unreachable(self.unreachable()))
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<WardenRaft>,
        _option: RPCOption,
    ) -> Result<VoteResponse<WardenRaft>, RPCError<WardenRaft>> {
        Err(RPCError::Unreachable(self.unreachable()))
    }

    async fn pre_vote(
        &mut self,
        _rpc: VoteRequest<WardenRaft>,
        _option: RPCOption,
    ) -> Result<VoteResponse<WardenRaft>, RPCError<WardenRaft>> {
        Err(RPCError::Unreachable(self.unreachable()))
    }

    async fn full_snapshot(
        &mut self,
        _vote: VoteOf<WardenRaft>,
        _snapshot: SnapshotOf<WardenRaft, Vec<u8>>,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<WardenRaft>, StreamingError<WardenRaft>> {
        Err(StreamingError::Unreachable(self.unreachable()))
    }

    async fn transfer_leader(
        &mut self,
        _req: TransferLeaderRequest<WardenRaft>,
        _option: RPCOption,
    ) -> Result<TransferLeaderResponse<WardenRaft>, RPCError<WardenRaft>> {
        Err(RPCError::Unreachable(self.unreachable()))
    }
}
