//! Snapshots: the whole state as a versioned, checksummed, zstd-compressed byte stream.
//! The layout is drawn in docs/snapshot-format.md. Loading checks the checksum before it
//! decodes anything, and the rebuilt tree's digest against the one saved: a snapshot that
//! fails either is refused, never half-loaded.

use std::io::{self, Read, Write};

use thiserror::Error;
use warden_proto::{Acl, Id};

use crate::acl::{AclId, AclTable};
use crate::mirror::MirrorPhase;
use crate::state::{Session, State, StateConfig};
use crate::tree::{DataTree, NodeId, NodeStat, ROOT};

const MAGIC: &[u8; 8] = b"WARDSNAP";
const FORMAT_VERSION: u32 = 3;
/// Version 1 had no time of the last transaction; it is read as 0. Versions 1 and 2 had no
/// mirror phase: they never mirrored.
const FORMAT_VERSION_V1: u32 = 1;
const FORMAT_VERSION_V2: u32 = 2;
const HEADER_BYTES: usize = 12;
const TRAILER_BYTES: usize = 12;
/// zstd level 3: most of the ratio at a small fraction of the time of higher levels.
const ZSTD_LEVEL: i32 = 3;
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
    let mut out = Vec::with_capacity(1 << 20);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    let mut z = zstd::stream::write::Encoder::new(out, ZSTD_LEVEL).expect("zstd encoder");
    z.include_checksum(true).expect("zstd option");
    write_body(state, &mut io::BufWriter::with_capacity(1 << 16, &mut z))
        .expect("writing to memory cannot fail");
    let mut out = z.finish().expect("writing to memory cannot fail");
    let len = out.len() as u64;
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out
}

/// Decodes a snapshot made by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<State, SnapshotError> {
    let (covered, version) = verify(bytes)?;
    let z = zstd::stream::read::Decoder::new(&covered[HEADER_BYTES..])?;
    read_body(&mut Body(io::BufReader::with_capacity(1 << 16, z)), version)
}

/// The zxid of the state in a snapshot, read from its first bytes without decoding (or
/// checking) the rest: what ZooKeeper puts in a snapshot's file name.
pub fn read_zxid(mut r: impl io::Read) -> Result<i64, SnapshotError> {
    let mut header = [0u8; HEADER_BYTES];
    r.read_exact(&mut header)
        .map_err(|_| SnapshotError::Truncated)?;
    if &header[..8] != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    if ![FORMAT_VERSION, FORMAT_VERSION_V2, FORMAT_VERSION_V1].contains(&version) {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
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
    if &bytes[..8] != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let (covered, trailer) = bytes.split_at(bytes.len() - TRAILER_BYTES);
    let stored = u32::from_le_bytes(trailer[..4].try_into().expect("4 bytes"));
    let len = u64::from_le_bytes(trailer[4..].try_into().expect("8 bytes"));
    if len != covered.len() as u64 {
        return Err(SnapshotError::Truncated);
    }
    let computed = crc32c::crc32c(covered);
    if stored != computed {
        return Err(SnapshotError::Checksum { stored, computed });
    }
    let version = u32::from_le_bytes(covered[8..12].try_into().expect("4 bytes"));
    if ![FORMAT_VERSION, FORMAT_VERSION_V2, FORMAT_VERSION_V1].contains(&version) {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    Ok((covered, version))
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
        stack.extend(n.child_ids().iter().rev());
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
        let len = u64::from_le_bytes(self.array()?) as usize;
        if len > FIELD_BYTES_MAX {
            return Err(SnapshotError::Corrupt(format!("field of {len} bytes")));
        }
        let mut b = vec![0u8; len];
        self.0
            .read_exact(&mut b)
            .map_err(|_| SnapshotError::Corrupt("body ends early".into()))?;
        Ok(b)
    }
    fn string(&mut self) -> Result<String, SnapshotError> {
        String::from_utf8(self.bytes()?)
            .map_err(|_| SnapshotError::Corrupt("string is not UTF-8".into()))
    }
}

fn corrupt(what: &str) -> SnapshotError {
    SnapshotError::Corrupt(what.to_owned())
}

fn read_body<R: Read>(r: &mut Body<R>, version: u32) -> Result<State, SnapshotError> {
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
    let acl = |ordinal: u32| {
        acl_ids
            .get(ordinal as usize)
            .copied()
            .ok_or_else(|| corrupt("ACL ordinal"))
    };
    let node_count = r.u64_count()?;
    if node_count == 0 {
        return Err(corrupt("no root"));
    }
    // Parents still open in the preorder walk: (ordinal, node id, path).
    let mut open: Vec<(u32, NodeId, String)> = Vec::new();
    let mut tree: Option<DataTree> = None;
    for ordinal in 0..node_count {
        let parent = r.u32()?;
        let name = r.string()?;
        let data = match r.u8()? {
            0 => None,
            1 => Some(r.bytes()?),
            _ => return Err(corrupt("data flag")),
        };
        let longs = [r.i64()?, r.i64()?, r.i64()?, r.i64()?, r.i64()?, r.i64()?];
        let stat = NodeStat::from_fields(longs, [r.i32()?, r.i32()?, r.i32()?]);
        let node_acl = acl(r.u32()?)?;
        let (id, path) = match tree.as_mut() {
            None => {
                if parent != u32::MAX || !name.is_empty() {
                    return Err(corrupt("first node is not the root"));
                }
                let t =
                    DataTree::restored(std::mem::take(&mut acls), data.as_deref(), node_acl, stat);
                tree = Some(t);
                (ROOT, "/".to_owned())
            }
            Some(t) => {
                while open.last().is_some_and(|(o, _, _)| *o != parent) {
                    open.pop();
                }
                let (_, parent_id, parent_path) =
                    open.last().ok_or_else(|| corrupt("parent ordinal"))?;
                if name.is_empty() || name.contains('/') || t.child(*parent_id, &name).is_some() {
                    return Err(corrupt("node name"));
                }
                let id = t.restore_child(
                    parent_path,
                    *parent_id,
                    &name,
                    data.as_deref(),
                    node_acl,
                    stat,
                );
                (id, crate::path::join(parent_path, &name))
            }
        };
        open.push((ordinal as u32, id, path));
    }
    let stored = r.i64()? as u64;
    let mut tree = tree.ok_or_else(|| corrupt("no root"))?;
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

impl<R: Read> Body<R> {
    fn u64_count(&mut self) -> Result<u64, SnapshotError> {
        let n = u64::from_le_bytes(self.array()?);
        if n > u64::from(u32::MAX) {
            return Err(corrupt("node count"));
        }
        Ok(n)
    }
}
