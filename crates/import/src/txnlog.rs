//! One ZooKeeper transaction log (`FileTxnLog`, `Util.readTxnBytes`,
//! `SerializeUtils.deserializeTxn`, 3.9):
//!
//! ```text
//! header  int magic "ZKLG", int version 2, long dbid
//! entry*  long adler32 of body, int length of body,
//!         body: TxnHeader { long session, int cxid, long zxid, long time, int type }
//!               record by type, [TxnDigest { int version, long digest }]
//!         byte 'B'
//! zeros   the rest of the preallocated file
//! ```
//!
//! The log ends at a zero length or at the end of the file. An entry cut short (by the end of
//! the file, or without its 'B') was being written when ZooKeeper stopped: the log ends there,
//! as ZooKeeper's reader ends it, and the cut is reported. A complete entry whose checksum or
//! record is wrong is damage, and an error.

use std::path::Path;

use warden_proto::{Acl, DecodeError, Reader, Record};
use warden_state::restore::{LoggedOp, LoggedTxn};
use warden_state::tree::{CONTAINER_OWNER, TTL_MAX_MS, ttl_owner};

use crate::ImportError;

const MAGIC: i32 = 0x5A4B_4C47;
const VERSION: i32 = 2;
const HEADER_BYTES: usize = 16;
const END_OF_RECORD: u8 = b'B';
const DIGEST_VERSION: i32 = 2;
const DIGEST_BYTES: usize = 12;

/// `ZooDefs.OpCode` values that appear in logs.
mod op {
    pub const ERROR: i32 = -1;
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const SET_DATA: i32 = 5;
    pub const SET_ACL: i32 = 7;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const RECONFIG: i32 = 16;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const DELETE_CONTAINER: i32 = 20;
    pub const CREATE_TTL: i32 = 21;
    pub const CREATE_SESSION: i32 = -10;
    pub const CLOSE_SESSION: i32 = -11;
}

/// One entry: where it starts, its transaction, and the tree digest logged with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub offset: u64,
    pub txn: LoggedTxn,
    pub digest: Option<u64>,
}

/// A log file's bytes, read entry by entry.
pub struct LogFile<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    at: usize,
    torn: Option<u64>,
}

impl<'a> LogFile<'a> {
    pub fn open(path: &'a Path, bytes: &'a [u8]) -> Result<LogFile<'a>, ImportError> {
        let mut r = Reader::new(bytes);
        let header = (|| Ok::<_, DecodeError>((r.read_i32()?, r.read_i32()?, r.read_i64()?)))();
        match header {
            Ok((MAGIC, VERSION, _)) => Ok(LogFile {
                path,
                bytes,
                at: HEADER_BYTES,
                torn: None,
            }),
            Ok((magic, version, _)) => Err(damaged(
                path,
                0,
                format!("not a ZooKeeper transaction log (magic {magic:#x}, version {version})"),
            )),
            Err(e) => Err(damaged(path, 0, format!("header: {e}"))),
        }
    }

    /// Where the last entry was cut short, if it was.
    pub fn torn(&self) -> Option<u64> {
        self.torn
    }

    /// The next entry, or `None` at the end of the log.
    pub fn next_entry(&mut self) -> Result<Option<Entry>, ImportError> {
        let start = self.at;
        let rest = &self.bytes[start..];
        let mut r = Reader::new(rest);
        let (Ok(crc), Ok(len)) = (r.read_i64(), r.read_i32()) else {
            return Ok(self.end(start, rest.iter().any(|&b| b != 0)));
        };
        if len == 0 {
            return Ok(self.end(start, crc != 0));
        }
        let Ok(len) = usize::try_from(len) else {
            return Err(damaged(
                self.path,
                start,
                format!("negative entry length {len}"),
            ));
        };
        let Ok(body) = r.take(len) else {
            return Ok(self.end(start, true));
        };
        if r.read_u8() != Ok(END_OF_RECORD) {
            return Ok(self.end(start, true));
        }
        let mut adler = adler2::Adler32::new();
        adler.write_slice(body);
        if i64::from(adler.checksum()) != crc {
            return Err(damaged(
                self.path,
                start,
                format!(
                    "checksum mismatch: stored {crc:#x}, computed {:#x}",
                    adler.checksum()
                ),
            ));
        }
        let (txn, digest) = decode(body).map_err(|e| damaged(self.path, start, e))?;
        self.at = start + rest.len() - r.remaining();
        Ok(Some(Entry {
            offset: start as u64,
            txn,
            digest,
        }))
    }

    fn end(&mut self, at: usize, torn: bool) -> Option<Entry> {
        if torn {
            self.torn = Some(at as u64);
        }
        self.at = self.bytes.len();
        None
    }
}

fn damaged(path: &Path, offset: usize, what: String) -> ImportError {
    ImportError::Damaged {
        path: path.to_owned(),
        offset: offset as u64,
        what,
    }
}

/// One transaction as ZooKeeper writes it in its log and sends it to learners (PROPOSAL,
/// INFORM): TxnHeader, the record of its type, and the tree's digest after it if recorded.
pub fn decode(body: &[u8]) -> Result<(LoggedTxn, Option<u64>), String> {
    let r = &mut Reader::new(body);
    let e = |e: DecodeError| e.to_string();
    let session_id = r.read_i64().map_err(e)?;
    r.read_i32().map_err(e)?; // cxid
    let zxid = r.read_i64().map_err(e)?;
    let time_ms = r.read_i64().map_err(e)?;
    let kind = r.read_i32().map_err(e)?;
    let op = match kind {
        op::CREATE_SESSION => LoggedOp::CreateSession {
            timeout_ms: r.read_i32().map_err(e)?,
        },
        // Absent before 3.6 or with zookeeper.closeSessionTxn.enabled=false: nothing, or only
        // a digest, follows (a record and a digest take at least 16 bytes).
        op::CLOSE_SESSION if r.is_empty() || is_digest_only(r) => {
            LoggedOp::CloseSession { paths: Vec::new() }
        }
        op::CLOSE_SESSION => LoggedOp::CloseSession {
            paths: r.read_vec(4, Reader::read_string).map_err(e)?,
        },
        op::MULTI => multi(r, session_id).map_err(e)?,
        op::CHECK => return Err("a check outside a multi".into()),
        kind => record(kind, r, session_id).map_err(e)?,
    };
    let digest = match r.remaining() {
        0 => None,
        DIGEST_BYTES => {
            let version = r.read_i32().map_err(e)?;
            let digest = r.read_i64().map_err(e)? as u64;
            (version == DIGEST_VERSION).then_some(digest)
        }
        n => return Err(format!("{n} unexpected bytes after the record")),
    };
    let txn = LoggedTxn {
        session_id,
        zxid,
        time_ms,
        op,
    };
    Ok((txn, digest))
}

fn is_digest_only(r: &Reader<'_>) -> bool {
    r.remaining() == DIGEST_BYTES && r.clone().read_i32() == Ok(DIGEST_VERSION)
}

/// `MultiTxn`: sub-records of the types a multi may hold. One `error` among them means the
/// multi failed and applied nothing: the others are not decoded (ZooKeeper does not use
/// them either, and their bytes are not always those of their type).
fn multi(r: &mut Reader<'_>, session_id: i64) -> Result<LoggedOp, DecodeError> {
    let subs = r.read_vec(8, |r| {
        Ok((r.read_i32()?, r.read_buffer()?.unwrap_or_default()))
    })?;
    if subs.iter().any(|(kind, _)| *kind == op::ERROR) {
        return Ok(LoggedOp::Multi(vec![LoggedOp::Error { err: 0 }]));
    }
    let ops = subs
        .iter()
        .map(|(kind, data)| match *kind {
            op::CREATE
            | op::CREATE2
            | op::CREATE_TTL
            | op::CREATE_CONTAINER
            | op::DELETE
            | op::DELETE_CONTAINER
            | op::SET_DATA
            | op::CHECK => record(*kind, &mut Reader::new(data), session_id),
            other => Err(DecodeError::UnexpectedOpCode(other)),
        })
        .collect::<Result<_, _>>()?;
    Ok(LoggedOp::Multi(ops))
}

/// The record of one create, delete, setData, setACL, check or error.
fn record(kind: i32, r: &mut Reader<'_>, session_id: i64) -> Result<LoggedOp, DecodeError> {
    let acl = |r: &mut Reader<'_>| r.read_vec(12, Acl::decode);
    Ok(match kind {
        op::CREATE | op::CREATE2 => {
            let (path, data, acl) = (r.read_string()?, r.read_buffer()?, acl(r)?);
            let ephemeral = r.read_bool()?;
            // `CreateTxnV0` had no parentCVersion: -1 asks replay to work it out.
            let parent_cversion = if r.remaining() < 4 { -1 } else { r.read_i32()? };
            LoggedOp::Create {
                path,
                data,
                acl,
                ephemeral_owner: if ephemeral { session_id } else { 0 },
                parent_cversion,
                fix_parent_if_exists: kind == op::CREATE,
            }
        }
        op::CREATE_CONTAINER | op::CREATE_TTL => {
            let (path, data, acl) = (r.read_string()?, r.read_buffer()?, acl(r)?);
            let parent_cversion = r.read_i32()?;
            let ephemeral_owner = if kind == op::CREATE_TTL {
                let ttl = r.read_i64()?;
                if !(0..=TTL_MAX_MS).contains(&ttl) {
                    return Err(DecodeError::InvalidValue {
                        field: "ttl",
                        value: ttl,
                    });
                }
                ttl_owner(ttl)
            } else {
                CONTAINER_OWNER
            };
            LoggedOp::Create {
                path,
                data,
                acl,
                ephemeral_owner,
                parent_cversion,
                fix_parent_if_exists: false,
            }
        }
        op::DELETE | op::DELETE_CONTAINER => LoggedOp::Delete {
            path: r.read_string()?,
        },
        op::SET_DATA | op::RECONFIG => LoggedOp::SetData {
            path: r.read_string()?,
            data: r.read_buffer()?,
            version: r.read_i32()?,
        },
        op::SET_ACL => LoggedOp::SetAcl {
            path: r.read_string()?,
            acl: acl(r)?,
            version: r.read_i32()?,
        },
        op::CHECK => {
            r.read_string()?;
            r.read_i32()?;
            LoggedOp::Check
        }
        op::ERROR => LoggedOp::Error { err: r.read_i32()? },
        other => return Err(DecodeError::UnknownOpCode(other)),
    })
}
