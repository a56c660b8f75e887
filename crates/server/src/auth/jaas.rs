//! The JAAS login configuration file ZooKeeper takes its SASL users from
//! (`-Djava.security.auth.login.config=FILE`), read as the JDK's `ConfigFile` reads it:
//!
//! ```text
//! Server {
//!     org.apache.zookeeper.server.auth.DigestLoginModule required
//!     user_super="super_secret"
//!     user_jaasuser="jaas_password";
//! };
//! ```
//!
//! sections of login modules, each `class flag key=value ... ;`, with `//` and `/* */`
//! comments. As ZooKeeper (`ServerCnxnFactory.getDigestMd5Credentials`), every option
//! `user_<name>="<password>"` of the server's section is a DIGEST-MD5 user. A file the JDK
//! would refuse is an error naming its line.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A JAAS file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum JaasError {
    #[error("cannot read the JAAS file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// The DIGEST-MD5 users of one section: name → password. Its `Debug` shows the names only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Users(pub HashMap<String, String>);

impl fmt::Debug for Users {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&String> = self.0.keys().collect();
        names.sort();
        f.debug_tuple("Users").field(&names).finish()
    }
}

/// One section (`Name { ... };`) of login modules.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Section {
    name: String,
    options: Vec<(String, String)>,
}

/// The users of section `section` of the file at `path`; `None` when the file has no such
/// section (the JDK's answer too; ZooKeeper then runs without SASL).
pub fn read_users(path: &Path, section: &str) -> Result<Option<Users>, JaasError> {
    let bytes = std::fs::read(path).map_err(|source| JaasError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let sections = parse(&text).map_err(|(line, message)| JaasError::Syntax {
        path: path.to_path_buf(),
        line,
        message,
    })?;
    Ok(sections.into_iter().find(|s| s.name == section).map(|s| {
        Users(
            s.options
                .into_iter()
                .filter_map(|(key, value)| Some((key.strip_prefix("user_")?.to_owned(), value)))
                .collect(),
        )
    }))
}

/// A lexical element and the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Punct(char),
}

fn tokens(text: &str) -> Result<Vec<(usize, Token)>, (usize, String)> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '/' if chars.peek() == Some(&'/') => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let start = line;
                chars.next();
                let mut last = ' ';
                loop {
                    match chars.next() {
                        None => return Err((start, "unterminated /* comment".into())),
                        Some('/') if last == '*' => break,
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            last = c;
                        }
                    }
                }
            }
            '"' => {
                let start = line;
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err((start, "unterminated quoted string".into())),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            None => return Err((start, "unterminated quoted string".into())),
                            Some('n') => value.push('\n'),
                            Some('t') => value.push('\t'),
                            Some(c) => value.push(c),
                        },
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            value.push(c);
                        }
                    }
                }
                out.push((start, Token::Quoted(value)));
            }
            '{' | '}' | ';' | '=' => out.push((line, Token::Punct(c))),
            c if is_word_char(c) => {
                let mut word = String::from(c);
                while let Some(&c) = chars.peek().filter(|&&c| is_word_char(c)) {
                    word.push(c);
                    chars.next();
                }
                out.push((line, Token::Word(word)));
            }
            c => return Err((line, format!("unexpected character {c:?}"))),
        }
    }
    Ok(out)
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '$' | '-' | '*')
}

/// `Name { Module Flag key=value ... ; ... };` repeated.
fn parse(text: &str) -> Result<Vec<Section>, (usize, String)> {
    let tokens = tokens(text)?;
    let last_line = tokens.last().map_or(1, |(line, _)| *line);
    let mut it = tokens.into_iter().peekable();
    let mut next = |what: &str| {
        it.next()
            .ok_or_else(|| (last_line, format!("the file ends where {what} should be")))
    };
    let mut sections: Vec<Section> = Vec::new();
    loop {
        let Ok((line, token)) = next("a section name") else {
            return Ok(sections);
        };
        let Token::Word(name) = token else {
            return Err((line, format!("expected a section name, found {token:?}")));
        };
        if sections.iter().any(|s| s.name == name) {
            return Err((line, format!("section {name:?} is given twice")));
        }
        punct(next("'{'")?, '{')?;
        let mut options = Vec::new();
        let mut modules = 0;
        loop {
            let (line, token) = next("a login module or '}'")?;
            let module = match token {
                Token::Punct('}') => break,
                Token::Word(module) => module,
                other => return Err((line, format!("expected a login module, found {other:?}"))),
            };
            let (line, flag) = next("a flag")?;
            match flag {
                Token::Word(f)
                    if ["required", "requisite", "sufficient", "optional"]
                        .contains(&f.to_ascii_lowercase().as_str()) => {}
                other => {
                    return Err((
                        line,
                        format!(
                            "expected the flag of {module} (required, requisite, sufficient \
                             or optional), found {other:?}"
                        ),
                    ));
                }
            }
            loop {
                let (line, token) = next("an option or ';'")?;
                let key = match token {
                    Token::Punct(';') => break,
                    Token::Word(key) => key,
                    other => return Err((line, format!("expected an option, found {other:?}"))),
                };
                punct(next("'='")?, '=')?;
                let (line, value) = next("an option value")?;
                let value = match value {
                    Token::Quoted(v) | Token::Word(v) => v,
                    other => {
                        return Err((
                            line,
                            format!("expected the value of {key}, found {other:?}"),
                        ));
                    }
                };
                if options.iter().any(|(k, _)| *k == key) {
                    return Err((line, format!("option {key} is given twice")));
                }
                options.push((key, value));
            }
            modules += 1;
        }
        if modules == 0 {
            return Err((line, format!("section {name:?} has no login module")));
        }
        punct(next("';' after '}'")?, ';')?;
        sections.push(Section { name, options });
    }
}

fn punct((line, token): (usize, Token), expected: char) -> Result<(), (usize, String)> {
    if token == Token::Punct(expected) {
        Ok(())
    } else {
        Err((line, format!("expected '{expected}', found {token:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users_of(text: &str, section: &str) -> Result<Option<Users>, JaasError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jaas.conf");
        std::fs::write(&path, text).unwrap();
        read_users(&path, section)
    }

    #[test]
    fn kazoos_file_gives_its_two_users() {
        // What kazoo's test harness writes (kazoo/testing/harness.py).
        let text = "\nServer {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
                    user_super=\"super_secret\"\n  user_jaasuser=\"jaas_password\";\n};\n\n\
                    Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
                    username=\"jaasuser\"\n  password=\"jaas_password\";\n};\n";
        let users = users_of(text, "Server").unwrap().unwrap();
        assert_eq!(
            users.0,
            HashMap::from([
                ("super".to_owned(), "super_secret".to_owned()),
                ("jaasuser".to_owned(), "jaas_password".to_owned()),
            ])
        );
        assert_eq!(format!("{users:?}"), "Users([\"jaasuser\", \"super\"])");
        // The client section has no user_ options.
        assert_eq!(users_of(text, "Client").unwrap(), Some(Users::default()));
        assert_eq!(users_of(text, "Other").unwrap(), None);
        // An empty file has no sections: no SASL, as with the JDK.
        assert_eq!(users_of("", "Server").unwrap(), None);
    }

    #[test]
    fn comments_escapes_and_several_modules() {
        let text = "// users\nZk { /* the digest\n module */ a.B optional user_x=\"p\\\"q\"\
                    ; c.D Required user_y=plain; };";
        let users = users_of(text, "Zk").unwrap().unwrap();
        assert_eq!(users.0["x"], "p\"q");
        assert_eq!(users.0["y"], "plain");
    }

    #[test]
    fn bad_files_name_the_line() {
        for (text, line) in [
            ("Server {\n m required user_a=\"x\"\n};", 3),
            ("Server {\n m mandatory user_a=\"x\";\n};", 2),
            ("Server {\n m required user_a=\"x\";\n}", 3),
            ("Server {\n m required user_a \"x\";\n};", 2),
            ("Server {\n};", 1),
            ("Server {\n m required user_a=\"x;\n};", 2),
            ("S { m required; };\nS { m required; };", 2),
            ("Server {\n m required user_a=\"x\" user_a=\"y\";\n};", 2),
            ("Server {\n m required a=b; } ;\n/* open", 3),
            ("Server (", 1),
        ] {
            match users_of(text, "Server") {
                Err(JaasError::Syntax {
                    line: got, message, ..
                }) => {
                    assert_eq!(got, line, "{text:?}: {message}")
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert!(matches!(
            read_users(Path::new("/nonexistent/jaas.conf"), "Server"),
            Err(JaasError::Read { .. })
        ));
    }
}
