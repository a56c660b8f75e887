//! ClickHouse keeper-client's operator helpers, which zkCli lacks: the nodes with the most
//! children, copying and moving a node or a subtree in one multi, `touch`, and four-letter words.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::net::{TcpStream, ToSocketAddrs as _};
use std::time::Duration;

use zookeeper_client as zk;

use super::output;
use super::znode::{Reply, check_path, child_path, multi_error};

/// How long a four-letter word may take to connect and to answer.
const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest four-letter answer read (a `cons` or `wchc` of a big server is long).
const FOUR_LETTER_ANSWER_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// The most nodes `cpr`/`mvr` copy: one multi holds them all.
const TREE_NODES_MAX: usize = 1000;
/// The largest multi `cpr`/`mvr` send, below the server's jute.maxbuffer (1 MiB by default).
const TREE_REQUEST_BYTES_MAX: usize = 1_000_000;

/// Every node of the subtree with its Stat, parents first.
async fn walk(client: &zk::Client, root: &str) -> Result<Vec<(String, zk::Stat)>, String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(path) = stack.pop() {
        let (mut children, stat) = match client.get_children(&path).await {
            Ok(found) => found,
            Err(zk::Error::NoNode) if path != root => continue,
            Err(error) => return Err(output::error(&error, &path)),
        };
        children.sort();
        stack.extend(children.iter().rev().map(|c| child_path(&path, c)));
        out.push((path, stat));
    }
    Ok(out)
}

/// keeper-client's `find_super_nodes`: `path\tnumChildren` for every node of the subtree with at
/// least `threshold` children.
pub async fn find_super_nodes(client: &zk::Client, threshold: usize, path: &str) -> Reply {
    check_path(path)?;
    let mut out = String::new();
    for (node, stat) in walk(client, path).await? {
        if usize::try_from(stat.num_children).unwrap_or(0) >= threshold {
            let _ = writeln!(out, "{node}\t{}", stat.num_children);
        }
    }
    Ok(out)
}

/// keeper-client's `find_big_family`: the `n` nodes of the subtree (`path` included) with the
/// biggest subtrees, `path\tnodes` where nodes counts the node itself and all its descendants;
/// biggest first, ties in keeper-client's order (its `std::greater` on (size, path)).
pub async fn find_big_family(client: &zk::Client, path: &str, n: usize) -> Reply {
    check_path(path)?;
    let nodes = walk(client, path).await?;
    let mut sizes: HashMap<&str, u64> = HashMap::new();
    // `walk` lists parents before children: backwards, every child is counted before its parent.
    for (node, _) in nodes.iter().rev() {
        let size = sizes.entry(node.as_str()).or_insert(0);
        *size += 1;
        let size = *size;
        if node != path {
            let parent = match node.rfind('/') {
                Some(0) => "/",
                Some(i) => &node[..i],
                None => continue,
            };
            *sizes.entry(parent).or_insert(0) += size;
        }
    }
    let mut ranked: Vec<(u64, &str)> = sizes.into_iter().map(|(p, s)| (s, p)).collect();
    ranked.sort_by(|a, b| b.cmp(a));
    let mut out = String::new();
    for (size, node) in ranked.into_iter().take(n) {
        let _ = writeln!(out, "{node}\t{size}");
    }
    Ok(out)
}

/// keeper-client's `cp`: a new persistent node with the source's data and ACL, in a multi that
/// also checks the source's version, so the copy is of one version of it.
pub async fn copy(client: &zk::Client, from: &str, to: &str) -> Reply {
    transfer(client, from, to, false).await
}

/// keeper-client's `mv`: `cp` and the delete of the source in one multi. A source with children
/// cannot move (NotEmpty); nothing changes then.
pub async fn move_node(client: &zk::Client, from: &str, to: &str) -> Reply {
    transfer(client, from, to, true).await
}

async fn transfer(client: &zk::Client, from: &str, to: &str, delete_source: bool) -> Reply {
    check_path(from)?;
    check_path(to)?;
    let (data, stat) = client
        .get_data(from)
        .await
        .map_err(|e| output::error(&e, from))?;
    let (acls, _) = client
        .get_acl(from)
        .await
        .map_err(|e| output::error(&e, from))?;
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls));
    let mut multi = client.new_multi_writer();
    let paths = [from, to, from];
    multi
        .add_check_version(from, stat.version)
        .map_err(|e| output::error(&e, from))?;
    multi
        .add_create(to, &data, &options)
        .map_err(|e| output::error(&e, to))?;
    if delete_source {
        multi
            .add_delete(from, Some(stat.version))
            .map_err(|e| output::error(&e, from))?;
    }
    multi
        .commit()
        .await
        .map_err(|e| multi_error(e, |i| paths[i]))?;
    Ok(String::new())
}

/// One node of a subtree `cpr`/`mvr` copies.
struct TreeNode {
    path: String,
    data: Vec<u8>,
    acls: Vec<zk::Acl>,
    version: i32,
}

/// Every node of the subtree with its data, ACL and version, parents first; refused beyond
/// [`TREE_NODES_MAX`] nodes or [`TREE_REQUEST_BYTES_MAX`] bytes, before anything is written.
async fn read_tree(client: &zk::Client, root: &str) -> Result<Vec<TreeNode>, String> {
    let mut out = Vec::new();
    let mut bytes = 0;
    let mut stack = vec![root.to_owned()];
    while let Some(path) = stack.pop() {
        let read = async {
            let (data, stat) = client.get_data(&path).await?;
            let (acls, _) = client.get_acl(&path).await?;
            let children = client.list_children(&path).await?;
            Ok::<_, zk::Error>((data, stat, acls, children))
        };
        let (data, stat, acls, mut children) = match read.await {
            Ok(found) => found,
            // Deleted while we read: not part of the subtree any more.
            Err(zk::Error::NoNode) if path != root => continue,
            Err(error) => return Err(output::error(&error, &path)),
        };
        if out.len() == TREE_NODES_MAX {
            return Err(format!(
                "{root} has more than {TREE_NODES_MAX} nodes: too many to copy in one multi"
            ));
        }
        // Each node is written twice (check or delete, and create): its path twice, its
        // data and ACL once, and an operation header each.
        bytes += 2 * path.len()
            + data.len()
            + acls.iter().map(|a| a.id().len() + 16).sum::<usize>()
            + 64;
        if bytes > TREE_REQUEST_BYTES_MAX {
            return Err(format!(
                "{root}'s subtree needs a multi of more than {TREE_REQUEST_BYTES_MAX} bytes: too \
                 big to copy in one (the server's jute.maxbuffer is 1 MiB by default)"
            ));
        }
        children.sort();
        stack.extend(children.iter().rev().map(|c| child_path(&path, c)));
        out.push(TreeNode {
            path,
            data,
            acls,
            version: stat.version,
        });
    }
    Ok(out)
}

/// keeper-client's `cpr` and `mvr`: the subtree of `from` copied under the new name `to` (data
/// and ACLs, as persistent nodes) in one multi that also checks every source node's version
/// (`cpr`) or deletes it with its version, children first (`mvr`): all or nothing, and the copy is
/// of one version of each node. A destination that exists fails the multi (`Node already exists`).
pub async fn transfer_tree(
    client: &zk::Client,
    from: &str,
    to: &str,
    delete_source: bool,
) -> Reply {
    check_path(from)?;
    check_path(to)?;
    if from == "/" || to == from || to.starts_with(&format!("{from}/")) {
        return Err(format!("Cannot copy {from} into its own subtree: {to}"));
    }
    let nodes = read_tree(client, from).await?;
    let destination = |node: &TreeNode| format!("{to}{}", &node.path[from.len()..]);
    let mut multi = client.new_multi_writer();
    let mut paths = Vec::with_capacity(2 * nodes.len());
    for node in &nodes {
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&node.acls));
        let path = destination(node);
        multi
            .add_create(&path, &node.data, &options)
            .map_err(|e| output::error(&e, &path))?;
        paths.push(path);
    }
    for node in nodes.iter().rev() {
        if delete_source {
            multi.add_delete(&node.path, Some(node.version))
        } else {
            multi.add_check_version(&node.path, node.version)
        }
        .map_err(|e| output::error(&e, &node.path))?;
        paths.push(node.path.clone());
    }
    multi
        .commit()
        .await
        .map_err(|e| multi_error(e, |i| &paths[i]))?;
    Ok(String::new())
}

/// keeper-client's `touch`: creates `path` with no data; an existing node is left as it is.
pub async fn touch(client: &zk::Client, path: &str) -> Reply {
    check_path(path)?;
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    match client.create(path, b"", &options).await {
        Ok(_) | Err(zk::Error::NodeExists) => Ok(String::new()),
        Err(error) => Err(output::error(&error, path)),
    }
}

/// A four-letter word on a new plain TCP connection to `server` (`host:port`): its answer as
/// the server sends it.
pub fn four_letter(word: &str, server: &str) -> Reply {
    let failed = |e: std::io::Error| format!("{word} to {server} failed: {e}");
    let address = server
        .to_socket_addrs()
        .map_err(failed)?
        .next()
        .ok_or_else(|| format!("{server}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&address, FOUR_LETTER_TIMEOUT).map_err(failed)?;
    stream
        .set_read_timeout(Some(FOUR_LETTER_TIMEOUT))
        .map_err(failed)?;
    stream.write_all(word.as_bytes()).map_err(failed)?;
    let mut answer = Vec::new();
    stream
        .take(FOUR_LETTER_ANSWER_BYTES_MAX)
        .read_to_end(&mut answer)
        .map_err(failed)?;
    let mut answer = String::from_utf8_lossy(&answer).into_owned();
    if !answer.is_empty() && !answer.ends_with('\n') {
        answer.push('\n');
    }
    Ok(answer)
}

/// The first `host:port` of a connect string (`h1:p1,h2:p2/chroot`), where a four-letter word
/// goes when none is named.
pub fn first_server(connect_string: &str) -> String {
    let first = connect_string.split(',').next().unwrap_or_default().trim();
    let first = first.split_once("://").map_or(first, |(_, rest)| rest);
    let first = first.split('/').next().unwrap_or_default();
    if first.contains(':') {
        first.to_owned()
    } else {
        format!("{first}:2181")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_letter_words_go_to_the_first_server() {
        assert_eq!(first_server("127.0.0.1:2182,b:2183/app"), "127.0.0.1:2182");
        assert_eq!(first_server("tcp://h:1"), "h:1");
        assert_eq!(first_server("h"), "h:2181");
    }
}
