//! ZooKeeper's files (`persistence/Util.java`, `FileTxnLog.java`, `SnapStream.java`):
//! `snapshot.<zxid>[.gz|.snappy]` and `log.<first zxid>` in a `version-2` directory, the zxid
//! in hex; a snapshot's compression is told by its name.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::ImportError;

/// The directory under dataDir (and dataLogDir) that holds the files.
pub const VERSION_DIR: &str = "version-2";
/// ZooKeeper tries at most this many snapshots, newest first (`FileSnap.findNValidSnapshots`).
pub const SNAPSHOTS_TRIED_MAX: usize = 100;
/// xerial snappy-java's stream header: magic, then version and compatible version (both 1).
const SNAPPY_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const SNAPPY_HEADER_BYTES: usize = 16;
/// No snappy block of ZooKeeper's is near this (snappy-java writes 32 KiB blocks).
const SNAPPY_BLOCK_BYTES_MAX: usize = 64 << 20;
/// The first bytes of a gzip stream.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// A plain snapshot ends with the string "/" (the end of its last seal).
const SEAL_END: &[u8; 5] = b"\x00\x00\x00\x01/";

/// How a snapshot is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Plain,
    Gzip,
    Snappy,
}

/// One snapshot or log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkFile {
    pub path: PathBuf,
    pub zxid: i64,
}

/// `dir/version-2`, or `dir` itself when it is the version directory.
pub fn version_dir(dir: &Path) -> PathBuf {
    if dir.file_name().is_some_and(|n| n == VERSION_DIR) {
        dir.to_owned()
    } else {
        dir.join(VERSION_DIR)
    }
}

/// The zxid in a file name (`Util.getZxidFromName`): the second `.`-separated part, in hex.
fn zxid_of(name: &str, prefix: &str) -> Option<i64> {
    let mut parts = name.split('.');
    (parts.next()? == prefix)
        .then(|| u64::from_str_radix(parts.next()?, 16).ok())
        .flatten()
        .map(|z| z as i64)
}

fn list(dir: &Path, prefix: &str) -> Result<Vec<ZkFile>, ImportError> {
    let io_err = |source| ImportError::Io {
        path: dir.to_owned(),
        source,
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(io_err)?.path();
        let zxid = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| zxid_of(n, prefix));
        if let Some(zxid) = zxid {
            files.push(ZkFile { path, zxid });
        }
    }
    files.sort_by_key(|f| f.zxid);
    Ok(files)
}

/// Snapshot files, newest first.
pub fn snapshots(dir: &Path) -> Result<Vec<ZkFile>, ImportError> {
    let mut files = list(dir, "snapshot")?;
    files.reverse();
    Ok(files)
}

/// Log files, oldest first.
pub fn logs(dir: &Path) -> Result<Vec<ZkFile>, ImportError> {
    list(dir, "log")
}

/// The logs that can hold transactions after `zxid` (`FileTxnLog.getLogFiles`): the newest
/// that starts at or before `zxid + 1`, and every later one.
pub fn logs_from(logs: &[ZkFile], zxid: i64) -> &[ZkFile] {
    let first = logs
        .iter()
        .rposition(|f| f.zxid <= zxid.saturating_add(1))
        .unwrap_or(0);
    &logs[first..]
}

pub fn compression_of(path: &Path) -> Compression {
    match path.extension().and_then(|e| e.to_str()) {
        Some("gz") => Compression::Gzip,
        Some("snappy") => Compression::Snappy,
        _ => Compression::Plain,
    }
}

pub fn read(path: &Path) -> Result<Vec<u8>, ImportError> {
    fs::read(path).map_err(|source| ImportError::Io {
        path: path.to_owned(),
        source,
    })
}

/// ZooKeeper's quick check before it reads a snapshot (`SnapStream.isValidSnapshot`).
pub fn looks_complete(bytes: &[u8], compression: Compression) -> bool {
    match compression {
        Compression::Plain => bytes.len() >= 10 && bytes.ends_with(SEAL_END),
        Compression::Gzip => bytes.starts_with(&GZIP_MAGIC),
        Compression::Snappy => bytes.starts_with(SNAPPY_MAGIC),
    }
}

/// A snapshot's bytes as ZooKeeper's checksums see them: decompressed.
pub fn decompress(
    path: &Path,
    bytes: Vec<u8>,
    compression: Compression,
) -> Result<Vec<u8>, ImportError> {
    let damaged = |offset: usize, what: String| ImportError::Damaged {
        path: path.to_owned(),
        offset: offset as u64,
        what,
    };
    match compression {
        Compression::Plain => Ok(bytes),
        Compression::Gzip => gunzip(path, &bytes, usize::MAX),
        Compression::Snappy => {
            let mut out = Vec::with_capacity(bytes.len() * 4);
            let mut at = SNAPPY_HEADER_BYTES;
            if bytes.len() < at || !bytes.starts_with(SNAPPY_MAGIC) {
                return Err(damaged(0, "not a snappy-java stream".into()));
            }
            let mut decoder = snap::raw::Decoder::new();
            while at < bytes.len() {
                let len = bytes
                    .get(at..at + 4)
                    .map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")))
                    .ok_or_else(|| damaged(at, "truncated block length".into()))?;
                let block = usize::try_from(len)
                    .ok()
                    .and_then(|len| bytes.get(at + 4..at + 4 + len))
                    .ok_or_else(|| damaged(at, format!("block of {len} bytes past the end")))?;
                let size = snap::raw::decompress_len(block)
                    .ok()
                    .filter(|&n| n <= SNAPPY_BLOCK_BYTES_MAX)
                    .ok_or_else(|| damaged(at, "bad snappy block header".into()))?;
                let start = out.len();
                out.resize(start + size, 0);
                decoder
                    .decompress(block, &mut out[start..])
                    .map_err(|e| damaged(at, format!("snappy block: {e}")))?;
                at += 4 + block.len();
            }
            Ok(out)
        }
    }
}

/// A gzip stream (one or more members) decompressed, refused past `bytes_max` bytes.
pub fn gunzip(path: &Path, bytes: &[u8], bytes_max: usize) -> Result<Vec<u8>, ImportError> {
    let damaged = |offset: usize, what: String| ImportError::Damaged {
        path: path.to_owned(),
        offset: offset as u64,
        what,
    };
    let mut out = Vec::with_capacity(bytes.len().saturating_mul(4).min(bytes_max));
    let limit = u64::try_from(bytes_max)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    flate2::read::MultiGzDecoder::new(bytes)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| {
            damaged(
                out.len(),
                format!("gzip stream (offset in the decompressed bytes): {e}"),
            )
        })?;
    if out.len() > bytes_max {
        return Err(damaged(
            bytes_max,
            format!("more than {bytes_max} bytes once decompressed"),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_hex_zxids() {
        assert_eq!(zxid_of("snapshot.1a", "snapshot"), Some(0x1a));
        assert_eq!(
            zxid_of("snapshot.100000002.snappy", "snapshot"),
            Some(0x1_0000_0002)
        );
        assert_eq!(zxid_of("log.1", "log"), Some(1));
        assert_eq!(zxid_of("log.xyz", "log"), None);
        assert_eq!(zxid_of("snapshot.5", "log"), None);
        assert_eq!(zxid_of("acceptedEpoch", "log"), None);
    }

    #[test]
    fn logs_start_with_the_one_holding_the_next_zxid() {
        let files: Vec<ZkFile> = [1, 0x20, 0x40]
            .into_iter()
            .map(|zxid| ZkFile {
                path: PathBuf::from(format!("log.{zxid:x}")),
                zxid,
            })
            .collect();
        assert_eq!(logs_from(&files, 0x25)[0].zxid, 0x20);
        assert_eq!(logs_from(&files, 0x1f)[0].zxid, 0x20);
        assert_eq!(logs_from(&files, 0x1e)[0].zxid, 1);
        assert_eq!(logs_from(&files, 0)[0].zxid, 1);
        assert_eq!(logs_from(&files, 0x50).len(), 1);
    }
}
