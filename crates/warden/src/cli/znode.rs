//! zkCli's commands on znodes, sessions and the ensemble, each one request (or a walk of
//! requests) through the zookeeper-client crate and zkCli's output. Watches the commands set are
//! handed back to the shell, which prints their events.

use std::fmt::Write as _;

use zookeeper_client as zk;

use base64::Engine as _;

use super::command::DataFormat;
use super::output;

/// The largest TTL a node may have: 40 bits of milliseconds, as ZooKeeper's EphemeralType.
const TTL_MS_MAX: i64 = 0xFF_FFFF_FFFF;

/// What a command prints on success, or the message it prints (on stderr) on failure.
pub type Reply = Result<String, String>;

/// A watch a command set: the shell keeps it and prints its event.
pub enum NewWatch {
    Data(zk::OneshotWatcher),
    Children(zk::OneshotWatcher),
    Persistent(zk::PersistentWatcher),
}

/// zkCli checks a path before sending it (`PathUtils.validatePath`); the crate checks the rest.
pub fn check_path(path: &str) -> Result<(), String> {
    if path.starts_with('/') {
        Ok(())
    } else {
        Err("Path must start with / character".to_owned())
    }
}

fn fail(path: &str) -> impl Fn(zk::Error) -> String + '_ {
    move |error| output::error(&error, path)
}

pub fn child_path(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

pub async fn ls(
    client: &zk::Client,
    path: &str,
    stat: bool,
    watch: bool,
    recursive: bool,
) -> Result<(String, Option<NewWatch>), String> {
    check_path(path)?;
    if recursive {
        // zkCli's `ls -R` (ZKUtil.listSubTreeBFS): every path of the subtree, level by level.
        let mut out = String::new();
        for node in subtree(client, path).await? {
            let _ = writeln!(out, "{node}");
        }
        return Ok((out, None));
    }
    let (mut children, node_stat, watcher) = match (stat, watch) {
        (true, true) => {
            let (c, s, w) = client
                .get_and_watch_children(path)
                .await
                .map_err(fail(path))?;
            (c, Some(s), Some(w))
        }
        (true, false) => {
            let (c, s) = client.get_children(path).await.map_err(fail(path))?;
            (c, Some(s), None)
        }
        (false, true) => {
            let (c, w) = client
                .list_and_watch_children(path)
                .await
                .map_err(fail(path))?;
            (c, None, Some(w))
        }
        (false, false) => (
            client.list_children(path).await.map_err(fail(path))?,
            None,
            None,
        ),
    };
    children.sort();
    let mut out = output::java_list(&children) + "\n";
    if let Some(s) = node_stat {
        out += &output::stat(&s);
    }
    Ok((out, watcher.map(NewWatch::Children)))
}

/// Every path under `root`, breadth first (`root`, its children, their children...), children
/// sorted: every parent comes before its children.
pub async fn subtree(client: &zk::Client, root: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut queue = std::collections::VecDeque::from([root.to_owned()]);
    while let Some(path) = queue.pop_front() {
        let mut children = match client.list_children(&path).await {
            Ok(children) => children,
            // Deleted while we walked: not part of the subtree any more.
            Err(zk::Error::NoNode) if path != root => continue,
            Err(error) => return Err(output::error(&error, &path)),
        };
        children.sort();
        queue.extend(children.iter().map(|c| child_path(&path, c)));
        out.push(path);
    }
    Ok(out)
}

pub async fn get(
    client: &zk::Client,
    path: &str,
    stat: bool,
    watch: bool,
    format: DataFormat,
) -> Result<(String, Option<NewWatch>), String> {
    check_path(path)?;
    let (data, node_stat, watcher) = if watch {
        let (d, s, w) = client.get_and_watch_data(path).await.map_err(fail(path))?;
        (d, s, Some(NewWatch::Data(w)))
    } else {
        let (d, s) = client.get_data(path).await.map_err(fail(path))?;
        (d, s, None)
    };
    let mut out = match format {
        DataFormat::Text => String::from_utf8_lossy(&data).into_owned(),
        DataFormat::Base64 => base64::engine::general_purpose::STANDARD.encode(&data),
        DataFormat::HexDump => output::hex_dump(&data),
    } + "\n";
    if stat {
        out += &output::stat(&node_stat);
    }
    Ok((out, watcher))
}

/// `stat -w` on a missing node fails as zkCli's does and still sets the watch (on the node's
/// creation), so the watch comes back beside the reply.
pub async fn stat(client: &zk::Client, path: &str, watch: bool) -> (Reply, Option<NewWatch>) {
    if let Err(message) = check_path(path) {
        return (Err(message), None);
    }
    let (node_stat, watcher) = if watch {
        match client.check_and_watch_stat(path).await {
            Ok((s, w)) => (s, Some(NewWatch::Data(w))),
            Err(error) => return (Err(output::error(&error, path)), None),
        }
    } else {
        match client.check_stat(path).await {
            Ok(s) => (s, None),
            Err(error) => return (Err(output::error(&error, path)), None),
        }
    };
    match node_stat {
        Some(s) => (Ok(output::stat(&s)), watcher),
        None => (Err(output::error(&zk::Error::NoNode, path)), watcher),
    }
}

pub async fn set(
    client: &zk::Client,
    path: &str,
    data: &str,
    stat: bool,
    version: Option<i32>,
    base64: bool,
) -> Reply {
    check_path(path)?;
    let data = if base64 {
        let decoded = base64::engine::general_purpose::STANDARD.decode(data);
        decoded.map_err(|e| format!("Illegal base64 data: {e}"))?
    } else {
        data.as_bytes().to_vec()
    };
    let node_stat = client
        .set_data(path, &data, version)
        .await
        .map_err(fail(path))?;
    Ok(if stat {
        output::stat(&node_stat)
    } else {
        String::new()
    })
}

pub struct CreateRequest<'a> {
    pub path: &'a str,
    pub data: Option<&'a str>,
    pub acl: Option<&'a str>,
    pub sequential: bool,
    pub ephemeral: bool,
    pub container: bool,
    pub ttl: Option<i64>,
}

pub async fn create(client: &zk::Client, request: CreateRequest<'_>) -> Reply {
    let CreateRequest {
        path,
        data,
        acl,
        sequential,
        ephemeral,
        container,
        ttl,
    } = request;
    check_path(path)?;
    // zkCli's CreateCommand refuses these combinations before sending anything.
    if container && (sequential || ephemeral) {
        return Err(
            "-c cannot be combined with -s or -e. Containers cannot be ephemeral or sequential."
                .into(),
        );
    }
    if ttl.is_some() && ephemeral {
        return Err("TTLs cannot be used with Ephemeral znodes".into());
    }
    if ttl.is_some() && container {
        return Err("TTLs cannot be used with Container znodes".into());
    }
    let mode = match (container, ephemeral, sequential) {
        (true, _, _) => zk::CreateMode::Container,
        (_, true, true) => zk::CreateMode::EphemeralSequential,
        (_, true, false) => zk::CreateMode::Ephemeral,
        (_, false, true) => zk::CreateMode::PersistentSequential,
        (_, false, false) => zk::CreateMode::Persistent,
    };
    let acls = match acl {
        Some(text) => parse_acl(text)?,
        None => Vec::new(),
    };
    let acls = if acls.is_empty() {
        zk::Acls::anyone_all()
    } else {
        zk::Acls::new(&acls)
    };
    let mut options = mode.with_acls(acls);
    if let Some(ttl) = ttl {
        // zkCli's check (EphemeralType.MAX_EXTENDED_SERVER_ID's TTL range: 40 bits of ms).
        if !(1..=TTL_MS_MAX).contains(&ttl) {
            return Err(format!(
                "ttl must be positive and cannot be larger than: {TTL_MS_MAX}"
            ));
        }
        options = options.with_ttl(std::time::Duration::from_millis(ttl.unsigned_abs()));
    }
    let data = data.unwrap_or_default().as_bytes();
    let (_, sequence) = client
        .create(path, data, &options)
        .await
        .map_err(fail(path))?;
    let created = if sequential {
        format!("{path}{sequence}")
    } else {
        path.to_owned()
    };
    Ok(format!("Created {created}\n"))
}

/// zkCli's AclParser: comma-separated `scheme:id:perms`, the id being everything between the
/// first and the last colon (a digest id has a colon inside). As zkCli, an unknown permission
/// letter is reported on stderr and skipped.
pub fn parse_acl(text: &str) -> Result<Vec<zk::Acl>, String> {
    let mut acls = Vec::new();
    for entry in text.split(',') {
        let (Some(first), Some(last)) = (entry.find(':'), entry.rfind(':')) else {
            return Err(format!("{entry} does not have the form scheme:id:perm"));
        };
        if first == last {
            return Err(format!("{entry} does not have the form scheme:id:perm"));
        }
        let mut permission = zk::Permission::NONE;
        for letter in entry[last + 1..].chars() {
            match output::PERMISSION_LETTERS
                .iter()
                .find(|(c, _)| *c == letter)
            {
                Some((_, p)) => permission = permission | *p,
                None => eprintln!("Unknown perm type: {letter}"),
            }
        }
        let id = zk::AuthId::new(&entry[..first], &entry[first + 1..last]);
        acls.push(zk::Acl::new(permission, id));
    }
    Ok(acls)
}

pub async fn delete(client: &zk::Client, path: &str, version: Option<i32>) -> Reply {
    check_path(path)?;
    client.delete(path, version).await.map_err(fail(path))?;
    Ok(String::new())
}

/// zkCli's `deleteall` (ZKUtil.deleteRecursive): the subtree, children before parents, in
/// multis of `batch` deletes (1000 by default, as zkCli).
pub async fn delete_all(client: &zk::Client, path: &str, batch: Option<usize>) -> Reply {
    check_path(path)?;
    let batch = batch.unwrap_or(1000).max(1);
    let nodes = subtree(client, path).await?;
    for chunk in nodes.rchunks(batch) {
        let mut multi = client.new_multi_writer();
        for node in chunk.iter().rev() {
            multi.add_delete(node, None).map_err(fail(node))?;
        }
        multi
            .commit()
            .await
            .map_err(|error| multi_error(error, |i| &chunk[chunk.len() - 1 - i]))?;
    }
    Ok(String::new())
}

/// The message for a failed multi: the failing operation's error on its path.
pub fn multi_error<'a>(error: zk::MultiWriteError, path_of: impl Fn(usize) -> &'a str) -> String {
    match error {
        zk::MultiWriteError::OperationFailed { index, source } => {
            output::error(&source, path_of(index))
        }
        zk::MultiWriteError::RequestFailed { source } => output::error(&source, path_of(0)),
    }
}

pub async fn get_acl(client: &zk::Client, path: &str, stat: bool) -> Reply {
    check_path(path)?;
    let (acls, node_stat) = client.get_acl(path).await.map_err(fail(path))?;
    let mut out = output::acls(&acls);
    if stat {
        out += &output::stat(&node_stat);
    }
    Ok(out)
}

pub async fn set_acl(
    client: &zk::Client,
    path: &str,
    acl: &str,
    stat: bool,
    version: Option<i32>,
    recursive: bool,
) -> Reply {
    check_path(path)?;
    let acls = parse_acl(acl)?;
    let node_stat = client
        .set_acl(path, &acls, version)
        .await
        .map_err(fail(path))?;
    if recursive {
        // zkCli's -R: the same ACL on every descendant, whatever its version.
        for node in subtree(client, path).await?.iter().skip(1) {
            client
                .set_acl(node, &acls, None)
                .await
                .map_err(fail(node))?;
        }
    }
    Ok(if stat {
        output::stat(&node_stat)
    } else {
        String::new()
    })
}

pub async fn add_auth(client: &zk::Client, scheme: &str, auth: &str) -> Reply {
    client
        .auth(scheme, auth.as_bytes())
        .await
        .map_err(fail(""))?;
    Ok(String::new())
}

pub async fn sync(client: &zk::Client, path: &str) -> Reply {
    check_path(path)?;
    client.sync(path).await.map_err(fail(path))?;
    Ok("Sync is OK\n".to_owned())
}

pub async fn config(
    client: &zk::Client,
    client_only: bool,
    stat: bool,
    watch: bool,
) -> Result<(String, Option<NewWatch>), String> {
    let (data, node_stat, watcher) = if watch {
        let (d, s, w) = client.get_and_watch_config().await.map_err(fail(""))?;
        (d, s, Some(NewWatch::Data(w)))
    } else {
        let (d, s) = client.get_config().await.map_err(fail(""))?;
        (d, s, None)
    };
    let text = String::from_utf8_lossy(&data);
    let mut out = if client_only {
        client_config(&text)
    } else {
        text.into_owned()
    } + "\n";
    if stat {
        out += &output::stat(&node_stat);
    }
    Ok((out, watcher))
}

/// zkCli's `config -c` (ConfigUtils.getClientConfigStr): the version, a space, and the client
/// addresses of the servers, comma-separated (here in server id order).
pub fn client_config(config: &str) -> String {
    let mut version = "";
    let mut servers: Vec<(u64, String)> = Vec::new();
    for line in config.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key == "version" {
            version = value.trim();
        }
        let Some(id) = key.strip_prefix("server.").and_then(|id| id.parse().ok()) else {
            continue;
        };
        if let Some((_, client)) = value.trim().split_once(';') {
            let address = if client.contains(':') {
                client.to_owned()
            } else {
                format!("0.0.0.0:{client}")
            };
            servers.push((id, address));
        }
    }
    servers.sort();
    let addresses: Vec<String> = servers.into_iter().map(|(_, a)| a).collect();
    format!("{version} {}", addresses.join(","))
}

pub struct ReconfigRequest<'a> {
    pub add: &'a [String],
    pub remove: &'a [String],
    pub members: Option<&'a str>,
    pub file: Option<&'a str>,
    pub version: Option<i64>,
    pub stat: bool,
}

pub async fn reconfig(client: &zk::Client, request: ReconfigRequest<'_>) -> Reply {
    let as_str: fn(&String) -> &str = String::as_str;
    let members = match (request.members, request.file) {
        (Some(members), _) => Some(members.split(',').map(str::to_owned).collect::<Vec<_>>()),
        // zkCli's -file: the `server.N=...` lines of a dynamic config file.
        (None, Some(file)) => {
            let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
            let lines = text
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with("server."));
            Some(lines.map(str::to_owned).collect())
        }
        (None, None) => None,
    };
    let update = match &members {
        Some(members) => zk::EnsembleUpdate::New {
            ensemble: members.iter().map(as_str),
        },
        None => zk::EnsembleUpdate::Incremental {
            joinings: request.add.iter().map(as_str),
            leavings: request.remove.iter().map(as_str),
        },
    };
    let (data, node_stat) = client
        .update_ensemble(update, request.version)
        .await
        .map_err(fail(""))?;
    let mut out = format!(
        "Committed new configuration:\n{}\n",
        String::from_utf8_lossy(&data)
    );
    if request.stat {
        out += &output::stat(&node_stat);
    }
    Ok(out)
}

/// zkCli's `whoami`: a header, then `scheme: user` per identity of this session.
pub async fn who_am_i(client: &zk::Client) -> Reply {
    let users = client.list_auth_users().await.map_err(fail(""))?;
    let mut out = String::from("Auth scheme: User\n");
    for user in users {
        let _ = writeln!(out, "{}: {}", user.scheme(), user.user());
    }
    Ok(out)
}

pub async fn get_ephemerals(client: &zk::Client, path: &str) -> Reply {
    check_path(path)?;
    let mut paths = client.list_ephemerals(path).await.map_err(fail(path))?;
    paths.sort();
    Ok(output::java_list(&paths) + "\n")
}

pub async fn get_all_children_number(client: &zk::Client, path: &str) -> Reply {
    check_path(path)?;
    let count = client
        .count_descendants_number(path)
        .await
        .map_err(fail(path))?;
    Ok(format!("{count}\n"))
}

pub async fn add_watch(
    client: &zk::Client,
    path: &str,
    recursive: bool,
) -> Result<NewWatch, String> {
    check_path(path)?;
    let mode = if recursive {
        zk::AddWatchMode::PersistentRecursive
    } else {
        zk::AddWatchMode::Persistent
    };
    let watcher = client.watch(path, mode).await.map_err(fail(path))?;
    Ok(NewWatch::Persistent(watcher))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acls_parse_as_zkcli_parses_them() {
        let acls = parse_acl("world:anyone:r,digest:u:hash=:cdrwa").unwrap();
        assert_eq!(acls.len(), 2);
        assert_eq!((acls[1].scheme(), acls[1].id()), ("digest", "u:hash="));
        assert_eq!(output::permissions(acls[1].permission()), "cdrwa");
        assert!(parse_acl("world:anyone").is_err());
        let skipped = parse_acl("world:anyone:rx").unwrap();
        assert_eq!(output::permissions(skipped[0].permission()), "r");
    }

    #[test]
    fn client_config_lists_client_addresses() {
        let config = "server.2=h2:1:2:participant;127.0.0.1:2182\n\
                      server.1=h1:1:2:participant;2181\nversion=100000000";
        assert_eq!(
            client_config(config),
            "100000000 0.0.0.0:2181,127.0.0.1:2182"
        );
    }

    #[test]
    fn child_paths_under_the_root_and_below() {
        assert_eq!(child_path("/", "a"), "/a");
        assert_eq!(child_path("/a", "b"), "/a/b");
    }
}
