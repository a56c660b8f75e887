//! One ZooKeeper snapshot (`FileSnap.deserialize`, `DataTree.deserialize`, 3.9):
//!
//! ```text
//! header    int magic "ZKSN", int version 2, long dbid
//! sessions  int count, then { long id, int timeoutMs }
//! ACLs      int count, then { long ref, vector<ACL> }
//! nodes     { ustring path, buffer data, long aclRef, StatPersisted } until path "/"
//!           (the root first, as ""; aclRef -1 is world:anyone ALL)
//! seal      long adler32 of every byte before it, ustring "/"
//! [digest   long zxid, int version, long digest (hex ustring before version 2)
//!  seal]
//! [lastZxid long (the zxid when the dump ended)
//!  seal]
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use warden_proto::{Acl, DecodeError, Reader};
use warden_state::StateConfig;
use warden_state::restore::Restore;
use warden_state::tree::NodeStat;

use crate::files::{self, ZkFile};
use crate::{ImportError, ZkDigest};

pub(crate) const MAGIC: i32 = 0x5A4B_534E;
pub(crate) const VERSION: i32 = 2;
/// The database id `FileSnap` writes (ZooKeeper reads it and ignores it).
pub(crate) const DBID: i64 = -1;
/// `ReferenceCountedACLCache`: a node whose aclRef is -1 is open to everyone.
const OPEN_ACL_REF: i64 = -1;
/// The digest format whose value is a long (`DigestCalculator.DIGEST_VERSION`).
pub(crate) const DIGEST_VERSION: i32 = 2;
/// Where the body of a snapshot received whole (the admin `restore` command) is said to be.
const RECEIVED: &str = "the snapshot received";

/// A snapshot loaded and checked.
pub struct Loaded {
    pub path: PathBuf,
    /// The zxid in its name: every transaction up to it is in it, and maybe some after.
    pub zxid: i64,
    pub restore: Restore,
    /// The digest of the tree as it was at some zxid at or after `zxid`.
    pub digest: Option<ZkDigest>,
}

/// The newest snapshot that reads without error, as ZooKeeper picks it; the damaged ones
/// passed over are described. An error only if there were snapshots and none was valid.
pub fn newest_valid(
    dir: &Path,
    snapshots: &[ZkFile],
    config: StateConfig,
) -> Result<(Option<Loaded>, Vec<String>), ImportError> {
    let mut tried = Vec::new();
    for file in snapshots.iter().take(files::SNAPSHOTS_TRIED_MAX) {
        match read_file(file, config) {
            Ok(loaded) => return Ok((Some(loaded), tried)),
            Err(e) => tried.push(e.to_string()),
        }
    }
    if snapshots.is_empty() {
        Ok((None, tried))
    } else {
        Err(ImportError::NoValidSnapshot {
            dir: dir.to_owned(),
            tried,
        })
    }
}

fn read_file(file: &ZkFile, config: StateConfig) -> Result<Loaded, ImportError> {
    let compression = files::compression_of(&file.path);
    let bytes = files::read(&file.path)?;
    if !files::looks_complete(&bytes, compression) {
        return Err(ImportError::Damaged {
            path: file.path.clone(),
            offset: bytes.len() as u64,
            what: "incomplete: it does not end as a snapshot ends".into(),
        });
    }
    let bytes = files::decompress(&file.path, bytes, compression)?;
    parse(&file.path, file.zxid, &bytes, config)
}

/// Parses a snapshot's decompressed bytes; `zxid` is the one in its name.
pub fn parse(
    path: &Path,
    zxid: i64,
    bytes: &[u8],
    config: StateConfig,
) -> Result<Loaded, ImportError> {
    let mut body = parse_body(path, bytes, config)?;
    body.restore.set_zxid(zxid);
    // ZooKeeper compares only digests of the version it computes, of a zxid at or after the
    // snapshot's (`DataTree.deserializeZxidDigest`); a zxid of 0 means none was taken.
    let digest = body
        .digest
        .filter(|d| d.version == DIGEST_VERSION && d.digest.zxid > 0 && d.digest.zxid >= zxid)
        .map(|d| d.digest);
    Ok(Loaded {
        path: path.to_owned(),
        zxid,
        restore: body.restore,
        digest,
    })
}

/// A snapshot received whole, without a file name (the admin `restore` command's body), as
/// ZooKeeper's `restoreFromSnapshot` reads one: uncompressed (or gzip, told by its first
/// bytes), every seal checked, and its zxid the last processed zxid written at its end.
/// The digest is not compared: a snapshot ZooKeeper takes while writes go on is fuzzy, its
/// digest of a later tree than the nodes dumped, and ZooKeeper's restore does not compare it
/// either. At most `bytes_max` decompressed bytes are read.
pub fn parse_received(
    bytes: &[u8],
    bytes_max: usize,
    config: StateConfig,
) -> Result<Restore, ImportError> {
    let path = Path::new(RECEIVED);
    let plain;
    let bytes = if bytes.starts_with(&files::GZIP_MAGIC) {
        plain = files::gunzip(path, bytes, bytes_max)?;
        plain.as_slice()
    } else {
        bytes
    };
    let mut body = parse_body(path, bytes, config)?;
    let zxid = body.last_zxid.ok_or_else(|| ImportError::Damaged {
        path: path.to_owned(),
        offset: bytes.len() as u64,
        what: "no last processed zxid at its end (ZooKeeper writes it when \
               serializeLastProcessedZxid is on, the default since 3.9)"
            .into(),
    })?;
    body.restore.set_zxid(zxid);
    Ok(body.restore)
}

/// A digest section as written.
#[derive(Debug, Clone, Copy)]
struct DigestSection {
    version: i32,
    digest: ZkDigest,
}

/// What a snapshot holds, before its zxid is decided.
struct Body {
    restore: Restore,
    digest: Option<DigestSection>,
    /// The zxid applied when the dump ended (3.9's optional last section).
    last_zxid: Option<i64>,
}

fn parse_body(path: &Path, bytes: &[u8], config: StateConfig) -> Result<Body, ImportError> {
    let mut s = Stream {
        bytes,
        r: Reader::new(bytes),
        path,
    };
    let magic = s.get(Reader::read_i32)?;
    let version = s.get(Reader::read_i32)?;
    if magic != MAGIC || version != VERSION {
        return Err(s.damaged(
            0,
            format!("not a ZooKeeper snapshot (magic {magic:#x}, version {version})"),
        ));
    }
    s.get(Reader::read_i64)?; // dbid
    let restore = read_tree(&mut s, config)?;
    s.seal()?;
    let mut digest = None;
    if !s.r.is_empty() {
        let at = s.at();
        let zxid = s.get(Reader::read_i64)?;
        let version = s.get(Reader::read_i32)?;
        let value = if version < DIGEST_VERSION {
            let hex = s.get(Reader::read_string)?;
            u64::from_str_radix(&hex, 16)
                .map_err(|_| s.damaged(at, format!("digest {hex:?} is not hex")))?
        } else {
            s.get(Reader::read_i64)? as u64
        };
        digest = Some(DigestSection {
            version,
            digest: ZkDigest {
                zxid,
                digest: value,
            },
        });
        s.seal()?;
    }
    let mut last_zxid = None;
    if !s.r.is_empty() {
        // Restoring from files, ZooKeeper reads it and then replays from the zxid in the name
        // all the same (`FileSnap.deserialize`): the transactions in between may be only
        // partly in the fuzzy dump.
        last_zxid = Some(s.get(Reader::read_i64)?);
        s.seal()?;
    }
    if !s.r.is_empty() {
        return Err(s.damaged(
            s.at(),
            format!("{} bytes after the last seal", s.r.remaining()),
        ));
    }
    Ok(Body {
        restore,
        digest,
        last_zxid,
    })
}

/// The snapshot a ZooKeeper leader dumps to a learner after SNAP (`ZKDatabase.serializeSnapshot`:
/// sessions, ACLs and nodes, without header, seals or digest), as delimited by
/// `warden_proto::quorum::SnapshotScan`; `zxid` is the SNAP packet's. `origin` names the
/// leader in errors.
pub fn parse_dump(
    origin: &Path,
    zxid: i64,
    bytes: &[u8],
    config: StateConfig,
) -> Result<Restore, ImportError> {
    let mut s = Stream {
        bytes,
        r: Reader::new(bytes),
        path: origin,
    };
    let mut restore = read_tree(&mut s, config)?;
    if !s.r.is_empty() {
        return Err(s.damaged(s.at(), format!("{} bytes after the nodes", s.r.remaining())));
    }
    restore.set_zxid(zxid);
    Ok(restore)
}

/// Sessions, the ACL table and the nodes (`SerializeUtils.serializeSnapshot`).
fn read_tree(s: &mut Stream<'_>, config: StateConfig) -> Result<Restore, ImportError> {
    let mut sessions = Vec::new();
    for _ in 0..s.count(12)? {
        let id = s.get(Reader::read_i64)?;
        sessions.push((id, s.get(Reader::read_i32)?));
    }
    let mut acls: HashMap<i64, Vec<Acl>> = HashMap::new();
    for _ in 0..s.count(12)? {
        let reference = s.get(Reader::read_i64)?;
        let list = s.get(|r| r.read_vec(12, |r| warden_proto::Record::decode(r)))?;
        acls.insert(reference, list);
    }
    let mut restore = read_nodes(s, &acls, config)?;
    for (id, timeout_ms) in sessions {
        restore.add_session(id, timeout_ms);
    }
    Ok(restore)
}

/// The nodes, the root first, each after its parent.
fn read_nodes(
    s: &mut Stream<'_>,
    acls: &HashMap<i64, Vec<Acl>>,
    config: StateConfig,
) -> Result<Restore, ImportError> {
    let open = Acl::open();
    let mut restore: Option<Restore> = None;
    loop {
        let at = s.at();
        let path = s.get(Reader::read_string)?;
        if path == "/" {
            break;
        }
        let data = s.get(Reader::read_buffer)?;
        let acl_ref = s.get(Reader::read_i64)?;
        let acl = match acl_ref {
            OPEN_ACL_REF => &open,
            r => acls.get(&r).ok_or_else(|| {
                s.damaged(
                    at,
                    format!("node {path:?}: ACL reference {r} is not in the ACL table"),
                )
            })?,
        };
        let stat = s.get(read_stat)?;
        match restore.as_mut() {
            None if path.is_empty() => {
                restore = Some(Restore::new(config, data.as_deref(), acl, stat));
            }
            None => return Err(s.damaged(at, format!("first node {path:?} is not the root"))),
            Some(r) => r
                .add_node(&path, data.as_deref(), acl, stat)
                .map_err(|e| s.damaged(at, e.to_string()))?,
        }
    }
    restore.ok_or_else(|| s.damaged(s.at(), "no root node".into()))
}

/// A seal's value: the Adler-32 of every byte of the snapshot before it, as a long.
pub(crate) fn seal_checksum(prefix: &[u8]) -> i64 {
    let mut adler = adler2::Adler32::new();
    adler.write_slice(prefix);
    i64::from(adler.checksum())
}

/// `StatPersisted`: 60 bytes, without dataLength and numChildren.
fn read_stat(r: &mut Reader<'_>) -> Result<NodeStat, DecodeError> {
    Ok(NodeStat {
        czxid: r.read_i64()?,
        mzxid: r.read_i64()?,
        ctime: r.read_i64()?,
        mtime: r.read_i64()?,
        version: r.read_i32()?,
        cversion: r.read_i32()?,
        aversion: r.read_i32()?,
        ephemeral_owner: r.read_i64()?,
        pzxid: r.read_i64()?,
    })
}

/// The decompressed stream with its position, for errors that say where.
struct Stream<'a> {
    bytes: &'a [u8],
    r: Reader<'a>,
    path: &'a Path,
}

impl<'a> Stream<'a> {
    fn at(&self) -> usize {
        self.bytes.len() - self.r.remaining()
    }

    fn damaged(&self, offset: usize, what: String) -> ImportError {
        ImportError::Damaged {
            path: self.path.to_owned(),
            offset: offset as u64,
            what,
        }
    }

    fn get<T>(
        &mut self,
        f: impl FnOnce(&mut Reader<'a>) -> Result<T, DecodeError>,
    ) -> Result<T, ImportError> {
        let at = self.at();
        f(&mut self.r).map_err(|e| self.damaged(at, e.to_string()))
    }

    /// A count of items at least `item_bytes` long each, checked against what is left.
    fn count(&mut self, item_bytes: usize) -> Result<usize, ImportError> {
        let at = self.at();
        let n = self.get(Reader::read_i32)?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n.saturating_mul(item_bytes) <= self.r.remaining())
            .ok_or_else(|| self.damaged(at, format!("count {n} does not fit in the file")))
    }

    /// `SnapStream.checkSealIntegrity`: the Adler-32 of every byte before the seal.
    fn seal(&mut self) -> Result<(), ImportError> {
        let at = self.at();
        let computed = seal_checksum(&self.bytes[..at]);
        let stored = self.get(Reader::read_i64)?;
        let slash = self.get(Reader::read_string)?;
        if stored != computed || slash != "/" {
            return Err(self.damaged(
                at,
                format!("checksum mismatch: stored {stored:#x}, computed {computed:#x}"),
            ));
        }
        Ok(())
    }
}
