//! What the shell prints, in zkCli 3.9's exact words: the Stat block (`StatPrinter`), ACL
//! lines (`GetAclCommand`), error messages (`CliWrapperException` and `KeeperException`'s
//! code messages) and watch events (`WatchedEvent.toString()`).

use std::fmt::Write as _;

use zookeeper_client as zk;

/// zkCli's `StatPrinter.print`: eleven `name = value` lines, zxids and the owner in hex.
pub fn stat(stat: &zk::Stat) -> String {
    let mut out = String::new();
    let mut line = |name: &str, value: String| {
        let _ = writeln!(out, "{name} = {value}");
    };
    line("cZxid", format!("0x{:x}", stat.czxid));
    line("ctime", java_date(stat.ctime));
    line("mZxid", format!("0x{:x}", stat.mzxid));
    line("mtime", java_date(stat.mtime));
    line("pZxid", format!("0x{:x}", stat.pzxid));
    line("cversion", stat.cversion.to_string());
    line("dataVersion", stat.version.to_string());
    line("aclVersion", stat.aversion.to_string());
    line("ephemeralOwner", format!("0x{:x}", stat.ephemeral_owner));
    line("dataLength", stat.data_length.to_string());
    line("numChildren", stat.num_children.to_string());
    out
}

/// `java.util.Date.toString()` in UTC: `Thu Nov 26 18:01:19 UTC 2026`. (Java prints the JVM's
/// time zone; the shell always prints UTC, which is what zkCli prints on a UTC machine.)
pub fn java_date(ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(time) => time.format("%a %b %d %H:%M:%S UTC %Y").to_string(),
        None => format!("{ms} ms"),
    }
}

/// zkCli's ACL lines: the Id as jute prints a record (`'world,'anyone`), then `: cdrwa`.
pub fn acls(acls: &[zk::Acl]) -> String {
    acls.iter()
        .map(|acl| {
            format!(
                "'{},'{}\n: {}\n",
                acl.scheme(),
                acl.id(),
                permissions(acl.permission())
            )
        })
        .collect()
}

/// Permissions as zkCli writes and reads them, in its order: `cdrwa`.
pub fn permissions(permission: zk::Permission) -> String {
    PERMISSION_LETTERS
        .iter()
        .filter(|(_, p)| permission.has(*p))
        .map(|(c, _)| *c)
        .collect()
}

pub const PERMISSION_LETTERS: [(char, zk::Permission); 5] = [
    ('c', zk::Permission::CREATE),
    ('d', zk::Permission::DELETE),
    ('r', zk::Permission::READ),
    ('w', zk::Permission::WRITE),
    ('a', zk::Permission::ADMIN),
];

/// The message zkCli prints for a failed request on `path`.
pub fn error(error: &zk::Error, path: &str) -> String {
    use zk::Error as E;
    let code = match error {
        E::NoNode => return format!("Node does not exist: {path}"),
        E::NoChildrenForEphemerals => return format!("Ephemerals cannot have children: {path}"),
        E::NodeExists => return format!("Node already exists: {path}"),
        E::NotEmpty => return format!("Node not empty: {path}"),
        E::NotReadOnly => return format!("Not a read-only call: {path}"),
        E::InvalidAcl => return format!("Acl is not valid : {path}"),
        E::NoAuth => return format!("Insufficient permission : {path}"),
        E::BadArguments(_) => return format!("Arguments are not valid : {path}"),
        E::BadVersion => return format!("version No is not valid : {path}"),
        E::QuotaExceeded => return format!("Quota has exceeded : {path}"),
        E::ConnectionLoss | E::NoHosts => "ConnectionLoss",
        E::Timeout => "OperationTimeout",
        E::SessionExpired => "Session expired",
        E::AuthFailed => "AuthFailed",
        E::SessionMoved => "Session moved",
        E::NoWatcher => "No such watcher",
        E::Throttled => "Op throttled due to high load",
        E::MarshallingError => "MarshallingError",
        E::Unimplemented => "Unimplemented",
        E::ReconfigDisabled => "Reconfig is disabled",
        E::RuntimeInconsistent => "RuntimeInconsistency",
        E::ClientClosed => return "Not connected".to_owned(),
        other => return format!("KeeperErrorCode = {other} for {path}"),
    };
    if path.is_empty() {
        format!("KeeperErrorCode = {code}")
    } else {
        format!("KeeperErrorCode = {code} for {path}")
    }
}

/// zkCli's printing of a watch event: `ZooKeeperMain.printMessage` puts a blank line before
/// each of `WATCHER::` and the event.
pub fn watched_event(event: &zk::WatchedEvent) -> String {
    let kind = match event.event_type {
        zk::EventType::Session => "None".to_owned(),
        other => other.to_string(),
    };
    let path = if event.path.is_empty() {
        "null"
    } else {
        &event.path
    };
    format!(
        "\nWATCHER::\n\nWatchedEvent state:{} type:{kind} path:{path} zxid: {}",
        session_state(event.session_state),
        event.zxid
    )
}

/// `Watcher.Event.KeeperState` names.
fn session_state(state: zk::SessionState) -> &'static str {
    match state {
        zk::SessionState::Disconnected => "Disconnected",
        zk::SessionState::SyncConnected => "SyncConnected",
        zk::SessionState::AuthFailed => "AuthFailed",
        zk::SessionState::ConnectedReadOnly => "ConnectedReadOnly",
        zk::SessionState::Expired => "Expired",
        zk::SessionState::Closed => "Closed",
    }
}

/// zkCli's prompt shows `ZooKeeper.States`: CONNECTED, CONNECTING, CLOSED, ...
pub fn prompt_state(state: Option<zk::SessionState>) -> &'static str {
    match state {
        None => "CLOSED",
        Some(zk::SessionState::SyncConnected) => "CONNECTED",
        Some(zk::SessionState::ConnectedReadOnly) => "CONNECTEDREADONLY",
        Some(zk::SessionState::Disconnected) => "CONNECTING",
        Some(zk::SessionState::AuthFailed) => "AUTH_FAILED",
        Some(zk::SessionState::Expired | zk::SessionState::Closed) => "CLOSED",
    }
}

/// zkCli's `get -x`: Netty's `ByteBufUtil.prettyHexDump`, 16 bytes a row, bytes outside
/// 0x20..0x7e shown as `.` on the right; nothing at all for empty data.
pub fn hex_dump(data: &[u8]) -> String {
    if data.is_empty() {
        return String::new();
    }
    const RULE: &str =
        "+--------+-------------------------------------------------+----------------+";
    let mut out = String::from(
        "         +-------------------------------------------------+\n\
         \x20        |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |\n",
    );
    out += RULE;
    for (row, chunk) in data.chunks(16).enumerate() {
        let hex: String = chunk.iter().map(|b| format!(" {b:02x}")).collect();
        let text: String = chunk
            .iter()
            .map(|&b| {
                if (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        let _ = write!(out, "\n|{:08x}|{hex:<48} |{text:<16}|", row * 16);
    }
    out + "\n" + RULE
}

/// A Java `List.toString()`: `[a, b]`.
pub fn java_list<S: AsRef<str>>(items: &[S]) -> String {
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("[{}]", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_print_as_java_does_in_utc() {
        assert_eq!(java_date(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(java_date(1_795_716_079_000), "Thu Nov 26 18:01:19 UTC 2026");
    }

    #[test]
    fn permissions_in_zkclis_order() {
        assert_eq!(permissions(zk::Permission::ALL), "cdrwa");
        assert_eq!(
            permissions(zk::Permission::READ | zk::Permission::ADMIN),
            "ra"
        );
        let acl = zk::Acl::new(zk::Permission::ALL, zk::AuthId::anyone());
        assert_eq!(acls(&[acl]), "'world,'anyone\n: cdrwa\n");
    }

    #[test]
    fn hex_dump_as_netty_draws_it() {
        let want = "         +-------------------------------------------------+\n\
                    \x20        |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |\n\
                    +--------+-------------------------------------------------+----------------+\n\
                    |00000000| 68 65 6c 6c 6f 2d 77 6f 72 6c 64 2d 30 31 32 33 |hello-world-0123|\n\
                    |00000010| 61 09 62                                        |a.b             |\n\
                    +--------+-------------------------------------------------+----------------+";
        assert_eq!(hex_dump(b"hello-world-0123a\tb"), want);
        assert_eq!(hex_dump(b""), "");
    }

    #[test]
    fn errors_as_zkcli_words_them() {
        assert_eq!(error(&zk::Error::NoNode, "/x"), "Node does not exist: /x");
        assert_eq!(
            error(&zk::Error::BadVersion, "/x"),
            "version No is not valid : /x"
        );
        assert_eq!(
            error(&zk::Error::ConnectionLoss, "/x"),
            "KeeperErrorCode = ConnectionLoss for /x"
        );
        assert_eq!(
            error(&zk::Error::ReconfigDisabled, ""),
            "KeeperErrorCode = Reconfig is disabled"
        );
    }

    #[test]
    fn events_as_zkcli_prints_them() {
        let event = zk::WatchedEvent::new(zk::EventType::NodeDataChanged, "/x").with_zxid(5);
        assert_eq!(
            watched_event(&event),
            "\nWATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDataChanged path:/x zxid: 5"
        );
        let session = zk::WatchedEvent::new_session(zk::SessionState::Expired);
        assert!(watched_event(&session).ends_with("state:Expired type:None path:null zxid: -1"));
    }
}
