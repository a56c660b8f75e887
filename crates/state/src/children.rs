//! Where a parent's children are kept: a short list in the parent's node, a long one here,
//! in chunks, with each child's place.
//!
//! A short list is a plain vector of 4-byte ids in the node, 8 bytes and no allocation for
//! the leaves that most nodes are. Two things go wrong with one vector for the queues, locks
//! and logs that grow a parent to a million children:
//! - a delete scanned the list for its child and shifted every id after it, so it cost as much
//!   as its parent had children (15,400 deletes a second against 65,000 creates);
//! - a node is copied whole when its chunk of the arena is first written after a snapshot's
//!   clone, list included: 0.9-5.6 ms of stopped applies at 200,000-800,000 children, and the
//!   same again whenever any of the 31 nodes beside it in its chunk was written.
//!
//! So a list reaching [`LONG`] ids moves out of its node into a [`LongList`]: the ids in an
//! [`Arena`] of 4 KiB chunks, copied one chunk at a time after a clone, and each child's place
//! in a [`ShardedTable`], so that a delete finds its child without a scan. A freed place takes
//! the list's last child, short or long (ZooKeeper keeps children in a hash set and lists them
//! in no particular order either). Below [`SHORT`] ids a long list moves back into its node.
//!
//! Which children move where depends only on the list and the deleted child, never on where
//! the list is kept: replicas that reached the same list by different histories (a snapshot's
//! load, a log's replay) keep listing the same order.

use std::sync::Arc;

use hashbrown::HashMap;
use thin_vec::ThinVec;
use xxhash_rust::xxh3::xxh3_64;

use crate::arena::Arena;
use crate::sharded_table::ShardedTable;
use crate::tree::NodeId;

/// A list moves out of its node when it reaches this length: below it a scan of a few
/// kilobytes costs less than the places would...
const LONG: usize = 4096;
/// ... and back below this one, so that a list hovering at the mark does not move each time.
const SHORT: usize = LONG / 4;

/// Ids per chunk of a long list: 4 KiB, the most a write copies after a snapshot's clone.
const CHUNK: usize = 1024;
/// Chunks per group: 65,536 ids. A clone of a list of 1,000,000 shares 16 groups.
const GROUP: usize = 64;

/// Shards of one list's places: at 1,000,000 children a shard holds ~16,000, so the first
/// delete after a snapshot's clone copies ~200 KiB of them, not 16 MiB (a 14 ms stall).
const SHARDS: usize = 64;

/// The ids of a long list, in order.
pub(crate) type Ids = Arena<NodeId, CHUNK, GROUP>;

/// A long list: its ids, and each child's place among them.
#[derive(Clone)]
struct LongList {
    ids: Ids,
    places: ShardedTable<(NodeId, u32)>,
}

impl LongList {
    fn of(short: &[NodeId]) -> LongList {
        let mut list = LongList {
            ids: Ids::with_capacity(short.len()),
            places: ShardedTable::with_capacity(SHARDS, short.len()),
        };
        for &child in short {
            list.push(child);
        }
        list
    }

    fn push(&mut self, child: NodeId) {
        let at = place(self.ids.push(child));
        let eq = |e: &(NodeId, u32)| e.0 == child;
        self.places
            .insert_new(place_hash(child), (child, at), eq, placed_hash);
    }

    fn remove(&mut self, child: NodeId) {
        let (_, at) = self
            .places
            .remove(place_hash(child), |e| e.0 == child, placed_hash)
            .expect("a parent places its child");
        let last = self.ids.pop().expect("a long list is not empty");
        if (at as usize) < self.ids.len() {
            *self.ids.get_mut(at) = last;
            let found = self
                .places
                .find_mut(place_hash(last), |e| e.0 == last, placed_hash);
            found.expect("a parent places its child").1 = at;
        }
    }
}

fn place_hash(child: NodeId) -> u64 {
    xxh3_64(&child.to_le_bytes())
}

fn placed_hash(&(child, _): &(NodeId, u32)) -> u64 {
    place_hash(child)
}

/// The long lists of children, by parent. Copy-on-write as the rest of the tree: a clone
/// shares every list's groups and places' shards, and a change copies the group, chunk and
/// shard it touches.
#[derive(Clone, Default)]
pub(crate) struct LongLists {
    parents: Arc<HashMap<NodeId, LongList>>,
}

impl LongLists {
    /// The long list of `parent`, whose node's own list is empty; `None` if it has none.
    pub(crate) fn get(&self, parent: NodeId) -> Option<&Ids> {
        if self.parents.is_empty() {
            return None;
        }
        self.parents.get(&parent).map(|list| &list.ids)
    }

    /// Appends `child` to the children of `parent`, whose node holds `short`.
    pub(crate) fn push(&mut self, parent: NodeId, short: &mut ThinVec<NodeId>, child: NodeId) {
        if short.is_empty() && self.parents.contains_key(&parent) {
            let parents = Arc::make_mut(&mut self.parents);
            parents.get_mut(&parent).expect("just found").push(child);
            return;
        }
        short.push(child);
        if short.len() >= LONG {
            let list = LongList::of(&std::mem::take(short));
            Arc::make_mut(&mut self.parents).insert(parent, list);
        }
    }

    /// Takes `child` out of the children of `parent`, whose node holds `short`; the last child
    /// takes its place. A short list's memory shrinks with it, so that an emptied queue does
    /// not keep the room its peak needed.
    pub(crate) fn remove(&mut self, parent: NodeId, child: NodeId, short: &mut ThinVec<NodeId>) {
        if short.is_empty() {
            let parents = Arc::make_mut(&mut self.parents);
            let list = parents.get_mut(&parent).expect("a parent lists its child");
            list.remove(child);
            if list.ids.len() < SHORT {
                *short = list.ids.iter().copied().collect();
                parents.remove(&parent);
            }
            return;
        }
        let at = short
            .iter()
            .position(|&c| c == child)
            .expect("a parent lists its child");
        short.swap_remove(at);
        if short.is_empty() {
            *short = ThinVec::new();
        } else if short.len() * 4 < short.capacity() && short.capacity() > 64 {
            short.shrink_to_fit();
        }
    }
}

/// A place in a list: lists are shorter than the 2^32 nodes a tree can hold.
fn place(at: usize) -> u32 {
    u32::try_from(at).expect("fewer than 2^32 children")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parent's children as the tree keeps them: its node's list and the long lists.
    #[derive(Clone, Default)]
    struct Parent {
        short: ThinVec<NodeId>,
        lists: LongLists,
    }

    const P: NodeId = 7;

    impl Parent {
        /// Pushes `ids` one by one, as a tree's creates do.
        fn grown(ids: impl IntoIterator<Item = NodeId>) -> Parent {
            let mut p = Parent::default();
            for id in ids {
                p.lists.push(P, &mut p.short, id);
            }
            p
        }

        fn remove(&mut self, child: NodeId) {
            self.lists.remove(P, child, &mut self.short);
        }

        fn is_long(&self) -> bool {
            self.lists.get(P).is_some()
        }

        /// The children in order, each long list's places checked against it.
        fn listed(&self) -> Vec<NodeId> {
            let Some(list) = self.lists.parents.get(&P) else {
                return self.short.to_vec();
            };
            assert!(self.short.is_empty());
            assert_eq!(list.places.len(), list.ids.len());
            for (at, &c) in list.ids.iter().enumerate() {
                let found = list.places.find(place_hash(c), |e| e.0 == c);
                assert_eq!(found, Some(&(c, place(at))), "child {c}");
            }
            list.ids.iter().copied().collect()
        }
    }

    #[test]
    fn a_short_list_moves_its_last_child_into_the_freed_place() {
        let mut p = Parent::grown([10, 11, 12, 13]);
        p.remove(11);
        assert_eq!(p.listed(), [10, 13, 12]);
        assert!(!p.is_long());
    }

    #[test]
    fn a_long_list_moves_out_of_its_node_and_back() {
        let n = LONG as NodeId + 2 * CHUNK as NodeId + 100;
        let mut p = Parent::grown(100..100 + n);
        assert!(p.is_long());
        assert_eq!(p.short.capacity(), 0);
        assert_eq!(p.listed(), (100..100 + n).collect::<Vec<_>>());
        // Oldest first, as a queue drains; then from the middle.
        for id in 100..100 + n / 2 {
            p.remove(id);
            p.listed();
        }
        let mut left = p.listed();
        while let Some(id) = left.get(left.len() / 2).copied() {
            left.retain(|&c| c != id);
            p.remove(id);
            let mut listed = p.listed();
            listed.sort_unstable();
            let mut expected = left.clone();
            expected.sort_unstable();
            assert_eq!(listed, expected);
            assert_eq!(p.is_long(), listed.len() >= SHORT);
        }
        assert!(p.short.is_empty());
        assert_eq!(p.short.capacity(), 0);
        assert!(p.lists.parents.is_empty());
    }

    #[test]
    fn the_order_does_not_depend_on_where_the_list_is_kept() {
        // One history grows past the mark and shrinks back; the other starts from the list
        // the first reached, as a snapshot's load would. Their deletes move the same children.
        let mut a = Parent::grown(0..LONG as NodeId);
        for id in 0..(LONG - SHORT) as NodeId {
            a.remove(id * 7 % LONG as NodeId);
        }
        assert!(a.is_long());
        let mut b = Parent::grown(a.listed());
        assert!(!b.is_long());
        for id in a.listed().iter().rev().step_by(3) {
            a.remove(*id);
            b.remove(*id);
            assert_eq!(a.listed(), b.listed());
        }
    }

    #[test]
    fn a_clone_keeps_its_list_while_the_original_changes() {
        let mut p = Parent::grown(0..(LONG + CHUNK) as NodeId);
        let kept = p.clone();
        p.remove(0);
        p.lists.push(P, &mut p.short, 99_999);
        assert_eq!(
            kept.listed(),
            (0..(LONG + CHUNK) as NodeId).collect::<Vec<_>>()
        );
        let mut expected: Vec<NodeId> = (0..(LONG + CHUNK) as NodeId).collect();
        expected.swap_remove(0);
        expected.push(99_999);
        assert_eq!(p.listed(), expected);
    }
}
