//! The Warden server process, usable embedded or from the `warden` binary.
//!
//! - [`config`]: [`Config`], every knob and bound of the server with its default, read from
//!   Warden's own TOML and checked as a whole.
//! - [`zoo_cfg`]: ZooKeeper's zoo.cfg (and myid file) read into a [`Config`], as ZooKeeper 3.9
//!   reads it, with a warning for each key not taken as written.
//!
//! Still to come with the one-node server: listeners, sessions, the request pipeline through
//! openraft, watch dispatch, admin. Nothing here stands in for them yet, on purpose, so that
//! no placeholder can be mistaken for a working part.

pub mod config;
pub mod zoo_cfg;

pub use config::{Config, ConfigError};
pub use zoo_cfg::Warning;
