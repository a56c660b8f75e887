//! Java's JKS key store, read as the JDK's `JavaKeyStore` writes it (no maintained Rust crate
//! reads it; the format is small). Layout, all big-endian:
//!
//! ```text
//! magic 0xFEEDFEED, version (1 or 2), entry count
//! entry: tag (1 private key, 2 trusted certificate), alias (u16 length + UTF-8), u64 time,
//!   tag 1: u32 length + EncryptedPrivateKeyInfo, u32 chain length, certificates
//!   tag 2: one certificate
//!   certificate: (version 2: u16 length + type, "X.509"), u32 length + DER
//! SHA-1(password as UTF-16BE || "Mighty Aphrodite" || everything above)
//! ```
//!
//! A key is protected by Sun's own scheme (OID 1.3.6.1.4.1.42.2.17.1.1): 20 bytes of salt,
//! the key XORed with the stream SHA-1(pw || salt), SHA-1(pw || previous block), ..., then
//! SHA-1(pw || plain key) as a check (the JDK's `KeyProtector`).

use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha1::{Digest, Sha1};

use super::KeyMaterial;

const MAGIC: u32 = 0xFEED_FEED;
const JCEKS_MAGIC: u32 = 0xCECE_CECE;
const TAG_PRIVATE_KEY: u32 = 1;
const TAG_TRUSTED_CERT: u32 = 2;
const DIGEST_BYTES: usize = 20;
/// `1.3.6.1.4.1.42.2.17.1.1`, DER-encoded.
const SUN_KEY_PROTECTOR_OID: &[u8] = &[
    0x06, 0x0a, 0x2b, 0x06, 0x01, 0x04, 0x01, 0x2a, 0x02, 0x11, 0x01, 0x01,
];
/// Bound on the entries of one store, so a damaged count allocates nothing large.
const ENTRIES_MAX: u32 = 10_000;

enum Entry {
    Key {
        encrypted: Vec<u8>,
        chain: Vec<Vec<u8>>,
    },
    Trusted(Vec<u8>),
}

/// The first private key of the store and its chain; `password` is the store's and the
/// key's (as ZooKeeper uses one password for both).
pub fn key(bytes: &[u8], password: &str) -> Result<KeyMaterial, String> {
    let entries = parse(bytes, Some(password))?;
    for entry in entries {
        if let Entry::Key { encrypted, chain } = entry {
            let key = decrypt_key(&encrypted, password)?;
            return Ok(KeyMaterial {
                chain: chain.into_iter().map(CertificateDer::from).collect(),
                key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
            });
        }
    }
    Err("no private key entry in the JKS store".into())
}

/// Every trusted certificate entry; the integrity check is made only with a password, as the
/// JDK does.
pub fn trusted(
    bytes: &[u8],
    password: Option<&str>,
) -> Result<Vec<CertificateDer<'static>>, String> {
    Ok(parse(bytes, password)?
        .into_iter()
        .filter_map(|e| match e {
            Entry::Trusted(der) => Some(CertificateDer::from(der)),
            Entry::Key { .. } => None,
        })
        .collect())
}

fn password_utf16(password: &str) -> Vec<u8> {
    password.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or("a JKS store cut short")?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn blob(&mut self) -> Result<Vec<u8>, String> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn certificate(&mut self, version: u32) -> Result<Vec<u8>, String> {
        if version == 2 {
            let n = self.u16()? as usize;
            let kind = self.take(n)?;
            if kind != b"X.509" {
                return Err(format!(
                    "a certificate of type {:?}, not X.509",
                    String::from_utf8_lossy(kind)
                ));
            }
        }
        self.blob()
    }
}

fn parse(bytes: &[u8], password: Option<&str>) -> Result<Vec<Entry>, String> {
    if bytes.len() < DIGEST_BYTES {
        return Err("not a JKS store: too short".into());
    }
    let (body, digest) = bytes.split_at(bytes.len() - DIGEST_BYTES);
    let mut c = Cursor { bytes: body, at: 0 };
    match c.u32()? {
        MAGIC => {}
        JCEKS_MAGIC => {
            return Err(
                "a JCEKS store, which Warden does not read: convert it with keytool \
                 -importkeystore -srcstoretype JCEKS -deststoretype PKCS12"
                    .into(),
            );
        }
        _ => return Err("not a JKS store (no 0xFEEDFEED magic)".into()),
    }
    if let Some(password) = password {
        let mut sha = Sha1::new();
        sha.update(password_utf16(password));
        sha.update(b"Mighty Aphrodite");
        sha.update(body);
        if sha.finalize().as_slice() != digest {
            return Err(
                "the JKS store's integrity check failed: a wrong password, or a \
                        damaged file"
                    .into(),
            );
        }
    }
    let version = c.u32()?;
    if version != 1 && version != 2 {
        return Err(format!("JKS version {version}, not 1 or 2"));
    }
    let count = c.u32()?;
    if count > ENTRIES_MAX {
        return Err(format!("{count} entries, more than {ENTRIES_MAX}"));
    }
    let mut entries = Vec::new();
    for _ in 0..count {
        let tag = c.u32()?;
        let alias_len = c.u16()? as usize;
        c.take(alias_len)?;
        c.take(8)?; // creation time
        entries.push(match tag {
            TAG_PRIVATE_KEY => {
                let encrypted = c.blob()?;
                let n = c.u32()?;
                if n > ENTRIES_MAX {
                    return Err(format!("a chain of {n} certificates"));
                }
                let chain = (0..n)
                    .map(|_| c.certificate(version))
                    .collect::<Result<_, _>>()?;
                Entry::Key { encrypted, chain }
            }
            TAG_TRUSTED_CERT => Entry::Trusted(c.certificate(version)?),
            tag => return Err(format!("an entry of unknown kind {tag}")),
        });
    }
    Ok(entries)
}

/// The (tag, content) of the DER element at the start of `der`, and what follows it.
fn der_element(der: &[u8]) -> Result<(u8, &[u8], &[u8]), String> {
    let bad = || "a malformed EncryptedPrivateKeyInfo".to_string();
    let (&tag, rest) = der.split_first().ok_or_else(bad)?;
    let (&first, rest) = rest.split_first().ok_or_else(bad)?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return Err(bad());
        }
        let len = rest[..n].iter().fold(0usize, |a, &b| (a << 8) | b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return Err(bad());
    }
    Ok((tag, &rest[..len], &rest[len..]))
}

fn decrypt_key(encrypted_info: &[u8], password: &str) -> Result<Vec<u8>, String> {
    // EncryptedPrivateKeyInfo ::= SEQUENCE { AlgorithmIdentifier, OCTET STRING }
    let (_, info, _) = der_element(encrypted_info)?;
    let (_, algorithm, rest) = der_element(info)?;
    if !algorithm.starts_with(SUN_KEY_PROTECTOR_OID) {
        return Err(
            "a private key not protected by the JKS key protector (keytool's \
                    -keypass): convert the store to PKCS12 with keytool -importkeystore"
                .into(),
        );
    }
    let (_, data, _) = der_element(rest)?;
    if data.len() < 2 * DIGEST_BYTES {
        return Err("a JKS private key cut short".into());
    }
    let (salt, rest) = data.split_at(DIGEST_BYTES);
    let (cipher, check) = rest.split_at(rest.len() - DIGEST_BYTES);
    let pw = password_utf16(password);
    let mut plain = Vec::with_capacity(cipher.len());
    let mut block: Vec<u8> = salt.to_vec();
    for chunk in cipher.chunks(DIGEST_BYTES) {
        let mut sha = Sha1::new();
        sha.update(&pw);
        sha.update(&block);
        block = sha.finalize().to_vec();
        plain.extend(chunk.iter().zip(&block).map(|(c, k)| c ^ k));
    }
    let mut sha = Sha1::new();
    sha.update(&pw);
    sha.update(&plain);
    if sha.finalize().as_slice() != check {
        return Err("the JKS private key does not decrypt with the store's password".into());
    }
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JKS store with one trusted "certificate" (any bytes: the format does not look inside).
    fn store(password: &str, cert: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&MAGIC.to_be_bytes());
        body.extend_from_slice(&2u32.to_be_bytes());
        body.extend_from_slice(&1u32.to_be_bytes());
        body.extend_from_slice(&TAG_TRUSTED_CERT.to_be_bytes());
        body.extend_from_slice(&2u16.to_be_bytes());
        body.extend_from_slice(b"ca");
        body.extend_from_slice(&0u64.to_be_bytes());
        body.extend_from_slice(&5u16.to_be_bytes());
        body.extend_from_slice(b"X.509");
        body.extend_from_slice(&(cert.len() as u32).to_be_bytes());
        body.extend_from_slice(cert);
        let mut sha = Sha1::new();
        sha.update(password_utf16(password));
        sha.update(b"Mighty Aphrodite");
        sha.update(&body);
        body.extend_from_slice(&sha.finalize());
        body
    }

    #[test]
    fn trusted_entries_and_the_integrity_check() {
        let bytes = store("apassword", b"der");
        let certs = trusted(&bytes, Some("apassword")).unwrap();
        assert_eq!(certs.len(), 1);
        assert_eq!(certs[0].as_ref(), b"der");
        // Without a password the JDK skips the check, and so does Warden.
        assert_eq!(trusted(&bytes, None).unwrap().len(), 1);
        let wrong = trusted(&bytes, Some("nope")).map(|_| ()).unwrap_err();
        assert!(wrong.contains("integrity check failed"), "{wrong}");
        assert!(key(&bytes, "apassword").is_err(), "no key entry");
    }

    #[test]
    fn damaged_and_foreign_stores_are_refused_with_a_reason() {
        let bytes = store("pw", b"der");
        for cut in [0, 10, 30, bytes.len() - 21] {
            assert!(trusted(&bytes[..cut], None).is_err(), "cut at {cut}");
        }
        let mut jceks = bytes.clone();
        jceks[..4].copy_from_slice(&JCEKS_MAGIC.to_be_bytes());
        assert!(trusted(&jceks, None).unwrap_err().contains("JCEKS"));
        let mut other = bytes.clone();
        other[0] = 0x30;
        assert!(
            trusted(&other, None)
                .unwrap_err()
                .contains("not a JKS store")
        );
        let mut huge = bytes;
        huge[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(trusted(&huge, None).is_err());
    }

    #[test]
    fn a_key_protected_by_the_jdk_key_protector_decrypts() {
        // Encrypt as the JDK's KeyProtector does, then decrypt.
        let (password, plain, salt) = ("changeit", b"a PKCS#8 key, any length".to_vec(), [7u8; 20]);
        let pw = password_utf16(password);
        let mut cipher = Vec::new();
        let mut block = salt.to_vec();
        for chunk in plain.chunks(DIGEST_BYTES) {
            let mut sha = Sha1::new();
            sha.update(&pw);
            sha.update(&block);
            block = sha.finalize().to_vec();
            cipher.extend(chunk.iter().zip(&block).map(|(p, k)| p ^ k));
        }
        let mut check = Sha1::new();
        check.update(&pw);
        check.update(&plain);
        let data = [salt.as_slice(), &cipher, &check.finalize()].concat();
        let mut octets = vec![0x04, data.len() as u8];
        octets.extend_from_slice(&data);
        let algorithm = [
            &[0x30, SUN_KEY_PROTECTOR_OID.len() as u8 + 2][..],
            SUN_KEY_PROTECTOR_OID,
            &[0x05, 0x00],
        ]
        .concat();
        let inner = [algorithm, octets].concat();
        let mut info = vec![0x30, inner.len() as u8];
        info.extend_from_slice(&inner);
        assert_eq!(decrypt_key(&info, password).unwrap(), plain);
        assert!(
            decrypt_key(&info, "wrong")
                .unwrap_err()
                .contains("does not decrypt")
        );
    }
}
