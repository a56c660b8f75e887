//! The nodes every tree starts with: ZooKeeper's /zookeeper, /zookeeper/quota and
//! /zookeeper/config, and ClickHouse Keeper's /keeper/api_version and /keeper/feature_flags,
//! which tell ClickHouse which protocol extensions this server implements.

use warden_proto::Acl;

use crate::tree::{DataTree, NodeStat};

pub const ZOOKEEPER: &str = "/zookeeper";
pub const QUOTA: &str = "/zookeeper/quota";
pub const CONFIG: &str = "/zookeeper/config";
pub const KEEPER: &str = "/keeper";
pub const API_VERSION: &str = "/keeper/api_version";
pub const FEATURE_FLAGS: &str = "/keeper/feature_flags";

/// ClickHouse's `KeeperFeatureFlag` numbering (bit n of the flags string).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Feature {
    FilteredList = 0,
    MultiRead = 1,
    CheckNotExists = 2,
    CreateIfNotExists = 3,
    RemoveRecursive = 4,
    MultiWatches = 5,
    CheckStat = 6,
    PersistentWatches = 7,
    CreateWithStats = 8,
    TryRemove = 9,
    ListWithStatAndData = 10,
    GetChildrenRecursive = 11,
}

impl Feature {
    /// Every flag ClickHouse defines, in its order.
    pub const ALL: [Feature; 12] = [
        Feature::FilteredList,
        Feature::MultiRead,
        Feature::CheckNotExists,
        Feature::CreateIfNotExists,
        Feature::RemoveRecursive,
        Feature::MultiWatches,
        Feature::CheckStat,
        Feature::PersistentWatches,
        Feature::CreateWithStats,
        Feature::TryRemove,
        Feature::ListWithStatAndData,
        Feature::GetChildrenRecursive,
    ];

    /// ClickHouse's name for the flag, lower-cased as its `ftfl` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Feature::FilteredList => "filtered_list",
            Feature::MultiRead => "multi_read",
            Feature::CheckNotExists => "check_not_exists",
            Feature::CreateIfNotExists => "create_if_not_exists",
            Feature::RemoveRecursive => "remove_recursive",
            Feature::MultiWatches => "multi_watches",
            Feature::CheckStat => "check_stat",
            Feature::PersistentWatches => "persistent_watches",
            Feature::CreateWithStats => "create_with_stats",
            Feature::TryRemove => "try_remove",
            Feature::ListWithStatAndData => "list_with_stat_and_data",
            Feature::GetChildrenRecursive => "get_children_recursive",
        }
    }
}

/// The extensions Warden advertises (MULTI_WATCHES only matters with MULTI_READ). MULTI_READ
/// is left out on purpose: with it ClickHouse
/// expects a failed multiRead operation to keep its own op type without a body, while
/// ZooKeeper clients expect ZooKeeper's error result (type -1 and an error body); Warden
/// answers multiRead as ZooKeeper does, and ClickHouse then reads one request at a time.
pub const FEATURES: &[Feature] = &[
    Feature::FilteredList,
    Feature::CheckNotExists,
    Feature::CreateIfNotExists,
    Feature::RemoveRecursive,
    Feature::CheckStat,
    Feature::PersistentWatches,
    Feature::CreateWithStats,
    Feature::TryRemove,
    Feature::ListWithStatAndData,
    Feature::GetChildrenRecursive,
];

/// ClickHouse's `KeeperApiVersion` for clients too old to read the feature flags: the
/// versions are cumulative, and without MULTI_READ the highest that holds is
/// WITH_FILTERED_LIST (1). See docs/clickhouse-extensions.md.
pub const API_VERSION_VALUE: &[u8] = b"1";

/// The flags string: byte n/8, bit 7 - n%8, for each feature n (`KeeperFeatureFlags`).
pub fn feature_flags(features: &[Feature]) -> Vec<u8> {
    let mut bytes = vec![0u8; 2];
    for f in features {
        let n = *f as usize;
        bytes[n / 8] |= 1 << (7 - n % 8);
    }
    bytes
}

/// Creates the system nodes in a fresh tree, with zero stats as ZooKeeper's have.
pub fn install(tree: &mut DataTree) {
    let stat = NodeStat::default();
    let zk = tree.create(
        "/",
        crate::tree::ROOT,
        "zookeeper",
        Some(b""),
        &Acl::open(),
        stat,
        0,
    );
    tree.create(ZOOKEEPER, zk, "quota", Some(b""), &Acl::open(), stat, 0);
    // ZooKeeper's `addConfigNode` sets this ACL with `setACL(path, READ_ACL_UNSAFE, -1)`,
    // which stores -1 as the aversion (golden vector java_basic).
    let config_stat = NodeStat {
        aversion: -1,
        ..stat
    };
    tree.create(
        ZOOKEEPER,
        zk,
        "config",
        Some(b""),
        &Acl::read_only(),
        config_stat,
        0,
    );
    let keeper = tree.create(
        "/",
        crate::tree::ROOT,
        "keeper",
        Some(b""),
        &Acl::read_only(),
        stat,
        0,
    );
    tree.create(
        KEEPER,
        keeper,
        "api_version",
        Some(API_VERSION_VALUE),
        &Acl::read_only(),
        stat,
        0,
    );
    tree.create(
        KEEPER,
        keeper,
        "feature_flags",
        Some(&feature_flags(FEATURES)),
        &Acl::read_only(),
        stat,
        0,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_msb_first() {
        assert_eq!(feature_flags(&[Feature::FilteredList]), [0x80, 0]);
        assert_eq!(feature_flags(FEATURES), [0xbb, 0xf0]);
    }
}
