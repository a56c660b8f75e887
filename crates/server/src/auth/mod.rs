//! Client authentication beyond the `digest` scheme the connection handles itself: SASL
//! DIGEST-MD5 (ZooKeeper's `sasl` scheme) with its users from a JAAS file.
//!
//! - [`digest_md5`]: the mechanism's server side (RFC 2831), one exchange per connection.
//! - [`jaas`]: the JAAS login file and its `user_<name>` options.

pub mod digest_md5;
pub mod jaas;

use crate::config::Auth;
use jaas::{JaasError, Users};

/// The SASL users of `auth`'s JAAS file; `None` when no file is named or it has no section of
/// that name, and the server then answers SASL tokens as a ZooKeeper without a JAAS `Server`
/// section does.
pub fn sasl_users(auth: &Auth) -> Result<Option<Users>, JaasError> {
    match &auth.jaas_file {
        None => Ok(None),
        Some(path) => jaas::read_users(path, &auth.jaas_section),
    }
}
