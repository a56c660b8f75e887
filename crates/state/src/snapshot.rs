//! Snapshots: the whole state as a versioned, checksummed, zstd-compressed byte stream.
//! The layout is drawn in docs/snapshot-format.md. Loading checks the checksum before it
//! decodes anything, and the rebuilt tree's digest against the one saved: a snapshot that
//! fails either is refused, never half-loaded.

use std::io::{self, Read, Write};
use std::sync::{Arc, mpsc};

use thiserror::Error;
use warden_proto::{Acl, Id};

use crate::acl::{AclId, AclTable};
use crate::mirror::MirrorPhase;
use crate::state::{Session, State, StateConfig};
use crate::tree::{DataTree, NodeId, NodeStat, ROOT, node_digest};

const MAGIC: &[u8; 8] = b"WARDSNAP";
const FORMAT_VERSION: u32 = 3;
/// Version 1 had no time of the last transaction; it is read as 0. Versions 1 and 2 had no
/// mirror phase: they never mirrored.
const FORMAT_VERSION_V1: u32 = 1;
const FORMAT_VERSION_V2: u32 = 2;
const HEADER_BYTES: usize = 12;
const TRAILER_BYTES: usize = 12;
/// zstd level 1. On the body of a 1,000,000-znode snapshot (192 MB of 100-byte random values
/// and their paths and stats) level 1 compressed 2.4 times as fast as level 3 (203 against
/// 86 MB/s, `zstd -b1 -e3`) to the same size (2.20x against 2.19x): a snapshot's time is
/// mostly compression, and a clean stop waits for one (`snapshots.on_exit`).
const ZSTD_LEVEL: i32 = 1;
/// No single string or buffer in a snapshot is larger than this (far above any frame limit).
const FIELD_BYTES_MAX: usize = 1 << 30;

#[derive(Debug, Error)]
pub enum SnapshotError {
    #[error("not a Warden snapshot (bad magic)")]
    BadMagic,
    #[error("snapshot format version {0} is not supported (this build reads {FORMAT_VERSION})")]
    UnsupportedVersion(u32),
    #[error("snapshot is truncated")]
    Truncated,
    #[error("snapshot checksum mismatch: stored {stored:08x}, computed {computed:08x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("snapshot body is corrupt: {0}")]
    Corrupt(String),
    #[error("snapshot tree digest mismatch: stored {stored:016x}, rebuilt {rebuilt:016x}")]
    Digest { stored: u64, rebuilt: u64 },
    #[error("snapshot decompression failed: {0}")]
    Io(#[from] io::Error),
}

/// Encodes the whole state.
pub fn encode(state: &State) -> Vec<u8> {
    encode_to(state, Vec::with_capacity(1 << 20)).expect("writing to memory cannot fail")
}

/// Encodes the whole state into `w` as it goes (a snapshot file is written without the
/// encoding ever held whole in memory); returns `w`.
pub fn encode_to<W: Write>(state: &State, w: W) -> io::Result<W> {
    let mut framed = Checksummed::new(w);
    framed.write_all(MAGIC)?;
    framed.write_all(&FORMAT_VERSION.to_le_bytes())?;
    let mut z = zstd::stream::write::Encoder::new(framed, ZSTD_LEVEL)?;
    z.include_checksum(true)?;
    let mut body = io::BufWriter::with_capacity(1 << 16, z);
    write_body(state, &mut body)?;
    let framed = body.into_inner().map_err(|e| e.into_error())?.finish()?;
    let (mut w, crc, len) = (framed.inner, framed.crc, framed.len);
    w.write_all(&crc.to_le_bytes())?;
    w.write_all(&len.to_le_bytes())?;
    Ok(w)
}

/// Decodes a snapshot made by [`encode`], checking it whole before it decodes anything.
pub fn decode(bytes: &[u8]) -> Result<State, SnapshotError> {
    let (covered, version) = verify(bytes)?;
    let z = zstd::stream::read::Decoder::new(&covered[HEADER_BYTES..])?;
    read_body(&mut Body(io::BufReader::with_capacity(1 << 16, z)), version)
}

/// Decodes a snapshot of `len` bytes read from `r` as they stream by, never holding it
/// whole: the checksum is computed on the way and checked before the state is returned, so
/// a damaged snapshot is still refused, never half-loaded. For a snapshot already checked
/// once ([`verify_stream`] of a file at start): what the check guards against here is a
/// change since, and a damaged body that the decoder trips on first is reported as the
/// checksum mismatch it also is.
pub fn decode_from<R: Read + Send>(r: R, len: u64) -> Result<State, SnapshotError> {
    read_framed(r, len, |header, covered| {
        let version = check_version(header)?;
        let z = zstd::stream::read::Decoder::new(covered)?;
        read_body(&mut Body(io::BufReader::with_capacity(1 << 16, z)), version)
    })
    .map(|(state, _)| state)
}

/// Reads a snapshot of `len` bytes from `r` as they stream by: `body` is given the header and
/// the checksummed bytes after it; whatever of those it leaves is read too, then the trailer,
/// and the frame is checked (magic, length, checksum, version) before `body`'s result is
/// returned, with the format version.
fn read_framed<R: Read, T>(
    r: R,
    len: u64,
    body: impl FnOnce(&[u8; HEADER_BYTES], &mut Checksummed<io::Take<R>>) -> Result<T, SnapshotError>,
) -> Result<(T, u32), SnapshotError> {
    if len < (HEADER_BYTES + TRAILER_BYTES) as u64 {
        return Err(SnapshotError::Truncated);
    }
    let covered = len - TRAILER_BYTES as u64;
    let mut c = Checksummed::new(r.take(covered));
    let mut header = [0u8; HEADER_BYTES];
    c.read_exact(&mut header)
        .map_err(|_| SnapshotError::Truncated)?;
    let read = body(&header, &mut c);
    // The rest of the checksummed bytes (the body may stop short of them, or have failed).
    io::copy(&mut c, &mut io::sink())?;
    if c.len != covered {
        return Err(SnapshotError::Truncated);
    }
    let computed = c.crc;
    let mut rest = c.inner.into_inner();
    let mut trailer = [0u8; TRAILER_BYTES];
    rest.read_exact(&mut trailer)
        .map_err(|_| SnapshotError::Truncated)?;
    let version = check_frame(&header, &trailer, covered, || computed)?;
    Ok((read?, version))
}

/// Bytes passing through, to a writer or from a reader, with their CRC-32C and count.
struct Checksummed<T> {
    inner: T,
    crc: u32,
    len: u64,
}

impl<T> Checksummed<T> {
    fn new(inner: T) -> Checksummed<T> {
        Checksummed {
            inner,
            crc: 0,
            len: 0,
        }
    }

    fn count(&mut self, bytes: &[u8]) {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.len += bytes.len() as u64;
    }
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Checksummed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count(&buf[..n]);
        Ok(n)
    }
}

/// The zxid of the state in a snapshot, read from its first bytes without decoding (or
/// checking) the rest: what ZooKeeper puts in a snapshot's file name.
pub fn read_zxid(mut r: impl io::Read) -> Result<i64, SnapshotError> {
    let mut header = [0u8; HEADER_BYTES];
    r.read_exact(&mut header)
        .map_err(|_| SnapshotError::Truncated)?;
    check_version(&header)?;
    let mut zxid = [0u8; 8];
    zstd::stream::read::Decoder::new(r)?.read_exact(&mut zxid)?;
    Ok(i64::from_le_bytes(zxid))
}

/// Checks a snapshot's framing and checksum without decoding its body (a restart checks the
/// newest snapshot before it relies on it); returns the checksummed bytes and format version.
pub fn verify(bytes: &[u8]) -> Result<(&[u8], u32), SnapshotError> {
    if bytes.len() < HEADER_BYTES + TRAILER_BYTES {
        return Err(SnapshotError::Truncated);
    }
    let (covered, trailer) = bytes.split_at(bytes.len() - TRAILER_BYTES);
    let header = covered[..HEADER_BYTES].try_into().expect("header bytes");
    let trailer = trailer.try_into().expect("trailer bytes");
    let version = check_frame(header, trailer, covered.len() as u64, || {
        crc32c::crc32c(covered)
    })?;
    Ok((covered, version))
}

/// [`verify`] of a snapshot of `len` bytes read from `r`, without holding it in memory.
pub fn verify_stream(r: &mut impl Read, len: u64) -> Result<u32, SnapshotError> {
    read_framed(r, len, |_, _| Ok(())).map(|((), version)| version)
}

/// Checks a snapshot's magic, its length and checksum (as the trailer states them, against
/// `covered` bytes checksummed by `crc`), and its version, which it returns.
fn check_frame(
    header: &[u8; HEADER_BYTES],
    trailer: &[u8; TRAILER_BYTES],
    covered: u64,
    crc: impl FnOnce() -> u32,
) -> Result<u32, SnapshotError> {
    if &header[..8] != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let stored = u32::from_le_bytes(trailer[..4].try_into().expect("4 bytes"));
    if u64::from_le_bytes(trailer[4..].try_into().expect("8 bytes")) != covered {
        return Err(SnapshotError::Truncated);
    }
    let computed = crc();
    if stored != computed {
        return Err(SnapshotError::Checksum { stored, computed });
    }
    check_version(header)
}

/// The format version a header names, if this build reads it.
fn check_version(header: &[u8; HEADER_BYTES]) -> Result<u32, SnapshotError> {
    if &header[..8] != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    if ![FORMAT_VERSION, FORMAT_VERSION_V2, FORMAT_VERSION_V1].contains(&version) {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    Ok(version)
}

fn write_body(state: &State, w: &mut impl Write) -> io::Result<()> {
    let put_i64 = |w: &mut dyn Write, v: i64| w.write_all(&v.to_le_bytes());
    let put_u32 = |w: &mut dyn Write, v: u32| w.write_all(&v.to_le_bytes());
    fn put_bytes(w: &mut dyn Write, b: &[u8]) -> io::Result<()> {
        w.write_all(&(b.len() as u64).to_le_bytes())?;
        w.write_all(b)
    }
    put_i64(w, state.zxid)?;
    put_i64(w, state.next_session_id)?;
    put_i64(w, state.time_ms)?;
    w.write_all(&[u8::from(state.config.ttl_enabled)])?;
    w.write_all(&[state.mirror.to_byte()])?;
    put_u32(w, state.sessions.len() as u32)?;
    for (id, s) in &state.sessions {
        put_i64(w, *id)?;
        put_i64(w, i64::from(s.timeout_ms))?;
        put_bytes(w, &s.password)?;
    }
    let tree = &state.tree;
    // ACL lists renumbered densely in table order.
    let mut acl_ordinal = vec![
        u32::MAX;
        tree.acl_table()
            .live()
            .map(|(id, _)| id as usize + 1)
            .max()
            .unwrap_or(0)
    ];
    let live: Vec<_> = tree.acl_table().live().collect();
    put_u32(w, live.len() as u32)?;
    for (ordinal, (id, acl)) in live.iter().enumerate() {
        acl_ordinal[*id as usize] = ordinal as u32;
        put_u32(w, acl.len() as u32)?;
        for a in acl.iter() {
            w.write_all(&a.perms.to_le_bytes())?;
            put_bytes(w, a.id.scheme.as_bytes())?;
            put_bytes(w, a.id.id.as_bytes())?;
        }
    }
    w.write_all(&(tree.len() as u64).to_le_bytes())?;
    // Preorder: every node after its parent; a parent is named by its preorder ordinal.
    let mut ordinal_of = hashbrown::HashMap::<NodeId, u32>::with_capacity(tree.len());
    let mut stack = vec![ROOT];
    let mut next = 0u32;
    while let Some(id) = stack.pop() {
        let n = tree.node(id);
        let parent = n.parent().map_or(u32::MAX, |p| ordinal_of[&p]);
        if n.num_children() > 0 {
            ordinal_of.insert(id, next);
        }
        next += 1;
        put_u32(w, parent)?;
        put_bytes(w, n.name().as_bytes())?;
        match n.data() {
            None => w.write_all(&[0])?,
            Some(d) => {
                w.write_all(&[1])?;
                put_bytes(w, d)?;
            }
        }
        let s = n.stat();
        for v in s.longs() {
            put_i64(w, v)?;
        }
        for v in s.ints() {
            w.write_all(&v.to_le_bytes())?;
        }
        put_u32(w, acl_ordinal[n.acl_id() as usize])?;
        // Reversed so children come off the stack in their listed order.
        stack.extend(n.child_ids().rev());
    }
    w.write_all(&tree.digest().to_le_bytes())?;
    w.flush()
}

/// A little reader over the decompressed body; every failure is corruption.
struct Body<R>(R);

impl<R: Read> Body<R> {
    fn array<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let mut b = [0u8; N];
        self.0.read_exact(&mut b).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => SnapshotError::Corrupt("body ends early".into()),
            _ => SnapshotError::Io(e),
        })?;
        Ok(b)
    }
    fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.array::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, SnapshotError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32, SnapshotError> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    fn i64(&mut self) -> Result<i64, SnapshotError> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, SnapshotError> {
        let mut b = Vec::new();
        self.bytes_into(&mut b)?;
        Ok(b)
    }
    /// A field into `b` (cleared first), so that a loop reading a million of them reuses
    /// one buffer.
    fn bytes_into(&mut self, b: &mut Vec<u8>) -> Result<(), SnapshotError> {
        let len = u64::from_le_bytes(self.array()?) as usize;
        if len > FIELD_BYTES_MAX {
            return Err(SnapshotError::Corrupt(format!("field of {len} bytes")));
        }
        b.clear();
        b.resize(len, 0);
        self.0
            .read_exact(b)
            .map_err(|_| SnapshotError::Corrupt("body ends early".into()))
    }
    fn string(&mut self) -> Result<String, SnapshotError> {
        String::from_utf8(self.bytes()?)
            .map_err(|_| SnapshotError::Corrupt("string is not UTF-8".into()))
    }
}

fn corrupt(what: &str) -> SnapshotError {
    SnapshotError::Corrupt(what.to_owned())
}

fn read_body<R: Read + Send>(r: &mut Body<R>, version: u32) -> Result<State, SnapshotError> {
    let zxid = r.i64()?;
    let next_session_id = r.i64()?;
    let time_ms = if version == FORMAT_VERSION_V1 {
        0
    } else {
        r.i64()?
    };
    let config = StateConfig {
        ttl_enabled: r.u8()? != 0,
    };
    let mirror = if version < FORMAT_VERSION {
        MirrorPhase::Off
    } else {
        MirrorPhase::from_byte(r.u8()?).ok_or_else(|| corrupt("mirror phase"))?
    };
    let mut sessions = std::collections::BTreeMap::new();
    for _ in 0..r.u32()? {
        let id = r.i64()?;
        let timeout_ms = i32::try_from(r.i64()?).map_err(|_| corrupt("session timeout"))?;
        let password = r.bytes()?;
        sessions.insert(
            id,
            Session {
                timeout_ms,
                password,
            },
        );
    }
    let mut acls = AclTable::default();
    let acl_count = r.u32()?;
    let mut acl_ids: Vec<AclId> = Vec::new();
    for _ in 0..acl_count {
        let n = r.u32()?;
        let mut list = Vec::new();
        for _ in 0..n {
            let perms = r.i32()?;
            let scheme = r.string()?;
            let id = r.string()?;
            list.push(Acl {
                perms,
                id: Id { scheme, id },
            });
        }
        acl_ids.push(acls.push_unreferenced(list));
    }
    let node_count = r.u64_count()?;
    if node_count == 0 {
        return Err(corrupt("no root"));
    }
    let acl_lists: Vec<Arc<[Acl]>> = acl_ids.iter().map(|&id| acls.get(id).clone()).collect();
    // Two threads: one decompresses, parses and hashes the nodes, the other builds the tree
    // from them, which halves a restart's load of a large tree.
    let (parsed, built) = std::thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel(BATCHES_IN_FLIGHT);
        let parser = scope.spawn(move || parse_nodes(r, node_count, &acl_lists, tx));
        let built = build_tree(rx, acls, &acl_ids, node_count);
        (
            parser.join().expect("the snapshot parser does not panic"),
            built,
        )
    });
    // A parser's error comes first: the builder then only saw the nodes end early. A parser
    // that found no one listening stopped because the builder failed.
    let (stored, mut tree) = match (parsed?, built?) {
        (Some(stored), tree) => (stored, tree),
        (None, _) => return Err(corrupt("tree builder stopped")),
    };
    if tree.digest() != stored {
        return Err(SnapshotError::Digest {
            stored,
            rebuilt: tree.digest(),
        });
    }
    tree.index_quotas();
    Ok(State {
        config,
        tree,
        sessions,
        zxid,
        next_session_id,
        time_ms,
        mirror,
    })
}

/// Batches of parsed nodes queued between the parser and the builder.
const BATCHES_IN_FLIGHT: usize = 4;
/// Nodes per batch: enough to make a hand-off's cost vanish, few enough to keep both busy.
const BATCH_NODES: usize = 4096;

/// Nodes parsed from a snapshot, in preorder, on their way to the tree.
#[derive(Default)]
struct Batch {
    nodes: Vec<ParsedNode>,
    /// Each node's name, then its data, back to back.
    bytes: Vec<u8>,
}

struct ParsedNode {
    /// How many ancestors the node has: 0 for the root.
    depth: usize,
    name_len: usize,
    /// `None` for null data.
    data_len: Option<usize>,
    stat: NodeStat,
    /// The ordinal of its ACL list, checked.
    acl: usize,
    /// Its share of the tree's digest (0 for the root, which the tree hashes itself).
    digest: u64,
}

/// Reads `count` nodes, checks that each names a parent before it and a proper name, hashes
/// them, and sends them on in batches; returns the digest stored after them, or `None` if
/// the builder stopped listening.
fn parse_nodes<R: Read>(
    r: &mut Body<R>,
    count: u64,
    acls: &[Arc<[Acl]>],
    tx: mpsc::SyncSender<Batch>,
) -> Result<Option<u64>, SnapshotError> {
    // Nodes still open in the preorder walk, root first: (ordinal, length of its path), each
    // path a prefix of the next, all held in `path`.
    let mut open: Vec<(u32, usize)> = Vec::new();
    let mut path = String::new();
    let (mut name, mut data) = (Vec::new(), Vec::new());
    let mut batch = Batch::default();
    for ordinal in 0..count {
        let parent = r.u32()?;
        r.bytes_into(&mut name)?;
        let name = std::str::from_utf8(&name).map_err(|_| corrupt("string is not UTF-8"))?;
        let has_data = match r.u8()? {
            0 => false,
            1 => {
                r.bytes_into(&mut data)?;
                true
            }
            _ => return Err(corrupt("data flag")),
        };
        let data = has_data.then_some(&data[..]);
        let longs = [r.i64()?, r.i64()?, r.i64()?, r.i64()?, r.i64()?, r.i64()?];
        let stat = NodeStat::from_fields(longs, [r.i32()?, r.i32()?, r.i32()?]);
        let acl = r.u32()? as usize;
        let acl_list = acls.get(acl).ok_or_else(|| corrupt("ACL ordinal"))?;
        let (depth, digest) = if ordinal == 0 {
            if parent != u32::MAX || !name.is_empty() {
                return Err(corrupt("first node is not the root"));
            }
            path.push('/');
            (0, 0)
        } else {
            while open.last().is_some_and(|(o, _)| *o != parent) {
                open.pop();
            }
            let &(_, parent_len) = open.last().ok_or_else(|| corrupt("parent ordinal"))?;
            if name.is_empty() || name.contains('/') {
                return Err(corrupt("node name"));
            }
            path.truncate(parent_len);
            if parent_len > 1 {
                path.push('/');
            }
            path.push_str(name);
            let digest = node_digest(&[path.as_bytes()], data, &stat, acl_list);
            (open.len(), digest)
        };
        open.push((ordinal as u32, path.len()));
        batch.bytes.extend_from_slice(name.as_bytes());
        batch.bytes.extend_from_slice(data.unwrap_or_default());
        batch.nodes.push(ParsedNode {
            depth,
            name_len: name.len(),
            data_len: data.map(<[u8]>::len),
            stat,
            acl,
            digest,
        });
        if batch.nodes.len() == BATCH_NODES && tx.send(std::mem::take(&mut batch)).is_err() {
            return Ok(None);
        }
    }
    if !batch.nodes.is_empty() && tx.send(batch).is_err() {
        return Ok(None);
    }
    Ok(Some(r.i64()? as u64))
}

/// Builds the tree from the parser's batches: `count` nodes, the root first.
fn build_tree(
    rx: mpsc::Receiver<Batch>,
    acls: AclTable,
    acl_ids: &[AclId],
    count: u64,
) -> Result<DataTree, SnapshotError> {
    let mut acls = Some(acls);
    let mut tree: Option<DataTree> = None;
    // The nodes from the root to the last one built, by depth, and their paths' lengths.
    let mut line: Vec<(NodeId, usize)> = Vec::new();
    let mut built = 0u64;
    for batch in rx {
        let mut at = 0;
        let mut take = |len: usize| {
            at += len;
            &batch.bytes[at - len..at]
        };
        for n in &batch.nodes {
            let name = std::str::from_utf8(take(n.name_len)).expect("the parser checked it");
            let data = n.data_len.map(&mut take);
            let acl = acl_ids[n.acl];
            match tree.as_mut() {
                None => {
                    let acls = acls.take().expect("one root");
                    let restored = DataTree::restored(acls, data, acl, n.stat, count as usize);
                    tree = Some(restored);
                    line.push((ROOT, 0));
                }
                Some(t) => {
                    line.truncate(n.depth);
                    let (parent, parent_len) = *line.last().expect("the parser checked the parent");
                    let path_len = parent_len + 1 + name.len();
                    let id = t
                        .restore_child(parent, name, data, acl, n.stat, n.digest, path_len)
                        .ok_or_else(|| corrupt("node name"))?;
                    line.push((id, path_len));
                }
            }
            built += 1;
        }
    }
    if built != count {
        return Err(corrupt("body ends early"));
    }
    tree.ok_or_else(|| corrupt("no root"))
}

impl<R: Read> Body<R> {
    fn u64_count(&mut self) -> Result<u64, SnapshotError> {
        let n = u64::from_le_bytes(self.array()?);
        if n > u64::from(u32::MAX) {
            return Err(corrupt("node count"));
        }
        Ok(n)
    }
}
