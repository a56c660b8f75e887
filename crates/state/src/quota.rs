//! ZooKeeper's quotas, kept as ZooKeeper 3.9 keeps them (`Quotas`, `StatsTrack`, the quota
//! trie of `DataTree`): a quota on `/p` is the node `/zookeeper/quota/p/zookeeper_limits`
//! (its limits) beside `/zookeeper/quota/p/zookeeper_stats` (its usage: the nodes of the
//! subtree of `/p`, `/p` included, and the bytes of their data). The tree keeps the usage
//! up to date in place, as a function of the transactions applied; the hard limits are
//! checked when a write is prepared (`prepare`), only if the leader that proposed it
//! enforces them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::system::QUOTA;

/// The name of the node holding a quota's limits.
pub const LIMITS_NODE: &str = "zookeeper_limits";
/// The name of the node holding a quota's usage.
pub const STATS_NODE: &str = "zookeeper_stats";

const COUNT: &str = "count";
const BYTES: &str = "bytes";
const COUNT_HARD_LIMIT: &str = "countHardLimit";
const BYTE_HARD_LIMIT: &str = "byteHardLimit";

/// ZooKeeper's `StatsTrack`: named numbers, -1 for a name that is absent. `count` and
/// `bytes` are the usage in a stats node and the soft limits in a limits node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsTrack {
    values: BTreeMap<String, i64>,
}

impl StatsTrack {
    /// Reads a node's data as ZooKeeper does: pairs split on runs of `,` and `;`, each at
    /// `=`, an empty value meaning -1. Where ZooKeeper would throw (a pair without `=`, a
    /// value that is not a number) the pair is skipped: a client may write anything there.
    pub fn parse(data: &[u8]) -> StatsTrack {
        let text = String::from_utf8_lossy(data);
        let mut values = BTreeMap::new();
        for pair in text.split([',', ';']).filter(|p| !p.is_empty()) {
            // Java's split drops trailing empty strings: "bytes=-1=" is ["bytes", "-1"].
            let mut parts = pair.split('=');
            let key = parts.next().unwrap_or_default();
            let value = match parts.next() {
                Some("") => Some(-1),
                Some(v) => v.trim().parse().ok(),
                None => None,
            };
            if let Some(v) = value {
                values.insert(key.to_owned(), v);
            }
        }
        StatsTrack { values }
    }

    /// A usage, as ZooKeeper writes it when it recounts a subtree.
    pub fn usage(count: i64, bytes: i64) -> StatsTrack {
        let mut s = StatsTrack::default();
        s.values.insert(COUNT.to_owned(), count);
        s.values.insert(BYTES.to_owned(), bytes);
        s
    }

    fn get(&self, key: &str) -> i64 {
        self.values.get(key).copied().unwrap_or(-1)
    }

    pub fn count(&self) -> i64 {
        self.get(COUNT)
    }

    pub fn bytes(&self) -> i64 {
        self.get(BYTES)
    }

    pub fn count_hard_limit(&self) -> i64 {
        self.get(COUNT_HARD_LIMIT)
    }

    pub fn byte_hard_limit(&self) -> i64 {
        self.get(BYTE_HARD_LIMIT)
    }

    /// Adds to the usage (`DataTree.updateQuotaStat`). Saturating: a client may have written
    /// any number there.
    pub fn add(&mut self, count: i64, bytes: i64) {
        let (c, b) = (
            self.count().saturating_add(count),
            self.bytes().saturating_add(bytes),
        );
        self.values.insert(COUNT.to_owned(), c);
        self.values.insert(BYTES.to_owned(), b);
    }
}

/// `StatsTrack.toString`: `count` and `bytes` first (what 3.5 clients read), then, if any
/// other name is set, `=` and `;name=value` for each, sorted by name.
impl fmt::Display for StatsTrack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{COUNT}={},{BYTES}={}", self.count(), self.bytes())?;
        let mut others = self
            .values
            .iter()
            .filter(|(k, _)| *k != COUNT && *k != BYTES)
            .peekable();
        if others.peek().is_some() {
            f.write_str("=")?;
        }
        for (k, v) in others {
            write!(f, ";{k}={v}")?;
        }
        Ok(())
    }
}

/// Where the limits of a quota on `root` live.
pub fn limits_path(root: &str) -> String {
    format!("{QUOTA}{root}/{LIMITS_NODE}")
}

/// Where the usage of a quota on `root` lives.
pub fn stats_path(root: &str) -> String {
    format!("{QUOTA}{root}/{STATS_NODE}")
}

/// The quota root a node under `/zookeeper/quota` stands for: `/zookeeper/quota/a/b` is
/// `/a/b` (`Quotas.trimQuotaPath`).
pub fn root_of(quota_path: &str) -> Option<&str> {
    quota_path
        .strip_prefix(QUOTA)
        .filter(|rest| rest.len() > 1 && rest.starts_with('/'))
}

/// ZooKeeper's `PathUtils.getTopNamespace`: `a` for `/a/b`; none for `/`.
pub fn top_namespace(path: &str) -> Option<&str> {
    path.split('/').nth(1).filter(|n| !n.is_empty())
}

/// The paths that have a limits node: ZooKeeper's quota trie.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuotaRoots {
    roots: BTreeSet<String>,
}

impl QuotaRoots {
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.roots.iter().map(String::as_str)
    }

    pub(crate) fn insert(&mut self, root: &str) {
        self.roots.insert(root.to_owned());
    }

    pub(crate) fn remove(&mut self, root: &str) {
        self.roots.remove(root);
    }

    pub(crate) fn clear(&mut self) {
        self.roots.clear();
    }

    /// The deepest root that is `path` or one of its ancestors (`PathTrie.findMaxPrefix`);
    /// `/` never has a quota.
    pub fn covering(&self, path: &str) -> Option<&str> {
        if self.roots.is_empty() {
            return None;
        }
        let mut end = path.len();
        while end > 1 {
            let prefix = &path[..end];
            if let Some(root) = self.roots.get(prefix) {
                return Some(root);
            }
            end = prefix.rfind('/')?;
        }
        None
    }
}

/// Which limit a write went over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Count,
    Bytes,
}

/// A write that took a quota over one of its limits (`ZooKeeperServer.checkQuota`): over a
/// hard limit it was refused with QuotaExceeded; over a soft one it went ahead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaBreach {
    pub root: String,
    /// The top-level namespace of the path written, the key of ZooKeeper's
    /// `quota_exceeded_error_per_namespace`.
    pub namespace: Option<String>,
    pub measure: Measure,
    /// The usage the write would have made.
    pub usage: i64,
    pub limit: i64,
    pub hard: bool,
}

/// ZooKeeper's log line, word for word.
impl fmt::Display for QuotaBreach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, limit) = match self.measure {
            Measure::Count => ("count", "CountLimit"),
            Measure::Bytes => ("bytes", "ByteLimit"),
        };
        let kind = if self.hard { "hard" } else { "soft" };
        write!(
            f,
            "Quota exceeded: {} [current {what}={}, {kind}{limit}={}]",
            self.root, self.usage, self.limit
        )
    }
}

/// Limits and usage summed per top-level namespace, as ZooKeeper's `QuotaMetricsUtils`
/// reports them (a limit is the hard one if set, else the soft one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuotaFigures {
    pub count_limit: BTreeMap<String, i64>,
    pub bytes_limit: BTreeMap<String, i64>,
    pub count_usage: BTreeMap<String, i64>,
    pub bytes_usage: BTreeMap<String, i64>,
}

impl QuotaFigures {
    pub(crate) fn add_limits(&mut self, root: &str, limits: &StatsTrack) {
        let Some(ns) = top_namespace(root) else {
            return;
        };
        let pick = |hard: i64, soft: i64| if hard > -1 { hard } else { soft };
        add(
            &mut self.count_limit,
            ns,
            pick(limits.count_hard_limit(), limits.count()),
        );
        add(
            &mut self.bytes_limit,
            ns,
            pick(limits.byte_hard_limit(), limits.bytes()),
        );
    }

    pub(crate) fn add_usage(&mut self, root: &str, usage: &StatsTrack) {
        let Some(ns) = top_namespace(root) else {
            return;
        };
        add(&mut self.count_usage, ns, usage.count());
        add(&mut self.bytes_usage, ns, usage.bytes());
    }
}

fn add(by_namespace: &mut BTreeMap<String, i64>, namespace: &str, value: i64) {
    let sum = by_namespace.entry(namespace.to_owned()).or_default();
    *sum = sum.saturating_add(value);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ecosystem.md 7.1, captured from ZooKeeper 3.9.5 after `setquota -n 3 /q` and
    /// `setquota -B 10 /q`.
    #[test]
    fn limits_read_and_written_as_zookeeper_writes_them() {
        let live = "count=3,bytes=-1=;byteHardLimit=10;countHardLimit=-1";
        let s = StatsTrack::parse(live.as_bytes());
        assert_eq!(s.count(), 3);
        assert_eq!(s.bytes(), -1);
        assert_eq!(s.byte_hard_limit(), 10);
        assert_eq!(s.count_hard_limit(), -1);
        assert_eq!(s.to_string(), live);
        assert_eq!(StatsTrack::usage(2, 1).to_string(), "count=2,bytes=1");
    }

    #[test]
    fn the_parser_is_as_tolerant_as_zookeepers() {
        let s = StatsTrack::parse(b"count=,bytes=7;;,countHardLimit==4");
        assert_eq!(s.count(), -1, "an empty value is -1");
        assert_eq!(s.bytes(), 7);
        assert_eq!(s.count_hard_limit(), -1);
        // 3.5's format, and rubbish a client may have written.
        assert_eq!(StatsTrack::parse(b"count=5,bytes=6").count(), 5);
        let junk = StatsTrack::parse(b"\xffcount;bytes=x,z");
        assert_eq!((junk.count(), junk.bytes()), (-1, -1));
        let mut empty = StatsTrack::parse(b"");
        empty.add(1, 2);
        assert_eq!(empty.to_string(), "count=0,bytes=1");
    }

    #[test]
    fn the_deepest_covering_root_wins_and_the_root_path_never_has_one() {
        let mut roots = QuotaRoots::default();
        assert_eq!(roots.covering("/a"), None);
        roots.insert("/a");
        roots.insert("/a/b/c");
        assert_eq!(roots.covering("/a"), Some("/a"));
        assert_eq!(roots.covering("/a/b"), Some("/a"));
        assert_eq!(roots.covering("/a/b/c/d"), Some("/a/b/c"));
        assert_eq!(roots.covering("/ab"), None);
        assert_eq!(roots.covering("/"), None);
        assert_eq!(root_of("/zookeeper/quota/a/b"), Some("/a/b"));
        assert_eq!(root_of("/zookeeper/quota"), None);
        assert_eq!(root_of("/zookeeper/quotas/a"), None);
        assert_eq!(top_namespace("/a/b"), Some("a"));
        assert_eq!(top_namespace("/"), None);
    }

    #[test]
    fn breaches_read_as_zookeepers_log_line() {
        let b = QuotaBreach {
            root: "/q".into(),
            namespace: Some("q".into()),
            measure: Measure::Count,
            usage: 4,
            limit: 3,
            hard: false,
        };
        assert_eq!(
            b.to_string(),
            "Quota exceeded: /q [current count=4, softCountLimit=3]"
        );
        let b = QuotaBreach {
            measure: Measure::Bytes,
            hard: true,
            ..b
        };
        assert_eq!(
            b.to_string(),
            "Quota exceeded: /q [current bytes=4, hardByteLimit=3]"
        );
    }
}
