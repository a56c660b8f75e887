//! Framing: every ZooKeeper message is a 4-byte big-endian length followed by that many bytes.
//! A frame is only handed out once all of it has arrived, and its length is checked against the
//! configured maximum before the caller buffers a single byte of its body.

use crate::jute::DecodeError;

/// Bytes in the length prefix.
pub const FRAME_PREFIX_BYTES: usize = 4;

/// ZooKeeper's own packet limit (jute.maxbuffer's default, 1 MiB - 1): clients expect frames
/// up to this size to work everywhere.
pub const ZOOKEEPER_FRAME_BYTES_MAX: usize = 0xfffff;

/// Reads the length prefix at the start of `buf`, if all four bytes are there, and checks it
/// against `frame_bytes_max`.
pub fn frame_len(buf: &[u8], frame_bytes_max: usize) -> Result<Option<usize>, DecodeError> {
    let Some(prefix) = buf.first_chunk::<FRAME_PREFIX_BYTES>() else {
        return Ok(None);
    };
    let len = i32::from_be_bytes(*prefix);
    if len < 0 {
        return Err(DecodeError::NegativeFrameLength(len));
    }
    let len = len as usize;
    if len > frame_bytes_max {
        return Err(DecodeError::FrameTooLarge {
            len,
            max: frame_bytes_max,
        });
    }
    Ok(Some(len))
}

/// Splits one whole frame off the front of `buf`: `Ok(Some((payload, consumed)))` once the
/// whole frame is there, `Ok(None)` while more bytes are needed.
pub fn split_frame(
    buf: &[u8],
    frame_bytes_max: usize,
) -> Result<Option<(&[u8], usize)>, DecodeError> {
    let Some(len) = frame_len(buf, frame_bytes_max)? else {
        return Ok(None);
    };
    let end = FRAME_PREFIX_BYTES + len;
    if buf.len() < end {
        return Ok(None);
    }
    Ok(Some((&buf[FRAME_PREFIX_BYTES..end], end)))
}

/// Prefixes `payload` with its length.
pub fn encode_frame(payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("frame payloads are capped far below 4 GiB");
    let mut out = Vec::with_capacity(FRAME_PREFIX_BYTES + payload.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The four-letter words ZooKeeper answers on its client port. A connection whose first four
/// bytes spell one of these is an admin command, not a session (the bytes, read as a frame
/// length, would be a frame of over a gigabyte).
pub const FOUR_LETTER_WORDS: &[&str] = &[
    "ruok", "conf", "cons", "crst", "srvr", "stat", "srst", "wchs", "wchc", "wchp", "dirs", "mntr",
    "isro", "envi", "dump", "gtmk", "stmk", "hash", // ClickHouse Keeper's and RaftKeeper's:
    "rqld", "ydld", "apiv", "csnp", "lgif", "ftfl", "uptm",
];

/// The four-letter word spelled by the first four bytes of a connection, if any.
pub fn four_letter_word(prefix: &[u8; FRAME_PREFIX_BYTES]) -> Option<&'static str> {
    FOUR_LETTER_WORDS
        .iter()
        .copied()
        .find(|w| w.as_bytes() == prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_frames_wait_for_more_bytes() {
        let frame = encode_frame(b"hello");
        for cut in 0..frame.len() {
            assert_eq!(split_frame(&frame[..cut], 100).unwrap(), None);
        }
        assert_eq!(split_frame(&frame, 100).unwrap(), Some((&b"hello"[..], 9)));
    }

    #[test]
    fn oversized_frame_is_refused_from_its_prefix_alone() {
        let prefix = 1_000_000i32.to_be_bytes();
        assert_eq!(
            split_frame(&prefix, 1024),
            Err(DecodeError::FrameTooLarge {
                len: 1_000_000,
                max: 1024
            })
        );
    }

    #[test]
    fn negative_frame_length_is_an_error() {
        assert_eq!(
            frame_len(&(-5i32).to_be_bytes(), 1024),
            Err(DecodeError::NegativeFrameLength(-5))
        );
    }

    #[test]
    fn four_letter_words_are_recognised_by_their_bytes() {
        assert_eq!(four_letter_word(b"ruok"), Some("ruok"));
        assert_eq!(four_letter_word(b"\0\0\0\x2c"), None);
    }
}
