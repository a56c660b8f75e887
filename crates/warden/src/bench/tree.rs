//! The znodes of a run: their names under the bench root, the tree made before a run, and its
//! removal.

use anyhow::{Context, bail, ensure};
use futures::{StreamExt, TryStreamExt, stream};
use zookeeper_client as zk;

use super::session::error_code;
use super::workload::{Op, Plan, Span, Workload};

/// Own znodes per folder. Keeps every folder's getChildren answer far below ZooKeeper's 1 MiB
/// packet limit, however long a create-only run goes on.
pub const OWN_BUCKET_NODES: u64 = 1000;
/// Requests outstanding while the tree is made or removed.
const SETUP_WINDOW: usize = 256;
/// Cleanup keeps every path of the tree in memory until it deletes them, deepest first.
const REMOVE_NODES_MAX: usize = 50_000_000;

/// The names of a run's znodes.
#[derive(Clone, Debug)]
pub struct Paths {
    root: String,
}

impl Paths {
    pub fn new(root: &str) -> anyhow::Result<Paths> {
        ensure!(
            root.starts_with('/') && root.len() > 1,
            "--root must be an absolute path below /, not {root:?}"
        );
        ensure!(
            !root.ends_with('/') && !root.contains("//"),
            "--root {root:?} has an empty path element"
        );
        ensure!(
            root != "/zookeeper" && !root.starts_with("/zookeeper/"),
            "--root may not lie under /zookeeper, which belongs to the server"
        );
        Ok(Paths {
            root: root.to_string(),
        })
    }

    pub fn root(&self) -> &str {
        &self.root
    }

    fn shared(&self) -> String {
        format!("{}/shared", self.root)
    }

    pub fn shared_parent(&self, parent: u32) -> String {
        format!("{}/shared/p{parent}", self.root)
    }

    pub fn shared_child(&self, parent: u32, child: u32) -> String {
        format!("{}/shared/p{parent}/c{child}", self.root)
    }

    fn session(&self, session: u32) -> String {
        format!("{}/s{session}", self.root)
    }

    /// The folder that holds own znode `seq` of a session.
    pub fn own_bucket(&self, session: u32, seq: u64) -> String {
        format!("{}/s{session}/b{}", self.root, seq / OWN_BUCKET_NODES)
    }

    pub fn own(&self, session: u32, seq: u64) -> String {
        format!(
            "{}/s{session}/b{}/n{seq}",
            self.root,
            seq / OWN_BUCKET_NODES
        )
    }

    fn load(&self) -> String {
        format!("{}/load", self.root)
    }

    fn load_parent(&self, parent: u32) -> String {
        format!("{}/load/p{parent}", self.root)
    }

    /// Node `index` of a load lies under parent `index % parents`.
    pub fn load_node(&self, index: u64, parents: u32) -> String {
        format!(
            "{}/load/p{}/n{index}",
            self.root,
            index % u64::from(parents)
        )
    }
}

pub fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// A value of a size drawn from `size`, made of letters drawn from a 64-letter alphabet: random,
/// so that no server gets to compress or deduplicate it better than real data, but text, as
/// most real values are.
pub fn value(rng: &mut fastrand::Rng, size: Span) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = vec![0u8; size.pick(rng) as usize];
    rng.fill(&mut bytes);
    for byte in &mut bytes {
        *byte = ALPHABET[usize::from(*byte & 63)];
    }
    bytes
}

/// Removes whatever an earlier run left under the root, then makes the tree the workload starts
/// from: the shared tree, each session's folder with its stock of deletable znodes, the load
/// parents. Returns how many leftover znodes were removed.
pub async fn prepare(
    client: &zk::Client,
    paths: &Paths,
    workload: &Workload,
    sessions: u32,
    rng: &mut fastrand::Rng,
) -> anyhow::Result<u64> {
    let leftover = remove(client, paths.root()).await?;
    create_level(client, [(paths.root().to_string(), Vec::new())]).await?;
    if let Some(shared) = &workload.shared {
        create_level(client, [(paths.shared(), Vec::new())]).await?;
        create_level(
            client,
            (0..shared.parents).map(|p| (paths.shared_parent(p), value(rng, shared.value))),
        )
        .await?;
        let children = (0..shared.parents)
            .flat_map(|p| (0..shared.children).map(move |c| (p, c)))
            .map(|(p, c)| (paths.shared_child(p, c), value(rng, shared.value)));
        create_level(client, children).await?;
    }
    create_level(
        client,
        (0..sessions).map(|s| (paths.session(s), Vec::new())),
    )
    .await?;
    let stock = u64::from(workload.delete_stock);
    let buckets = stock.div_ceil(OWN_BUCKET_NODES);
    let bucket_paths =
        (0..sessions).flat_map(|s| (0..buckets).map(move |b| (s, b * OWN_BUCKET_NODES)));
    create_level(
        client,
        bucket_paths.map(|(s, seq)| (paths.own_bucket(s, seq), Vec::new())),
    )
    .await?;
    let stock_value = stock_value(workload);
    let stock_nodes = (0..sessions).flat_map(|s| (0..stock).map(move |seq| (s, seq)));
    create_level(
        client,
        stock_nodes.map(|(s, seq)| (paths.own(s, seq), value(rng, stock_value))),
    )
    .await?;
    if let Plan::Load(load) = &workload.plan {
        create_level(client, [(paths.load(), Vec::new())]).await?;
        create_level(
            client,
            (0..load.parents).map(|p| (paths.load_parent(p), Vec::new())),
        )
        .await?;
    }
    Ok(leftover)
}

/// Stock znodes take the size of the workload's first create, as if that create had made them.
fn stock_value(workload: &Workload) -> Span {
    let Plan::Mix(ops) = &workload.plan else {
        return Span::exactly(0);
    };
    ops.iter()
        .find_map(|op| match op {
            Op::Create { value } | Op::Multi { value, .. } => Some(*value),
            _ => None,
        })
        .unwrap_or(Span::exactly(0))
}

/// Creates znodes whose parents all exist, many at a time.
async fn create_level(
    client: &zk::Client,
    nodes: impl IntoIterator<Item = (String, Vec<u8>)>,
) -> anyhow::Result<()> {
    let options = persistent();
    let options = &options;
    stream::iter(nodes)
        .map(|(path, data)| async move {
            client
                .create(&path, &data, options)
                .await
                .with_context(|| format!("setup: creating {path}"))
                .map(drop)
        })
        .buffer_unordered(SETUP_WINDOW)
        .try_collect::<()>()
        .await
}

/// Deletes `root` and everything under it; returns how many znodes went. A root that does not
/// exist is no error.
pub async fn remove(client: &zk::Client, root: &str) -> anyhow::Result<u64> {
    let mut levels: Vec<Vec<String>> = Vec::new();
    let mut level = vec![root.to_string()];
    let mut total = 0usize;
    while !level.is_empty() {
        total += level.len();
        if total > REMOVE_NODES_MAX {
            bail!("more than {REMOVE_NODES_MAX} znodes under {root}: too many to remove from here");
        }
        let children: Vec<Vec<String>> = stream::iter(&level)
            .map(|parent| async move {
                match client.list_children(parent).await {
                    Ok(names) => Ok(names
                        .into_iter()
                        .map(|name| format!("{parent}/{name}"))
                        .collect()),
                    // Gone already (or never there): nothing below it to remove.
                    Err(zk::Error::NoNode) => Ok(Vec::new()),
                    Err(e) => Err(e).with_context(|| format!("cleanup: listing {parent}")),
                }
            })
            .buffered(SETUP_WINDOW)
            .try_collect()
            .await?;
        levels.push(std::mem::replace(
            &mut level,
            children.into_iter().flatten().collect(),
        ));
    }
    let mut removed = 0;
    // Deepest first, so every znode is childless when its delete arrives.
    for level in levels.iter().rev() {
        removed += stream::iter(level)
            .map(|path| async move {
                match client.delete(path, None).await {
                    Ok(()) => Ok(1),
                    Err(zk::Error::NoNode) => Ok(0),
                    Err(e) => Err(e).with_context(|| format!("cleanup: deleting {path}")),
                }
            })
            .buffer_unordered(SETUP_WINDOW)
            .try_fold(0u64, |sum, n| async move { Ok(sum + n) })
            .await?;
    }
    Ok(removed)
}

/// Checks, through the independent client, that `root` has `n` children.
pub async fn expect_children(admin: &zk::Client, root: &str, n: u64) -> anyhow::Result<()> {
    admin
        .sync(root)
        .await
        .map_err(|e| anyhow::anyhow!("sync: {}", error_code(&e)))?;
    let (_, stat) = admin
        .get_data(root)
        .await
        .map_err(|e| anyhow::anyhow!("reading {root}: {}", error_code(&e)))?;
    ensure!(
        stat.num_children as u64 == n,
        "{root} has {} children through the independent client, {n} expected",
        stat.num_children
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_lie_under_the_root() {
        let paths = Paths::new("/bench").unwrap();
        assert_eq!(paths.shared_child(3, 7), "/bench/shared/p3/c7");
        assert_eq!(paths.shared_parent(3), "/bench/shared/p3");
        assert_eq!(paths.own(2, 999), "/bench/s2/b0/n999");
        assert_eq!(paths.own(2, 1000), "/bench/s2/b1/n1000");
        assert_eq!(paths.own_bucket(2, 1999), "/bench/s2/b1");
        assert_eq!(paths.load_node(1234, 1000), "/bench/load/p234/n1234");
    }

    #[test]
    fn a_root_must_be_safe_to_remove() {
        for root in [
            "",
            "/",
            "relative",
            "/a/",
            "/a//b",
            "/zookeeper",
            "/zookeeper/quota",
        ] {
            assert!(Paths::new(root).is_err(), "{root:?} was accepted");
        }
        assert!(Paths::new("/zookeeper-bench").is_ok());
    }

    #[test]
    fn values_are_text_of_the_asked_length() {
        let mut rng = fastrand::Rng::with_seed(9);
        let v = value(&mut rng, Span::exactly(500));
        assert_eq!(v.len(), 500);
        assert!(
            v.iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        );
        assert_ne!(v, value(&mut rng, Span::exactly(500)));
        assert!(value(&mut rng, Span::exactly(0)).is_empty());
        let sizes: Vec<usize> = (0..100)
            .map(|_| value(&mut rng, Span { min: 1, max: 3 }).len())
            .collect();
        assert!(sizes.iter().all(|n| (1..=3).contains(n)));
    }
}
