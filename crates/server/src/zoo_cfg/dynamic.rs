//! The files ZooKeeper keeps its membership in once reconfig is enabled, kept by Warden the same
//! way, so that an operator can go on restarting every server from its own zoo.cfg.
//!
//! ZooKeeper 3.9 (`QuorumPeer.setQuorumVerifier`, `QuorumPeerConfig.writeDynamicConfig` and
//! `editStaticConfig`), on every server and only with reconfigEnabled=true, whenever a committed
//! membership is newer than the one it has (the first leader's founding membership included):
//!
//! 1. writes `<zoo.cfg>.dynamic.<version in hex>`: one
//!    `server.N=host:quorumPort:electionPort:role;clientHost:clientPort` line per member, sorted
//!    as text, with no `version` line (the version is in the name) and no final new line;
//! 2. rewrites zoo.cfg as `key=value` lines, without comments, leaving out `server.*`,
//!    `group*`, `weight*`, `peerType*`, the old `dynamicConfigFile`, and `clientPort*` when
//!    this server's entry names its client address; then `dynamicConfigFile=<canonical path of
//!    the new file>`.
//!
//! At start, a member whose zoo.cfg still has server.N lines first copies it to
//! `<zoo.cfg>.bak`. Older dynamic files stay where they are, as with ZooKeeper. ZooKeeper also
//! writes `<zoo.cfg>.dynamic.next` while a reconfig is being proposed, and reads it at start;
//! Warden's change in flight is in its Raft log (a joint configuration), so it writes no such
//! file and reads none.
//!
//! Every file is written atomically: a temporary file beside it, fsynced, renamed over it, then
//! the directory fsynced. A failure is logged and the server carries on: the membership in
//! force is in the log and `/zookeeper/config`, these files only say where to start from, and
//! the next change tries again.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{java_trim, read_properties};
use crate::config::{Config, Member};

/// The zoo.cfg of a cluster member, kept up to date with the committed membership.
#[derive(Debug)]
pub struct DynamicConfigFiles {
    zoo_cfg: PathBuf,
    my_id: u64,
    /// The version of the membership the files hold. A committed membership is written only
    /// when newer, as ZooKeeper's `setQuorumVerifier` ignores a known or older one: a server
    /// that replays its log at start rewrites nothing.
    version: i64,
    /// Whether zoo.cfg still has the server.N lines (no dynamic file yet).
    static_members: bool,
}

impl DynamicConfigFiles {
    /// For a cluster member started from a zoo.cfg with reconfig enabled, as ZooKeeper (which
    /// writes nothing for a standalone server or with reconfigEnabled=false). `fresh` is true
    /// when the data directory is new: the first membership applied is then written whatever
    /// version the files have (they may come from ZooKeeper, whose versions are its zxids).
    pub fn new(config: &Config, fresh: bool) -> Option<DynamicConfigFiles> {
        let files = config.zoo_cfg.as_ref()?;
        if !config.cluster.reconfig_enabled || config.cluster.members.len() < 2 {
            return None;
        }
        Some(DynamicConfigFiles {
            zoo_cfg: files.path.clone(),
            my_id: config.cluster.my_id?,
            // ZooKeeper: a membership without a version is version 0.
            version: if fresh {
                -1
            } else {
                files.dynamic_version.unwrap_or(0)
            },
            static_members: files.dynamic_version.is_none(),
        })
    }

    /// ZooKeeper's `backupOldConfig`: zoo.cfg with its server.N lines, copied to
    /// `<zoo.cfg>.bak` at every start until a membership has been written to a dynamic file.
    pub fn back_up_static_config(&self) {
        if !self.static_members {
            return;
        }
        let backup = with_suffix(&self.zoo_cfg, ".bak");
        let copied = fs::read(&self.zoo_cfg)
            .and_then(|bytes| write_atomically(&backup, &bytes, Some(&self.zoo_cfg)));
        if let Err(e) = copied {
            tracing::error!(path = %backup.display(), error = %e, "cannot back up zoo.cfg");
        }
    }

    /// The membership `version` is committed (and applied here): writes it out if it is newer
    /// than what the files hold.
    pub fn committed(&mut self, members: &[Member], version: i64) {
        if version <= self.version {
            return;
        }
        let dynamic = dynamic_file_path(&self.zoo_cfg, version);
        match self.write(members, &dynamic) {
            Ok(()) => {
                tracing::info!(
                    version = format_args!("{version:#x}"),
                    path = %dynamic.display(),
                    zoo_cfg = %self.zoo_cfg.display(),
                    "membership written to a dynamic config file, and zoo.cfg pointed at it"
                );
                self.version = version;
                self.static_members = false;
            }
            Err(e) => tracing::error!(
                version = format_args!("{version:#x}"),
                path = %dynamic.display(),
                error = %e,
                "cannot write the membership to zoo.cfg's dynamic config file; the next \
                 membership change tries again (the membership in force is in the log)"
            ),
        }
    }

    fn write(&self, members: &[Member], dynamic: &Path) -> io::Result<()> {
        write_atomically(dynamic, dynamic_file_text(members).as_bytes(), None)?;
        let properties = read_properties(&self.zoo_cfg).map_err(io::Error::other)?;
        let properties = properties
            .into_iter()
            .map(|p| (java_trim(&p.key).to_owned(), java_trim(&p.value).to_owned()));
        let erase_client = members
            .iter()
            .any(|m| m.id == self.my_id && m.client.is_some());
        let edited = edited_zoo_cfg(properties, &fs::canonicalize(dynamic)?, erase_client);
        write_atomically(&self.zoo_cfg, edited.as_bytes(), Some(&self.zoo_cfg))
    }
}

/// ZooKeeper's `getVersionFromFilename`: the hex number after the last `.` of the path
/// (`zoo.cfg.dynamic.100000000`), 0 when there is none. A negative number is refused, as
/// ZooKeeper fails to start on one.
pub fn version_from_file_name(path: &Path) -> Result<i64, String> {
    let name = path.to_string_lossy();
    let Some(dot) = name.rfind('.') else {
        return Ok(0);
    };
    match java_parse_hex_long(&name[dot + 1..]) {
        Some(version) if version < 0 => Err(format!(
            "the version in the file's name, {}, is negative (ZooKeeper refuses it too)",
            &name[dot + 1..]
        )),
        Some(version) => Ok(version),
        None => Ok(0),
    }
}

/// Java's `Long.parseLong(text, 16)`: an optional sign, then hex digits, within a long.
fn java_parse_hex_long(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, 16).ok()?;
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// `<zoo.cfg>.dynamic.<version in hex>`, as ZooKeeper names it (`Long.toHexString`).
pub fn dynamic_file_path(zoo_cfg: &Path, version: i64) -> PathBuf {
    with_suffix(zoo_cfg, &format!(".dynamic.{:x}", version as u64))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The dynamic file's text, as ZooKeeper's `writeDynamicConfig` writes it: the members'
/// `server.N=...` lines sorted as text (`server.10=` before `server.1=`, since '0' < '='),
/// joined by new lines.
pub fn dynamic_file_text(members: &[Member]) -> String {
    let mut lines: Vec<String> = members.iter().map(Member::dynamic_config_line).collect();
    lines.sort();
    lines.join("\n")
}

/// zoo.cfg as ZooKeeper's `editStaticConfig` rewrites it: every `key=value` (the last of a
/// repeated key, in the order the keys first appear) but the membership's, then the pointer to
/// the dynamic file.
pub fn edited_zoo_cfg(
    properties: impl IntoIterator<Item = (String, String)>,
    dynamic_file: &Path,
    erase_client: bool,
) -> String {
    let mut kept: Vec<(String, String)> = Vec::new();
    for (key, value) in properties {
        let membership = [
            "server.",
            "group",
            "weight",
            "dynamicConfigFile",
            "peerType",
        ]
        .iter()
        .any(|prefix| key.starts_with(prefix));
        if membership || (erase_client && key.starts_with("clientPort")) {
            continue;
        }
        match kept.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => kept.push((key, value)),
        }
    }
    let mut text = String::new();
    for (key, value) in &kept {
        text.push_str(&format!("{}={}\n", escape(key, true), escape(value, false)));
    }
    let path = dynamic_file.to_string_lossy();
    text.push_str(&format!("dynamicConfigFile={}\n", escape(&path, false)));
    text
}

/// Escapes what `java.util.Properties` would read otherwise (ZooKeeper writes values raw, which
/// loses a `\` in a path; Warden's file reads back as it was meant).
fn escape(text: &str, key: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\x0c' => out.push_str("\\f"),
            '=' | ':' | ' ' if key => {
                out.push('\\');
                out.push(c);
            }
            '#' | '!' if key && i == 0 => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Writes `path` so that it holds either its old bytes or all of `bytes`, even across a crash:
/// `<path>.tmp` (with the permissions of `like`, if given), fsynced, renamed over `path`, and
/// the directory fsynced so that the rename lasts.
pub fn write_atomically(path: &Path, bytes: &[u8], like: Option<&Path>) -> io::Result<()> {
    let tmp = with_suffix(path, ".tmp");
    let result = (|| {
        let mut file = File::create(&tmp)?;
        if let Some(like) = like
            && let Ok(meta) = fs::metadata(like)
        {
            file.set_permissions(meta.permissions())?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{HostPort, Role};

    fn member(id: u64, role: Role, client: Option<u16>) -> Member {
        Member {
            id,
            host: "127.0.0.1".into(),
            peer_port: 2000 + id as u16,
            election_port: Some(3000 + id as u16),
            role,
            client: client.map(|port| HostPort::new("127.0.0.1", port)),
        }
    }

    #[test]
    fn the_version_is_the_hex_number_the_name_ends_in() {
        let v = |name: &str| version_from_file_name(Path::new(name));
        assert_eq!(v("/etc/zk/zoo.cfg.dynamic.100000000"), Ok(0x1_0000_0000));
        assert_eq!(v("zoo.cfg.dynamic.1a"), Ok(0x1a));
        assert_eq!(v("zoo.cfg.dynamic.+1F"), Ok(0x1f));
        // No hex number after the last dot: version 0, as ZooKeeper.
        assert_eq!(v("/etc/zk/zoo.cfg.dynamic"), Ok(0));
        assert_eq!(v("/etc/zk.d/members"), Ok(0));
        assert_eq!(v("members"), Ok(0));
        assert_eq!(v("zoo.cfg.dynamic.10000000000000000"), Ok(0));
        assert!(v("zoo.cfg.dynamic.-1").is_err());
    }

    #[test]
    fn the_dynamic_file_is_sorted_as_text_without_a_version_or_final_new_line() {
        let members = [
            member(2, Role::Participant, Some(2182)),
            member(10, Role::Observer, None),
            member(1, Role::Participant, Some(2181)),
        ];
        assert_eq!(
            dynamic_file_text(&members),
            "server.10=127.0.0.1:2010:3010:observer\n\
             server.1=127.0.0.1:2001:3001:participant;127.0.0.1:2181\n\
             server.2=127.0.0.1:2002:3002:participant;127.0.0.1:2182"
        );
        assert_eq!(
            dynamic_file_path(Path::new("/etc/zk/zoo.cfg"), 0x1_0000_0000),
            Path::new("/etc/zk/zoo.cfg.dynamic.100000000")
        );
    }

    #[test]
    fn zoo_cfg_loses_the_membership_and_points_at_the_dynamic_file() {
        let properties = [
            ("tickTime", "2000"),
            ("server.1", "a:1:2"),
            ("clientPort", "2181"),
            ("clientPortAddress", "127.0.0.1"),
            ("dynamicConfigFile", "/old"),
            ("peerType", "participant"),
            ("dataDir", "C:\\zk data"),
            ("tickTime", "1000"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let dynamic = Path::new("/etc/zk/zoo.cfg.dynamic.5");
        assert_eq!(
            edited_zoo_cfg(properties.clone(), dynamic, true),
            "tickTime=1000\ndataDir=C:\\\\zk data\ndynamicConfigFile=/etc/zk/zoo.cfg.dynamic.5\n"
        );
        assert_eq!(
            edited_zoo_cfg(properties, dynamic, false),
            "tickTime=1000\nclientPort=2181\nclientPortAddress=127.0.0.1\n\
             dataDir=C:\\\\zk data\ndynamicConfigFile=/etc/zk/zoo.cfg.dynamic.5\n"
        );
    }

    #[test]
    fn a_rewritten_zoo_cfg_reads_back_as_the_same_member() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        fs::create_dir_all(&data).unwrap();
        fs::write(data.join("myid"), "2\n").unwrap();
        let zoo_cfg = dir.path().join("zoo.cfg");
        let before = format!(
            "# the ensemble\ntickTime=1000\ninitLimit=5\nsyncLimit=2\ndataDir={}\n\
             clientPort=2182\nclientPortAddress=127.0.0.1\nreconfigEnabled=true\n\
             server.1=127.0.0.1:2001:3001;127.0.0.1:2181\n\
             server.2=127.0.0.1:2002:3002;127.0.0.1:2182\n\
             server.3=127.0.0.1:2003:3003;127.0.0.1:2183\n",
            data.display()
        );
        fs::write(&zoo_cfg, &before).unwrap();
        let (config, _) = Config::from_zoo_cfg(&zoo_cfg).unwrap();
        let mut files = DynamicConfigFiles::new(&config, false).expect("kept");
        files.back_up_static_config();
        assert_eq!(
            fs::read_to_string(dir.path().join("zoo.cfg.bak")).unwrap(),
            before
        );

        // server.3 leaves, server.4 joins as an observer.
        let mut members = config.cluster.members.clone();
        members.retain(|m| m.id != 3);
        members.push(member(4, Role::Observer, Some(2184)));
        files.committed(&members, 0x2a);
        let dynamic = dir.path().join("zoo.cfg.dynamic.2a");
        assert_eq!(
            fs::read_to_string(&dynamic).unwrap(),
            dynamic_file_text(&members)
        );
        let rewritten = fs::read_to_string(&zoo_cfg).unwrap();
        assert!(!rewritten.contains("server."), "{rewritten}");
        assert!(!rewritten.contains("clientPort"), "{rewritten}");
        assert!(rewritten.ends_with(&format!(
            "dynamicConfigFile={}\n",
            fs::canonicalize(&dynamic).unwrap().display()
        )));

        let (again, warnings) = Config::from_zoo_cfg(&zoo_cfg).unwrap();
        assert_eq!(warnings, []);
        assert_eq!(again.cluster.my_id, Some(2));
        assert_eq!(again.cluster.members, {
            let mut sorted = members.clone();
            sorted.sort_by_key(|m| m.id);
            sorted
        });
        assert_eq!(again.client_listen, config.client_listen);
        assert_eq!(again.zoo_cfg.as_ref().unwrap().dynamic_version, Some(0x2a));

        // Older or known versions (a log replayed at start) write nothing.
        fs::remove_file(&dynamic).unwrap();
        files.committed(&members, 0x2a);
        files.committed(&members, 0x7);
        assert!(!dynamic.exists());
        let restarted = DynamicConfigFiles::new(&again, false).unwrap();
        assert_eq!(restarted.version, 0x2a);
        assert!(!dir.path().join("zoo.cfg.dynamic.2a.tmp").exists());
    }
}
