//! A growable array stored as fixed-size chunks behind `Arc`s, so that a clone shares every
//! chunk and costs one reference-count increment per chunk, whatever the element count. The
//! first write to a shared chunk copies that chunk alone (`Arc::make_mut`); the others stay
//! shared until they are written too.
//!
//! The data tree keeps its nodes here so that a snapshot's copy of the state is taken without
//! a pause proportional to the tree (docs/state.md, "Memory layout").

use std::sync::Arc;

/// Elements per chunk: small, so that writes spread over the tree while a snapshot's clone
/// lives copy little more than they touch (32 nodes, 3 KiB of nodes plus their names and
/// data, per first write to a chunk); large enough that a clone of 1,000,000 nodes is 31,000
/// reference-count increments (~1 ms) and the chunks' own overhead under 2 bytes a node.
pub const CHUNK_LEN: usize = 32;

/// Copy-on-write chunked storage, indexed by `u32`.
#[derive(Debug, Clone)]
pub struct Arena<T> {
    /// Every chunk but the last holds exactly [`CHUNK_LEN`] elements; the last holds 1 to
    /// [`CHUNK_LEN`]. There is no empty chunk.
    chunks: Vec<Arc<Vec<T>>>,
}

impl<T> Default for Arena<T> {
    fn default() -> Self {
        Arena { chunks: Vec::new() }
    }
}

fn place(id: u32) -> (usize, usize) {
    let id = id as usize;
    (id / CHUNK_LEN, id % CHUNK_LEN)
}

impl<T: Clone> Arena<T> {
    /// An empty arena whose list of chunks has room for `len` elements.
    pub fn with_capacity(len: usize) -> Self {
        Arena {
            chunks: Vec::with_capacity(len.div_ceil(CHUNK_LEN)),
        }
    }

    pub fn len(&self) -> usize {
        match self.chunks.last() {
            None => 0,
            Some(last) => (self.chunks.len() - 1) * CHUNK_LEN + last.len(),
        }
    }

    pub fn get(&self, id: u32) -> &T {
        let (chunk, at) = place(id);
        &self.chunks[chunk][at]
    }

    /// The element at `id`, its chunk first copied if another clone shares it.
    pub fn get_mut(&mut self, id: u32) -> &mut T {
        let (chunk, at) = place(id);
        &mut Arc::make_mut(&mut self.chunks[chunk])[at]
    }

    /// Appends `value`; returns its index.
    pub fn push(&mut self, value: T) -> usize {
        let id = self.len();
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK_LEN => {
                let chunk = Arc::make_mut(last);
                // A copied chunk has only the capacity of its length; reserving the rest at
                // once keeps a chunk to one allocation of its final size.
                chunk.reserve_exact(CHUNK_LEN - chunk.len());
                chunk.push(value);
            }
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK_LEN);
                chunk.push(value);
                self.chunks.push(Arc::new(chunk));
            }
        }
        id
    }

    #[cfg(test)]
    fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// Elements the chunks have room for.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.chunks.iter().map(|c| c.capacity()).sum()
    }

    /// Chunks this arena shares with a clone.
    #[cfg(test)]
    fn shared_chunks(&self) -> usize {
        self.chunks
            .iter()
            .filter(|c| Arc::strong_count(c) > 1)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
