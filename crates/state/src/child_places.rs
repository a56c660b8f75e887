//! How a delete takes a child out of its parent's list: in constant time, whatever the list's
//! length.
//!
//! A parent's children are a plain vector of node ids, 4 bytes each. Taking one out used to
//! mean a scan to find it and a shift of every id after it, so a delete cost as much as its
//! parent had children: the queues, locks and logs that grow a parent to a million children
//! deleted 15,400 znodes a second against 65,000 creates. Now the freed place takes the list's
//! last child (ZooKeeper keeps children in a hash set and lists them in no particular order
//! either), and a parent with [`INDEXED`] children or more also keeps each child's place, so
//! the scan goes too. Below that, a scan of a few kilobytes costs less than the map would.
//!
//! Which children move where depends only on the list and the deleted child, never on whether
//! a parent's places are kept: replicas that reached the same list by different histories (a
//! snapshot's load, a log's replay) keep listing the same order.

use std::sync::Arc;

use hashbrown::HashMap;
use hashbrown::hash_map::Entry;
use thin_vec::ThinVec;
use xxhash_rust::xxh3::xxh3_64;

use crate::sharded_table::ShardedTable;
use crate::tree::NodeId;

/// A parent gets its places map when its list reaches this length...
const INDEXED: usize = 4096;
/// ... and loses it below this one, so that a list hovering at the mark does not rebuild it.
const UNINDEXED: usize = INDEXED / 4;

/// Shards of one parent's places: at 1,000,000 children a shard holds ~16,000, so the first
/// delete after a snapshot's clone copies ~200 KiB of them, not 16 MiB (a 14 ms stall).
const SHARDS: usize = 64;

/// Each child of one long list, with its place in the list.
type Places = ShardedTable<(NodeId, u32)>;

fn place_hash(child: NodeId) -> u64 {
    xxh3_64(&child.to_le_bytes())
}

fn placed_hash(&(child, _): &(NodeId, u32)) -> u64 {
    place_hash(child)
}

/// The places of the children of every parent with a long list. Copy-on-write as the rest of
/// the tree: a clone shares every shard of every parent's places, and a change copies the
/// one shard it touches.
#[derive(Clone, Default)]
pub(crate) struct ChildPlaces {
    parents: Arc<HashMap<NodeId, Places>>,
}

impl ChildPlaces {
    /// `children`, the list of `parent`, has just had its last id pushed.
    pub(crate) fn pushed(&mut self, parent: NodeId, children: &[NodeId]) {
        if children.len() < INDEXED {
            return;
        }
        match Arc::make_mut(&mut self.parents).entry(parent) {
            Entry::Vacant(slot) => {
                let mut places = ShardedTable::with_capacity(SHARDS, children.len());
                for (at, &child) in children.iter().enumerate() {
                    places.insert_new(
                        place_hash(child),
                        (child, place(at)),
                        |e| e.0 == child,
                        placed_hash,
                    );
                }
                slot.insert(places);
            }
            Entry::Occupied(places) => {
                let (&child, before) = children.split_last().expect("pushed to");
                let placed = (child, place(before.len()));
                let eq = |e: &(NodeId, u32)| e.0 == child;
                places
                    .into_mut()
                    .insert_new(place_hash(child), placed, eq, placed_hash);
            }
        }
    }

    /// Takes `child` out of `children`, the list of `parent`; the last child takes its place.
    /// The list's memory shrinks with it, so that an emptied queue does not keep the room its
    /// peak needed.
    pub(crate) fn remove(&mut self, parent: NodeId, child: NodeId, children: &mut ThinVec<NodeId>) {
        if self.parents.contains_key(&parent) {
            let parents = Arc::make_mut(&mut self.parents);
            let places = parents.get_mut(&parent).expect("just found");
            let (_, at) = places
                .remove(place_hash(child), |e| e.0 == child, placed_hash)
                .expect("parent places its child");
            children.swap_remove(at as usize);
            if children.len() < UNINDEXED {
                parents.remove(&parent);
            } else if let Some(&moved) = children.get(at as usize) {
                let found = places.find_mut(place_hash(moved), |e| e.0 == moved, placed_hash);
                found.expect("parent places its child").1 = at;
            }
        } else {
            let at = children
                .iter()
                .position(|&c| c == child)
                .expect("parent lists its child");
            children.swap_remove(at);
        }
        if children.is_empty() {
            *children = ThinVec::new();
        } else if children.len() * 4 < children.capacity() && children.capacity() > 64 {
            children.shrink_to_fit();
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

    /// Pushes `ids` one by one, as a tree's creates do.
    fn grown(
        places: &mut ChildPlaces,
        parent: NodeId,
        ids: impl IntoIterator<Item = NodeId>,
    ) -> ThinVec<NodeId> {
        let mut children = ThinVec::new();
        for id in ids {
            children.push(id);
            places.pushed(parent, &children);
        }
        children
    }

    /// Every kept place points at its child.
    fn check(places: &ChildPlaces, parent: NodeId, children: &[NodeId]) {
        if let Some(map) = places.parents.get(&parent) {
            assert_eq!(map.len(), children.len());
            for (at, &c) in children.iter().enumerate() {
                let found = map.find(place_hash(c), |e| e.0 == c);
                assert_eq!(found, Some(&(c, place(at))), "child {c}");
            }
        }
    }

    #[test]
    fn a_short_list_moves_its_last_child_into_the_freed_place() {
        let mut places = ChildPlaces::default();
        let mut children = grown(&mut places, 1, [10, 11, 12, 13]);
        places.remove(1, 11, &mut children);
        assert_eq!(children.as_slice(), &[10, 13, 12]);
        assert!(places.parents.is_empty());
    }

    #[test]
    fn a_long_list_keeps_places_and_drops_them_when_it_shrinks() {
        let mut places = ChildPlaces::default();
        let n = INDEXED as NodeId + 100;
        let mut children = grown(&mut places, 7, 100..100 + n);
        check(&places, 7, &children);
        assert!(places.parents.contains_key(&7));
        // Oldest first, as a queue drains; then from the middle.
        for id in 100..100 + n / 2 {
            places.remove(7, id, &mut children);
            check(&places, 7, &children);
        }
        let mut left: Vec<NodeId> = children.to_vec();
        while let Some(id) = left.get(left.len() / 2).copied() {
            left.retain(|&c| c != id);
            places.remove(7, id, &mut children);
            check(&places, 7, &children);
            let mut listed = children.to_vec();
            listed.sort_unstable();
            let mut expected = left.clone();
            expected.sort_unstable();
            assert_eq!(listed, expected);
        }
        assert!(children.is_empty());
        assert_eq!(children.capacity(), 0);
        assert!(places.parents.is_empty());
    }

    #[test]
    fn the_order_does_not_depend_on_whether_places_are_kept() {
        // One history grows past the mark and shrinks back; the other starts from the list
        // the first reached, as a snapshot's load would. Their deletes move the same children.
        let mut a = ChildPlaces::default();
        let mut long = grown(&mut a, 1, 0..INDEXED as NodeId);
        for id in 0..(INDEXED - UNINDEXED) as NodeId {
            a.remove(1, id * 7 % INDEXED as NodeId, &mut long);
        }
        assert!(a.parents.contains_key(&1));
        let mut b = ChildPlaces::default();
        let mut loaded = grown(&mut b, 1, long.iter().copied());
        assert!(!b.parents.contains_key(&1));
        for id in long.clone().iter().rev().step_by(3) {
            a.remove(1, *id, &mut long);
            b.remove(1, *id, &mut loaded);
            assert_eq!(long, loaded);
        }
    }

    #[test]
    fn a_clone_keeps_its_places_while_the_original_changes() {
        let mut places = ChildPlaces::default();
        let mut children = grown(&mut places, 3, 0..INDEXED as NodeId);
        let (kept_places, kept_children) = (places.clone(), children.clone());
        places.remove(3, 0, &mut children);
        check(&kept_places, 3, &kept_children);
        check(&places, 3, &children);
    }
}
