//! Jute, ZooKeeper's record serialization: big-endian integers, length-prefixed strings,
//! buffers and vectors. Hand-written because jute is tiny and no maintained crate speaks it;
//! every length is checked against the bytes that remain before anything is allocated.

use thiserror::Error;

/// Why a byte sequence is not a valid ZooKeeper message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("truncated: needed {needed} more bytes, {remaining} remain")]
    Truncated { needed: usize, remaining: usize },
    #[error("negative length {0}")]
    NegativeLength(i32),
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    #[error("unknown opcode {0}")]
    UnknownOpCode(i32),
    #[error("opcode {0} is not allowed here")]
    UnexpectedOpCode(i32),
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge { len: usize, max: usize },
    #[error("frame length {0} is negative")]
    NegativeFrameLength(i32),
    #[error("{0} trailing bytes after the record")]
    TrailingBytes(usize),
    #[error("malformed multi: {0}")]
    MalformedMulti(&'static str),
    #[error("invalid value {value} for {field}")]
    InvalidValue { field: &'static str, value: i64 },
}

/// Reads jute values from a borrowed frame; never reads past its end.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Fails unless every byte has been consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.bytes.len() {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.bytes.len() {
            return Err(DecodeError::Truncated {
                needed: n,
                remaining: self.bytes.len(),
            });
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn read_u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    /// Java's `DataInput.readBoolean`: any non-zero byte is true.
    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.read_u8()? != 0)
    }

    pub fn read_i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub fn read_i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// A length prefix: -1 means null (`None`); other negatives are errors.
    fn read_len(&mut self) -> Result<Option<usize>, DecodeError> {
        match self.read_i32()? {
            -1 => Ok(None),
            n if n < 0 => Err(DecodeError::NegativeLength(n)),
            n => Ok(Some(n as usize)),
        }
    }

    /// A jute `buffer`; null stays distinguishable from empty.
    pub fn read_buffer(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        match self.read_len()? {
            None => Ok(None),
            Some(n) => Ok(Some(self.take(n)?.to_vec())),
        }
    }

    /// A jute `ustring`. A null string reads as empty: no ZooKeeper client sends one where
    /// the distinction matters, and the server answers both the same way.
    pub fn read_string(&mut self) -> Result<String, DecodeError> {
        match self.read_len()? {
            None => Ok(String::new()),
            Some(n) => {
                let bytes = self.take(n)?;
                std::str::from_utf8(bytes)
                    .map(str::to_owned)
                    .map_err(|_| DecodeError::InvalidUtf8)
            }
        }
    }

    /// A jute `vector`; null reads as empty. `min_item_bytes` bounds the count by the bytes
    /// that remain, so a forged count cannot reserve more memory than the frame holds.
    pub fn read_vec<T>(
        &mut self,
        min_item_bytes: usize,
        mut item: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let Some(count) = self.read_len()? else {
            return Ok(Vec::new());
        };
        let needed = count.saturating_mul(min_item_bytes.max(1));
        if needed > self.bytes.len() {
            return Err(DecodeError::Truncated {
                needed,
                remaining: self.bytes.len(),
            });
        }
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            out.push(item(self)?);
        }
        Ok(out)
    }
}

/// Appends jute values to a growable buffer.
#[derive(Debug, Default, Clone)]
pub struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Writer::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        Writer {
            bytes: Vec::with_capacity(n),
        }
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The bytes written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn write_u8(&mut self, v: u8) {
        self.bytes.push(v);
    }

    pub fn write_bool(&mut self, v: bool) {
        self.bytes.push(u8::from(v));
    }

    pub fn write_i32(&mut self, v: i32) {
        self.bytes.extend_from_slice(&v.to_be_bytes());
    }

    pub fn write_i64(&mut self, v: i64) {
        self.bytes.extend_from_slice(&v.to_be_bytes());
    }

    fn write_len(&mut self, n: usize) {
        let n = i32::try_from(n).expect("jute lengths fit in i32: frames are capped far below");
        self.write_i32(n);
    }

    pub fn write_bytes(&mut self, v: &[u8]) {
        self.write_len(v.len());
        self.bytes.extend_from_slice(v);
    }

    pub fn write_buffer(&mut self, v: Option<&[u8]>) {
        match v {
            None => self.write_i32(-1),
            Some(b) => self.write_bytes(b),
        }
    }

    pub fn write_string(&mut self, v: &str) {
        self.write_bytes(v.as_bytes());
    }

    pub fn write_vec<T>(&mut self, items: &[T], mut item: impl FnMut(&mut Self, &T)) {
        self.write_len(items.len());
        for i in items {
            item(self, i);
        }
    }

    pub fn write_raw(&mut self, v: &[u8]) {
        self.bytes.extend_from_slice(v);
    }
}

/// A jute record: a value with a fixed field layout.
pub trait Record: Sized {
    fn encode(&self, w: &mut Writer);
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError>;

    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        self.encode(&mut w);
        w.into_bytes()
    }
}

impl Record for i32 {
    fn encode(&self, w: &mut Writer) {
        w.write_i32(*self)
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_i32()
    }
}

impl Record for i64 {
    fn encode(&self, w: &mut Writer) {
        w.write_i64(*self)
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_i64()
    }
}

impl Record for bool {
    fn encode(&self, w: &mut Writer) {
        w.write_bool(*self)
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_bool()
    }
}

impl Record for String {
    fn encode(&self, w: &mut Writer) {
        w.write_string(self)
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_string()
    }
}

/// A nullable `ustring`, for the fields clients really send as null (reconfig's).
impl Record for Option<String> {
    fn encode(&self, w: &mut Writer) {
        match self {
            None => w.write_i32(-1),
            Some(v) => w.write_string(v),
        }
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.read_buffer()? {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| DecodeError::InvalidUtf8),
        }
    }
}

impl Record for Option<Vec<u8>> {
    fn encode(&self, w: &mut Writer) {
        w.write_buffer(self.as_deref())
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_buffer()
    }
}

impl Record for Vec<u8> {
    fn encode(&self, w: &mut Writer) {
        w.write_bytes(self)
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(r.read_buffer()?.unwrap_or_default())
    }
}

/// The fewest bytes one encoded item of a vector can take; bounds forged counts.
pub trait MinEncodedLen {
    const MIN_ENCODED_LEN: usize;
}

impl MinEncodedLen for String {
    const MIN_ENCODED_LEN: usize = 4;
}

impl<T: Record + MinEncodedLen> Record for Vec<T> {
    fn encode(&self, w: &mut Writer) {
        w.write_vec(self, |w, item| item.encode(w))
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.read_vec(T::MIN_ENCODED_LEN, T::decode)
    }
}

/// Declares a jute record: the struct, and its encode/decode in field order.
macro_rules! record {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name { $($(#[$fmeta])* pub $field: $ty),* }

        impl $crate::jute::Record for $name {
            fn encode(&self, w: &mut $crate::jute::Writer) {
                $($crate::jute::Record::encode(&self.$field, w);)*
            }
            fn decode(r: &mut $crate::jute::Reader<'_>) -> Result<Self, $crate::jute::DecodeError> {
                Ok(Self { $($field: $crate::jute::Record::decode(r)?),* })
            }
        }
    };
}
pub(crate) use record;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forged_vector_count_is_rejected_before_allocation() {
        let mut w = Writer::new();
        w.write_i32(i32::MAX);
        let bytes = w.into_bytes();
        let err = Vec::<String>::decode(&mut Reader::new(&bytes)).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated { .. }));
    }

    #[test]
    fn null_buffer_differs_from_empty() {
        let mut w = Writer::new();
        w.write_buffer(None);
        w.write_buffer(Some(b""));
        let bytes = w.into_bytes();
        assert_eq!(bytes, [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        let mut r = Reader::new(&bytes);
        assert_eq!(r.read_buffer().unwrap(), None);
        assert_eq!(r.read_buffer().unwrap(), Some(vec![]));
        r.finish().unwrap();
    }

    #[test]
    fn negative_lengths_other_than_null_are_errors() {
        let bytes = (-2i32).to_be_bytes();
        assert_eq!(
            Reader::new(&bytes).read_string(),
            Err(DecodeError::NegativeLength(-2))
        );
    }

    #[test]
    fn string_length_beyond_frame_is_truncation() {
        let mut bytes = 100i32.to_be_bytes().to_vec();
        bytes.extend_from_slice(b"abc");
        assert!(matches!(
            Reader::new(&bytes).read_string(),
            Err(DecodeError::Truncated { needed: 100, .. })
        ));
    }
}
