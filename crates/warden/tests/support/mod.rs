//! Helpers shared by integration tests (not a test target of its own).

#![allow(dead_code)]

pub mod cluster;
pub mod http;
pub mod pki;
pub mod proxy;
pub mod servers;
pub mod tree;
pub mod warden;
