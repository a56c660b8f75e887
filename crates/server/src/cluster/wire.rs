//! The peer protocol's framing and handshake, shared by every channel between two servers.
//!
//! ```text
//! frame := u32 body length | u32 crc32c(body) | body          (big-endian)
//! body  := u8 kind | u64 group | u64 request id | payload
//! ```
//!
//! The length is checked against the bound before a byte of the body is buffered, and the
//! checksum before the body is decoded: a peer that sends garbage is disconnected and nothing
//! it sent is used. Every frame names its Raft group (0 today: one group per cluster) so that
//! several groups can later share connections.
//!
//! A connection opens with one `Hello` each way. The dialer says which cluster it belongs to,
//! who it is, whom it meant to reach and what the channel is for; the acceptor refuses a peer
//! of another cluster, an id that is not a member, or a dialer that meant another server (a
//! duplicate or swapped id), with a reason the dialer logs.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use warden_proto::jute::{DecodeError, Reader, Writer};

use super::transport::Transport;
use crate::tls::quorum::{PeerRead, PeerWrite};

/// Bytes before the body: length and checksum.
const PREFIX_BYTES: usize = 8;
/// Bytes of the body before the payload: kind, group, request id.
const BODY_HEADER_BYTES: usize = 17;
/// The protocol this build speaks; a peer speaking another is refused at the handshake.
pub const PROTOCOL_VERSION: u16 = 1;
const MAGIC: &[u8; 8] = b"WRDNPEER";
/// The only Raft group of a cluster until multi-group arrives.
pub const GROUP_MAIN: u64 = 0;
/// How long a handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// What a frame carries. Numbers are on the wire: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Hello = 1,
    HelloRefused = 2,
    // Raft channel: requests, then answers.
    AppendEntries = 10,
    Vote = 11,
    PreVote = 12,
    SnapshotChunk = 13,
    TransferLeader = 14,
    RaftReply = 20,
    RaftError = 21,
    // Forward channel, follower to leader.
    Forward = 30,
    Touch = 31,
    ReadIndex = 32,
    Revalidate = 33,
    // Forward channel, leader to follower.
    ForwardFailed = 40,
    ReadIndexDone = 41,
    ReadIndexFailed = 42,
    Revalidated = 43,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        use Kind::*;
        Some(match b {
            1 => Hello,
            2 => HelloRefused,
            10 => AppendEntries,
            11 => Vote,
            12 => PreVote,
            13 => SnapshotChunk,
            14 => TransferLeader,
            20 => RaftReply,
            21 => RaftError,
            30 => Forward,
            31 => Touch,
            32 => ReadIndex,
            33 => Revalidate,
            40 => ForwardFailed,
            41 => ReadIndexDone,
            42 => ReadIndexFailed,
            43 => Revalidated,
            _ => return None,
        })
    }
}

/// One received frame.
#[derive(Debug)]
pub struct Frame {
    pub kind: Kind,
    pub group: u64,
    pub id: u64,
    pub payload: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("peer closed the connection")]
    Closed,
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("frame of {len} bytes is over the limit of {max} (cluster.peer_frame_bytes_max)")]
    TooLarge { len: usize, max: usize },
    #[error("frame of {0} bytes is too short")]
    TooShort(usize),
    #[error("frame checksum mismatch: the peer sent corrupt data")]
    Checksum,
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("malformed {what}: {error}")]
    Malformed {
        what: &'static str,
        error: DecodeError,
    },
    #[error("peer refused the handshake: {0}")]
    Refused(String),
    #[error("handshake: {0}")]
    Handshake(String),
    #[error("timed out")]
    Timeout,
}

/// Reads frames off one connection, checking each before it is used.
pub struct FrameReader {
    socket: PeerRead,
    frame_bytes_max: usize,
}

impl FrameReader {
    pub async fn next(&mut self) -> Result<Frame, WireError> {
        let mut prefix = [0u8; PREFIX_BYTES];
        match self.socket.read_exact(&mut prefix).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(WireError::Closed),
            Err(e) => return Err(e.into()),
        }
        let len = u32::from_be_bytes(prefix[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(prefix[4..].try_into().expect("4 bytes"));
        if len > self.frame_bytes_max {
            return Err(WireError::TooLarge {
                len,
                max: self.frame_bytes_max,
            });
        }
        if len < BODY_HEADER_BYTES {
            return Err(WireError::TooShort(len));
        }
        let mut body = vec![0u8; len];
        self.socket.read_exact(&mut body).await?;
        if crc32c::crc32c(&body) != crc {
            return Err(WireError::Checksum);
        }
        let kind = Kind::from_u8(body[0]).ok_or(WireError::UnknownKind(body[0]))?;
        let group = u64::from_be_bytes(body[1..9].try_into().expect("8 bytes"));
        let id = u64::from_be_bytes(body[9..17].try_into().expect("8 bytes"));
        body.drain(..BODY_HEADER_BYTES);
        Ok(Frame {
            kind,
            group,
            id,
            payload: body,
        })
    }

    /// The next frame, or `Timeout` after `limit`.
    pub async fn next_within(&mut self, limit: Duration) -> Result<Frame, WireError> {
        tokio::time::timeout(limit, self.next())
            .await
            .map_err(|_| WireError::Timeout)?
    }
}

/// Writes frames to one connection.
pub struct FrameWriter {
    socket: PeerWrite,
    buf: Vec<u8>,
}

impl FrameWriter {
    pub async fn send(
        &mut self,
        kind: Kind,
        group: u64,
        id: u64,
        payload: &[u8],
    ) -> Result<(), WireError> {
        self.buf.clear();
        self.buf.extend_from_slice(&[0u8; PREFIX_BYTES]);
        self.buf.push(kind as u8);
        self.buf.extend_from_slice(&group.to_be_bytes());
        self.buf.extend_from_slice(&id.to_be_bytes());
        self.buf.extend_from_slice(payload);
        let body = &self.buf[PREFIX_BYTES..];
        let len = (body.len() as u32).to_be_bytes();
        let crc = crc32c::crc32c(body).to_be_bytes();
        self.buf[..4].copy_from_slice(&len);
        self.buf[4..8].copy_from_slice(&crc);
        self.socket.write_all(&self.buf).await?;
        // A large frame's buffer is not kept for the life of the connection.
        if self.buf.capacity() > 1 << 20 {
            self.buf = Vec::new();
        }
        Ok(())
    }
}

/// What a channel is for, chosen by the dialer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Channel {
    /// Raft's own RPCs (openraft's network), one request answered at a time.
    Raft = 1,
    /// A follower's forwarded writes, session touches and read-index requests to the leader.
    Forward = 2,
    /// Only the handshake: a member with an empty data directory asks whether the cluster
    /// exists, and its id (so the probe's own cluster id is not checked).
    Probe = 3,
}

/// Who is on each end, as the handshake says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    pub cluster_id: u64,
    pub from: u64,
    pub to: u64,
    pub channel: Channel,
    /// The sender's committed log index (0: none). A member with an empty data directory
    /// learns from it whether the cluster already exists (docs/cluster.md, "Rejoining").
    pub committed: u64,
}

impl Hello {
    fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        for b in MAGIC {
            w.write_u8(*b);
        }
        w.write_i32(self.version.into());
        w.write_i64(self.cluster_id as i64);
        w.write_i64(self.from as i64);
        w.write_i64(self.to as i64);
        w.write_u8(self.channel as u8);
        w.write_i64(self.committed as i64);
        w.into_bytes()
    }

    fn decode(payload: &[u8]) -> Result<Hello, WireError> {
        let malformed = |error| WireError::Malformed {
            what: "hello",
            error,
        };
        let mut r = Reader::new(payload);
        for b in MAGIC {
            if r.read_u8().map_err(malformed)? != *b {
                return Err(WireError::Handshake(
                    "not a Warden peer (bad magic)".to_owned(),
                ));
            }
        }
        let version = r.read_i32().map_err(malformed)?;
        let cluster_id = r.read_i64().map_err(malformed)? as u64;
        let from = r.read_i64().map_err(malformed)? as u64;
        let to = r.read_i64().map_err(malformed)? as u64;
        let channel = match r.read_u8().map_err(malformed)? {
            1 => Channel::Raft,
            2 => Channel::Forward,
            3 => Channel::Probe,
            other => return Err(WireError::Handshake(format!("unknown channel {other}"))),
        };
        let committed = r.read_i64().map_err(malformed)? as u64;
        Ok(Hello {
            version: version.clamp(0, u16::MAX.into()) as u16,
            cluster_id,
            from,
            to,
            channel,
            committed,
        })
    }
}

/// A connection's halves, as a checked reader and a writer.
pub fn split(
    (read, write): (PeerRead, PeerWrite),
    frame_bytes_max: usize,
) -> (FrameReader, FrameWriter) {
    (
        FrameReader {
            socket: read,
            frame_bytes_max,
        },
        FrameWriter {
            socket: write,
            buf: Vec::new(),
        },
    )
}

/// The dialer's side: connects (over TLS if `transport` says so), sends our hello, waits for
/// the acceptor's.
pub async fn dial(
    transport: &Transport,
    addr: &str,
    hello: Hello,
    frame_bytes_max: usize,
    limit: Duration,
) -> Result<(FrameReader, FrameWriter, Hello), WireError> {
    let opened = async {
        let stream = transport.connect(addr).await?;
        let (mut reader, mut writer) = split(stream, frame_bytes_max);
        writer
            .send(Kind::Hello, GROUP_MAIN, 0, &hello.encode())
            .await?;
        let answer = reader.next().await?;
        match answer.kind {
            Kind::Hello => {
                let theirs = Hello::decode(&answer.payload)?;
                let probing = hello.channel == Channel::Probe;
                if theirs.from != hello.to || (theirs.cluster_id != hello.cluster_id && !probing) {
                    return Err(WireError::Handshake(format!(
                        "{addr} answered as server {} of cluster {:#x}, expected server {} of \
                         cluster {:#x}",
                        theirs.from, theirs.cluster_id, hello.to, hello.cluster_id
                    )));
                }
                Ok((reader, writer, theirs))
            }
            Kind::HelloRefused => Err(WireError::Refused(
                String::from_utf8_lossy(&answer.payload).into_owned(),
            )),
            other => Err(WireError::Handshake(format!(
                "expected a hello, got {other:?}"
            ))),
        }
    };
    tokio::time::timeout(limit, opened)
        .await
        .map_err(|_| WireError::Timeout)?
}

/// The acceptor's side: reads the dialer's hello and lets `check` decide; answers with our
/// own hello or with the refusal's reason.
pub async fn accept(
    reader: &mut FrameReader,
    writer: &mut FrameWriter,
    me: u64,
    cluster_id: u64,
    committed: u64,
    check: impl FnOnce(&Hello) -> Result<(), String>,
) -> Result<Hello, WireError> {
    let first = reader.next_within(HANDSHAKE_TIMEOUT).await?;
    if first.kind != Kind::Hello {
        return Err(WireError::Handshake(format!(
            "expected a hello, got {:?}",
            first.kind
        )));
    }
    let theirs = Hello::decode(&first.payload)?;
    let verdict = if theirs.version != PROTOCOL_VERSION {
        Err(format!(
            "peer protocol version {} (this server speaks {PROTOCOL_VERSION})",
            theirs.version
        ))
    } else if theirs.cluster_id != cluster_id && theirs.channel != Channel::Probe {
        Err(format!(
            "peer belongs to cluster {:#x}, this server to cluster {cluster_id:#x}",
            theirs.cluster_id
        ))
    } else if theirs.to != me {
        Err(format!(
            "peer {} meant to reach server {}, but this is server {me} (duplicate or \
             swapped server ids?)",
            theirs.from, theirs.to
        ))
    } else {
        check(&theirs)
    };
    match verdict {
        Ok(()) => {
            let ours = Hello {
                version: PROTOCOL_VERSION,
                cluster_id,
                from: me,
                to: theirs.from,
                channel: theirs.channel,
                committed,
            };
            writer
                .send(Kind::Hello, GROUP_MAIN, 0, &ours.encode())
                .await?;
            Ok(theirs)
        }
        Err(reason) => {
            let _ = writer
                .send(Kind::HelloRefused, GROUP_MAIN, 0, reason.as_bytes())
                .await;
            Err(WireError::Handshake(reason))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::{TcpListener, TcpStream};

    fn halves(stream: TcpStream) -> (PeerRead, PeerWrite) {
        let (read, write) = stream.into_split();
        (Box::new(read), Box::new(write))
    }

    async fn pair(max: usize) -> ((FrameReader, FrameWriter), (FrameReader, FrameWriter)) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (a, b) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (
            split(halves(a.unwrap()), max),
            split(halves(b.unwrap().0), max),
        )
    }

    #[tokio::test]
    async fn frames_roundtrip_with_group_and_id() {
        let ((_, mut w), (mut r, _)) = pair(1024).await;
        w.send(Kind::Forward, 7, 42, b"payload").await.unwrap();
        let f = r.next().await.unwrap();
        assert_eq!((f.kind, f.group, f.id), (Kind::Forward, 7, 42));
        assert_eq!(f.payload, b"payload");
    }

    #[tokio::test]
    async fn oversized_corrupt_and_unknown_frames_are_refused() {
        let ((_, mut w), (mut r, _)) = pair(64).await;
        w.send(Kind::Touch, 0, 0, &[0u8; 100]).await.unwrap();
        assert!(matches!(r.next().await, Err(WireError::TooLarge { .. })));

        let ((_, mut w), (mut r, _)) = pair(1024).await;
        let mut body = vec![Kind::Touch as u8];
        body.extend_from_slice(&[0u8; 16]);
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&(crc32c::crc32c(&body) ^ 1).to_be_bytes());
        frame.extend_from_slice(&body);
        w.socket.write_all(&frame).await.unwrap();
        assert!(matches!(r.next().await, Err(WireError::Checksum)));

        let ((_, mut w), (mut r, _)) = pair(1024).await;
        body[0] = 99;
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        frame.extend_from_slice(&body);
        w.socket.write_all(&frame).await.unwrap();
        assert!(matches!(r.next().await, Err(WireError::UnknownKind(99))));
    }

    async fn handshake(hello: Hello, me: u64, cluster: u64) -> (Result<(), WireError>, bool) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let acceptor = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let (mut r, mut w) = split(halves(s), 1024);
            accept(&mut r, &mut w, me, cluster, 0, |h| {
                if h.from == 9 {
                    Err("not a member".into())
                } else {
                    Ok(())
                }
            })
            .await
            .is_ok()
        });
        let dialed = dial(
            &Transport::default(),
            &addr,
            hello,
            1024,
            Duration::from_secs(5),
        )
        .await
        .map(|_| ());
        (dialed, acceptor.await.unwrap())
    }

    #[tokio::test]
    async fn handshake_refuses_strangers_with_a_reason() {
        let hello = |cluster_id, from, to| Hello {
            version: PROTOCOL_VERSION,
            cluster_id,
            from,
            to,
            channel: Channel::Raft,
            committed: 0,
        };
        let (ok, accepted) = handshake(hello(5, 1, 2), 2, 5).await;
        assert!(ok.is_ok() && accepted);
        for (h, why) in [
            (hello(6, 1, 2), "cluster"),
            (hello(5, 1, 3), "meant to reach"),
            (hello(5, 9, 2), "not a member"),
        ] {
            let (dialed, accepted) = handshake(h, 2, 5).await;
            assert!(!accepted);
            match dialed {
                Err(WireError::Refused(reason)) => assert!(reason.contains(why), "{reason}"),
                other => panic!("expected a refusal naming {why}, got {other:?}"),
            }
        }
    }
}
