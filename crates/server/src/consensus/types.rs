//! openraft's type configuration for Warden and the log entry it replicates.

use std::fmt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use warden_proto::jute::{DecodeError, Reader, Record, Writer};
use warden_proto::{ErrorCode, Id, Request};
use warden_state::mirror::{MirroredTxn, ZkTree};
use warden_state::restore::Restore;
use warden_state::{StateConfig, Txn, TxnKind};

/// Where a proposal came from, so that the replica owning the connection can answer it.
/// The key survives restarts: `incarnation` is drawn at random when the process starts, so an
/// entry proposed by an earlier process of the same node never reaches a connection of a
/// later one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// The node whose client sent it.
    pub node: u64,
    /// The process of that node.
    pub incarnation: u64,
    /// That process's connection (ids are never reused while the process lives).
    pub connection: u64,
    /// The connection's count of writes sent, this one included: the replica checks that a
    /// connection's writes are applied 1, 2, 3... and treats a gap as a lost write.
    pub seq: u64,
    /// The request's xid, echoed in the reply.
    pub xid: i32,
}

/// One replicated log entry: a transaction and who is waiting for its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub origin: Option<Origin>,
    pub txn: Txn,
}

impl Proposal {
    /// A transaction no client waits for (the leader's own, an operator's, the mirror's), in
    /// `session_id`'s name (0 for none); the leader stamps its time when it proposes it.
    pub fn own(session_id: i64, kind: TxnKind) -> Proposal {
        Proposal {
            origin: None,
            txn: Txn {
                session_id,
                time_ms: 0,
                auth: Vec::new(),
                enforce_quota: false,
                kind,
            },
        }
    }
}

impl fmt::Display for Proposal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.txn.kind {
            TxnKind::CreateSession { .. } => "createSession".to_owned(),
            TxnKind::CloseSession => "closeSession".to_owned(),
            TxnKind::Request(req) => format!("{:?}", req.op()),
            TxnKind::DeleteContainer { path } => format!("deleteContainer {path}"),
            TxnKind::Reconfigured { .. } => "reconfigured".to_owned(),
            TxnKind::Refused { err } => format!("refused {}", err.0),
            TxnKind::Restore { snapshot } => format!("restore of {} bytes", snapshot.len()),
            TxnKind::MirrorReset(tree) => format!("mirror reset to zxid {:#x}", tree.zxid),
            TxnKind::Mirrored(m) => format!("mirrored zxid {:#x}", m.txn.zxid),
            TxnKind::Promote => "promote".to_owned(),
        };
        write!(f, "{kind} session {:#x}", self.txn.session_id)
    }
}

/// Tags of [`TxnKind`] in the encoded entry. Never renumber: they are on disk.
mod tag {
    pub const CREATE_SESSION: u8 = 1;
    pub const CLOSE_SESSION: u8 = 2;
    pub const REQUEST: u8 = 3;
    pub const DELETE_CONTAINER: u8 = 4;
    pub const RECONFIGURED: u8 = 5;
    pub const REFUSED: u8 = 6;
    pub const RESTORE: u8 = 7;
    pub const MIRROR_RESET: u8 = 8;
    pub const MIRRORED: u8 = 9;
    pub const PROMOTE: u8 = 10;
}

/// Version byte of the encoding below, first in every entry. Version 1 (one-node servers)
/// had no incarnation or sequence in the origin; its entries are still read, with both 0,
/// which no live connection has. Versions 1 and 2 had no quota flag: their writes were
/// made when Warden enforced no quota, and are read as such.
const PROPOSAL_FORMAT: u8 = 3;
const PROPOSAL_FORMAT_V2: u8 = 2;
const PROPOSAL_FORMAT_V1: u8 = 1;

impl Proposal {
    /// The entry's bytes: the request keeps ZooKeeper's own jute encoding, so the log holds
    /// exactly what the client asked for.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.write_u8(PROPOSAL_FORMAT);
        match self.origin {
            Some(o) => {
                w.write_bool(true);
                w.write_i64(o.node as i64);
                w.write_i64(o.incarnation as i64);
                w.write_i64(o.connection as i64);
                w.write_i64(o.seq as i64);
                w.write_i32(o.xid);
            }
            None => w.write_bool(false),
        }
        let txn = &self.txn;
        w.write_i64(txn.session_id);
        w.write_i64(txn.time_ms);
        w.write_bool(txn.enforce_quota);
        w.write_vec(&txn.auth, |w, id| id.encode(w));
        match &txn.kind {
            TxnKind::CreateSession {
                timeout_ms,
                password,
            } => {
                w.write_u8(tag::CREATE_SESSION);
                w.write_i32(*timeout_ms);
                w.write_bytes(password);
            }
            TxnKind::CloseSession => w.write_u8(tag::CLOSE_SESSION),
            TxnKind::Request(req) => {
                w.write_u8(tag::REQUEST);
                w.write_i32(req.op() as i32);
                req.encode(&mut w);
            }
            TxnKind::DeleteContainer { path } => {
                w.write_u8(tag::DELETE_CONTAINER);
                w.write_string(path);
            }
            TxnKind::Reconfigured { members } => {
                w.write_u8(tag::RECONFIGURED);
                w.write_string(members);
            }
            TxnKind::Refused { err } => {
                w.write_u8(tag::REFUSED);
                w.write_i32(err.0);
            }
            TxnKind::Restore { snapshot } => {
                w.write_u8(tag::RESTORE);
                w.write_bytes(snapshot);
            }
            // ZooKeeper's own bytes: the snapshot dump its leader sent (empty for its empty
            // tree) and each transaction as its leader sent it.
            TxnKind::MirrorReset(tree) => {
                w.write_u8(tag::MIRROR_RESET);
                w.write_i64(tree.zxid);
                w.write_bytes(&tree.wire);
            }
            TxnKind::Mirrored(m) => {
                w.write_u8(tag::MIRRORED);
                w.write_bytes(&m.wire);
            }
            TxnKind::Promote => w.write_u8(tag::PROMOTE),
        }
        w.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<Proposal, DecodeError> {
        let mut r = Reader::new(bytes);
        let format = r.read_u8()?;
        if ![PROPOSAL_FORMAT, PROPOSAL_FORMAT_V2, PROPOSAL_FORMAT_V1].contains(&format) {
            return Err(DecodeError::InvalidValue {
                field: "proposal format",
                value: format.into(),
            });
        }
        let origin = if r.read_bool()? {
            let node = r.read_i64()? as u64;
            let (incarnation, connection, seq) = if format == PROPOSAL_FORMAT_V1 {
                (0, r.read_i64()? as u64, 0)
            } else {
                (
                    r.read_i64()? as u64,
                    r.read_i64()? as u64,
                    r.read_i64()? as u64,
                )
            };
            Some(Origin {
                node,
                incarnation,
                connection,
                seq,
                xid: r.read_i32()?,
            })
        } else {
            None
        };
        let session_id = r.read_i64()?;
        let time_ms = r.read_i64()?;
        let enforce_quota = format == PROPOSAL_FORMAT && r.read_bool()?;
        let auth = r.read_vec(8, Id::decode)?;
        let kind = match r.read_u8()? {
            tag::CREATE_SESSION => TxnKind::CreateSession {
                timeout_ms: r.read_i32()?,
                password: Vec::<u8>::decode(&mut r)?,
            },
            tag::CLOSE_SESSION => TxnKind::CloseSession,
            tag::REQUEST => {
                let op = r.read_i32()?;
                TxnKind::Request(Request::decode(op, &mut r)?)
            }
            tag::DELETE_CONTAINER => TxnKind::DeleteContainer {
                path: r.read_string()?,
            },
            tag::RECONFIGURED => TxnKind::Reconfigured {
                members: r.read_string()?,
            },
            tag::REFUSED => TxnKind::Refused {
                err: ErrorCode(r.read_i32()?),
            },
            tag::RESTORE => TxnKind::Restore {
                snapshot: Vec::<u8>::decode(&mut r)?,
            },
            tag::MIRROR_RESET => {
                let zxid = r.read_i64()?;
                TxnKind::MirrorReset(zk_tree(zxid, Vec::<u8>::decode(&mut r)?)?)
            }
            tag::MIRRORED => TxnKind::Mirrored(mirrored_txn(Vec::<u8>::decode(&mut r)?)?),
            tag::PROMOTE => TxnKind::Promote,
            other => {
                return Err(DecodeError::InvalidValue {
                    field: "transaction kind",
                    value: other.into(),
                });
            }
        };
        r.finish()?;
        Ok(Proposal {
            origin,
            txn: Txn {
                session_id,
                time_ms,
                auth,
                enforce_quota,
                kind,
            },
        })
    }
}

/// The tree a mirror starts from: ZooKeeper's empty tree (no bytes), or the snapshot dump its
/// leader sent after SNAP at `zxid`. (The state's settings are the replica's own: the tree
/// is taken into it.)
pub fn zk_tree(zxid: i64, wire: Vec<u8>) -> Result<ZkTree, DecodeError> {
    let config = StateConfig::default();
    let restore = if wire.is_empty() {
        let mut restore = Restore::empty(config);
        restore.set_zxid(zxid);
        restore
    } else {
        warden_import::snapshot::parse_dump(Path::new("ZooKeeper snapshot"), zxid, &wire, config)
            .map_err(|e| {
                tracing::warn!(error = %e, "a mirrored ZooKeeper snapshot does not read");
                DecodeError::InvalidValue {
                    field: "mirrored ZooKeeper snapshot",
                    value: wire.len() as i64,
                }
            })?
    };
    Ok(ZkTree::new(Arc::from(wire), restore))
}

/// One transaction as ZooKeeper's leader sent it (TxnHeader, record, digest).
pub fn mirrored_txn(wire: Vec<u8>) -> Result<MirroredTxn, DecodeError> {
    let (txn, _) = warden_import::txnlog::decode(&wire).map_err(|e| {
        tracing::warn!(error = %e, "a mirrored ZooKeeper transaction does not read");
        DecodeError::InvalidValue {
            field: "mirrored ZooKeeper transaction",
            value: wire.len() as i64,
        }
    })?;
    Ok(MirroredTxn {
        txn,
        wire: Arc::from(wire),
    })
}

/// A proposal as openraft carries it: one copy shared by the log's cache, the apply and
/// every replication stream (each used to take a deep copy), with its log encoding made at
/// most once, whether for the log file, a follower, or the cache's size estimate.
#[derive(Clone)]
pub struct LogProposal(Arc<Encoded>);

struct Encoded {
    proposal: Proposal,
    bytes: OnceLock<Box<[u8]>>,
}

impl LogProposal {
    pub fn new(proposal: Proposal) -> LogProposal {
        LogProposal(Arc::new(Encoded {
            proposal,
            bytes: OnceLock::new(),
        }))
    }

    /// [`Proposal::encode`], made on first use and kept.
    pub fn encoded(&self) -> &[u8] {
        self.0
            .bytes
            .get_or_init(|| self.0.proposal.encode().into_boxed_slice())
    }
}

impl std::ops::Deref for LogProposal {
    type Target = Proposal;
    fn deref(&self) -> &Proposal {
        &self.0.proposal
    }
}

impl PartialEq for LogProposal {
    fn eq(&self, other: &LogProposal) -> bool {
        self.0.proposal == other.0.proposal
    }
}

impl Eq for LogProposal {}

impl fmt::Debug for LogProposal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.proposal.fmt(f)
    }
}

impl fmt::Display for LogProposal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.proposal.fmt(f)
    }
}

impl Serialize for LogProposal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.encoded())
    }
}

impl<'de> Deserialize<'de> for LogProposal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let bytes: serde_bytes_buf::Bytes = Deserialize::deserialize(d)?;
        let proposal = Proposal::decode(&bytes.0).map_err(serde::de::Error::custom)?;
        // The bytes read are the encoding: kept, they spare an encode if the entry is sent on.
        Ok(LogProposal(Arc::new(Encoded {
            proposal,
            bytes: OnceLock::from(bytes.0.into_boxed_slice()),
        })))
    }
}

/// Deserializes a byte string however the format presents it (borrowed, owned or as a
/// sequence), so that `Proposal` does not depend on the format's buffering.
mod serde_bytes_buf {
    use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};
    use std::fmt;

    pub struct Bytes(pub Vec<u8>);

    impl<'de> Deserialize<'de> for Bytes {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Bytes;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a byte string")
                }
                fn visit_bytes<E>(self, v: &[u8]) -> Result<Bytes, E> {
                    Ok(Bytes(v.to_vec()))
                }
                fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Bytes, E> {
                    Ok(Bytes(v))
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
                    let mut out = Vec::new();
                    while let Some(b) = seq.next_element::<u8>()? {
                        out.push(b);
                    }
                    Ok(Bytes(out))
                }
            }
            d.deserialize_byte_buf(V)
        }
    }
}

/// The answer the state machine gives openraft for an entry: only the zxid. The real
/// outcome is delivered to the connection by the replica that owns it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub zxid: i64,
}

/// How a member is reached. Part of the on-disk membership, so fields are only ever added.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerNode {
    /// `host:port` other members replicate to.
    pub peer_addr: String,
    /// `host:port` clients connect to.
    pub client_addr: String,
}

/// What openraft calls when a proposal is done with: with the applied result, or with the
/// reason it never entered the log (this server does not lead). A closure, so that each
/// proposer decides what a failure means (close a local connection, tell a follower).
pub struct Completion<T>(Box<dyn FnOnce(T) + Send>);

impl<T> Completion<T> {
    pub fn new(f: impl FnOnce(T) + Send + 'static) -> Completion<T> {
        Completion(Box::new(f))
    }
}

impl<T: Send + 'static> openraft::raft::responder::Responder<WardenRaft, T> for Completion<T> {
    fn on_complete(self, result: T) {
        (self.0)(result)
    }
}

/// Warden's openraft types. Every type that shapes the on-disk log is named here. Written out
/// rather than with `declare_raft_types!`, whose syntax cannot name a responder of our own.
#[derive(Debug, Clone, Copy, Default, Eq, PartialEq, Ord, PartialOrd)]
pub struct WardenRaft {}

impl openraft::RaftTypeConfig for WardenRaft {
    type D = LogProposal;
    type R = Applied;
    type NodeId = u64;
    type Node = PeerNode;
    type Term = u64;
    type LeaderId = openraft::impls::leader_id_std::LeaderId<u64, u64>;
    type Vote = openraft::impls::Vote<Self::LeaderId>;
    type Payload = openraft::EntryPayload<Self::D, Self::NodeId, Self::Node>;
    type Entry =
        openraft::Entry<<Self::LeaderId as openraft::vote::RaftLeaderId>::Committed, Self::Payload>;
    type Responder<T>
        = Completion<T>
    where
        T: Send + 'static;
    type Batch<T>
        = openraft::impls::InlineBatch<T>
    where
        T: Send + 'static;
    type AsyncRuntime = openraft::impls::TokioRuntime;
    type ErrorSource = openraft::impls::BoxedErrorSource;
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_proto::request::CreateRequest;

    fn roundtrip(p: Proposal) {
        let p = LogProposal::new(p);
        let bytes = rmp_serde::to_vec(&p).unwrap();
        let back: LogProposal = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(p, back);
        assert_eq!(
            back.encoded(),
            p.encode(),
            "the bytes read are kept as the encoding"
        );
    }

    #[test]
    fn every_kind_roundtrips_through_the_log_codec() {
        let txn = |kind| Txn {
            session_id: 0x1234,
            time_ms: 1_700_000_000_000,
            auth: vec![Id {
                scheme: "digest".into(),
                id: "alice:x".into(),
            }],
            enforce_quota: true,
            kind,
        };
        roundtrip(Proposal {
            origin: Some(Origin {
                node: 1,
                incarnation: 0x5eed,
                connection: 7,
                seq: 3,
                xid: 42,
            }),
            txn: txn(TxnKind::Request(Request::Create(CreateRequest {
                path: "/a".into(),
                data: Some(b"v".to_vec()),
                acl: vec![],
                flags: 0,
            }))),
        });
        roundtrip(Proposal {
            origin: None,
            txn: txn(TxnKind::CreateSession {
                timeout_ms: 30_000,
                password: vec![1; 16],
            }),
        });
        roundtrip(Proposal {
            origin: None,
            txn: txn(TxnKind::CloseSession),
        });
        roundtrip(Proposal {
            origin: None,
            txn: txn(TxnKind::DeleteContainer { path: "/c".into() }),
        });
        roundtrip(Proposal {
            origin: None,
            txn: txn(TxnKind::Reconfigured {
                members: "server.1=a:2888:3888:participant;0.0.0.0:2181\n".into(),
            }),
        });
        roundtrip(Proposal {
            origin: None,
            txn: txn(TxnKind::Refused {
                err: ErrorCode::NEW_CONFIG_NO_QUORUM,
            }),
        });
        roundtrip(Proposal {
            origin: None,
            txn: txn(TxnKind::Restore {
                snapshot: warden_state::snapshot::encode(&warden_state::State::new(
                    Default::default(),
                )),
            }),
        });
        roundtrip(Proposal {
            origin: None,
            txn: txn(TxnKind::MirrorReset(
                zk_tree(0x2_0000_0000, Vec::new()).unwrap(),
            )),
        });
        // createSession as ZooKeeper's leader sends it: TxnHeader { clientId, cxid, zxid,
        // time, type }, CreateSessionTxn { timeOut }.
        let mut w = Writer::new();
        w.write_i64(0x0100_0000_0000_0001);
        w.write_i32(0);
        w.write_i64(0x2_0000_0001);
        w.write_i64(1_700_000_000_000);
        w.write_i32(-10);
        w.write_i32(30_000);
        let mirrored = mirrored_txn(w.into_bytes()).unwrap();
        assert_eq!(mirrored.txn.zxid, 0x2_0000_0001);
        roundtrip(Proposal {
            origin: None,
            txn: txn(TxnKind::Mirrored(mirrored)),
        });
        roundtrip(Proposal {
            origin: None,
            txn: txn(TxnKind::Promote),
        });
        assert!(
            mirrored_txn(vec![1, 2, 3]).is_err(),
            "bad bytes are an error"
        );
    }

    #[test]
    fn entries_of_one_node_servers_are_still_read() {
        // Format 1: origin = node, connection, xid; no incarnation or sequence.
        let mut w = Writer::new();
        w.write_u8(PROPOSAL_FORMAT_V1);
        w.write_bool(true);
        w.write_i64(1);
        w.write_i64(7);
        w.write_i32(42);
        w.write_i64(0x1234);
        w.write_i64(1_700_000_000_000);
        w.write_vec(&Vec::<Id>::new(), |w, id| id.encode(w));
        w.write_u8(tag::CLOSE_SESSION);
        let p = Proposal::decode(&w.into_bytes()).unwrap();
        let o = p.origin.unwrap();
        assert_eq!(
            (o.node, o.incarnation, o.connection, o.seq, o.xid),
            (1, 0, 7, 0, 42)
        );
        assert_eq!(p.txn.kind, TxnKind::CloseSession);
    }

    #[test]
    fn entries_from_before_quotas_are_read_as_unenforced() {
        let mut w = Writer::new();
        w.write_u8(PROPOSAL_FORMAT_V2);
        w.write_bool(false);
        w.write_i64(0x1234);
        w.write_i64(1_700_000_000_000);
        w.write_vec(&Vec::<Id>::new(), |w, id| id.encode(w));
        w.write_u8(tag::CLOSE_SESSION);
        let p = Proposal::decode(&w.into_bytes()).unwrap();
        assert!(!p.txn.enforce_quota);
        assert_eq!(p.txn.kind, TxnKind::CloseSession);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for n in 0..64u8 {
            let bytes: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37)).collect();
            let _ = Proposal::decode(&bytes);
        }
    }
}
