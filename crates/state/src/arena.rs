//! A growable array stored as fixed-size chunks behind `Arc`s, the chunks themselves in
//! groups behind `Arc`s, so that a clone shares every group and costs one reference-count
//! increment per group, whatever the element count. The first write to a shared group copies
//! that group's list of chunks (`Arc::make_mut`), then the written chunk alone; the others
//! stay shared until they are written too.
//!
//! The data tree keeps its nodes here so that a snapshot's copy of the state is taken without
//! a pause proportional to the tree (docs/state.md, "Memory layout").

use std::sync::Arc;

/// Elements per chunk: small, so that writes spread over the tree while a snapshot's clone
/// lives copy little more than they touch (32 nodes, 3 KiB of nodes plus their names and
/// data, per first write to a chunk), and the chunks' own overhead stays under 2 bytes a node.
pub const CHUNK_LEN: usize = 32;

/// Chunks per group. One level of chunks made a clone one reference-count increment per
/// chunk, each a cache miss: 0.4-0.7 ms at 1,000,000 nodes and 6.7 ms at 10,000,000, with
/// applies and reads waiting. Groups of 256 chunks (8,192 nodes) make it one per group, 1,221
/// at 10,000,000; the first write to a shared group copies its 256 chunk pointers (2 KiB),
/// a few µs.
pub const GROUP_LEN: usize = 256;

type Chunk<T> = Arc<Vec<T>>;

/// Copy-on-write chunked storage, indexed by `u32`, in chunks of `CHUNK` elements and groups
/// of `GROUP` chunks: the tree's nodes take the defaults, a long list of children
/// (`children.rs`) larger chunks of its 4-byte ids.
#[derive(Debug, Clone)]
pub struct Arena<T, const CHUNK: usize = CHUNK_LEN, const GROUP: usize = GROUP_LEN> {
    /// Every group but the last holds exactly `GROUP` chunks, every chunk but the last one
    /// of all exactly `CHUNK` elements. There is no empty group or chunk.
    groups: Vec<Arc<Vec<Chunk<T>>>>,
}

impl<T, const CHUNK: usize, const GROUP: usize> Default for Arena<T, CHUNK, GROUP> {
    fn default() -> Self {
        Arena { groups: Vec::new() }
    }
}

impl<T: Clone, const CHUNK: usize, const GROUP: usize> Arena<T, CHUNK, GROUP> {
    /// An empty arena whose list of groups has room for `len` elements.
    pub fn with_capacity(len: usize) -> Self {
        Arena {
            groups: Vec::with_capacity(len.div_ceil(CHUNK * GROUP)),
        }
    }

    /// The group, the chunk within it and the element within that of index `id`.
    fn place(id: usize) -> (usize, usize, usize) {
        (
            id / (CHUNK * GROUP),
            id % (CHUNK * GROUP) / CHUNK,
            id % CHUNK,
        )
    }

    pub fn len(&self) -> usize {
        let Some(group) = self.groups.last() else {
            return 0;
        };
        let chunk = group.last().expect("no group is empty");
        (self.groups.len() - 1) * CHUNK * GROUP + (group.len() - 1) * CHUNK + chunk.len()
    }

    pub fn get(&self, id: u32) -> &T {
        let (group, chunk, at) = Self::place(id as usize);
        &self.groups[group][chunk][at]
    }

    /// The element at `id`, its group and chunk first copied if another clone shares them.
    pub fn get_mut(&mut self, id: u32) -> &mut T {
        let (group, chunk, at) = Self::place(id as usize);
        let group = Arc::make_mut(&mut self.groups[group]);
        &mut Arc::make_mut(&mut group[chunk])[at]
    }

    /// Appends `value`; returns its index.
    pub fn push(&mut self, value: T) -> usize {
        let id = self.len();
        let (_, chunk_at, at) = Self::place(id);
        if at == 0 && chunk_at == 0 {
            let mut group = Vec::with_capacity(GROUP);
            group.push(Arc::new(new_chunk::<T, CHUNK>(value)));
            self.groups.push(Arc::new(group));
            return id;
        }
        let group = Arc::make_mut(self.groups.last_mut().expect("a group has room"));
        if at == 0 {
            // A copied group or chunk has only the capacity of its length; reserving the rest
            // at once keeps each to one allocation of its final size.
            group.reserve_exact(GROUP - group.len());
            group.push(Arc::new(new_chunk::<T, CHUNK>(value)));
        } else {
            let chunk = Arc::make_mut(group.last_mut().expect("no group is empty"));
            chunk.reserve_exact(CHUNK - chunk.len());
            chunk.push(value);
        }
        id
    }

    /// Takes the last element off; a chunk or group it empties goes with it.
    pub fn pop(&mut self) -> Option<T> {
        let group = Arc::make_mut(self.groups.last_mut()?);
        let chunk = Arc::make_mut(group.last_mut().expect("no group is empty"));
        let value = chunk.pop();
        if chunk.is_empty() {
            group.pop();
            if group.is_empty() {
                self.groups.pop();
            }
        }
        value
    }

    /// Every element, in index order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        self.groups
            .iter()
            .flat_map(|g| g.iter())
            .flat_map(|c| c.iter())
    }

    /// Elements the chunks have room for.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.groups
            .iter()
            .flat_map(|g| g.iter())
            .map(|c| c.capacity())
            .sum()
    }

    /// Chunks this arena shares with a clone: those of a shared group, and shared ones of
    /// its own groups.
    #[cfg(test)]
    fn shared_chunks(&self) -> usize {
        self.groups
            .iter()
            .map(|g| {
                if Arc::strong_count(g) > 1 {
                    g.len()
                } else {
                    g.iter().filter(|c| Arc::strong_count(c) > 1).count()
                }
            })
            .sum()
    }

    /// Groups this arena shares with a clone.
    #[cfg(test)]
    fn shared_groups(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| Arc::strong_count(g) > 1)
            .count()
    }
}

fn new_chunk<T, const CHUNK: usize>(value: T) -> Vec<T> {
    let mut chunk = Vec::with_capacity(CHUNK);
    chunk.push(value);
    chunk
}

#[cfg(test)]
mod tests {
    use super::*;

    const GROUP_ELEMENTS: usize = CHUNK_LEN * GROUP_LEN;

    fn filled(n: u32) -> Arena<u32> {
        let mut a = Arena::default();
        for i in 0..n {
            assert_eq!(a.push(i), i as usize);
        }
        a
    }

    #[test]
    fn push_and_get_across_chunks() {
        let n = (CHUNK_LEN * 3 + 5) as u32;
        let a = filled(n);
        assert_eq!(a.len(), n as usize);
        for i in 0..n {
            assert_eq!(*a.get(i), i);
        }
        assert!(a.iter().copied().eq(0..n));
        assert_eq!(Arena::<u32>::default().len(), 0);
    }

    #[test]
    fn a_write_after_a_clone_copies_one_chunk_and_leaves_the_clone_alone() {
        let mut a = filled((CHUNK_LEN * 4) as u32);
        let b = a.clone();
        assert_eq!(a.shared_chunks(), 4);
        *a.get_mut(CHUNK_LEN as u32 + 1) = 7;
        assert_eq!(a.shared_chunks(), 3);
        assert_eq!(*a.get(CHUNK_LEN as u32 + 1), 7);
        assert_eq!(*b.get(CHUNK_LEN as u32 + 1), CHUNK_LEN as u32 + 1);
        drop(b);
        assert_eq!(a.shared_chunks(), 0);
    }

    #[test]
    fn a_push_after_a_clone_does_not_show_in_the_clone() {
        let mut a = filled(CHUNK_LEN as u32 + 3);
        let b = a.clone();
        a.push(99);
        assert_eq!(a.len(), CHUNK_LEN + 4);
        assert_eq!(b.len(), CHUNK_LEN + 3);
        assert_eq!(*a.get(CHUNK_LEN as u32 + 3), 99);
        // The copied last chunk was given its whole room back: one allocation, no growth.
        assert_eq!(a.capacity(), 2 * CHUNK_LEN);
    }

    #[test]
    fn a_clone_shares_groups_and_a_write_copies_one_group_and_one_chunk() {
        let n = (GROUP_ELEMENTS * 2 + CHUNK_LEN * 3 + 1) as u32;
        let mut a = filled(n);
        assert_eq!(a.len(), n as usize);
        assert!(a.iter().copied().eq(0..n));
        let b = a.clone();
        assert_eq!(a.shared_groups(), 3);
        let id = (GROUP_ELEMENTS + CHUNK_LEN * 5 + 2) as u32;
        *a.get_mut(id) = 7;
        assert_eq!(a.shared_groups(), 2);
        assert_eq!(a.shared_chunks(), GROUP_LEN * 2 + 4 - 1);
        assert_eq!(*a.get(id), 7);
        assert_eq!(*b.get(id), id);
        // Pushing past the last group's end starts a group the clone never sees.
        for i in n..(GROUP_ELEMENTS * 3 + 1) as u32 {
            a.push(i);
        }
        assert_eq!(a.len(), GROUP_ELEMENTS * 3 + 1);
        assert_eq!(b.len(), n as usize);
        assert_eq!(
            *a.get((GROUP_ELEMENTS * 3) as u32),
            (GROUP_ELEMENTS * 3) as u32
        );
        drop(b);
        assert_eq!(a.shared_chunks(), 0);
    }

    #[test]
    fn pops_empty_chunks_and_groups_and_leave_a_clone_alone() {
        // Chunks of 4, groups of 2: 8 elements a group.
        let mut a: Arena<u32, 4, 2> = Arena::default();
        for i in 0..19 {
            a.push(i);
        }
        let kept = a.clone();
        for expected in (0..19).rev() {
            assert_eq!(a.pop(), Some(expected));
            assert_eq!(a.len(), expected as usize);
            assert!(a.iter().copied().eq(0..expected));
            let chunks: usize = a.groups.iter().map(|g| g.len()).sum();
            assert_eq!(chunks, (expected as usize).div_ceil(4));
            assert_eq!(a.groups.len(), (expected as usize).div_ceil(8));
        }
        assert_eq!(a.pop(), None);
        assert!(kept.iter().copied().eq(0..19));
        assert!(kept.iter().rev().copied().eq((0..19).rev()));
        // Pushes after pops fill the same places again.
        for i in 0..10 {
            a.push(i);
        }
        assert!(a.iter().copied().eq(0..10));
    }
}
