//! ZooKeeper's quorum protocol (Zab) as a learner speaks it on the leader's quorum port:
//! `QuorumPacket` (`zookeeper.jute`), the observer's handshake records (`LearnerInfo`, the
//! epoch of LEADERINFO and ACKEPOCH), the session touches of a PING reply, and the framing of
//! the snapshot a leader streams after SNAP.
//!
//! Packets have no length prefix: a packet is its jute fields back to back, so
//! [`packet_len`] finds where one ends (once all of it is there) without allocating, and
//! [`SnapshotScan`] finds the end of a snapshot dump as its bytes arrive.

use crate::jute::{DecodeError, Reader, Record, Writer};
use crate::types::Id;

/// Packet types (`Leader.java`, 3.9).
pub mod kind {
    pub const REQUEST: i32 = 1;
    pub const PROPOSAL: i32 = 2;
    pub const ACK: i32 = 3;
    pub const COMMIT: i32 = 4;
    pub const PING: i32 = 5;
    pub const REVALIDATE: i32 = 6;
    pub const SYNC: i32 = 7;
    pub const INFORM: i32 = 8;
    pub const COMMIT_AND_ACTIVATE: i32 = 9;
    pub const NEW_LEADER: i32 = 10;
    pub const FOLLOWER_INFO: i32 = 11;
    pub const UP_TO_DATE: i32 = 12;
    pub const DIFF: i32 = 13;
    pub const TRUNC: i32 = 14;
    pub const SNAP: i32 = 15;
    pub const OBSERVER_INFO: i32 = 16;
    pub const LEADER_INFO: i32 = 17;
    pub const ACK_EPOCH: i32 = 18;
    pub const INFORM_AND_ACTIVATE: i32 = 19;
}

/// The Zab version a 3.4+ learner announces in `LearnerInfo` and a leader in LEADERINFO.
pub const PROTOCOL_VERSION: i32 = 0x10000;

/// What a leader writes after the snapshot dump (`LearnerHandler.run`).
pub const SNAPSHOT_SIGNATURE: &str = "BenWasHere";

/// Fixed bytes of a packet before its data: type and zxid.
const PACKET_HEAD_BYTES: usize = 12;
/// A packet carries at most this many auth ids (learners send none; a leader echoes them).
const AUTH_IDS_MAX: usize = 64;
/// A session touch in a PING reply: the session id and its timeout.
const TOUCH_BYTES: usize = 12;
/// A node's `StatPersisted` in a snapshot.
const STAT_PERSISTED_BYTES: usize = 60;

/// `QuorumPacket { int type; long zxid; buffer data; vector<Id> authinfo }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumPacket {
    pub kind: i32,
    pub zxid: i64,
    pub data: Option<Vec<u8>>,
    pub auth: Option<Vec<Id>>,
}

impl QuorumPacket {
    pub fn new(kind: i32, zxid: i64, data: Option<Vec<u8>>) -> Self {
        QuorumPacket {
            kind,
            zxid,
            data,
            auth: None,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.write_i32(self.kind);
        w.write_i64(self.zxid);
        w.write_buffer(self.data.as_deref());
        match &self.auth {
            None => w.write_i32(-1),
            Some(ids) => w.write_vec(ids, |w, id| id.encode(w)),
        }
        w.into_bytes()
    }

    /// Decodes one whole packet, as [`packet_len`] delimited it.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let kind = r.read_i32()?;
        let zxid = r.read_i64()?;
        let data = r.read_buffer()?;
        let auth = match r.clone().read_i32()? {
            -1 => {
                r.read_i32()?;
                None
            }
            _ => Some(r.read_vec(8, Id::decode)?),
        };
        r.finish()?;
        Ok(QuorumPacket {
            kind,
            zxid,
            data,
            auth,
        })
    }
}

/// The length of the packet at the start of `buf` once all of it is there; an error when its
/// data is longer than `data_bytes_max` or a length is negative.
pub fn packet_len(buf: &[u8], data_bytes_max: usize) -> Result<Option<usize>, DecodeError> {
    let mut at = PACKET_HEAD_BYTES;
    let Some(data) = int_at(buf, at) else {
        return Ok(None);
    };
    at += 4;
    match data {
        -1 => {}
        n if n < 0 => return Err(DecodeError::NegativeLength(n)),
        n if n as usize > data_bytes_max => {
            return Err(DecodeError::FrameTooLarge {
                len: n as usize,
                max: data_bytes_max,
            });
        }
        n => at += n as usize,
    }
    let Some(count) = int_at(buf, at) else {
        return Ok(None);
    };
    at += 4;
    if count < -1 || count > AUTH_IDS_MAX as i32 {
        return Err(DecodeError::InvalidValue {
            field: "auth id count",
            value: count.into(),
        });
    }
    for _ in 0..count.max(0) * 2 {
        let Some(len) = int_at(buf, at) else {
            return Ok(None);
        };
        at += 4;
        if len < -1 || len as usize > data_bytes_max {
            return Err(DecodeError::InvalidValue {
                field: "auth id length",
                value: len.into(),
            });
        }
        at += len.max(0) as usize;
    }
    Ok((buf.len() >= at).then_some(at))
}

fn int_at(buf: &[u8], at: usize) -> Option<i32> {
    let bytes = buf.get(at..at.checked_add(4)?)?;
    Some(i32::from_be_bytes(bytes.try_into().expect("4 bytes")))
}

/// `LearnerInfo { long serverid; int protocolVersion; long configVersion }`, the data of
/// OBSERVERINFO.
pub fn learner_info(server_id: i64, config_version: i64) -> Vec<u8> {
    let mut w = Writer::new();
    w.write_i64(server_id);
    w.write_i32(PROTOCOL_VERSION);
    w.write_i64(config_version);
    w.into_bytes()
}

/// The protocol version in LEADERINFO's data.
pub fn leader_protocol(data: Option<&[u8]>) -> Result<i32, DecodeError> {
    let mut r = Reader::new(data.unwrap_or_default());
    let version = r.read_i32()?;
    r.finish()?;
    Ok(version)
}

/// ACKEPOCH's data: the learner's current epoch, or -1 when it had already accepted the
/// leader's epoch (`Learner.registerWithLeader`).
pub fn ack_epoch(epoch: i32) -> Vec<u8> {
    epoch.to_be_bytes().to_vec()
}

/// A PING reply's data: `(session id, timeout ms)` of every session this learner's clients
/// touched since the last one (`Learner.ping`), which the leader counts as heard from.
pub fn touches(sessions: &[(i64, i32)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(sessions.len() * TOUCH_BYTES);
    for (id, timeout_ms) in sessions {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&timeout_ms.to_be_bytes());
    }
    out
}

/// Where the snapshot a leader dumps after SNAP ends (`ZKDatabase.serializeSnapshot` then the
/// signature): sessions `{ int count; count × { long id; int timeout } }`, the ACL table
/// `{ int count; count × { long ref; vector<ACL> } }`, nodes `{ ustring path; buffer data; long
/// aclRef; StatPersisted }` until the path "/", then the ustring [`SNAPSHOT_SIGNATURE`]. Fed the
/// bytes received so far, it moves on over whole items only, so each byte is looked at once.
#[derive(Debug, Clone)]
pub struct SnapshotScan {
    bytes_max: usize,
    at: usize,
    step: Step,
    /// Items left in the list being read (sessions, ACL entries, or an entry's ACLs).
    left: u32,
    /// ACL entries left in the table while one entry's ACLs are read.
    entries_left: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    SessionCount,
    Session,
    AclCount,
    AclEntry,
    Acl,
    NodePath,
    NodeBody,
    Signature,
    Done,
}

/// Where the scan stopped: the whole dump is there, or more bytes are needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scanned {
    /// The dump is `body` bytes (what `warden_import` parses), then `total - body` bytes of
    /// signature.
    Complete {
        body: usize,
        total: usize,
    },
    More,
}

impl SnapshotScan {
    pub fn new(bytes_max: usize) -> Self {
        SnapshotScan {
            bytes_max,
            at: 0,
            step: Step::SessionCount,
            left: 0,
            entries_left: 0,
        }
    }

    /// Scans `buf` (every byte received so far, from the first of the dump).
    pub fn scan(&mut self, buf: &[u8]) -> Result<Scanned, DecodeError> {
        loop {
            if self.at > self.bytes_max {
                return Err(DecodeError::FrameTooLarge {
                    len: self.at,
                    max: self.bytes_max,
                });
            }
            let rest = &buf[self.at.min(buf.len())..];
            let Some(used) = self.item(rest)? else {
                return Ok(Scanned::More);
            };
            self.at += used;
            if self.step == Step::Done {
                let body = self.at - 4 - SNAPSHOT_SIGNATURE.len();
                return Ok(Scanned::Complete {
                    body,
                    total: self.at,
                });
            }
        }
    }

    /// Reads one item at the start of `rest`; the bytes it took, or `None` if it is not all
    /// there yet.
    fn item(&mut self, rest: &[u8]) -> Result<Option<usize>, DecodeError> {
        let count = |rest: &[u8]| -> Result<Option<u32>, DecodeError> {
            match int_at(rest, 0) {
                None => Ok(None),
                Some(n) if n < 0 => Err(DecodeError::NegativeLength(n)),
                Some(n) => Ok(Some(n as u32)),
            }
        };
        Ok(match self.step {
            Step::SessionCount | Step::AclCount => count(rest)?.map(|n| {
                self.left = n;
                self.step = match (self.step, n) {
                    (Step::SessionCount, 0) => Step::AclCount,
                    (Step::SessionCount, _) => Step::Session,
                    (_, 0) => Step::NodePath,
                    _ => Step::AclEntry,
                };
                4
            }),
            Step::Session => (rest.len() >= 12).then(|| {
                self.left -= 1;
                if self.left == 0 {
                    self.step = Step::AclCount;
                }
                12
            }),
            Step::AclEntry => match (rest.len() >= 8).then(|| count(&rest[8..])) {
                Some(Ok(Some(n))) => {
                    self.entries_left = self.left - 1;
                    self.left = n;
                    self.step = if n == 0 { self.next_entry() } else { Step::Acl };
                    Some(12)
                }
                Some(Err(e)) => return Err(e),
                _ => None,
            },
            Step::Acl => {
                let Some(used) = strings(&rest[4.min(rest.len())..], 2)? else {
                    return Ok(None);
                };
                self.left -= 1;
                if self.left == 0 {
                    self.step = self.next_entry();
                }
                Some(4 + used)
            }
            Step::NodePath => match int_at(rest, 0) {
                Some(1) if rest.get(4) == Some(&b'/') => {
                    self.step = Step::Signature;
                    Some(5)
                }
                _ => strings(rest, 1)?.inspect(|_| self.step = Step::NodeBody),
            },
            Step::NodeBody => {
                let Some(data) = strings(rest, 1)? else {
                    return Ok(None);
                };
                let used = data + 8 + STAT_PERSISTED_BYTES;
                (rest.len() >= used).then(|| {
                    self.step = Step::NodePath;
                    used
                })
            }
            Step::Signature => {
                let Some(used) = strings(rest, 1)? else {
                    return Ok(None);
                };
                if &rest[4..used] != SNAPSHOT_SIGNATURE.as_bytes() {
                    return Err(DecodeError::InvalidValue {
                        field: "snapshot signature length",
                        value: (used - 4) as i64,
                    });
                }
                self.step = Step::Done;
                Some(used)
            }
            Step::Done => Some(0),
        })
    }

    fn next_entry(&mut self) -> Step {
        self.left = self.entries_left;
        if self.left == 0 {
            Step::NodePath
        } else {
            Step::AclEntry
        }
    }
}

/// The bytes taken by `n` length-prefixed strings or buffers at the start of `rest` (-1 is
/// null), if all are there.
fn strings(rest: &[u8], n: usize) -> Result<Option<usize>, DecodeError> {
    let mut at = 0usize;
    for _ in 0..n {
        let Some(len) = int_at(rest, at) else {
            return Ok(None);
        };
        if len < -1 {
            return Err(DecodeError::NegativeLength(len));
        }
        at += 4 + len.max(0) as usize;
        if at > rest.len() {
            return Ok(None);
        }
    }
    Ok(Some(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot_dump() -> Vec<u8> {
        let mut w = Writer::new();
        w.write_i32(1); // one session
        w.write_i64(0x0100_0000_0000_0001);
        w.write_i32(30_000);
        w.write_i32(1); // one ACL entry with one ACL
        w.write_i64(1);
        w.write_i32(1);
        w.write_i32(31);
        w.write_string("world");
        w.write_string("anyone");
        for (path, data) in [("", Some(&b""[..])), ("/a", None), ("/a/b", Some(b"x"))] {
            w.write_string(path);
            w.write_buffer(data);
            w.write_i64(-1);
            w.write_raw(&[0; STAT_PERSISTED_BYTES]);
        }
        w.write_string("/");
        w.into_bytes()
    }

    #[test]
    fn a_packet_round_trips_and_is_found_only_when_whole() {
        let packet = QuorumPacket::new(kind::INFORM, 0x1_0000_0002, Some(b"txn".to_vec()));
        let bytes = packet.encode();
        for cut in 0..bytes.len() {
            assert_eq!(packet_len(&bytes[..cut], 1024), Ok(None), "cut at {cut}");
        }
        assert_eq!(packet_len(&bytes, 1024), Ok(Some(bytes.len())));
        assert_eq!(QuorumPacket::decode(&bytes), Ok(packet));
        let with_auth = QuorumPacket {
            auth: Some(vec![Id::new("digest", "u:p".to_owned())]),
            ..QuorumPacket::new(kind::PING, 7, None)
        };
        let bytes = with_auth.encode();
        assert_eq!(packet_len(&bytes, 1024), Ok(Some(bytes.len())));
        assert_eq!(QuorumPacket::decode(&bytes), Ok(with_auth));
    }

    #[test]
    fn a_packet_larger_than_the_limit_is_refused_before_it_arrives() {
        let mut head = Writer::new();
        head.write_i32(kind::SNAP);
        head.write_i64(0);
        head.write_i32(1 << 30);
        assert!(matches!(
            packet_len(&head.into_bytes(), 1 << 20),
            Err(DecodeError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn a_snapshot_dump_ends_after_its_signature_however_it_arrives() {
        let mut bytes = snapshot_dump();
        let body = bytes.len();
        let mut w = Writer::new();
        w.write_string(SNAPSHOT_SIGNATURE);
        bytes.extend_from_slice(&w.into_bytes());
        let total = bytes.len();
        bytes.extend_from_slice(b"next packet");
        for step in [1, 3, 7, 64] {
            let mut scan = SnapshotScan::new(1 << 20);
            let mut got = Scanned::More;
            for end in (step..bytes.len() + step).step_by(step) {
                got = scan.scan(&bytes[..end.min(bytes.len())]).unwrap();
                if got != Scanned::More {
                    break;
                }
            }
            assert_eq!(got, Scanned::Complete { body, total }, "step {step}");
        }
    }

    #[test]
    fn a_damaged_snapshot_dump_is_an_error_not_a_wait_forever() {
        let mut bytes = snapshot_dump();
        let mut w = Writer::new();
        w.write_string("BenWasThere");
        bytes.extend_from_slice(&w.into_bytes());
        assert!(SnapshotScan::new(1 << 20).scan(&bytes).is_err());
        let mut negative = Writer::new();
        negative.write_i32(-5);
        assert!(
            SnapshotScan::new(1 << 20)
                .scan(&negative.into_bytes())
                .is_err()
        );
        assert!(matches!(
            SnapshotScan::new(16).scan(&snapshot_dump()),
            Err(DecodeError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn touches_are_id_and_timeout_pairs() {
        let data = touches(&[(1, 2), (3, 4)]);
        let mut r = Reader::new(&data);
        assert_eq!(
            (r.read_i64(), r.read_i32(), r.read_i64(), r.read_i32()),
            (Ok(1), Ok(2), Ok(3), Ok(4))
        );
        assert!(r.is_empty());
    }
}
