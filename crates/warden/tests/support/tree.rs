//! A whole tree read through a client, one sorted line per node (path, data, every Stat field,
//! ACL in stored order, sorted children), to compare two servers' trees node by node.

use std::time::Duration;

use zookeeper_client::{Client, Stat};

pub fn show_stat(s: &Stat) -> String {
    format!(
        "czxid {:#x} mzxid {:#x} pzxid {:#x} ctime {} mtime {} version {} cversion {} aversion {} \
         owner {:#x} dataLength {} numChildren {}",
        s.czxid,
        s.mzxid,
        s.pzxid,
        s.ctime,
        s.mtime,
        s.version,
        s.cversion,
        s.aversion,
        s.ephemeral_owner,
        s.data_length,
        s.num_children
    )
}

/// Every node but those in `skip` (and their subtrees), each request answered within
/// `op_timeout`.
pub async fn dump(op_timeout: Duration, skip: &[&str], client: &Client) -> Vec<String> {
    async fn timed<T>(limit: Duration, what: &str, future: impl Future<Output = T>) -> T {
        tokio::time::timeout(limit, future)
            .await
            .unwrap_or_else(|_| panic!("{what}: no answer within {limit:?}"))
    }
    let mut lines = Vec::new();
    let mut queue = vec!["/".to_string()];
    while let Some(path) = queue.pop() {
        if skip.contains(&path.as_str()) {
            continue;
        }
        let (data, stat) = timed(op_timeout, "getData", client.get_data(&path))
            .await
            .unwrap();
        let (acl, _) = timed(op_timeout, "getACL", client.get_acl(&path))
            .await
            .unwrap();
        let mut children = timed(op_timeout, "getChildren", client.list_children(&path))
            .await
            .unwrap();
        children.sort();
        let acl: Vec<String> = acl
            .iter()
            .map(|a| format!("{}:{}:{}", a.permission(), a.scheme(), a.id()))
            .collect();
        lines.push(format!(
            "{path} data {data:?} {} acl {acl:?} children {children:?}",
            show_stat(&stat)
        ));
        for child in children {
            queue.push(if path == "/" {
                format!("/{child}")
            } else {
                format!("{path}/{child}")
            });
        }
    }
    lines.sort();
    lines
}
