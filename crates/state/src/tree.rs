//! The data tree: every znode in one arena, found by a hash index keyed on (parent, name).
//!
//! Memory is the point of this layout. A node is 96 bytes plus one heap block holding its name
//! and data together; children are 4-byte indices; an ACL list shared by many nodes is stored
//! once. Full paths are never stored: they are rebuilt from the parent chain when needed.
//!
//! A clone is copy-on-write, for snapshots: the arena is chunks of 32 nodes behind `Arc`s, in
//! groups of 256 behind `Arc`s (`arena.rs`), the index 256 shards behind `Arc`s
//! (`sharded_table.rs`), the ACL table, the container and TTL sets and each session's
//! ephemerals one `Arc` each, so a clone copies pointers, and each side copies a group, a
//! chunk, a shard or a set on its first write to it.
//!
//! The tree keeps a digest, a wrapping sum of one hash per node over its path, data, stat and
//! ACL, updated on every change, so two replicas can compare whole trees in O(1).
//!
//! It also keeps ZooKeeper's quota usage: every create, delete and setData under a quota root
//! rewrites that quota's stats node in place (no zxid, version or mtime), as ZooKeeper's
//! `DataTree` does ([`crate::quota`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use thin_vec::ThinVec;
use warden_proto::{Acl, Stat};
use xxhash_rust::xxh3::{Xxh3, xxh3_64, xxh3_64_with_seed};

use crate::acl::{AclId, AclTable};
use crate::arena::Arena;
use crate::children::{Ids, LongLists};
use crate::path;
use crate::quota::{self, QuotaFigures, QuotaRoots, StatsTrack};
use crate::sharded_table::ShardedTable;

/// Index of a node in the arena.
pub type NodeId = u32;

/// The root's index; it is never freed.
pub const ROOT: NodeId = 0;

/// `ephemeralOwner` of a container node (`EphemeralType.CONTAINER_EPHEMERAL_OWNER`).
pub const CONTAINER_OWNER: i64 = i64::MIN;

/// High byte of `ephemeralOwner` marking an extended type; with bits 40..56 zero it is a TTL
/// node whose TTL is in the low 40 bits (`EphemeralType.TTL`).
const TTL_MARK: i64 = 0xff00_0000_0000_0000_u64 as i64;
pub const TTL_MAX_MS: i64 = (1 << 40) - 1;

/// The `ephemeralOwner` ZooKeeper stores for a TTL node.
pub fn ttl_owner(ttl_ms: i64) -> i64 {
    TTL_MARK | ttl_ms
}

/// What kind of node an `ephemeralOwner` value denotes (`EphemeralType.get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Persistent,
    Ephemeral(i64),
    Container,
    Ttl(i64),
}

impl NodeKind {
    pub fn of_owner(owner: i64) -> NodeKind {
        if owner == 0 {
            NodeKind::Persistent
        } else if owner == CONTAINER_OWNER {
            NodeKind::Container
        } else if owner & TTL_MARK == TTL_MARK && (owner >> 40) & 0xffff == 0 {
            NodeKind::Ttl(owner & TTL_MAX_MS)
        } else {
            NodeKind::Ephemeral(owner)
        }
    }
}

/// A node's stored metadata; numChildren and dataLength are derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeStat {
    pub czxid: i64,
    pub mzxid: i64,
    pub pzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub ephemeral_owner: i64,
}

impl NodeStat {
    /// The 64-bit fields in a fixed order, for hashing and snapshots.
    pub fn longs(&self) -> [i64; 6] {
        [
            self.czxid,
            self.mzxid,
            self.pzxid,
            self.ctime,
            self.mtime,
            self.ephemeral_owner,
        ]
    }

    /// The 32-bit fields in a fixed order, for hashing and snapshots.
    pub fn ints(&self) -> [i32; 3] {
        [self.version, self.cversion, self.aversion]
    }

    /// The inverse of [`NodeStat::longs`] and [`NodeStat::ints`].
    pub fn from_fields(l: [i64; 6], i: [i32; 3]) -> NodeStat {
        NodeStat {
            czxid: l[0],
            mzxid: l[1],
            pzxid: l[2],
            ctime: l[3],
            mtime: l[4],
            ephemeral_owner: l[5],
            version: i[0],
            cversion: i[1],
            aversion: i[2],
        }
    }
}

/// The high bit of `name_len` marks null data (distinct from empty data on the wire).
const NULL_DATA: u32 = 1 << 31;

/// One znode. The stat fields are kept flat rather than as a [`NodeStat`] so that the three
/// u32s below share its 8-byte alignment padding: 96 bytes instead of 104.
#[derive(Debug, Clone)]
struct Node {
    /// The node's name followed by its data, in one allocation.
    bytes: Box<[u8]>,
    /// Eight bytes, and no allocation, for the leaves that most nodes are; empty when the
    /// list is long and kept in [`DataTree`]'s long lists instead (`children.rs`).
    children: ThinVec<NodeId>,
    czxid: i64,
    mzxid: i64,
    pzxid: i64,
    ctime: i64,
    mtime: i64,
    ephemeral_owner: i64,
    version: i32,
    cversion: i32,
    aversion: i32,
    name_len: u32,
    parent: NodeId,
    /// In a free slot, the next free slot instead ([`DataTree`]'s free list).
    acl: AclId,
}

impl Node {
    fn new(name: &str, data: Option<&[u8]>, parent: NodeId, acl: AclId, s: NodeStat) -> Node {
        let (bytes, name_len) = pack(name, data);
        Node {
            bytes,
            children: ThinVec::new(),
            czxid: s.czxid,
            mzxid: s.mzxid,
            pzxid: s.pzxid,
            ctime: s.ctime,
            mtime: s.mtime,
            ephemeral_owner: s.ephemeral_owner,
            version: s.version,
            cversion: s.cversion,
            aversion: s.aversion,
            name_len,
            parent,
            acl,
        }
    }

    fn stat(&self) -> NodeStat {
        NodeStat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            pzxid: self.pzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            cversion: self.cversion,
            aversion: self.aversion,
            ephemeral_owner: self.ephemeral_owner,
        }
    }

    fn name_len(&self) -> usize {
        (self.name_len & !NULL_DATA) as usize
    }

    fn name(&self) -> &str {
        // Not validated again: every list of children read validated each child's name, 5% of
        // the server's CPU under the `mixed` workload (docs/benchmarks.md).
        // SAFETY: `bytes` and `name_len` are private to this module and only ever set
        // together, from what `pack` returns for a `&str` name: the name's bytes first, and
        // their length. So `name_bytes`, the first `name_len` bytes, are that `&str`'s bytes,
        // which are UTF-8.
        unsafe { std::str::from_utf8_unchecked(self.name_bytes()) }
    }

    /// The name unchecked: what the index hashes and compares, so that a lookup or a rehash
    /// does not validate UTF-8 again for every name it meets.
    fn name_bytes(&self) -> &[u8] {
        &self.bytes[..self.name_len()]
    }

    fn data(&self) -> Option<&[u8]> {
        (self.name_len & NULL_DATA == 0).then(|| &self.bytes[self.name_len()..])
    }

    fn is_free(&self) -> bool {
        self.parent == NodeId::MAX
    }
}

/// A node's bytes as a quota counts them.
fn data_len(data: Option<&[u8]>) -> i64 {
    data.map_or(0, |d| d.len() as i64)
}

fn pack(name: &str, data: Option<&[u8]>) -> (Box<[u8]>, u32) {
    let mut bytes = Vec::with_capacity(name.len() + data.map_or(0, <[u8]>::len));
    bytes.extend_from_slice(name.as_bytes());
    if let Some(d) = data {
        bytes.extend_from_slice(d);
    }
    let len = u32::try_from(name.len())
        .ok()
        .filter(|n| n & NULL_DATA == 0)
        .expect("names are bounded by the frame size");
    (
        bytes.into_boxed_slice(),
        len | if data.is_none() { NULL_DATA } else { 0 },
    )
}

/// A read-only view of one node.
#[derive(Clone, Copy)]
pub struct NodeRef<'a> {
    tree: &'a DataTree,
    id: NodeId,
    node: &'a Node,
}

impl<'a> NodeRef<'a> {
    pub fn id(&self) -> NodeId {
        self.id
    }

    pub fn name(&self) -> &'a str {
        self.node.name()
    }

    pub fn data(&self) -> Option<&'a [u8]> {
        self.node.data()
    }

    pub fn stat(&self) -> NodeStat {
        self.node.stat()
    }

    pub fn kind(&self) -> NodeKind {
        NodeKind::of_owner(self.node.ephemeral_owner)
    }

    pub fn num_children(&self) -> usize {
        self.node.children.len() + self.long_children().map_or(0, |ids| ids.len())
    }

    pub fn acl(&self) -> &'a [Acl] {
        self.tree.acls.get(self.node.acl)
    }

    pub fn acl_id(&self) -> AclId {
        self.node.acl
    }

    pub fn parent(&self) -> Option<NodeId> {
        (self.id != ROOT).then_some(self.node.parent)
    }

    /// The children's ids, in the order ZooKeeper's clients see them listed.
    pub fn child_ids(&self) -> impl DoubleEndedIterator<Item = NodeId> + 'a {
        let long = self.long_children().into_iter().flat_map(|ids| ids.iter());
        self.node.children.iter().chain(long).copied()
    }

    pub fn children(&self) -> impl Iterator<Item = NodeRef<'a>> + 'a {
        let tree = self.tree;
        self.child_ids().map(move |c| tree.node(c))
    }

    /// The list of children kept out of the node, for a long one.
    fn long_children(&self) -> Option<&'a Ids> {
        if self.node.children.is_empty() {
            self.tree.long_lists.get(self.id)
        } else {
            None
        }
    }

    /// The Stat a client sees, derived as ZooKeeper's `DataNode.copyStat` derives it:
    /// - the stored cversion counts child creations (it is also the sequence counter), and
    ///   the reported one is `2 * creations - numChildren`, i.e. creations plus deletions
    ///   (golden vector java_seq: after one create and one delete the parent reports
    ///   cversion 2, and the next sequential child is still -0000000001);
    /// - ephemeralOwner is the owning session for an ephemeral node and 0 for every other
    ///   kind: the container and TTL markers stay on the server (java_create).
    pub fn wire_stat(&self) -> Stat {
        let s = self.node.stat();
        let num_children = self.num_children() as i32;
        Stat {
            czxid: s.czxid,
            mzxid: s.mzxid,
            ctime: s.ctime,
            mtime: s.mtime,
            version: s.version,
            cversion: s.cversion.wrapping_mul(2).wrapping_sub(num_children),
            aversion: s.aversion,
            ephemeral_owner: match self.kind() {
                NodeKind::Ephemeral(owner) => owner,
                _ => 0,
            },
            data_length: self.data().map_or(0, |d| d.len() as i32),
            num_children,
            pzxid: s.pzxid,
        }
    }
}

/// The ZooKeeper data tree. A clone shares every part that grows with the tree (the arena's
/// chunks, the index's shards, the ACL table, the kind sets) and each copies only the part it
/// writes, when it writes it: a snapshot's copy costs no pause proportional to the tree.
#[derive(Clone)]
pub struct DataTree {
    nodes: Arena<Node>,
    /// The most recently freed slot ([`NO_FREE`] if none); a free node's `acl` field holds
    /// the slot freed before it, so the free list takes no memory of its own.
    free: NodeId,
    /// The (parent, name) index: each node's id, found by the hash of its parent and name.
    index: ShardedTable<NodeId>,
    /// The index hash's key, random for each tree ([`child_hash`]).
    index_key: u64,
    /// Lists of children too long for their parent's node.
    long_lists: LongLists,
    acls: Arc<AclTable>,
    /// Ephemeral nodes by owning session; a clone copies one `Arc` per session.
    ephemerals: hashbrown::HashMap<i64, Arc<BTreeSet<NodeId>>>,
    containers: Arc<BTreeSet<NodeId>>,
    ttls: Arc<BTreeSet<NodeId>>,
    digest: u64,
    live: usize,
    /// ZooKeeper's `approximateDataSize`: each node's path length and data length, summed,
    /// the root counted twice as ZooKeeper's nodes map holds it under "" and under "/".
    data_size: u64,
    /// Paths with a quota: a function of the limits nodes, rebuilt when a tree is loaded.
    quotas: QuotaRoots,
}

/// Marks the end of the free list.
const NO_FREE: NodeId = NodeId::MAX;
/// ZooKeeper's second key of the root in its nodes map (its first is ""), counted by its
/// `approximateDataSize`.
const ROOT_ALIAS: &str = "/";
/// Values up to this size are copied beside the other fields of a node's digest; larger ones
/// are hashed where they lie.
const DIGEST_COPIED_VALUE_BYTES_MAX: usize = 4096;

/// One node's share of the tree's digest: a hash of its path (given in pieces that join to
/// it), its data, its stat and its ACL. The digest is the wrapping sum over all nodes, so a
/// snapshot's loader may hash nodes apart from the tree that adds them.
pub(crate) fn node_digest(
    path: &[&[u8]],
    data: Option<&[u8]>,
    stat: &NodeStat,
    acl: &[Acl],
) -> u64 {
    thread_local! {
        static INPUT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let value = data.unwrap_or_default();
    // The fields laid end to end and hashed at once: feeding xxh3's streaming state a dozen
    // small pieces cost twice as much, for the same digest. A large value is streamed between
    // the fields before and after it instead (xxh3 hashes a stream as the bytes joined): a
    // copy of it cost as much as the hash, and kept the buffer that large on every thread.
    INPUT.with_borrow_mut(|b| {
        b.clear();
        for piece in path {
            b.extend_from_slice(piece);
        }
        b.push(u8::from(data.is_some()));
        let streamed = value.len() > DIGEST_COPIED_VALUE_BYTES_MAX;
        let mut hasher = streamed.then(|| {
            let mut hasher = Xxh3::new();
            hasher.update(b);
            hasher.update(value);
            b.clear();
            hasher
        });
        if !streamed {
            b.extend_from_slice(value);
        }
        for v in stat.longs() {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in stat.ints() {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for a in acl {
            b.extend_from_slice(&a.perms.to_le_bytes());
            b.extend_from_slice(a.id.scheme.as_bytes());
            b.push(0);
            b.extend_from_slice(a.id.id.as_bytes());
            b.push(0);
        }
        match &mut hasher {
            Some(hasher) => {
                hasher.update(b);
                hasher.digest()
            }
            None => xxh3_64(b),
        }
    })
}

/// Shards of the (parent, name) index. At 1,000,000 znodes a shard holds ~4,000 ids, so the
/// first create or delete in a shard after a clone copies ~20 KiB.
const INDEX_SHARDS: usize = 256;

/// The index's hash of a child's name under its parent, keyed by `key`, random for each tree:
/// names are the clients' to choose, and with a key they can know, one client could pick
/// millions of names that share a bucket and make every lookup under that parent walk them.
/// xxh3 with the key as its seed rather than a keyed PRF such as SipHash: several times
/// faster on the short names znodes have, and though xxh3 is no PRF, the key never leaves the
/// process and no reply depends on the hash (a list of children's order does not), so a
/// client has nothing to learn it from but timing.
fn child_hash(key: u64, parent: NodeId, name: &[u8]) -> u64 {
    xxh3_64_with_seed(name, key ^ u64::from(parent))
}

/// A fresh key for a tree's index.
fn index_key() -> u64 {
    let mut key = [0; 8];
    getrandom::fill(&mut key).expect("the OS gives random bytes");
    u64::from_le_bytes(key)
}

/// The index's hash of a stored node, read back for the index to move it between tables.
fn indexed_hash(key: u64, nodes: &Arena<Node>) -> impl Fn(&NodeId) -> u64 + '_ {
    move |&id| {
        let n = nodes.get(id);
        child_hash(key, n.parent, n.name_bytes())
    }
}

impl Default for DataTree {
    fn default() -> Self {
        DataTree::new()
    }
}

impl DataTree {
    /// A tree holding only the root, with an empty data and a zero stat as ZooKeeper's.
    pub fn new() -> Self {
        let mut acls = AclTable::default();
        let acl = acls.acquire(&Acl::open());
        DataTree::with_root(acls, Some(b""), acl, NodeStat::default(), 0)
    }

    /// A tree holding only a root as given, with room for `nodes` nodes; `acls` already
    /// holds the root's reference.
    fn with_root(
        acls: AclTable,
        data: Option<&[u8]>,
        acl: AclId,
        stat: NodeStat,
        nodes: usize,
    ) -> Self {
        // A snapshot's load knows its node count: growing the index as it went was a fifth
        // of the load.
        let index = ShardedTable::with_capacity(INDEX_SHARDS, nodes);
        let mut nodes = Arena::with_capacity(nodes);
        nodes.push(Node::new("", data, ROOT, acl, stat));
        let mut tree = DataTree {
            nodes,
            free: NO_FREE,
            index,
            index_key: index_key(),
            long_lists: LongLists::default(),
            acls: Arc::new(acls),
            ephemerals: Default::default(),
            containers: Default::default(),
            ttls: Default::default(),
            digest: 0,
            live: 1,
            data_size: ROOT_ALIAS.len() as u64 + 2 * data_len(data) as u64,
            quotas: QuotaRoots::default(),
        };
        tree.digest = tree.node_hash("/", ROOT);
        tree
    }

    /// Number of live nodes, root included.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// The ACL of node `id`, shared rather than copied.
    pub fn shared_acl(&self, id: NodeId) -> Arc<[Acl]> {
        self.acls.get(self.node(id).acl_id()).clone()
    }

    pub fn acl_table(&self) -> &AclTable {
        &self.acls
    }

    pub fn node(&self, id: NodeId) -> NodeRef<'_> {
        let node = self.nodes.get(id);
        assert!(!node.is_free(), "node {id} is live");
        NodeRef {
            tree: self,
            id,
            node,
        }
    }

    pub fn root(&self) -> NodeRef<'_> {
        self.node(ROOT)
    }

    pub fn child(&self, parent: NodeId, name: &str) -> Option<NodeId> {
        let nodes = &self.nodes;
        let name = name.as_bytes();
        let found = self
            .index
            .find(child_hash(self.index_key, parent, name), |&c| {
                let n = nodes.get(c);
                n.parent == parent && n.name_bytes() == name
            });
        found.copied()
    }

    /// Finds the node at `path`; any path that is not absolute and well formed finds nothing.
    pub fn lookup(&self, path: &str) -> Option<NodeId> {
        let mut id = ROOT;
        for name in path::names(path)? {
            id = self.child(id, name)?;
        }
        Some(id)
    }

    pub fn get(&self, path: &str) -> Option<NodeRef<'_>> {
        self.lookup(path).map(|id| self.node(id))
    }

    /// Rebuilds a node's full path from its parent chain.
    pub fn path_of(&self, id: NodeId) -> String {
        let mut names = Vec::new();
        let mut at = id;
        while at != ROOT {
            let n = self.nodes.get(at);
            names.push(n.name());
            at = n.parent;
        }
        if names.is_empty() {
            return "/".to_owned();
        }
        let mut out = String::new();
        for name in names.iter().rev() {
            out.push('/');
            out.push_str(name);
        }
        out
    }

    /// Ephemeral nodes owned by `session`, in node order.
    pub fn ephemerals_of(&self, session: i64) -> impl Iterator<Item = NodeId> + '_ {
        self.ephemerals
            .get(&session)
            .into_iter()
            .flat_map(|owned| owned.iter().copied())
    }

    /// How many ephemerals `session` owns.
    pub fn ephemeral_count(&self, session: i64) -> usize {
        self.ephemerals.get(&session).map_or(0, |owned| owned.len())
    }

    pub fn containers(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.containers.iter().copied()
    }

    pub fn ttls(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.ttls.iter().copied()
    }

    fn node_hash(&self, path: &str, id: NodeId) -> u64 {
        let n = self.nodes.get(id);
        node_digest(
            &[path.as_bytes()],
            n.data(),
            &n.stat(),
            self.acls.get(n.acl),
        )
    }

    /// [`DataTree::node_hash`] of the child `id` of `parent_path`, without building its path.
    fn child_node_hash(&self, parent_path: &str, id: NodeId) -> u64 {
        let n = self.nodes.get(id);
        let separator: &[u8] = if parent_path == "/" { b"" } else { b"/" };
        node_digest(
            &[parent_path.as_bytes(), separator, n.name_bytes()],
            n.data(),
            &n.stat(),
            self.acls.get(n.acl),
        )
    }

    /// Applies `change` to node `id` at `path`, keeping the digest in step.
    fn modify(&mut self, path: &str, id: NodeId, change: impl FnOnce(&mut Self, NodeId)) {
        self.digest = self.digest.wrapping_sub(self.node_hash(path, id));
        change(self, id);
        self.digest = self.digest.wrapping_add(self.node_hash(path, id));
    }

    /// Adds a child named `name` under `parent` (whose path is `parent_path`). The caller has
    /// checked that it does not exist. The parent's cversion becomes `parent_cversion` and its
    /// pzxid the new node's czxid, as in ZooKeeper's `DataTree.createNode`.
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        &mut self,
        parent_path: &str,
        parent: NodeId,
        name: &str,
        data: Option<&[u8]>,
        acl: &[Acl],
        stat: NodeStat,
        parent_cversion: i32,
    ) -> NodeId {
        let acl = Arc::make_mut(&mut self.acls).acquire(acl);
        let id = self
            .attach(parent, name, data, acl, stat)
            .expect("create of an existing node");
        let parent_len = if parent == ROOT { 0 } else { parent_path.len() };
        self.data_size += (parent_len + 1 + name.len()) as u64 + data_len(data) as u64;
        self.digest = self
            .digest
            .wrapping_add(self.child_node_hash(parent_path, id));
        self.modify(parent_path, parent, |t, p| {
            let pn = t.nodes.get_mut(p);
            pn.cversion = parent_cversion;
            pn.pzxid = stat.czxid;
        });
        // `DataTree.createNode`: a new limits node makes a quota root, a new stats node is
        // filled with its subtree's usage, and the quota covering the node counts it.
        if let Some(root) = quota::root_of(parent_path) {
            match name {
                quota::LIMITS_NODE => self.quotas.insert(root),
                quota::STATS_NODE => self.recount_quota(root),
                _ => {}
            }
        }
        if !self.quotas.is_empty() {
            // Only then is the new node's path worth building.
            self.charge_quota(&path::join(parent_path, name), 1, data_len(data));
        }
        id
    }

    /// Puts a node in the arena, the index, its parent's children and the kind sets; the
    /// digest and the parent's stat are left to the caller. `None`, and nothing changed, if
    /// the parent already has a child of that name.
    fn attach(
        &mut self,
        parent: NodeId,
        name: &str,
        data: Option<&[u8]>,
        acl: AclId,
        stat: NodeStat,
    ) -> Option<NodeId> {
        let id = if self.free == NO_FREE {
            NodeId::try_from(self.nodes.len())
                .ok()
                .filter(|id| *id != NO_FREE)
                .expect("fewer than 2^32 - 1 znodes")
        } else {
            self.free
        };
        let nodes = &self.nodes;
        let name_bytes = name.as_bytes();
        let added = self.index.insert_new(
            child_hash(self.index_key, parent, name_bytes),
            id,
            |&c| {
                let n = nodes.get(c);
                n.parent == parent && n.name_bytes() == name_bytes
            },
            indexed_hash(self.index_key, nodes),
        );
        if !added {
            return None;
        }
        let node = Node::new(name, data, parent, acl, stat);
        if self.free == NO_FREE {
            self.nodes.push(node);
        } else {
            let slot = self.nodes.get_mut(id);
            assert!(slot.is_free(), "the free list holds free slots only");
            self.free = slot.acl;
            *slot = node;
        }
        self.live += 1;
        match NodeKind::of_owner(stat.ephemeral_owner) {
            NodeKind::Ephemeral(owner) => {
                Arc::make_mut(self.ephemerals.entry(owner).or_default()).insert(id);
            }
            NodeKind::Container => {
                Arc::make_mut(&mut self.containers).insert(id);
            }
            NodeKind::Ttl(_) => {
                Arc::make_mut(&mut self.ttls).insert(id);
            }
            NodeKind::Persistent => {}
        }
        let siblings = &mut self.nodes.get_mut(parent).children;
        self.long_lists.push(parent, siblings, id);
        Some(id)
    }

    /// Restores a node read from a snapshot under an already restored parent, stat as saved;
    /// `digest` is its [`node_digest`], hashed by the loader, and `path_len` its path's
    /// length. `None` if the parent already has a child of that name.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn restore_child(
        &mut self,
        parent: NodeId,
        name: &str,
        data: Option<&[u8]>,
        acl: AclId,
        stat: NodeStat,
        digest: u64,
        path_len: usize,
    ) -> Option<NodeId> {
        let id = self.attach(parent, name, data, acl, stat)?;
        Arc::make_mut(&mut self.acls).add_ref(acl);
        self.digest = self.digest.wrapping_add(digest);
        self.data_size += path_len as u64 + data_len(data) as u64;
        Some(id)
    }

    /// An empty tree whose root is as saved, with the snapshot's ACL lists interned in order,
    /// and room for the `nodes` nodes the snapshot holds.
    pub(crate) fn restored(
        acls: AclTable,
        root_data: Option<&[u8]>,
        root_acl: AclId,
        root_stat: NodeStat,
        nodes: usize,
    ) -> Self {
        let mut acls = acls;
        acls.add_ref(root_acl);
        DataTree::with_root(acls, root_data, root_acl, root_stat, nodes)
    }

    /// Removes the childless node `id` at `path`; the parent's pzxid becomes `zxid`
    /// (`DataTree.deleteNode`: a delete does not change the parent's cversion).
    pub fn delete(&mut self, path: &str, id: NodeId, zxid: i64) {
        assert_ne!(id, ROOT, "the root is never deleted");
        assert_eq!(
            self.node(id).num_children(),
            0,
            "delete of a node with children"
        );
        let (parent_path, name) = path::split_parent(path).expect("absolute path");
        // `DataTree.deleteNode`: a deleted limits node ends its quota; the covering quota
        // uncounts the node.
        if name == quota::LIMITS_NODE
            && let Some(root) = quota::root_of(parent_path)
        {
            self.quotas.remove(root);
        }
        self.charge_quota(path, -1, -data_len(self.node(id).data()));
        self.data_size -= path.len() as u64 + data_len(self.node(id).data()) as u64;
        self.digest = self.digest.wrapping_sub(self.node_hash(path, id));
        let parent = self.nodes.get(id).parent;
        self.modify(parent_path, parent, |t, p| {
            let pn = t.nodes.get_mut(p);
            t.long_lists.remove(p, id, &mut pn.children);
            pn.pzxid = pn.pzxid.max(zxid);
        });
        let hash = child_hash(self.index_key, parent, self.nodes.get(id).name_bytes());
        let removed = self.index.remove(
            hash,
            |&c| c == id,
            indexed_hash(self.index_key, &self.nodes),
        );
        assert_eq!(removed, Some(id), "indexed node");
        // A free slot: no parent, and the previous head of the free list in place of an ACL.
        let node = std::mem::replace(
            self.nodes.get_mut(id),
            Node::new("", Some(b""), NodeId::MAX, self.free, NodeStat::default()),
        );
        self.free = id;
        Arc::make_mut(&mut self.acls).release(node.acl);
        match NodeKind::of_owner(node.ephemeral_owner) {
            NodeKind::Ephemeral(owner) => {
                if let Some(set) = self.ephemerals.get_mut(&owner) {
                    Arc::make_mut(set).remove(&id);
                    if set.is_empty() {
                        self.ephemerals.remove(&owner);
                    }
                }
            }
            NodeKind::Container => {
                Arc::make_mut(&mut self.containers).remove(&id);
            }
            NodeKind::Ttl(_) => {
                Arc::make_mut(&mut self.ttls).remove(&id);
            }
            NodeKind::Persistent => {}
        }
        self.live -= 1;
    }

    /// Replaces a node's data and bumps what setData bumps.
    pub fn set_data(&mut self, path: &str, id: NodeId, data: Option<&[u8]>, zxid: i64, time: i64) {
        let grown = data_len(data) - data_len(self.node(id).data());
        self.charge_quota(path, 0, grown);
        self.data_size_grows(id, grown);
        self.modify(path, id, |t, id| {
            let n = t.nodes.get_mut(id);
            let (bytes, name_len) = pack(n.name(), data);
            n.bytes = bytes;
            n.name_len = name_len;
            n.version = n.version.wrapping_add(1);
            n.mzxid = zxid;
            n.mtime = time;
        });
    }

    /// Sets a node's dataVersion, as ZooKeeper's reconfig leaves `/zookeeper/config`'s at -1
    /// (its `DataTree.setData` with version -1).
    pub fn set_version(&mut self, path: &str, id: NodeId, version: i32) {
        self.modify(path, id, |t, id| t.nodes.get_mut(id).version = version);
    }

    /// Sets a node's stored stat, as a restore from another server's files finds it; the
    /// ephemeralOwner stays, since a node's kind never changes.
    pub fn set_stat(&mut self, path: &str, id: NodeId, s: NodeStat) {
        self.modify(path, id, |t, id| {
            let n = t.nodes.get_mut(id);
            (n.czxid, n.mzxid, n.pzxid) = (s.czxid, s.mzxid, s.pzxid);
            (n.ctime, n.mtime) = (s.ctime, s.mtime);
            (n.version, n.cversion, n.aversion) = (s.version, s.cversion, s.aversion);
        });
    }

    /// Replaces a node's ACL and bumps its aversion.
    pub fn set_acl(&mut self, path: &str, id: NodeId, acl: &[Acl]) {
        self.modify(path, id, |t, id| {
            let acls = Arc::make_mut(&mut t.acls);
            let new = acls.acquire(acl);
            let n = t.nodes.get_mut(id);
            let old = std::mem::replace(&mut n.acl, new);
            n.aversion = n.aversion.wrapping_add(1);
            acls.release(old);
        });
    }

    /// Sets a system node's data without touching its stat (used at start-up only).
    pub fn put_system_data(&mut self, path: &str, data: &[u8]) {
        let id = self.lookup(path).expect("system node exists");
        self.replace_data(path, id, data);
    }

    /// Replaces a node's data and nothing else: no version, zxid or time moves.
    fn replace_data(&mut self, path: &str, id: NodeId, data: &[u8]) {
        self.data_size_grows(id, data_len(Some(data)) - data_len(self.node(id).data()));
        self.modify(path, id, |t, id| {
            let n = t.nodes.get_mut(id);
            let (bytes, name_len) = pack(n.name(), Some(data));
            n.bytes = bytes;
            n.name_len = name_len;
        });
    }

    /// The paths that have a quota.
    pub fn quota_roots(&self) -> &QuotaRoots {
        &self.quotas
    }

    /// Adds `count` nodes and `bytes` bytes to the usage of the quota covering `path`, if any
    /// (`DataTree.updateQuotaStat`); a quota without a stats node counts nothing.
    fn charge_quota(&mut self, path: &str, count: i64, bytes: i64) {
        let Some(root) = self.quotas.covering(path) else {
            return;
        };
        let stats_path = quota::stats_path(root);
        let Some(id) = self.lookup(&stats_path) else {
            return;
        };
        let mut usage = StatsTrack::parse(self.node(id).data().unwrap_or_default());
        usage.add(count, bytes);
        self.replace_data(&stats_path, id, usage.to_string().as_bytes());
    }

    /// Writes the usage of the subtree at `root`, itself included, into its quota's stats node
    /// (`DataTree.updateQuotaForPath`).
    fn recount_quota(&mut self, root: &str) {
        let stats_path = quota::stats_path(root);
        let Some(stats) = self.lookup(&stats_path) else {
            return;
        };
        let (mut count, mut bytes) = (0, 0);
        let mut stack: Vec<NodeId> = self.lookup(root).into_iter().collect();
        while let Some(id) = stack.pop() {
            let n = self.node(id);
            count += 1;
            bytes += data_len(n.data());
            stack.extend(n.child_ids());
        }
        let usage = StatsTrack::usage(count, bytes).to_string();
        self.replace_data(&stats_path, stats, usage.as_bytes());
    }

    /// Finds the quota roots again from the limits nodes, for a tree built without
    /// [`DataTree::create`] (a loaded snapshot). The stats nodes are kept as saved: they are
    /// replicated data, and a recount could tell one replica something another was not told.
    pub(crate) fn index_quotas(&mut self) {
        self.quotas.clear();
        let mut stack: Vec<NodeId> = self.lookup(crate::system::QUOTA).into_iter().collect();
        while let Some(id) = stack.pop() {
            let n = self.node(id);
            stack.extend(n.child_ids());
            if n.name() == quota::LIMITS_NODE {
                let parent = self.path_of(n.node.parent);
                if let Some(root) = quota::root_of(&parent) {
                    self.quotas.insert(root);
                }
            }
        }
    }

    /// Recounts the usage of every quota, as ZooKeeper does when it loads its own files
    /// (`DataTree.setupQuota`): their stats may be stale.
    pub(crate) fn recount_quotas(&mut self) {
        self.index_quotas();
        let roots: Vec<String> = self.quotas.iter().map(str::to_owned).collect();
        for root in roots {
            self.recount_quota(&root);
        }
    }

    /// The limits and usage of every quota, summed per top-level namespace; a node with null
    /// data is passed over, as ZooKeeper's `QuotaMetricsUtils` passes it over.
    pub fn quota_figures(&self) -> QuotaFigures {
        let mut figures = QuotaFigures::default();
        let data = |p: &str| self.get(p).and_then(|n| n.data()).map(StatsTrack::parse);
        for root in self.quotas.iter() {
            if let Some(limits) = data(&quota::limits_path(root)) {
                figures.add_limits(root, &limits);
            }
            if let Some(usage) = data(&quota::stats_path(root)) {
                figures.add_usage(root, &usage);
            }
        }
        figures
    }

    /// ZooKeeper's `approximateDataSize` (mntr's `approximate_data_size`): the length of every
    /// node's path and data, summed, the root twice.
    pub fn approximate_data_size(&self) -> u64 {
        self.data_size
    }

    fn data_size_grows(&mut self, id: NodeId, grown: i64) {
        let copies = if id == ROOT { 2 } else { 1 };
        self.data_size = self.data_size.wrapping_add_signed(copies * grown);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_value_is_hashed_where_it_lies_into_the_same_digest() {
        let stat = NodeStat {
            czxid: 7,
            mzxid: 9,
            version: 3,
            ..NodeStat::default()
        };
        let acl = Acl::open();
        let joined = |value: &[u8]| {
            let mut b = b"/a/b".to_vec();
            b.push(1);
            b.extend_from_slice(value);
            for v in stat.longs() {
                b.extend_from_slice(&v.to_le_bytes());
            }
            for v in stat.ints() {
                b.extend_from_slice(&v.to_le_bytes());
            }
            for a in &acl {
                b.extend_from_slice(&a.perms.to_le_bytes());
                b.extend_from_slice(a.id.scheme.as_bytes());
                b.push(0);
                b.extend_from_slice(a.id.id.as_bytes());
                b.push(0);
            }
            xxh3_64(&b)
        };
        for size in [
            0,
            100,
            DIGEST_COPIED_VALUE_BYTES_MAX,
            DIGEST_COPIED_VALUE_BYTES_MAX + 1,
            1 << 20,
        ] {
            let value: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
            let digest = node_digest(&[b"/a", b"/b"], Some(&value), &stat, &acl);
            assert_eq!(digest, joined(&value), "a value of {size} bytes");
        }
    }

    fn stat(zxid: i64) -> NodeStat {
        NodeStat {
            czxid: zxid,
            mzxid: zxid,
            pzxid: zxid,
            ..Default::default()
        }
    }

    #[test]
    fn node_is_96_bytes() {
        assert_eq!(std::mem::size_of::<Node>(), 96);
    }

    #[test]
    fn create_lookup_delete() {
        let mut t = DataTree::new();
        let a = t.create("/", ROOT, "a", Some(b"x"), &Acl::open(), stat(1), 1);
        let b = t.create("/a", a, "b", None, &Acl::open(), stat(2), 1);
        assert_eq!(t.lookup("/a/b"), Some(b));
        assert_eq!(t.path_of(b), "/a/b");
        assert_eq!(t.node(b).data(), None);
        assert_eq!(t.node(a).data(), Some(&b"x"[..]));
        assert_eq!(t.node(a).wire_stat().num_children, 1);
        assert_eq!(t.node(a).stat().pzxid, 2);
        assert_eq!(t.lookup("/a/c"), None);
        assert_eq!(t.lookup("a"), None);
        t.delete("/a/b", b, 3);
        assert_eq!(t.lookup("/a/b"), None);
        assert_eq!(t.node(a).stat().pzxid, 3);
        assert_eq!(t.node(a).stat().cversion, 1);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn each_tree_keys_its_index_apart_and_a_clone_keeps_the_key() {
        let mut t = DataTree::new();
        let a = t.create("/", ROOT, "a", None, &Acl::open(), stat(1), 1);
        let mut c = t.clone();
        assert_eq!(c.index_key, t.index_key);
        let b = c.create("/a", a, "b", None, &Acl::open(), stat(2), 1);
        assert_eq!(c.lookup("/a/b"), Some(b));
        assert_eq!(c.lookup("/a"), Some(a));
        // A fixed key would give every tree the same: 64 random bits collide almost never.
        let keys: std::collections::HashSet<u64> =
            (0..8).map(|_| DataTree::new().index_key).collect();
        assert_eq!(keys.len(), 8);
    }

    #[test]
    fn digest_depends_on_content_not_history() {
        let mut t1 = DataTree::new();
        let empty = t1.digest();
        let a = t1.create("/", ROOT, "a", Some(b"x"), &Acl::open(), stat(1), 1);
        assert_ne!(t1.digest(), empty);
        t1.set_data("/a", a, Some(b"y"), 2, 0);
        let after_set = t1.digest();
        t1.set_data("/a", a, Some(b"z"), 2, 0);
        assert_ne!(t1.digest(), after_set);
        let mut t2 = t1.clone();
        t2.set_acl("/a", a, &Acl::read_only());
        assert_ne!(t1.digest(), t2.digest());
    }

    #[test]
    fn data_size_counts_paths_and_data_as_zookeeper() {
        let mut t = DataTree::new();
        // The root's alias "/", as ZooKeeper's nodes map holds it.
        assert_eq!(t.approximate_data_size(), 1);
        let a = t.create("/", ROOT, "a", Some(b"x"), &Acl::open(), stat(1), 1);
        assert_eq!(t.approximate_data_size(), 1 + 2 + 1);
        let b = t.create("/a", a, "b", None, &Acl::open(), stat(2), 1);
        assert_eq!(t.approximate_data_size(), 4 + 4);
        t.set_data("/a", a, Some(b"xyz"), 3, 0);
        assert_eq!(t.approximate_data_size(), 8 + 2);
        t.delete("/a/b", b, 4);
        assert_eq!(t.approximate_data_size(), 10 - 4);
        t.put_system_data("/", b"ab");
        assert_eq!(t.approximate_data_size(), 6 + 2 * 2);
    }

    #[test]
    fn freed_slots_are_reused() {
        let mut t = DataTree::new();
        let a = t.create("/", ROOT, "a", None, &Acl::open(), stat(1), 1);
        t.delete("/a", a, 2);
        let b = t.create("/", ROOT, "b", None, &Acl::open(), stat(3), 2);
        assert_eq!(a, b);
        assert_eq!(t.lookup("/a"), None);
        assert_eq!(t.lookup("/b"), Some(b));
    }

    /// A node as a test compares it: path, data, stat, ACL.
    type Contents = (String, Option<Vec<u8>>, NodeStat, Vec<Acl>);

    /// Every node of `t`, in path order.
    fn contents(t: &DataTree) -> Vec<Contents> {
        let mut out = Vec::new();
        let mut stack = vec![ROOT];
        while let Some(id) = stack.pop() {
            let n = t.node(id);
            out.push((
                t.path_of(id),
                n.data().map(<[u8]>::to_vec),
                n.stat(),
                n.acl().to_vec(),
            ));
            stack.extend(n.child_ids());
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// A tree of `count` children under /p, every seventh ephemeral.
    fn wide(count: usize) -> (DataTree, NodeId, Vec<NodeId>) {
        let mut t = DataTree::new();
        let p = t.create("/", ROOT, "p", None, &Acl::open(), stat(1), 1);
        let ids = (0..count)
            .map(|i| {
                let s = NodeStat {
                    ephemeral_owner: if i % 7 == 0 { 42 } else { 0 },
                    ..stat(2 + i as i64)
                };
                let name = format!("n{i}");
                t.create("/p", p, &name, Some(b"v"), &Acl::open(), s, i as i32)
            })
            .collect();
        (t, p, ids)
    }

    /// Writes in every chunk of `wide`'s tree: data, ACLs, deletes, creates into freed slots.
    fn rewrite(t: &mut DataTree, p: NodeId, ids: &[NodeId]) {
        for (i, &id) in ids.iter().enumerate() {
            let path = format!("/p/n{i}");
            match i % 4 {
                0 => t.set_data(&path, id, Some(b"changed"), 10_000, 1),
                1 => t.set_acl(&path, id, &Acl::read_only()),
                2 => t.delete(&path, id, 10_000),
                _ => {}
            }
        }
        for i in 0..ids.len() / 4 {
            let name = format!("m{i}");
            t.create("/p", p, &name, None, &Acl::open(), stat(20_000), 0);
        }
    }

    #[test]
    fn a_clone_keeps_its_tree_whatever_the_original_does_after() {
        // Enough nodes for several arena chunks and entries in most index shards.
        a_clone_keeps_its_tree(crate::arena::CHUNK_LEN * 3 + 10);
    }

    #[test]
    fn a_clone_keeps_its_tree_when_a_list_of_children_is_long() {
        // Past `children.rs`'s LONG: /p's list is kept out of its node.
        a_clone_keeps_its_tree(5_000);
    }

    fn a_clone_keeps_its_tree(count: usize) {
        let (mut t, p, ids) = wide(count);
        let copy = t.clone();
        let (before, digest) = (contents(&t), t.digest());
        rewrite(&mut t, p, &ids);
        assert_eq!(contents(&copy), before);
        assert_eq!(copy.digest(), digest);
        assert_eq!(copy.len(), count + 2);
        assert_eq!(copy.ephemerals_of(42).count(), count.div_ceil(7));
        assert_eq!(copy.lookup("/p/n2"), Some(ids[2]));
        assert_eq!(copy.lookup("/p/m0"), None);
        // The written side is what the same writes make of a tree that was never cloned.
        let (mut never_cloned, p, ids) = wide(count);
        rewrite(&mut never_cloned, p, &ids);
        assert_eq!(contents(&t), contents(&never_cloned));
        assert_eq!(t.digest(), never_cloned.digest());
        assert_eq!(t.len(), never_cloned.len());
        assert_eq!(t.lookup("/p/n2"), None);
        assert!(t.lookup("/p/m0").is_some());
        assert_eq!(
            t.ephemerals_of(42).collect::<Vec<_>>(),
            never_cloned.ephemerals_of(42).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_long_list_of_children_lists_and_counts_as_a_short_one() {
        let count = 5_000;
        let (mut t, p, ids) = wide(count);
        let copy = t.clone();
        assert!(t.node(p).child_ids().eq(ids.iter().copied()));
        assert!(t.node(p).child_ids().rev().eq(ids.iter().rev().copied()));
        rewrite(&mut t, p, &ids);
        // A quarter deleted, as many created.
        let listed: Vec<NodeId> = t.node(p).child_ids().collect();
        assert_eq!(listed.len(), count);
        assert_eq!(t.node(p).num_children(), count);
        assert_eq!(t.node(p).wire_stat().num_children as usize, count);
        let mut names: Vec<&str> = listed.iter().map(|&c| t.node(c).name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
        assert!(copy.node(p).child_ids().eq(ids.iter().copied()));
        // Emptied, the list is back in its node, and empty.
        for c in listed {
            let path = t.path_of(c);
            t.delete(&path, c, 30_000);
        }
        assert_eq!(t.node(p).num_children(), 0);
        assert_eq!(t.node(p).child_ids().count(), 0);
        assert_eq!(copy.node(p).num_children(), count);
    }

    #[test]
    fn ttl_and_container_owners_decode() {
        assert_eq!(NodeKind::of_owner(0), NodeKind::Persistent);
        assert_eq!(NodeKind::of_owner(CONTAINER_OWNER), NodeKind::Container);
        assert_eq!(NodeKind::of_owner(ttl_owner(5000)), NodeKind::Ttl(5000));
        assert_eq!(
            NodeKind::of_owner(0x0100_0000_0000_0001),
            NodeKind::Ephemeral(0x0100_0000_0000_0001)
        );
    }
}
