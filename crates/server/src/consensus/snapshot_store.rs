//! Snapshot files in the data directory: the Raft metadata (last included log id and
//! membership) followed by the state machine's own snapshot bytes (docs/snapshot-format.md).
//! Written to a temporary file, fsynced, renamed, and the directory fsynced, so a crash
//! leaves either the old set of snapshots or the new one.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use openraft::alias::{SnapshotMetaOf, SnapshotOf};

use super::types::WardenRaft;

/// First bytes of every snapshot file.
const MAGIC: &[u8; 8] = b"WRDRAFT1";
const SUFFIX: &str = ".snap";

/// The snapshot files of one data directory.
#[derive(Debug, Clone)]
pub struct SnapshotStore {
    dir: PathBuf,
    retained_count: usize,
}

/// A snapshot as openraft hands it around: its metadata and the state's snapshot bytes.
pub type Snapshot = SnapshotOf<WardenRaft, StateBytes>;

/// A snapshot's state bytes (`warden_state::snapshot`'s encoding): in their file in the
/// store, opened but read only as they are used (a restart decodes them as they stream from
/// the disk, a leader sends them a chunk at a time), or in memory, as a leader sent them.
/// Reads go from the first byte to the last (blocking: off the runtime's threads).
pub enum StateBytes {
    Stored {
        /// Positioned at the state's first byte.
        file: io::BufReader<fs::File>,
        len: u64,
    },
    Received(io::Cursor<Vec<u8>>),
}

impl StateBytes {
    pub fn received(bytes: Vec<u8>) -> StateBytes {
        StateBytes::Received(io::Cursor::new(bytes))
    }

    pub fn len(&self) -> u64 {
        match self {
            StateBytes::Stored { len, .. } => *len,
            StateBytes::Received(bytes) => bytes.get_ref().len() as u64,
        }
    }
}

impl io::Read for StateBytes {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            StateBytes::Stored { file, .. } => file.read(buf),
            StateBytes::Received(bytes) => bytes.read(buf),
        }
    }
}

fn corrupt(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("snapshot {}: {what}", path.display()),
    )
}

impl SnapshotStore {
    pub fn open(dir: PathBuf, retained_count: usize) -> io::Result<SnapshotStore> {
        fs::create_dir_all(&dir)?;
        // Leftovers of a save that crashed before its rename.
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "tmp") {
                fs::remove_file(&path)?;
            }
        }
        Ok(SnapshotStore {
            dir,
            retained_count: retained_count.max(1),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Snapshot files, oldest first. Names carry the last included index, zero-padded, so
    /// name order is log order.
    fn files(&self) -> io::Result<Vec<PathBuf>> {
        let mut files: Vec<PathBuf> = fs::read_dir(&self.dir)?
            .map(|e| e.map(|e| e.path()))
            .collect::<io::Result<_>>()?;
        files.retain(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("snapshot-") && n.ends_with(SUFFIX))
        });
        files.sort();
        Ok(files)
    }

    /// The file of the snapshot `meta` describes.
    pub fn path_of(&self, meta: &SnapshotMetaOf<WardenRaft>) -> PathBuf {
        let index = meta.last_log_id.as_ref().map_or(0, |l| l.index);
        self.dir.join(format!("snapshot-{index:020}{SUFFIX}"))
    }

    /// Whether the snapshot `meta` describes is already on disk.
    pub fn contains(&self, meta: &SnapshotMetaOf<WardenRaft>) -> bool {
        self.path_of(meta).exists()
    }

    /// Writes a snapshot of `state` durably, encoding it into the file as it goes (never held
    /// whole in memory), then deletes the oldest beyond the retained count. Returns the
    /// snapshot as the store now holds it.
    pub fn write(
        &self,
        meta: &SnapshotMetaOf<WardenRaft>,
        state: &warden_state::State,
    ) -> io::Result<Snapshot> {
        let path = self.save_with(meta, |f| {
            warden_state::snapshot::encode_to(state, f).map(drop)
        })?;
        Self::read(&path)
    }

    /// Writes a snapshot received whole durably, then deletes the oldest beyond the retained
    /// count.
    pub fn save(&self, meta: &SnapshotMetaOf<WardenRaft>, bytes: &[u8]) -> io::Result<PathBuf> {
        self.save_with(meta, |f| f.write_all(bytes))
    }

    /// The file of `meta`: its metadata, then what `state` writes; to a temporary file,
    /// fsynced, renamed, the directory fsynced.
    fn save_with(
        &self,
        meta: &SnapshotMetaOf<WardenRaft>,
        state: impl FnOnce(&mut io::BufWriter<fs::File>) -> io::Result<()>,
    ) -> io::Result<PathBuf> {
        let path = self.path_of(meta);
        let tmp = path.with_extension("snap.tmp");
        let meta = rmp_serde::to_vec(meta).map_err(io::Error::other)?;
        let meta_len = u32::try_from(meta.len()).map_err(io::Error::other)?;
        {
            let mut f = io::BufWriter::with_capacity(1 << 20, fs::File::create(&tmp)?);
            f.write_all(MAGIC)?;
            f.write_all(&meta_len.to_be_bytes())?;
            f.write_all(&meta)?;
            f.write_all(&crc32c::crc32c(&meta).to_be_bytes())?;
            state(&mut f)?;
            let f = f.into_inner().map_err(|e| e.into_error())?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &path)?;
        fs::File::open(&self.dir)?.sync_all()?;
        self.purge()?;
        Ok(path)
    }

    /// Deletes all but the newest `retained_count` snapshots.
    fn purge(&self) -> io::Result<()> {
        let files = self.files()?;
        let excess = files.len().saturating_sub(self.retained_count);
        for old in &files[..excess] {
            fs::remove_file(old)?;
        }
        Ok(())
    }

    /// The newest snapshot, if any. A damaged file is an error: it is never skipped silently.
    pub fn latest(&self) -> io::Result<Option<Snapshot>> {
        match self.files()?.last() {
            Some(path) => Self::read(path).map(Some),
            None => Ok(None),
        }
    }

    /// Checks the newest snapshot end to end (its metadata and the tree's checksum) without
    /// loading it: a damaged one is an `InvalidData` error naming the file. The state's bytes
    /// are checksummed as they stream by, so a check holds no second copy of the snapshot.
    pub fn verify_latest(&self) -> io::Result<()> {
        let Some(path) = self.files()?.pop() else {
            return Ok(());
        };
        let (_, mut r, len) = Self::open_file(&path)?;
        warden_state::snapshot::verify_stream(&mut r, len)
            .map(|_| ())
            .map_err(|e| corrupt(&path, &e.to_string()))
    }

    /// A snapshot file with its metadata read and checked; the state's bytes are left in the
    /// file until used.
    fn read(path: &Path) -> io::Result<Snapshot> {
        let (meta, file, len) = Self::open_file(path)?;
        Ok(Snapshot {
            meta,
            snapshot: StateBytes::Stored { file, len },
        })
    }

    /// Opens a snapshot file and reads and checks its metadata; returns it with a reader
    /// positioned at the state's bytes, and how many bytes of them there are.
    fn open_file(
        path: &Path,
    ) -> io::Result<(SnapshotMetaOf<WardenRaft>, io::BufReader<fs::File>, u64)> {
        let file = fs::File::open(path)?;
        let file_len = file.metadata()?.len();
        let mut r = io::BufReader::with_capacity(1 << 20, file);
        let mut head = [0u8; MAGIC.len() + 4];
        io::Read::read_exact(&mut r, &mut head).map_err(|_| corrupt(path, "truncated header"))?;
        if head[..MAGIC.len()] != MAGIC[..] {
            return Err(corrupt(path, "not a Warden snapshot file"));
        }
        let len = u32::from_be_bytes(head[MAGIC.len()..].try_into().expect("4 bytes")) as u64;
        let header = MAGIC.len() as u64 + 4 + len + 4;
        if file_len < header {
            return Err(corrupt(path, "truncated metadata"));
        }
        let mut meta = vec![0u8; len as usize];
        io::Read::read_exact(&mut r, &mut meta)?;
        let mut crc = [0u8; 4];
        io::Read::read_exact(&mut r, &mut crc)?;
        if crc32c::crc32c(&meta).to_be_bytes() != crc {
            return Err(corrupt(path, "metadata checksum mismatch"));
        }
        let meta: SnapshotMetaOf<WardenRaft> =
            rmp_serde::from_slice(&meta).map_err(|e| corrupt(path, &e.to_string()))?;
        Ok((meta, r, file_len - header))
    }

    /// The newest snapshot's zxid and when its file was written, reading only its first
    /// bytes (for the `last_snapshot` command); `None` before the first snapshot.
    pub fn latest_zxid(&self) -> io::Result<Option<(i64, std::time::SystemTime)>> {
        let Some(path) = self.files()?.pop() else {
            return Ok(None);
        };
        let file = fs::File::open(&path)?;
        let written = file.metadata()?.modified()?;
        let mut r = io::BufReader::new(file);
        let mut head = [0u8; MAGIC.len() + 4];
        io::Read::read_exact(&mut r, &mut head)?;
        if head[..MAGIC.len()] != MAGIC[..] {
            return Err(corrupt(&path, "not a Warden snapshot file"));
        }
        let meta_len = u32::from_be_bytes(head[MAGIC.len()..].try_into().expect("4 bytes"));
        // The metadata and its checksum come before the state's bytes.
        io::copy(
            &mut io::Read::take(&mut r, u64::from(meta_len) + 4),
            &mut io::sink(),
        )?;
        let zxid =
            warden_state::snapshot::read_zxid(r).map_err(|e| corrupt(&path, &e.to_string()))?;
        Ok(Some((zxid, written)))
    }

    /// Bytes of snapshots on disk.
    pub fn disk_bytes(&self) -> u64 {
        self.files()
            .unwrap_or_default()
            .iter()
            .filter_map(|p| fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use openraft::alias::{CommittedLeaderIdOf, StoredMembershipOf};

    fn meta(index: u64) -> SnapshotMetaOf<WardenRaft> {
        SnapshotMetaOf::<WardenRaft> {
            last_log_id: Some(openraft::LogId::new(
                CommittedLeaderIdOf::<WardenRaft>::new(1),
                index,
            )),
            last_membership: StoredMembershipOf::<WardenRaft>::default(),
        }
    }

    fn bytes_of(snapshot: Snapshot) -> Vec<u8> {
        let mut data = snapshot.snapshot;
        let mut bytes = Vec::new();
        data.read_to_end(&mut bytes).unwrap();
        assert_eq!(bytes.len() as u64, data.len());
        bytes
    }

    #[test]
    fn saves_reads_back_and_keeps_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path().join("snapshots"), 3).unwrap();
        assert!(store.latest().unwrap().is_none());
        for i in 1..=5u64 {
            store.save(&meta(i * 10), &[i as u8; 100]).unwrap();
        }
        assert_eq!(store.files().unwrap().len(), 3);
        let latest = store.latest().unwrap().unwrap();
        assert_eq!(latest.meta.last_log_id.unwrap().index, 50);
        assert_eq!(bytes_of(latest), vec![5u8; 100]);
    }

    /// A snapshot written as it is encoded reads back as the state it was made from.
    #[test]
    fn a_state_written_as_it_is_encoded_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path().to_path_buf(), 3).unwrap();
        let mut state = warden_state::State::new(Default::default());
        state.apply(&warden_state::Txn {
            session_id: 0,
            time_ms: 1,
            auth: Vec::new(),
            enforce_quota: false,
            kind: warden_state::TxnKind::CreateSession {
                timeout_ms: 10_000,
                password: vec![1; 16],
            },
        });
        let written = store.write(&meta(9), &state).unwrap();
        assert_eq!(written.meta, meta(9));
        store.verify_latest().unwrap();
        let StateBytes::Stored { file, len } = store.latest().unwrap().unwrap().snapshot else {
            panic!("the store's snapshot is read from its file");
        };
        let loaded = warden_state::snapshot::decode_from(file, len).unwrap();
        assert_eq!(loaded.digest(), state.digest());
        assert_eq!(bytes_of(written), warden_state::snapshot::encode(&state));
    }

    #[test]
    fn a_damaged_header_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path().to_path_buf(), 3).unwrap();
        let path = store.save(&meta(7), b"state").unwrap();
        let mut bytes = fs::read(&path).unwrap();
        bytes[14] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(store.latest().is_err());
    }

    #[test]
    fn verify_latest_finds_a_flipped_byte_in_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path().to_path_buf(), 3).unwrap();
        let tree = warden_state::snapshot::encode(&warden_state::State::new(Default::default()));
        let path = store.save(&meta(7), &tree).unwrap();
        store.verify_latest().unwrap();
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 20;
        bytes[last] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        let err = store.verify_latest().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("checksum"), "{err}");
    }
}
