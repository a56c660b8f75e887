//! A hash table for the tree's large indexes (the (parent, name) index, the places of a long
//! list of children): split into shards behind `Arc`s, each shard grown a few buckets per
//! write rather than all at once, so that neither a snapshot's clone nor growth stops the
//! writes for long.
//!
//! A hash table that is full doubles in one go: the insert that finds it full rehashes every
//! entry. The (parent, name) index's rehash of an id reads its node (a cache miss) to hash its
//! parent and name again, about 0.3 µs an id; its 256 shards fill alike, so they all doubled
//! within a few thousand writes of each other, and each of those writes stopped applies and
//! reads for its whole shard: about 1 ms at 1,000,000 znodes, 4-17 ms at 10,000,000. A parent
//! of 1,000,000 children doubled its one map of places for 20 ms.
//!
//! Here a full shard starts a table of twice its room and keeps the old one beside it; every
//! later write to the shard first moves the entries of [`MOVE_PER_WRITE`] of the old table's
//! buckets over, so the old table is empty long before the new one fills, and no write moves
//! more than a few dozen entries. Lookups look in both while a shard is moving.
//!
//! A clone shares every shard; a write copies the one shard it changes.

use std::sync::Arc;

use hashbrown::HashTable;

/// Buckets of a moving shard's old table emptied by each write to the shard. The new table
/// has twice the old one's room (`C`): it takes the old table's at most `C` entries, plus the
/// writes made while they move, at most `buckets / MOVE_PER_WRITE = 8C/7/64`, so the move
/// always ends long before the new table is full. A write moves at most 64 entries (about
/// 20 µs for the index at 10,000,000 znodes); 8 buckets a write cost a load more (each move's
/// reads of nodes overlap less), for stalls already far below a millisecond.
const MOVE_PER_WRITE: usize = 64;

#[derive(Clone)]
pub(crate) struct ShardedTable<T> {
    shards: Vec<Arc<Shard<T>>>,
}

#[derive(Clone)]
struct Shard<T> {
    table: HashTable<T>,
    /// The table `table` replaced when it was full, still being emptied into it, and the
    /// next of its buckets to move.
    moving: Option<(HashTable<T>, usize)>,
}

impl<T: Clone> ShardedTable<T> {
    /// `shards` shards with room for about `entries` entries before any grows.
    pub(crate) fn with_capacity(shards: usize, entries: usize) -> Self {
        let per_shard = entries / shards;
        // Shards fill unevenly (binomially, a standard deviation of about sqrt(per_shard)):
        // an eighth more, and a little for small tables, keeps nearly every shard from growing.
        let room = if entries == 0 {
            0
        } else {
            per_shard + per_shard / 8 + 16
        };
        let shard = Shard {
            table: HashTable::with_capacity(room),
            moving: None,
        };
        ShardedTable {
            shards: (0..shards).map(|_| Arc::new(shard.clone())).collect(),
        }
    }

    /// hashbrown picks a bucket from a hash's low bits and its tag from the top seven; bits
    /// 48..56 are neither, so the entries of one shard still spread over every bucket and tag.
    fn shard(&self, hash: u64) -> usize {
        (hash >> 48) as usize % self.shards.len()
    }

    pub(crate) fn find(&self, hash: u64, mut eq: impl FnMut(&T) -> bool) -> Option<&T> {
        let shard = &self.shards[self.shard(hash)];
        match shard.table.find(hash, &mut eq) {
            Some(found) => Some(found),
            None => shard.moving.as_ref()?.0.find(hash, eq),
        }
    }

    /// Inserts `value` unless `eq` finds an entry already there. `rehash` gives a stored
    /// entry's hash, for the entries a write moves; it is never asked for `value`'s, so the
    /// caller may make that hashable only once this returns (the index's new node).
    pub(crate) fn insert_new(
        &mut self,
        hash: u64,
        value: T,
        mut eq: impl FnMut(&T) -> bool,
        rehash: impl Fn(&T) -> u64,
    ) -> bool {
        let at = self.shard(hash);
        let shard = Arc::make_mut(&mut self.shards[at]);
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
                slot.insert(value);
                true
            }
        }
    }

    /// The entry `eq` finds, to change in place (not in any way that changes its hash).
    pub(crate) fn find_mut(
        &mut self,
        hash: u64,
        mut eq: impl FnMut(&T) -> bool,
        rehash: impl Fn(&T) -> u64,
    ) -> Option<&mut T> {
        let at = self.shard(hash);
        let shard = Arc::make_mut(&mut self.shards[at]);
        shard.move_some(&rehash);
        match shard.table.find_mut(hash, &mut eq) {
            Some(found) => Some(found),
            None => shard.moving.as_mut()?.0.find_mut(hash, eq),
        }
    }

    /// Every shard's entries, in its old table and its new.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        let shards = self.shards.iter();
        shards
            .map(|s| s.table.len() + s.moving.as_ref().map_or(0, |(old, _)| old.len()))
            .sum()
    }

    /// Takes out the entry `eq` finds.
    pub(crate) fn remove(
        &mut self,
        hash: u64,
        mut eq: impl FnMut(&T) -> bool,
        rehash: impl Fn(&T) -> u64,
    ) -> Option<T> {
        let at = self.shard(hash);
        let shard = Arc::make_mut(&mut self.shards[at]);
        let removed = match shard.table.find_entry(hash, &mut eq) {
            Ok(entry) => Some(entry.remove().0),
            Err(_) => match &mut shard.moving {
                Some((old, _)) => old.find_entry(hash, eq).ok().map(|e| e.remove().0),
                None => None,
            },
        };
        // Deletes move entries too, so that a shard that only shrinks still lets go of its
        // old table.
        shard.move_some(&rehash);
        removed
    }
}

impl<T> Shard<T> {
    /// Replaces the full table by one with twice its room (or, when deletes left it mostly
    /// tombstones, twice its entries) and starts moving the entries over.
    fn grow(&mut self, rehash: &impl Fn(&T) -> u64) {
        if self.moving.is_some() {
            // Only when deletes during a move left tombstones that took the new table's room
            // (inserts alone cannot fill it first, by the arithmetic at MOVE_PER_WRITE):
            // finishing the move costs one pause and keeps the table right.
            self.move_all(rehash);
        }
        let room = (self.table.len() * 2).max(16);
        let old = std::mem::replace(&mut self.table, HashTable::with_capacity(room));
        self.moving = Some((old, 0));
    }

    /// Moves the entries of the next [`MOVE_PER_WRITE`] buckets of the old table, if one is
    /// being emptied, and lets it go once it is.
    fn move_some(&mut self, rehash: &impl Fn(&T) -> u64) {
        let Some((old, next)) = &mut self.moving else {
            return;
        };
        let end = (*next + MOVE_PER_WRITE).min(old.num_buckets());
        for bucket in *next..end {
            if let Ok(entry) = old.get_bucket_entry(bucket) {
                let (value, _) = entry.remove();
                self.table.insert_unique(rehash(&value), value, rehash);
            }
        }
        *next = end;
        if end == old.num_buckets() {
            self.moving = None;
        }
    }

    fn move_all(&mut self, rehash: &impl Fn(&T) -> u64) {
        while self.moving.is_some() {
            self.move_some(rehash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHARDS: usize = 256;

    /// Entries hashed by a stand-in for the index's (parent, name): every id is its own key.
    fn hash(id: u32) -> u64 {
        xxhash_rust::xxh3::xxh3_64(&id.to_le_bytes())
    }

    /// Inserts as the tree does, whose new node is not stored yet: `rehash` must not be
    /// asked for it.
    fn insert(table: &mut ShardedTable<u32>, id: u32) -> bool {
        let rehash = |&c: &u32| {
            assert_ne!(c, id, "the new id's node is not stored yet");
            hash(c)
        };
        table.insert_new(hash(id), id, |&c| c == id, rehash)
    }

    fn find(table: &ShardedTable<u32>, id: u32) -> Option<u32> {
        table.find(hash(id), |&c| c == id).copied()
    }

    fn remove(table: &mut ShardedTable<u32>, id: u32) -> Option<u32> {
        table.remove(hash(id), |&c| c == id, |&c| hash(c))
    }

    #[test]
    fn shards_grow_a_few_buckets_per_write_and_every_entry_stays_found() {
        let mut table = ShardedTable::with_capacity(SHARDS, 0);
        let count = 200_000;
        let mut moving_seen = 0;
        for id in 0..count {
            let at = table.shard(hash(id));
            let before = table.shards[at].table.capacity();
            assert!(insert(&mut table, id));
            let shard = &table.shards[at];
            // hashbrown never grew a table in place: a full one is replaced and moved.
            assert!(shard.table.capacity() == before || shard.moving.is_some());
            if shard.moving.is_some() {
                moving_seen += 1;
            }
            let again = table.insert_new(hash(id), id, |&c| c == id, |&c| hash(c));
            assert!(!again, "an entry is stored once, moved or not");
        }
        assert!(moving_seen > 1_000, "{moving_seen}");
        assert_eq!(table.len(), count as usize);
        for id in 0..count {
            assert_eq!(find(&table, id), Some(id));
        }
        assert_eq!(find(&table, count), None);
        for id in (0..count).step_by(3) {
            assert_eq!(remove(&mut table, id), Some(id));
        }
        assert_eq!(remove(&mut table, 0), None);
        for id in 0..count {
            assert_eq!(find(&table, id), (id % 3 != 0).then_some(id));
        }
        assert_eq!(table.len(), (count - count.div_ceil(3)) as usize);
    }

    #[test]
    fn an_entry_changed_in_place_is_found_changed_while_its_shard_moves() {
        let mut table = ShardedTable::with_capacity(4, 0);
        let key = |&(k, _): &(u32, u32)| hash(k);
        for k in 0..10_000 {
            assert!(table.insert_new(hash(k), (k, 0), |e| e.0 == k, key));
            let found = table.find_mut(hash(k / 2), |e| e.0 == k / 2, key);
            found.expect("stored").1 += 1;
        }
        for k in 0..10_000 {
            let expected = if k < 5_000 { 2 } else { 0 };
            assert_eq!(table.find(hash(k), |e| e.0 == k), Some(&(k, expected)));
        }
    }

    #[test]
    fn deletes_finish_a_move_and_a_shard_of_tombstones_shrinks() {
        let mut table = ShardedTable::with_capacity(SHARDS, 0);
        let count = 100_000;
        for id in 0..count {
            insert(&mut table, id);
        }
        for id in 0..count - 1_000 {
            remove(&mut table, id);
        }
        assert!(table.shards.iter().all(|s| s.moving.is_none()));
        // Creates after mass deletes: a full table of tombstones is replaced by a small one.
        for id in count..count + 50_000 {
            insert(&mut table, id);
        }
        let largest = table.shards.iter().map(|s| s.table.capacity()).max();
        assert!(largest.unwrap() < 2_000, "{largest:?}");
        for id in count - 1_000..count + 50_000 {
            assert_eq!(find(&table, id), Some(id));
        }
    }

    #[test]
    fn a_clone_keeps_its_entries_while_the_original_moves() {
        let mut table = ShardedTable::with_capacity(SHARDS, 0);
        for id in 0..20_000 {
            insert(&mut table, id);
        }
        let copy = table.clone();
        for id in 20_000..90_000 {
            insert(&mut table, id);
        }
        remove(&mut table, 0);
        assert_eq!(copy.len(), 20_000);
        assert_eq!(find(&copy, 0), Some(0));
        assert_eq!(find(&copy, 20_000), None);
        assert_eq!(find(&table, 0), None);
        assert_eq!(find(&table, 89_999), Some(89_999));
    }
}
