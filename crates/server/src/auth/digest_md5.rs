//! The server side of SASL DIGEST-MD5 (RFC 2831), as ZooKeeper's JDK mechanism runs it:
//! `Sasl.createSaslServer("DIGEST-MD5", "zookeeper", "zk-sasl-md5", ...)`, so realm
//! `zk-sasl-md5`, digest-uri `zookeeper/zk-sasl-md5`, and a challenge with no `qop` (the RFC's
//! default, `auth`: authentication only, no security layer).
//!
//! Written here from the RFC because no maintained Rust crate has the server side of
//! DIGEST-MD5 (rsasl and sasl implement other mechanisms only; RFC 6331 made it historic).
//!
//! The exchange is three tokens: the client's empty first token, answered with the
//! challenge; the client's digest-response, answered with `rspauth=...` when it proves the
//! password. Anything else is a [`Refused`] error, never a panic. This module does no IO:
//! the nonce's random bytes are handed in.

use std::collections::HashMap;

use base64::Engine;
use md5::{Digest, Md5};

/// The realm and server name ZooKeeper gives its SASL server.
pub const REALM: &str = "zk-sasl-md5";
/// The digest-uri a client must name: ZooKeeper's protocol "zookeeper" and server name.
pub const DIGEST_URI: &str = "zookeeper/zk-sasl-md5";
/// RFC 2831 §2.1.2: "The size of a digest-response is less than 4096 bytes."
pub const RESPONSE_BYTES_MAX: usize = 4096;
/// Random bytes in a nonce: the JDK's, 40 base64 characters.
pub const NONCE_RANDOM_BYTES: usize = 30;
/// Directives in one digest-response; RFC 2831 defines 13.
const DIRECTIVES_MAX: usize = 32;

/// Why a client's token is refused. The message never holds a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("DIGEST-MD5 has no initial response, but the first token has {0} bytes")]
    InitialResponse(usize),
    #[error("the digest-response has {0} bytes, more than RFC 2831's {RESPONSE_BYTES_MAX}")]
    TooLong(usize),
    #[error("malformed digest-response at byte {at}: {what}")]
    Syntax { at: usize, what: &'static str },
    #[error("the digest-response has more than {DIRECTIVES_MAX} directives")]
    TooManyDirectives,
    #[error("directive {0:?} appears twice")]
    Repeated(String),
    #[error("directive {0:?} is missing")]
    Missing(&'static str),
    #[error("directive {0:?} is not valid text in the response's charset")]
    Charset(&'static str),
    #[error("{directive}={value:?}, expected {expected:?}")]
    Mismatch {
        directive: &'static str,
        value: String,
        expected: String,
    },
    #[error("qop={0:?}: only auth was offered")]
    Qop(String),
    #[error("unknown user {0:?}")]
    UnknownUser(String),
    #[error("wrong password for user {0:?}")]
    WrongPassword(String),
    #[error("the authentication is already complete")]
    Complete,
}

/// The server's answer to one client token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send this token and wait for the client's next one.
    Continue(Vec<u8>),
    /// The client proved the password of `user`; send this last token (`rspauth=...`).
    Authenticated { user: String, token: Vec<u8> },
}

/// One connection's exchange.
#[derive(Debug)]
pub struct DigestMd5 {
    nonce: String,
    stage: Stage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Start,
    Challenged,
    Done,
}

impl DigestMd5 {
    pub fn new(random: [u8; NONCE_RANDOM_BYTES]) -> DigestMd5 {
        DigestMd5 {
            nonce: base64::engine::general_purpose::STANDARD.encode(random),
            stage: Stage::Start,
        }
    }

    /// Answers the client's next token; `users` maps names to passwords. After an error the
    /// exchange is over (the caller closes the connection, as ZooKeeper does).
    pub fn step(&mut self, token: &[u8], users: &HashMap<String, String>) -> Result<Step, Refused> {
        match self.stage {
            Stage::Start => {
                self.stage = Stage::Done;
                if !token.is_empty() {
                    return Err(Refused::InitialResponse(token.len()));
                }
                self.stage = Stage::Challenged;
                Ok(Step::Continue(self.challenge().into_bytes()))
            }
            Stage::Challenged => {
                self.stage = Stage::Done;
                let response = DigestResponse::parse(token)?;
                let (user, rspauth) = response.verify(&self.nonce, users)?;
                Ok(Step::Authenticated {
                    user,
                    token: format!("rspauth={rspauth}").into_bytes(),
                })
            }
            Stage::Done => Err(Refused::Complete),
        }
    }

    /// Exactly the JDK's challenge, directive for directive (LIVE, ZooKeeper 3.9.5).
    fn challenge(&self) -> String {
        format!(
            "realm=\"{REALM}\",nonce=\"{}\",charset=utf-8,algorithm=md5-sess",
            self.nonce
        )
    }
}

/// A parsed digest-response (RFC 2831 §2.1.2), values still as sent.
struct DigestResponse {
    directives: HashMap<String, Vec<u8>>,
}

impl DigestResponse {
    fn parse(token: &[u8]) -> Result<DigestResponse, Refused> {
        if token.len() > RESPONSE_BYTES_MAX {
            return Err(Refused::TooLong(token.len()));
        }
        let mut directives = HashMap::new();
        for (name, value) in parse_directives(token)? {
            // Directive names are case-insensitive (RFC 2831 §7.1: tokens).
            let name = name.to_ascii_lowercase();
            if directives.contains_key(&name) {
                return Err(Refused::Repeated(name));
            }
            if directives.len() == DIRECTIVES_MAX {
                return Err(Refused::TooManyDirectives);
            }
            directives.insert(name, value);
        }
        Ok(DigestResponse { directives })
    }

    /// Checks the response against the challenge and the user's password; returns the user
    /// and the rspauth value.
    fn verify(
        &self,
        nonce: &str,
        users: &HashMap<String, String>,
    ) -> Result<(String, String), Refused> {
        // RFC 2831 §2.1.2.1: with charset=utf-8 the strings are UTF-8, else ISO 8859-1.
        let utf8 = match self.text("charset")? {
            None => false,
            Some(charset) => {
                expect("charset", &charset, "utf-8", true)?;
                true
            }
        };
        let text = |name: &'static str| -> Result<String, Refused> {
            let bytes = self.directives.get(name).ok_or(Refused::Missing(name))?;
            decode(bytes, utf8).ok_or(Refused::Charset(name))
        };
        let username = text("username")?;
        expect("realm", &text("realm")?, REALM, false)?;
        expect("nonce", &text("nonce")?, nonce, false)?;
        let cnonce = text("cnonce")?;
        // One response per nonce: the count is 1 (read as hex, as the JDK reads it).
        let nc = text("nc")?;
        if u32::from_str_radix(&nc, 16) != Ok(1) {
            expect("nc", &nc, "00000001", false)?;
        }
        let qop = match self.text("qop")? {
            None => "auth".to_owned(),
            Some(qop) if qop == "auth" => qop,
            Some(qop) => return Err(Refused::Qop(qop)),
        };
        let digest_uri = text("digest-uri")?;
        expect("digest-uri", &digest_uri, DIGEST_URI, false)?;
        let response = text("response")?;
        let authzid = match self.directives.get("authzid") {
            None => None,
            Some(bytes) => Some(decode(bytes, utf8).ok_or(Refused::Charset("authzid"))?),
        };
        let password = users
            .get(&username)
            .ok_or_else(|| Refused::UnknownUser(username.clone()))?;
        let fields = Fields {
            username: &username,
            password,
            nonce,
            cnonce: &cnonce,
            nc: &nc,
            qop: &qop,
            digest_uri: &digest_uri,
            authzid: authzid.as_deref(),
        };
        let expected = fields.response_value("AUTHENTICATE");
        if !same_bytes(response.as_bytes(), expected.as_bytes()) {
            return Err(Refused::WrongPassword(username));
        }
        let rspauth = fields.response_value("");
        // ZooKeeper's SaslServerCallbackHandler authorizes the authentication id (a plain
        // name stays as it is), whatever authzid says.
        Ok((username, rspauth))
    }

    /// An optional directive as text in the charset every client sends it in (ASCII).
    fn text(&self, name: &'static str) -> Result<Option<String>, Refused> {
        self.directives
            .get(name)
            .map(|bytes| decode(bytes, true).ok_or(Refused::Charset(name)))
            .transpose()
    }
}

/// `value` must be `expected` (ASCII case-insensitively where the RFC says so).
fn expect(
    directive: &'static str,
    value: &str,
    expected: &str,
    ignore_case: bool,
) -> Result<(), Refused> {
    let same = if ignore_case {
        value.eq_ignore_ascii_case(expected)
    } else {
        value == expected
    };
    if same {
        Ok(())
    } else {
        Err(Refused::Mismatch {
            directive,
            value: value.to_owned(),
            expected: expected.to_owned(),
        })
    }
}

/// What the response value is computed from (RFC 2831 §2.1.2.1).
struct Fields<'a> {
    username: &'a str,
    password: &'a str,
    nonce: &'a str,
    cnonce: &'a str,
    nc: &'a str,
    qop: &'a str,
    digest_uri: &'a str,
    authzid: Option<&'a str>,
}

impl Fields<'_> {
    /// `response-value` for the client's proof (`method` "AUTHENTICATE") or the server's
    /// rspauth (`method` ""). qop is auth, so A2 has no `:000...` suffix.
    fn response_value(&self, method: &str) -> String {
        let mut secret = Md5::new();
        secret.update(self.string(self.username));
        secret.update(b":");
        secret.update(self.string(REALM));
        secret.update(b":");
        secret.update(self.string(self.password));
        let mut a1 = secret.finalize().to_vec();
        a1.extend_from_slice(format!(":{}:{}", self.nonce, self.cnonce).as_bytes());
        if let Some(authzid) = self.authzid {
            a1.push(b':');
            a1.extend_from_slice(authzid.as_bytes());
        }
        let a2 = format!("{method}:{}", self.digest_uri);
        let kd = format!(
            "{}:{}:{}:{}:{}:{}",
            hex::encode(Md5::digest(&a1)),
            self.nonce,
            self.nc,
            self.cnonce,
            self.qop,
            hex::encode(Md5::digest(a2.as_bytes()))
        );
        hex::encode(Md5::digest(kd.as_bytes()))
    }

    /// RFC 2831 §2.1.2.1: a string that fits in ISO 8859-1 is hashed in it even when the
    /// charset is UTF-8; only one that does not fit (which a client can send only with
    /// charset=utf-8) is hashed as UTF-8.
    fn string(&self, s: &str) -> Vec<u8> {
        if s.chars().all(|c| u32::from(c) <= 0xff) {
            s.chars().map(|c| c as u8).collect()
        } else {
            s.as_bytes().to_vec()
        }
    }
}

/// Bytes sent in `utf8` (UTF-8) or not (ISO 8859-1).
fn decode(bytes: &[u8], utf8: bool) -> Option<String> {
    if utf8 {
        String::from_utf8(bytes.to_vec()).ok()
    } else {
        Some(bytes.iter().map(|&b| char::from(b)).collect())
    }
}

/// Compares in time that depends only on the lengths, so a response's timing tells nothing
/// about how much of it was right.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// RFC 2831 §7.1's `#rule` list of `token "=" (token | quoted-string)`, separated by commas
/// with optional linear white space, empty elements allowed; a quoted-string's `\` makes the
/// next byte literal.
fn parse_directives(input: &[u8]) -> Result<Vec<(String, Vec<u8>)>, Refused> {
    let mut out = Vec::new();
    let mut at = 0;
    let error = |at: usize, what: &'static str| Refused::Syntax { at, what };
    loop {
        while at < input.len() && (is_lws(input[at]) || input[at] == b',') {
            at += 1;
        }
        if at == input.len() {
            return Ok(out);
        }
        let start = at;
        while at < input.len() && is_token_byte(input[at]) {
            at += 1;
        }
        if at == start {
            return Err(error(at, "expected a directive name"));
        }
        let name = String::from_utf8(input[start..at].to_vec()).expect("token bytes are ASCII");
        at = skip_lws(input, at);
        if input.get(at) != Some(&b'=') {
            return Err(error(at, "expected '=' after the directive name"));
        }
        at = skip_lws(input, at + 1);
        let mut value = Vec::new();
        if input.get(at) == Some(&b'"') {
            at += 1;
            loop {
                match input.get(at) {
                    None => return Err(error(at, "unterminated quoted string")),
                    Some(b'"') => break,
                    Some(b'\\') => {
                        let escaped = input.get(at + 1).ok_or(error(at, "'\\' at the end"))?;
                        value.push(*escaped);
                        at += 2;
                    }
                    Some(&b) => {
                        value.push(b);
                        at += 1;
                    }
                }
            }
            at += 1;
        } else {
            let start = at;
            while at < input.len() && is_token_byte(input[at]) {
                at += 1;
            }
            if at == start {
                return Err(error(at, "expected a value (a token or a quoted string)"));
            }
            value.extend_from_slice(&input[start..at]);
        }
        out.push((name, value));
        at = skip_lws(input, at);
        if at < input.len() && input[at] != b',' {
            return Err(error(at, "expected ',' between directives"));
        }
    }
}

fn skip_lws(input: &[u8], mut at: usize) -> usize {
    while at < input.len() && is_lws(input[at]) {
        at += 1;
    }
    at
}

fn is_lws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// RFC 2616's token characters: any CHAR but controls and separators.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii() && !b.is_ascii_control() && !b"()<>@,;:\\\"/[]?={} \t".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The LIVE exchange with ZooKeeper 3.9.5 and kazoo/pure-sasl
    /// (shared/reference/zookeeper-3.9.5-samples/sasl-digest-md5-transcript.txt).
    const LIVE_NONCE: &str = "QSdeJq0vVCjJDsy4rSgGZQAA7ZD2hpDSwrftprfR";
    const LIVE_RESPONSE: &str = "qop=auth,realm=\"zk-sasl-md5\",username=\"jaasuser\",\
        nonce=\"QSdeJq0vVCjJDsy4rSgGZQAA7ZD2hpDSwrftprfR\",cnonce=\"06282851203099848\",\
        nc=00000001,digest-uri=\"zookeeper/zk-sasl-md5\",\
        response=5105f2f9c444f3bf51d66ad4b48fc550";

    fn users() -> HashMap<String, String> {
        HashMap::from([
            ("jaasuser".to_owned(), "jaas_password".to_owned()),
            ("super".to_owned(), "super_secret".to_owned()),
        ])
    }

    /// A server that has sent the LIVE challenge.
    fn challenged() -> DigestMd5 {
        let random = base64::engine::general_purpose::STANDARD
            .decode(LIVE_NONCE)
            .unwrap();
        let mut server = DigestMd5::new(random.try_into().unwrap());
        let Step::Continue(challenge) = server.step(b"", &users()).unwrap() else {
            panic!("a challenge first");
        };
        assert_eq!(
            challenge,
            format!(
                "realm=\"zk-sasl-md5\",nonce=\"{LIVE_NONCE}\",charset=utf-8,algorithm=md5-sess"
            )
            .as_bytes(),
            "the LIVE challenge, byte for byte"
        );
        server
    }

    #[test]
    fn live_exchange_is_a_golden_vector() {
        let mut server = challenged();
        assert_eq!(
            server.step(LIVE_RESPONSE.as_bytes(), &users()),
            Ok(Step::Authenticated {
                user: "jaasuser".into(),
                token: b"rspauth=68cdb7f53a31ff153f8d3cc4a9d826ea".to_vec(),
            })
        );
        // A token after the end is not answered with another success.
        assert_eq!(
            server.step(LIVE_RESPONSE.as_bytes(), &users()),
            Err(Refused::Complete)
        );
    }

    #[test]
    fn wrong_password_unknown_user_and_wrong_values_are_refused() {
        let mut other = users();
        other.insert("jaasuser".into(), "not_the_password".into());
        assert_eq!(
            challenged().step(LIVE_RESPONSE.as_bytes(), &other),
            Err(Refused::WrongPassword("jaasuser".into()))
        );
        let refused = |from: &str, to: &str| {
            challenged()
                .step(LIVE_RESPONSE.replace(from, to).as_bytes(), &users())
                .unwrap_err()
        };
        assert_eq!(
            refused("\"jaasuser\"", "\"nobody\""),
            Refused::UnknownUser("nobody".into())
        );
        assert!(matches!(
            refused("nc=00000001", "nc=00000002"),
            Refused::Mismatch {
                directive: "nc",
                ..
            }
        ));
        assert!(matches!(
            refused("zookeeper/zk-sasl-md5", "zookeeper/elsewhere"),
            Refused::Mismatch {
                directive: "digest-uri",
                ..
            }
        ));
        assert!(matches!(
            refused("realm=\"zk-sasl-md5\"", "realm=\"other\""),
            Refused::Mismatch {
                directive: "realm",
                ..
            }
        ));
        assert_eq!(
            refused("qop=auth", "qop=auth-conf"),
            Refused::Qop("auth-conf".into())
        );
        assert_eq!(
            refused("cnonce=\"06282851203099848\",", ""),
            Refused::Missing("cnonce")
        );
        assert_eq!(
            refused("response=5105", "response=6105"),
            Refused::WrongPassword("jaasuser".into())
        );
    }

    #[test]
    fn a_response_to_another_nonce_is_refused() {
        // The LIVE response replayed against a fresh challenge (another nonce).
        let mut server = DigestMd5::new([7; NONCE_RANDOM_BYTES]);
        server.step(b"", &users()).unwrap();
        assert!(matches!(
            server.step(LIVE_RESPONSE.as_bytes(), &users()),
            Err(Refused::Mismatch {
                directive: "nonce",
                ..
            })
        ));
    }

    #[test]
    fn authzid_and_charset_take_part_in_the_digest() {
        // What the JDK client sends: charset, maxbuf and authzid = the user name.
        let mut server = DigestMd5::new([1; NONCE_RANDOM_BYTES]);
        server.step(b"", &users()).unwrap();
        let nonce = server.nonce.clone();
        let fields = Fields {
            username: "jaasuser",
            password: "jaas_password",
            nonce: &nonce,
            cnonce: "c",
            nc: "00000001",
            qop: "auth",
            digest_uri: DIGEST_URI,
            authzid: Some("jaasuser"),
        };
        let response = format!(
            "charset=utf-8,username=\"jaasuser\",realm=\"zk-sasl-md5\",nonce=\"{nonce}\",\
             nc=00000001,cnonce=\"c\",digest-uri=\"zookeeper/zk-sasl-md5\",maxbuf=65536,\
             response={},qop=auth,authzid=\"jaasuser\"",
            fields.response_value("AUTHENTICATE")
        );
        assert_eq!(
            server.step(response.as_bytes(), &users()),
            Ok(Step::Authenticated {
                user: "jaasuser".into(),
                token: format!("rspauth={}", fields.response_value("")).into_bytes(),
            })
        );
        // The same response with the authzid dropped no longer matches.
        let mut server = DigestMd5::new([1; NONCE_RANDOM_BYTES]);
        server.step(b"", &users()).unwrap();
        assert_eq!(
            server.step(
                response.replace(",authzid=\"jaasuser\"", "").as_bytes(),
                &users()
            ),
            Err(Refused::WrongPassword("jaasuser".into()))
        );
    }

    #[test]
    fn directives_parse_as_rfc_2831_says() {
        let parsed = parse_directives(b" a = \"x\\\"y\\\\z\" ,, b=tok ,c=\"\",").unwrap();
        assert_eq!(
            parsed,
            vec![
                ("a".to_owned(), b"x\"y\\z".to_vec()),
                ("b".to_owned(), b"tok".to_vec()),
                ("c".to_owned(), b"".to_vec()),
            ]
        );
        assert_eq!(parse_directives(b"").unwrap(), vec![]);
    }

    #[test]
    fn garbled_tokens_are_errors_not_panics() {
        for bad in [
            &b"username"[..],
            b"=x",
            b"a=\"unterminated",
            b"a=\"x\\",
            b"a=b c=d",
            b"a=",
            b"a=\"x\"y",
            b"\xff=1",
            b"a=(",
        ] {
            assert!(
                matches!(parse_directives(bad), Err(Refused::Syntax { .. })),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut server = challenged();
        assert_eq!(
            server.step(&vec![b'a'; RESPONSE_BYTES_MAX + 1], &users()),
            Err(Refused::TooLong(RESPONSE_BYTES_MAX + 1))
        );
        assert_eq!(
            challenged().step(b"a=1,A=2", &users()),
            Err(Refused::Repeated("a".into()))
        );
        let many: Vec<String> = (0..=DIRECTIVES_MAX).map(|i| format!("d{i}=1")).collect();
        assert_eq!(
            challenged().step(many.join(",").as_bytes(), &users()),
            Err(Refused::TooManyDirectives)
        );
        assert_eq!(
            challenged().step(b"charset=utf-8,username=\"\xff\"", &users()),
            Err(Refused::Charset("username"))
        );
        // A first token that is not empty, and any token after a refusal.
        let mut server = DigestMd5::new([0; NONCE_RANDOM_BYTES]);
        assert_eq!(
            server.step(b"x", &users()),
            Err(Refused::InitialResponse(1))
        );
        assert_eq!(server.step(b"", &users()), Err(Refused::Complete));
    }

    #[test]
    fn errors_never_show_the_password() {
        let mut other = users();
        other.insert("jaasuser".into(), "not_the_password".into());
        let error = challenged()
            .step(LIVE_RESPONSE.as_bytes(), &other)
            .unwrap_err()
            .to_string();
        assert!(!error.contains("not_the_password"), "{error}");
    }
}
