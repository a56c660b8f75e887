//! The (parent, name) index of the data tree: node ids in 256 hash tables ("shards") behind
//! `Arc`s, each grown a few buckets per write rather than all at once.
//!
//! A hash table that is full doubles in one go: the insert that finds it full rehashes every
//! id in it, and the index's rehash of an id reads its node (a cache miss) to hash its parent
//! and name again, about 0.3 µs an id. The 256 shards fill alike, so they all doubled within
//! a few thousand writes of each other, and each of those writes stopped applies and reads
//! for its whole shard: about 1 ms at 1,000,000 znodes, 4-17 ms at 10,000,000.
//!
//! Here a full shard starts a table of twice its room and keeps the old one beside it; every
//! later write to the shard first moves the ids of [`MOVE_PER_WRITE`] of the old table's
//! buckets over, so the old table is empty long before the new one fills, and no write moves
//! more than a few dozen ids. Lookups look in both while a shard is moving.
//!
//! The `Arc`s keep a clone cheap: a snapshot's copy shares every shard, and a write copies
//! the one shard it changes.

use std::sync::Arc;

use hashbrown::HashTable;

use crate::tree::NodeId;

/// Shards of the index. At 1,000,000 znodes a shard holds ~4,000 ids, so the first create or
/// delete in a shard after a clone copies ~20 KiB.
const SHARDS: usize = 256;

/// Buckets of a moving shard's old table emptied by each write to the shard. The new table
/// has twice the old one's room (`C`): it takes the old table's at most `C` ids, plus the
/// writes made while they move, at most `buckets / MOVE_PER_WRITE = 8C/7/64`, so the move
/// always ends long before the new table is full. A write moves at most 64 ids (about 20 µs
/// at 10,000,000 znodes); 8 buckets a write cost the load more (each move's reads of nodes
/// overlap less), for stalls already far below a millisecond.
const MOVE_PER_WRITE: usize = 64;

#[derive(Clone)]
pub(crate) struct ChildIndex {
    shards: Vec<Arc<Shard>>,
}

#[derive(Clone, Default)]
struct Shard {
    table: HashTable<NodeId>,
    /// The table `table` replaced when it was full, still being emptied into it, and the
    /// next of its buckets to move.
    moving: Option<(HashTable<NodeId>, usize)>,
}

impl ChildIndex {
    /// An index with room for about `nodes` ids before any shard grows: a snapshot's load
    /// knows its node count, and growing as it went was a fifth of the load.
    pub(crate) fn with_capacity(nodes: usize) -> Self {
        let per_shard = nodes / SHARDS;
        // Shards fill unevenly (binomially, a standard deviation of about sqrt(per_shard)):
        // an eighth more, and a little for small trees, keeps nearly every shard from growing.
        let room = if nodes == 0 {
            0
        } else {
            per_shard + per_shard / 8 + 16
        };
        ChildIndex {
            shards: (0..SHARDS)
                .map(|_| {
                    Arc::new(Shard {
                        table: HashTable::with_capacity(room),
                        moving: None,
                    })
                })
                .collect(),
        }
    }

    /// hashbrown picks a bucket from a hash's low bits and its tag from the top seven; bits
    /// 48..56 are neither, so the ids of one shard still spread over every bucket and tag.
    fn shard(hash: u64) -> usize {
        (hash >> 48) as usize % SHARDS
    }

    pub(crate) fn find(&self, hash: u64, mut eq: impl FnMut(&NodeId) -> bool) -> Option<NodeId> {
        let shard = &self.shards[Self::shard(hash)];
        match shard.table.find(hash, &mut eq) {
            Some(id) => Some(*id),
            None => shard.moving.as_ref()?.0.find(hash, eq).copied(),
        }
    }

    /// Inserts `id` unless `eq` finds an entry already there. `rehash` gives an indexed id's
    /// hash, for the ids a write moves; it is never asked for `id`'s, whose node the caller
    /// may store only once this returns.
    pub(crate) fn insert_new(
        &mut self,
        hash: u64,
        id: NodeId,
        mut eq: impl FnMut(&NodeId) -> bool,
        rehash: impl Fn(&NodeId) -> u64,
    ) -> bool {
        let shard = Arc::make_mut(&mut self.shards[Self::shard(hash)]);
        shard.move_some(&rehash);
        if shard.table.len() == shard.table.capacity() {
            shard.grow(&rehash);
        }
        if let Some((old, _)) = &shard.moving
            && old.find(hash, &mut eq).is_some()
        {
            return false;
        }
        match shard.table.entry(hash, eq, &rehash) {
            hashbrown::hash_table::Entry::Occupied(_) => false,
            hashbrown::hash_table::Entry::Vacant(slot) => {
                slot.insert(id);
                true
            }
        }
    }

    pub(crate) fn remove(&mut self, hash: u64, id: NodeId, rehash: impl Fn(&NodeId) -> u64) {
        let shard = Arc::make_mut(&mut self.shards[Self::shard(hash)]);
        match shard.table.find_entry(hash, |&c| c == id) {
            Ok(entry) => {
                entry.remove();
            }
            Err(_) => {
                let (old, _) = shard.moving.as_mut().expect("indexed node");
                old.find_entry(hash, |&c| c == id)
                    .expect("indexed node")
                    .remove();
            }
        }
        // Deletes move ids too, so that a shard that only shrinks still lets go of its old
        // table.
        shard.move_some(&rehash);
    }
}

impl Shard {
    /// Replaces the full table by one with twice its room (or, when deletes left it mostly
    /// tombstones, twice its ids) and starts moving the ids over.
    fn grow(&mut self, rehash: &impl Fn(&NodeId) -> u64) {
        if self.moving.is_some() {
            // Only when deletes during a move left tombstones that took the new table's room
            // (inserts alone cannot fill it first, by the arithmetic at MOVE_PER_WRITE):
            // finishing the move costs one pause and keeps the index right.
            self.move_all(rehash);
        }
        let room = (self.table.len() * 2).max(16);
        let old = std::mem::replace(&mut self.table, HashTable::with_capacity(room));
        self.moving = Some((old, 0));
    }

    /// Moves the ids of the next [`MOVE_PER_WRITE`] buckets of the old table, if one is being
    /// emptied, and lets it go once it is.
    fn move_some(&mut self, rehash: &impl Fn(&NodeId) -> u64) {
        let Some((old, next)) = &mut self.moving else {
            return;
        };
        let end = (*next + MOVE_PER_WRITE).min(old.num_buckets());
        for bucket in *next..end {
            if let Ok(entry) = old.get_bucket_entry(bucket) {
                let (id, _) = entry.remove();
                self.table.insert_unique(rehash(&id), id, rehash);
            }
        }
        *next = end;
        if end == old.num_buckets() {
            self.moving = None;
        }
    }

    fn move_all(&mut self, rehash: &impl Fn(&NodeId) -> u64) {
        while self.moving.is_some() {
            self.move_some(rehash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids hashed by a stand-in for (parent, name): every id is its own key.
    fn hash(id: NodeId) -> u64 {
        xxhash_rust::xxh3::xxh3_64(&id.to_le_bytes())
    }

    /// Inserts as the tree does, whose new node is not stored yet: `rehash` must not be
    /// asked for it.
    fn insert(index: &mut ChildIndex, id: NodeId) -> bool {
        let rehash = |&c: &NodeId| {
            assert_ne!(c, id, "the new id's node is not stored yet");
            hash(c)
        };
        index.insert_new(hash(id), id, |&c| c == id, rehash)
    }

    fn find(index: &ChildIndex, id: NodeId) -> Option<NodeId> {
        index.find(hash(id), |&c| c == id)
    }

    fn remove(index: &mut ChildIndex, id: NodeId) {
        index.remove(hash(id), id, |&c| hash(c));
    }

    /// Every shard's ids, old table and new.
    fn ids(index: &ChildIndex) -> usize {
        let shards = index.shards.iter();
        shards
            .map(|s| s.table.len() + s.moving.as_ref().map_or(0, |(old, _)| old.len()))
            .sum()
    }

    #[test]
    fn shards_grow_a_few_buckets_per_write_and_every_id_stays_found() {
        let mut index = ChildIndex::with_capacity(0);
        let count: NodeId = 200_000;
        let mut moves_seen = 0;
        for id in 0..count {
            let at = ChildIndex::shard(hash(id));
            let before = index.shards[at].table.capacity();
            assert!(insert(&mut index, id));
            let shard = &index.shards[at];
            // hashbrown never grew a table in place: a full one is replaced and moved.
            assert!(shard.table.capacity() == before || shard.moving.is_some());
            if shard.moving.is_some() {
                moves_seen += 1;
            }
            let again = index.insert_new(hash(id), id, |&c| c == id, |&c| hash(c));
            assert!(!again, "an id is indexed once, moved or not");
        }
        assert!(moves_seen > 1_000, "{moves_seen}");
        assert_eq!(ids(&index), count as usize);
        for id in 0..count {
            assert_eq!(find(&index, id), Some(id));
        }
        assert_eq!(find(&index, count), None);
        for id in (0..count).step_by(3) {
            remove(&mut index, id);
        }
        for id in 0..count {
            assert_eq!(find(&index, id), (id % 3 != 0).then_some(id));
        }
        assert_eq!(ids(&index), (count - count.div_ceil(3)) as usize);
    }

    #[test]
    fn deletes_finish_a_move_and_a_shard_of_tombstones_shrinks() {
        let mut index = ChildIndex::with_capacity(0);
        let count: NodeId = 100_000;
        for id in 0..count {
            insert(&mut index, id);
        }
        for id in 0..count - 1_000 {
            remove(&mut index, id);
        }
        assert!(index.shards.iter().all(|s| s.moving.is_none()));
        // Creates after mass deletes: a full table of tombstones is replaced by a small one.
        for id in count..count + 50_000 {
            insert(&mut index, id);
        }
        let largest = index.shards.iter().map(|s| s.table.capacity()).max();
        assert!(largest.unwrap() < 2_000, "{largest:?}");
        for id in count - 1_000..count + 50_000 {
            assert_eq!(find(&index, id), Some(id));
        }
    }

    #[test]
    fn a_clone_keeps_its_ids_while_the_original_moves() {
        let mut index = ChildIndex::with_capacity(0);
        for id in 0..20_000 {
            insert(&mut index, id);
        }
        let copy = index.clone();
        for id in 20_000..90_000 {
            insert(&mut index, id);
        }
        remove(&mut index, 0);
        assert_eq!(ids(&copy), 20_000);
        assert_eq!(find(&copy, 0), Some(0));
        assert_eq!(find(&copy, 20_000), None);
        assert_eq!(find(&index, 0), None);
        assert_eq!(find(&index, 89_999), Some(89_999));
    }
}
