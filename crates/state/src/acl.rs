//! Access control as ZooKeeper does it: the schemes (world, auth, digest, ip, super), the
//! permission check, the fix-up of a new node's ACL, and an interning table so a million nodes
//! sharing one ACL store it once (ZooKeeper's `ReferenceCountedACLCache`).

use std::net::IpAddr;
use std::sync::Arc;

use base64::Engine;
use hashbrown::HashMap;
use sha1::{Digest, Sha1};
use warden_proto::types::perms;
use warden_proto::{Acl, Id};

/// The identity a configured super digest grants: it passes every ACL check.
pub fn super_id() -> Id {
    Id::new("super", "")
}

/// `DigestAuthenticationProvider.generateDigest`: `user:base64(sha1("user:password"))`.
pub fn digest(user_password: &str) -> String {
    let user = user_password.split(':').next().unwrap_or_default();
    let hash = Sha1::digest(user_password.as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// The identities a digest `auth` packet (`user:password`) proves, as
/// `DigestAuthenticationProvider.handleAuthentication` grants them: the digest id, preceded by
/// the super identity when the digest equals the configured super digest
/// (`zookeeper.DigestAuthenticationProvider.superDigest`, e.g. `super:D/InIH...`).
pub fn authenticate_digest(user_password: &str, super_digest: Option<&str>) -> Vec<Id> {
    let id = digest(user_password);
    let mut ids = Vec::with_capacity(2);
    if super_digest == Some(id.as_str()) {
        ids.push(super_id());
    }
    ids.push(Id::new("digest", id));
    ids
}

/// Whether identities `auth` may do `perm` on a node whose ACL is `acl`
/// (`ZooKeeperServer.checkACL`).
pub fn permits(acl: &[Acl], perm: i32, auth: &[Id]) -> bool {
    if acl.is_empty() || auth.iter().any(|id| id.scheme == "super") {
        return true;
    }
    acl.iter().filter(|a| a.perms & perm != 0).any(|a| {
        (a.id.scheme == "world" && a.id.id == "anyone")
            || auth
                .iter()
                .any(|who| who.scheme == a.id.scheme && scheme_matches(&a.id, &who.id))
    })
}

fn scheme_matches(acl_id: &Id, who: &str) -> bool {
    match acl_id.scheme.as_str() {
        "ip" => ip_matches(&acl_id.id, who),
        "digest" | "x509" => acl_id.id == who,
        // `SASLAuthenticationProvider.matches`: a SASL user named "super" matches every
        // sasl ACL.
        "sasl" => who == "super" || acl_id.id == who,
        _ => false,
    }
}

/// `SASLAuthenticationProvider.isValid`: the id parses as a Kerberos principal
/// (`KerberosName`): a name without '@' always does; one with '@' must be
/// `primary[/instance]@REALM`, each part free of '/' and '@'.
fn sasl_id_is_valid(id: &str) -> bool {
    let Some((principal, realm)) = id.split_once('@') else {
        return true;
    };
    let no_separator = |s: &str| !s.contains(['/', '@']);
    let (primary, instance) = principal.split_once('/').unwrap_or((principal, ""));
    no_separator(primary) && no_separator(instance) && no_separator(realm)
}

/// `IPAuthenticationProvider.matches`: `who` is inside the address or CIDR block `expr`.
fn ip_matches(expr: &str, who: &str) -> bool {
    let Some((net, bits)) = parse_cidr(expr) else {
        return false;
    };
    let Some(addr) = parse_addr(who) else {
        return false;
    };
    let (net, addr) = (octets(net), octets(addr));
    if net.len() != addr.len() {
        return false;
    }
    let full = bits / 8;
    let rest = bits % 8;
    if net[..full] != addr[..full] {
        return false;
    }
    rest == 0 || {
        let mask = 0xffu8 << (8 - rest);
        net[full] & mask == addr[full] & mask
    }
}

fn octets(addr: IpAddr) -> Vec<u8> {
    match addr {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn parse_cidr(expr: &str) -> Option<(IpAddr, usize)> {
    let (addr, bits) = match expr.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (expr, None),
    };
    let addr = parse_addr(addr)?;
    let max = octets(addr).len() * 8;
    let bits = match bits {
        None => max,
        Some(b) => usize::try_from(java_int(b)?).ok().filter(|b| *b <= max)?,
    };
    Some((addr, bits))
}

/// An IPv4 address as `IPAuthenticationProvider.v4addr2Bytes` reads it: four `parseInt`
/// numbers in 0..=255, so ZooKeeper takes `010.0.0.1` as 10.0.0.1 where Rust's parser
/// refuses it. Anything with a colon is an IPv6 address.
fn parse_addr(s: &str) -> Option<IpAddr> {
    if s.contains(':') {
        return s.parse().ok();
    }
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (o, part) in octets.iter_mut().zip(parts) {
        *o = u8::try_from(java_int(part)?).ok()?;
    }
    Some(IpAddr::from(octets))
}

/// Java's `Integer.parseInt` on ASCII: an optional sign, then at least one digit.
fn java_int(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Why a requested ACL is refused (InvalidACL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidAcl;

/// `PrepRequestProcessor.fixupACL`: drops duplicates, expands `auth` to the requester's
/// authenticated identities, and refuses empty lists and ids no provider accepts.
pub fn fixup(acl: &[Acl], auth: &[Id]) -> Result<Vec<Acl>, InvalidAcl> {
    let mut unique: Vec<&Acl> = Vec::with_capacity(acl.len());
    for a in acl {
        if !unique.contains(&a) {
            unique.push(a);
        }
    }
    if unique.is_empty() {
        return Err(InvalidAcl);
    }
    let mut out = Vec::with_capacity(unique.len());
    for a in unique {
        match a.id.scheme.as_str() {
            "world" if a.id.id == "anyone" => out.push(a.clone()),
            "auth" => {
                // Only identities proved by a credential count (digest, sasl, x509); an ip is
                // not an authentication.
                let proved: Vec<&Id> = auth
                    .iter()
                    .filter(|id| matches!(id.scheme.as_str(), "digest" | "sasl" | "x509"))
                    .collect();
                if proved.is_empty() {
                    return Err(InvalidAcl);
                }
                out.extend(proved.into_iter().map(|id| Acl {
                    perms: a.perms,
                    id: id.clone(),
                }));
            }
            "digest" if digest_id_is_valid(&a.id.id) => out.push(a.clone()),
            // Servers without ZooKeeper's SASL provider refuse sasl ids before they get here
            // (`connection`), as a ZooKeeper without it does.
            "sasl" if sasl_id_is_valid(&a.id.id) => out.push(a.clone()),
            // Likewise x509 ids on servers without TLS client certificates. ZooKeeper's
            // provider takes what `new X500Principal(id)` parses: attribute=value pairs.
            "x509" if x509_id_is_valid(&a.id.id) => out.push(a.clone()),
            "ip" if parse_cidr(&a.id.id).is_some() => out.push(a.clone()),
            _ => return Err(InvalidAcl),
        }
    }
    Ok(out)
}

/// A distinguished name as the x509 scheme writes it (`CN=client,O=org`): RDNs of
/// `attribute=value`, none empty.
fn x509_id_is_valid(id: &str) -> bool {
    !id.is_empty()
        && id.split(',').all(|rdn| {
            rdn.split_once('=')
                .is_some_and(|(k, _)| !k.trim().is_empty())
        })
}

/// `DigestAuthenticationProvider.isValid`: Java's `split(":")` yields exactly two parts
/// (trailing empty parts are dropped, so `user:` is invalid).
fn digest_id_is_valid(id: &str) -> bool {
    let parts: Vec<&str> = id.split(':').collect();
    let mut n = parts.len();
    while n > 0 && parts[n - 1].is_empty() {
        n -= 1;
    }
    n == 2
}

/// getACL for a caller without ADMIN: digest hashes are masked as `user:x`.
pub fn masked(acl: &[Acl]) -> Vec<Acl> {
    acl.iter()
        .map(|a| match a.id.scheme.as_str() {
            "digest" => Acl {
                perms: a.perms,
                id: Id::new(
                    "digest",
                    format!("{}:x", a.id.id.split(':').next().unwrap_or_default()),
                ),
            },
            _ => a.clone(),
        })
        .collect()
}

/// Index of an interned ACL list.
pub type AclId = u32;

#[derive(Debug, Clone)]
struct Entry {
    acl: Arc<[Acl]>,
    refs: u64,
}

/// Interned ACL lists with reference counts.
#[derive(Debug, Clone, Default)]
pub struct AclTable {
    entries: Vec<Option<Entry>>,
    ids: HashMap<Arc<[Acl]>, AclId>,
    free: Vec<AclId>,
}

impl AclTable {
    /// Takes a reference to `acl`, interning it if new.
    pub fn acquire(&mut self, acl: &[Acl]) -> AclId {
        if let Some(&id) = self.ids.get(acl) {
            self.entries[id as usize]
                .as_mut()
                .expect("an indexed ACL entry is live")
                .refs += 1;
            return id;
        }
        let acl: Arc<[Acl]> = acl.into();
        let entry = Some(Entry {
            acl: acl.clone(),
            refs: 1,
        });
        let id = match self.free.pop() {
            Some(id) => {
                self.entries[id as usize] = entry;
                id
            }
            None => {
                let id = AclId::try_from(self.entries.len()).expect("fewer than 2^32 ACLs");
                self.entries.push(entry);
                id
            }
        };
        self.ids.insert(acl, id);
        id
    }

    /// Interns `acl` at the next index with no references yet (snapshot loading, which lists
    /// each ACL once, in index order, before the nodes that use it).
    pub(crate) fn push_unreferenced(&mut self, acl: Vec<Acl>) -> AclId {
        let acl: Arc<[Acl]> = acl.into();
        let id = AclId::try_from(self.entries.len()).expect("fewer than 2^32 ACLs");
        self.entries.push(Some(Entry {
            acl: acl.clone(),
            refs: 0,
        }));
        self.ids.insert(acl, id);
        id
    }

    /// Takes one more reference to a live entry.
    pub(crate) fn add_ref(&mut self, id: AclId) {
        self.entries[id as usize]
            .as_mut()
            .expect("referenced ACL is live")
            .refs += 1;
    }

    /// Live entries in index order, for snapshots.
    pub(crate) fn live(&self) -> impl Iterator<Item = (AclId, &Arc<[Acl]>)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|e| (i as AclId, &e.acl)))
    }

    /// Drops a reference taken by [`AclTable::acquire`].
    pub fn release(&mut self, id: AclId) {
        let slot = &mut self.entries[id as usize];
        let entry = slot.as_mut().expect("released ACL is live");
        assert!(entry.refs > 0);
        entry.refs -= 1;
        if entry.refs == 0 {
            let entry = slot.take().expect("checked above");
            self.ids.remove(&entry.acl);
            self.free.push(id);
        }
    }

    pub fn get(&self, id: AclId) -> &Arc<[Acl]> {
        &self.entries[id as usize]
            .as_ref()
            .expect("a node's ACL is live")
            .acl
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// The permission each operation needs, by name, for readability at call sites.
pub const READ: i32 = perms::READ;
pub const WRITE: i32 = perms::WRITE;
pub const CREATE: i32 = perms::CREATE;
pub const DELETE: i32 = perms::DELETE;
pub const ADMIN: i32 = perms::ADMIN;

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
        Acl {
            perms,
            id: Id::new(scheme, id),
        }
    }

    /// Programmer's Guide, "Builtin ACL Schemes": "digest uses a username:password string to
    /// generate MD5 hash which is then used as an ACL ID identity... the ACL expression will be
    /// the username:base64 encoded SHA1 password digest."
    #[test]
    fn digest_matches_zookeeper() {
        // Value printed by ZooKeeper's DigestAuthenticationProvider for "super:test".
        assert_eq!(digest("super:test"), "super:D/InIHSb7yEEbrWz8b9l71RjZJU=");
    }

    /// Administrator's Guide, "Authentication & Authorization Options":
    /// "zookeeper.DigestAuthenticationProvider.superDigest ... enables a ZooKeeper ensemble
    /// administrator to access the znode hierarchy as a "super" user."
    #[test]
    fn configured_super_digest_grants_super() {
        let conf = Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU=");
        let ids = authenticate_digest("super:test", conf);
        assert_eq!(ids[0], super_id());
        assert!(permits(&[], ADMIN, &ids));
        let locked = [acl(READ, "digest", "someone:else")];
        assert!(permits(&locked, READ, &ids));
        let other = authenticate_digest("super:wrong", conf);
        assert_eq!(other.len(), 1);
        assert!(!permits(&locked, READ, &other));
        assert_eq!(authenticate_digest("super:test", None).len(), 1);
    }

    /// "world has a single id, anyone, that represents anyone." "ip uses the client host IP as
    /// an ACL ID identity. The ACL expression is of the form addr/bits where the most
    /// significant bits of addr are matched against the most significant bits of the client
    /// host IP."
    #[test]
    fn permission_checks() {
        let open = Acl::open();
        assert!(permits(&open, ADMIN, &[]));
        let read = [acl(READ, "world", "anyone")];
        assert!(permits(&read, READ, &[]) && !permits(&read, WRITE, &[]));
        let net = [acl(ALL_BUT_ADMIN, "ip", "10.1.0.0/16")];
        assert!(permits(&net, WRITE, &[Id::new("ip", "10.1.2.3")]));
        assert!(!permits(&net, WRITE, &[Id::new("ip", "10.2.2.3")]));
        assert!(!permits(&net, ADMIN, &[Id::new("ip", "10.1.2.3")]));
        let zeros = [acl(READ, "ip", "010.001.0.0/16")];
        assert!(permits(&zeros, READ, &[Id::new("ip", "10.1.2.3")]));
        let user = [acl(ALL_BUT_ADMIN, "digest", &digest("bob:pw"))];
        assert!(permits(&user, READ, &[Id::new("digest", digest("bob:pw"))]));
        assert!(!permits(
            &user,
            READ,
            &[Id::new("digest", digest("bob:no"))]
        ));
        assert!(permits(&user, READ, &[super_id()]));
    }

    const ALL_BUT_ADMIN: i32 = READ | WRITE | CREATE | DELETE;

    /// "auth is a special scheme which ignores any provided expression and instead uses the
    /// current user, credentials, and scheme. Any expression (whether user like with SASL
    /// authentication or user:password like with DIGEST authentication) provided is ignored by
    /// the ZooKeeper server when persisting the ACL."
    #[test]
    fn sasl_ids_match_as_zookeepers_sasl_provider() {
        let sasl_acl = vec![acl(perms::READ, "sasl", "jaasuser")];
        assert!(permits(
            &sasl_acl,
            perms::READ,
            &[Id::new("sasl", "jaasuser")]
        ));
        assert!(!permits(
            &sasl_acl,
            perms::READ,
            &[Id::new("sasl", "other")]
        ));
        assert!(!permits(
            &sasl_acl,
            perms::READ,
            &[Id::new("digest", "jaasuser")]
        ));
        // A SASL user named super passes every sasl ACL, and only those.
        assert!(permits(&sasl_acl, perms::READ, &[Id::new("sasl", "super")]));
        let digest_acl = vec![acl(perms::READ, "digest", "u:x")];
        assert!(!permits(
            &digest_acl,
            perms::READ,
            &[Id::new("sasl", "super")]
        ));
    }

    #[test]
    fn sasl_ids_must_be_kerberos_names() {
        for ok in [
            "jaasuser",
            "a/b/c",
            "zk/host@EXAMPLE.COM",
            "user@REALM",
            "@",
            "",
        ] {
            assert!(fixup(&[acl(31, "sasl", ok)], &[]).is_ok(), "{ok}");
        }
        for bad in ["a@b@c", "a/b/c@R", "a@R/x"] {
            assert_eq!(
                fixup(&[acl(31, "sasl", bad)], &[]),
                Err(InvalidAcl),
                "{bad}"
            );
        }
    }

    #[test]
    fn fixup_expands_auth_and_refuses_bad_ids() {
        let me = Id::new("digest", digest("me:pw"));
        let got = fixup(
            &[acl(31, "auth", "")],
            &[Id::new("ip", "127.0.0.1"), me.clone()],
        );
        assert_eq!(got, Ok(vec![Acl { perms: 31, id: me }]));
        assert_eq!(
            fixup(&[acl(31, "auth", "")], &[Id::new("ip", "1.2.3.4")]),
            Err(InvalidAcl)
        );
        assert_eq!(fixup(&[], &[]), Err(InvalidAcl));
        assert_eq!(fixup(&[acl(31, "world", "nobody")], &[]), Err(InvalidAcl));
        assert_eq!(fixup(&[acl(31, "digest", "user:")], &[]), Err(InvalidAcl));
        assert_eq!(fixup(&[acl(31, "ip", "1.2.3.4/33")], &[]), Err(InvalidAcl));
        // Java's parseInt reads each number: leading zeros and signs are fine.
        for ok in [
            "010.0.0.1",
            "+10.0.0.1",
            "10.0.0.0/08",
            "10.0.0.0/+8",
            "0.0.0.0/-0",
        ] {
            assert!(fixup(&[acl(31, "ip", ok)], &[]).is_ok(), "{ok}");
        }
        for bad in ["10.0.0", "10.0.0.0/", "1.2.3.256", "1.2.3.4/ 8", "a.b.c.d"] {
            assert_eq!(fixup(&[acl(31, "ip", bad)], &[]), Err(InvalidAcl), "{bad}");
        }
        assert_eq!(fixup(&[acl(31, "unknown", "x")], &[]), Err(InvalidAcl));
        assert!(fixup(&[acl(31, "x509", "CN=client,O=Warden")], &[]).is_ok());
        for bad in ["", "client", "CN=a,,O=b", "=x"] {
            assert_eq!(
                fixup(&[acl(31, "x509", bad)], &[]),
                Err(InvalidAcl),
                "{bad}"
            );
        }
        let twice = [acl(1, "world", "anyone"), acl(1, "world", "anyone")];
        assert_eq!(fixup(&twice, &[]).unwrap().len(), 1);
    }

    #[test]
    fn table_interns_and_frees() {
        let mut t = AclTable::default();
        let a = t.acquire(&Acl::open());
        let b = t.acquire(&Acl::open());
        assert_eq!(a, b);
        assert_eq!(t.len(), 1);
        t.release(a);
        assert_eq!(t.len(), 1);
        t.release(b);
        assert!(t.is_empty());
    }

    #[test]
    fn masking_hides_digest_hashes() {
        let got = masked(&[acl(31, "digest", "bob:abc=")]);
        assert_eq!(got[0].id.id, "bob:x");
    }
}
