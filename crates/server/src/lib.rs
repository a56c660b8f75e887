//! The Warden server process, usable embedded or from the `warden` binary.
//!
//! Not built yet: it arrives with the one-node server (config, listeners, sessions, the request
//! pipeline through openraft, watch dispatch, admin). Until then this crate holds nothing, on
//! purpose, so that no placeholder can be mistaken for a working part.
