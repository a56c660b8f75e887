//! The names a reply lists: a node's children, or the paths of a recursive list.

use std::fmt;

use crate::jute::{DecodeError, Reader, Record, Writer};

/// A list of names kept as jute writes a vector of `ustring`s, less the count: each name's
/// big-endian i32 length, then its UTF-8 bytes, all in one buffer.
///
/// Why not `Vec<String>`: a getChildren of 100 children then took 100 allocations, copies and
/// frees to build and drop, and a copy per name to encode; the lists of the `mixed` workload
/// spent about a tenth of the server's CPU so (docs/benchmarks.md, "Children listed without a
/// String each"). Here a name is copied once into the list, and the list once into the reply.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Names {
    len: usize,
    /// Only ever appended to by [`Names::push`], from a `&str`.
    encoded: Vec<u8>,
}

impl Names {
    pub fn new() -> Names {
        Names::default()
    }

    /// Appends one name.
    pub fn push(&mut self, name: &str) {
        let n = i32::try_from(name.len()).expect("jute lengths fit in i32: frames are capped");
        self.encoded.extend_from_slice(&n.to_be_bytes());
        self.encoded.extend_from_slice(name.as_bytes());
        self.len += 1;
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes of the names themselves, without their length prefixes.
    pub fn name_bytes(&self) -> usize {
        self.encoded.len() - 4 * self.len
    }

    /// The bytes the list takes in a reply, its count included.
    pub fn encoded_len(&self) -> usize {
        4 + self.encoded.len()
    }

    /// The same names in byte order (ZooKeeper promises no order of children: lists are
    /// compared so).
    pub fn sorted(&self) -> Names {
        let mut names: Vec<&str> = self.iter().collect();
        names.sort_unstable();
        names.into_iter().collect()
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter {
            rest: &self.encoded,
        }
    }
}

/// The names of a [`Names`], in order.
pub struct Iter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let (len, rest) = self.rest.split_first_chunk::<4>()?;
        let (name, rest) = rest.split_at(i32::from_be_bytes(*len) as usize);
        self.rest = rest;
        Some(std::str::from_utf8(name).expect("names are pushed as str"))
    }
}

impl<S: AsRef<str>> FromIterator<S> for Names {
    fn from_iter<I: IntoIterator<Item = S>>(names: I) -> Names {
        let names = names.into_iter();
        // Room for names of 12 bytes, a guess that spares a list of children most of the
        // buffer's regrowths (they were a third of its building); longer ones grow it.
        let mut list = Names {
            len: 0,
            encoded: Vec::with_capacity(names.size_hint().0 * (4 + 12)),
        };
        for name in names {
            list.push(name.as_ref());
        }
        list
    }
}

impl fmt::Debug for Names {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Record for Names {
    fn encode(&self, w: &mut Writer) {
        let n = i32::try_from(self.len).expect("jute lengths fit in i32: frames are capped");
        w.write_i32(n);
        w.write_raw(&self.encoded);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Vec::<String>::decode(r)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_as_a_vector_of_strings() {
        let names: Names = ["a", "", "zoo", "é"].into_iter().collect();
        let strings: Vec<String> = names.iter().map(str::to_owned).collect();
        assert_eq!(names.to_bytes(), strings.to_bytes());
        assert_eq!(names.len(), 4);
        assert_eq!(names.name_bytes(), 1 + 3 + 2);
        assert_eq!(names.encoded_len(), names.to_bytes().len());
        let back = Names::decode(&mut Reader::new(&names.to_bytes())).unwrap();
        assert_eq!(back, names);
        assert_eq!(format!("{back:?}"), r#"["a", "", "zoo", "é"]"#);
        assert_eq!(format!("{:?}", back.sorted()), r#"["", "a", "zoo", "é"]"#);
    }

    #[test]
    fn an_empty_list_is_a_zero_count() {
        assert_eq!(Names::new().to_bytes(), 0i32.to_be_bytes());
        assert!(Names::new().is_empty());
        assert_eq!(Names::new().iter().count(), 0);
    }

    #[test]
    fn a_null_or_forged_vector_reads_as_the_strings_would() {
        let null = (-1i32).to_be_bytes();
        assert_eq!(
            Names::decode(&mut Reader::new(&null)).unwrap(),
            Names::new()
        );
        let forged = [0, 0, 0, 9, 0, 0, 0, 1, b'a'];
        assert!(Names::decode(&mut Reader::new(&forged)).is_err());
        let bad_utf8 = [0, 0, 0, 1, 0, 0, 0, 1, 0xff];
        assert_eq!(
            Names::decode(&mut Reader::new(&bad_utf8)),
            Err(DecodeError::InvalidUtf8)
        );
    }
}
