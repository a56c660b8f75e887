//! One line of input into a [`Command`]: zkCli's word splitting (quotes group words and are
//! stripped) and its flags, which, as commons-cli's PosixParser takes them, may come before or
//! after the arguments (`set /x data -s -v 3`) and may be bundled (`ls -sR /x`).

/// Every command: its name and the synopsis `help` prints, zkCli's wording where zkCli has it.
pub const COMMANDS: &[(&str, &str)] = &[
    (
        "addWatch",
        "[-m mode] path # optional mode is one of [PERSISTENT, PERSISTENT_RECURSIVE] - default is PERSISTENT_RECURSIVE",
    ),
    ("addauth", "scheme auth"),
    ("close", ""),
    ("config", "[-c] [-w] [-s]"),
    ("connect", "host:port"),
    (
        "cp",
        "source destination # copy one node (data and ACL) in one multi",
    ),
    (
        "cpr",
        "source destination # copy a subtree (data and ACLs, at most 1000 nodes) in one multi",
    ),
    ("create", "[-s] [-e] [-c] [-t ttl] path [data] [acl]"),
    ("delete", "[-v version] path"),
    ("deleteall", "path [-b batch size]"),
    ("delquota", "[-n|-b|-N|-B] path"),
    (
        "find_big_family",
        "[path] [n] # the n nodes of the subtree (path included) with the biggest subtrees (default /, 10)",
    ),
    (
        "find_super_nodes",
        "threshold [path] # nodes under path with at least threshold children",
    ),
    (
        "flwc",
        "word [host:port] # a four-letter word over a new TCP connection (alias 4lw)",
    ),
    ("get", "[-s] [-w] [-b] [-x] path"),
    ("getAcl", "[-s] path"),
    ("getAllChildrenNumber", "path"),
    ("getEphemerals", "path"),
    ("help", ""),
    ("history", ""),
    ("listquota", "path"),
    ("ls", "[-s] [-w] [-R] path"),
    (
        "mv",
        "source destination # move one childless node in one multi",
    ),
    (
        "mvr",
        "source destination # move a subtree (at most 1000 nodes) in one multi",
    ),
    ("printwatches", "on|off"),
    ("quit", ""),
    (
        "reconfig",
        "[-s] [-v version] [[-file path] | [-members serverID=host:port1:port2;port3[,...]*]] | [-add serverId=host:port1:port2;port3[,...]]* [-remove serverId[,...]*]",
    ),
    ("redo", "cmdno"),
    ("removewatches", "path [-c|-d|-a] [-l]"),
    ("set", "[-s] [-v version] [-b] path data"),
    ("setAcl", "[-s] [-v version] [-R] path acl"),
    ("setquota", "-n|-b|-N|-B val path"),
    ("stat", "[-w] path"),
    ("sync", "path"),
    ("touch", "path # create path with no data unless it exists"),
    ("version", ""),
    ("whoami", ""),
];

/// Also accepted, not listed.
const ALIASES: &[(&str, &str)] = &[("4lw", "flwc"), ("rmr", "deleteall")];

/// The quota fields of zkCli's `setquota`/`delquota`: soft count and bytes (`-n`, `-b`) and the
/// hard limits the server enforces (`-N`, `-B`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaField {
    Count,
    Bytes,
    CountHard,
    BytesHard,
}

/// How `get` prints data: as text, or zkCli's `-b` (base64) and `-x` (Netty's hex dump).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataFormat {
    Text,
    Base64,
    HexDump,
}

/// Which watches `removewatches` removes: `-c` children, `-d` data, `-a` (default) any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchKind {
    Children,
    Data,
    Any,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Ls {
        path: String,
        stat: bool,
        watch: bool,
        recursive: bool,
    },
    Get {
        path: String,
        stat: bool,
        watch: bool,
        format: DataFormat,
    },
    Stat {
        path: String,
        watch: bool,
    },
    Set {
        path: String,
        data: String,
        stat: bool,
        version: Option<i32>,
        /// zkCli's `-b`: `data` is base64.
        base64: bool,
    },
    Create {
        path: String,
        data: Option<String>,
        acl: Option<String>,
        sequential: bool,
        ephemeral: bool,
        container: bool,
        ttl: Option<i64>,
    },
    Delete {
        path: String,
        version: Option<i32>,
    },
    DeleteAll {
        path: String,
        batch: Option<usize>,
    },
    GetAcl {
        path: String,
        stat: bool,
    },
    SetAcl {
        path: String,
        acl: String,
        stat: bool,
        version: Option<i32>,
        recursive: bool,
    },
    AddAuth {
        scheme: String,
        auth: String,
    },
    Sync {
        path: String,
    },
    Config {
        client: bool,
        watch: bool,
        stat: bool,
    },
    Reconfig {
        add: Vec<String>,
        remove: Vec<String>,
        members: Option<String>,
        file: Option<String>,
        version: Option<i64>,
        stat: bool,
    },
    WhoAmI,
    GetEphemerals {
        path: String,
    },
    GetAllChildrenNumber {
        path: String,
    },
    AddWatch {
        path: String,
        recursive: bool,
    },
    RemoveWatches {
        path: String,
        kind: WatchKind,
        local: bool,
    },
    SetQuota {
        path: String,
        field: QuotaField,
        value: i64,
    },
    ListQuota {
        path: String,
    },
    DelQuota {
        path: String,
        field: Option<QuotaField>,
    },
    FindSuperNodes {
        threshold: usize,
        path: String,
    },
    FindBigFamily {
        path: String,
        n: usize,
    },
    /// `cp`, or `cpr` (the whole subtree) with `recursive`.
    Copy {
        from: String,
        to: String,
        recursive: bool,
    },
    /// `mv`, or `mvr` (the whole subtree) with `recursive`.
    Move {
        from: String,
        to: String,
        recursive: bool,
    },
    Touch {
        path: String,
    },
    FourLetter {
        word: String,
        server: Option<String>,
    },
    History,
    Redo {
        index: usize,
    },
    Connect {
        server: String,
    },
    Close,
    Quit,
    Help,
    PrintWatches {
        on: Option<bool>,
    },
    Version,
}

/// Why a line is not a command; `Display` is what the shell prints (zkCli's texts).
#[derive(Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not a command name; the shell also prints `help`.
    NotFound(String),
    /// The right command, the wrong arguments: its synopsis, as zkCli prints it.
    Usage(&'static str),
    /// A flag the command does not have, or a value that is not a number.
    Invalid(String),
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::NotFound(name) => write!(f, "Command not found {name}"),
            ParseError::Usage(name) => write!(f, "{name} {}", synopsis(name)),
            ParseError::Invalid(message) => f.write_str(message),
        }
    }
}

pub fn synopsis(name: &str) -> &'static str {
    COMMANDS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, s)| s)
}

/// The command names completion offers, aliases included.
pub fn names() -> impl Iterator<Item = &'static str> {
    COMMANDS
        .iter()
        .map(|(n, _)| *n)
        .chain(ALIASES.iter().map(|(a, _)| *a))
}

/// zkCli's splitting (`ZooKeeperMain.MyCommandOptions.ARGS_PATTERN`): a word is either a run of
/// non-blanks that does not start with a quote, or a whole `"..."`/`'...'` whose quotes go.
pub fn split_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut rest = line.trim_start();
    while !rest.is_empty() {
        let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'');
        let (word, after) = match quote.and_then(|q| rest[1..].find(q).map(|end| (q, end))) {
            Some((_, end)) => (&rest[1..=end], &rest[end + 2..]),
            None => {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        words.push(word.to_owned());
        rest = after.trim_start();
    }
    words
}

/// Flags and the remaining words of one command.
struct Flags {
    set: Vec<(char, Option<String>)>,
    args: Vec<String>,
}

impl Flags {
    /// `switches` take no value, `valued` take the next word. `-` alone or a word starting
    /// with `-` and a digit (a negative number) is an argument.
    fn parse(words: &[String], switches: &str, valued: &str) -> Result<Flags, ParseError> {
        let mut flags = Flags {
            set: Vec::new(),
            args: Vec::new(),
        };
        let mut words = words.iter();
        while let Some(word) = words.next() {
            let is_flag = word.len() > 1
                && word.starts_with('-')
                && !word[1..].starts_with(|c: char| c.is_ascii_digit());
            if !is_flag {
                flags.args.push(word.clone());
                continue;
            }
            for (i, c) in word[1..].char_indices() {
                if switches.contains(c) {
                    flags.set.push((c, None));
                } else if valued.contains(c) {
                    let inline = &word[2 + i..];
                    let value = if inline.is_empty() {
                        words.next().cloned().ok_or_else(|| {
                            ParseError::Invalid(format!("Missing argument for option: {c}"))
                        })?
                    } else {
                        inline.to_owned()
                    };
                    flags.set.push((c, Some(value)));
                    break;
                } else {
                    return Err(ParseError::Invalid(format!("Unrecognized option: {word}")));
                }
            }
        }
        Ok(flags)
    }

    fn has(&self, flag: char) -> bool {
        self.set.iter().any(|(c, _)| *c == flag)
    }

    fn value(&self, flag: char) -> Option<&str> {
        self.set
            .iter()
            .rev()
            .find(|(c, _)| *c == flag)
            .and_then(|(_, v)| v.as_deref())
    }

    fn number<T: std::str::FromStr>(&self, flag: char) -> Result<Option<T>, ParseError> {
        self.value(flag).map(number).transpose()
    }
}

fn number<T: std::str::FromStr>(text: &str) -> Result<T, ParseError> {
    text.parse()
        .map_err(|_| ParseError::Invalid(format!("For input string: \"{text}\"")))
}

/// Parses one line already split into words; `Ok(None)` for an empty line.
pub fn parse(words: &[String]) -> Result<Option<Command>, ParseError> {
    let Some((name, rest)) = words.split_first() else {
        return Ok(None);
    };
    let name = ALIASES
        .iter()
        .find(|(alias, _)| alias == name)
        .map_or(name.as_str(), |(_, real)| real);
    let Some(&(name, _)) = COMMANDS.iter().find(|(n, _)| *n == name) else {
        return Err(ParseError::NotFound(name.to_owned()));
    };
    let usage = || ParseError::Usage(name);
    let command = match name {
        "ls" => {
            let f = Flags::parse(rest, "swR", "")?;
            let [path] = one(&f.args).ok_or_else(usage)?;
            Command::Ls {
                path,
                stat: f.has('s'),
                watch: f.has('w'),
                recursive: f.has('R'),
            }
        }
        "get" => {
            let f = Flags::parse(rest, "swbx", "")?;
            let [path] = one(&f.args).ok_or_else(usage)?;
            let format = if f.has('b') {
                DataFormat::Base64
            } else if f.has('x') {
                DataFormat::HexDump
            } else {
                DataFormat::Text
            };
            Command::Get {
                path,
                stat: f.has('s'),
                watch: f.has('w'),
                format,
            }
        }
        "stat" => {
            let f = Flags::parse(rest, "w", "")?;
            let [path] = one(&f.args).ok_or_else(usage)?;
            Command::Stat {
                path,
                watch: f.has('w'),
            }
        }
        "set" => {
            let f = Flags::parse(rest, "sb", "v")?;
            let [path, data] = two(&f.args).ok_or_else(usage)?;
            Command::Set {
                path,
                data,
                stat: f.has('s'),
                version: f.number('v')?,
                base64: f.has('b'),
            }
        }
        "create" => {
            let f = Flags::parse(rest, "sec", "t")?;
            if f.args.is_empty() || f.args.len() > 3 {
                return Err(usage());
            }
            Command::Create {
                path: f.args[0].clone(),
                data: f.args.get(1).cloned(),
                acl: f.args.get(2).cloned(),
                sequential: f.has('s'),
                ephemeral: f.has('e'),
                container: f.has('c'),
                ttl: f.number('t')?,
            }
        }
        "delete" => {
            let f = Flags::parse(rest, "", "v")?;
            let [path] = one(&f.args).ok_or_else(usage)?;
            Command::Delete {
                path,
                version: f.number('v')?,
            }
        }
        "deleteall" => {
            let f = Flags::parse(rest, "", "b")?;
            let [path] = one(&f.args).ok_or_else(usage)?;
            Command::DeleteAll {
                path,
                batch: f.number('b')?,
            }
        }
        "getAcl" => {
            let f = Flags::parse(rest, "s", "")?;
            let [path] = one(&f.args).ok_or_else(usage)?;
            Command::GetAcl {
                path,
                stat: f.has('s'),
            }
        }
        "setAcl" => {
            let f = Flags::parse(rest, "sR", "v")?;
            let [path, acl] = two(&f.args).ok_or_else(usage)?;
            Command::SetAcl {
                path,
                acl,
                stat: f.has('s'),
                version: f.number('v')?,
                recursive: f.has('R'),
            }
        }
        "addauth" => {
            let [scheme, auth] = two(rest).ok_or_else(usage)?;
            Command::AddAuth { scheme, auth }
        }
        "sync" => Command::Sync {
            path: exactly_one(rest, usage)?,
        },
        "config" => {
            let f = Flags::parse(rest, "cws", "")?;
            if !f.args.is_empty() {
                return Err(usage());
            }
            Command::Config {
                client: f.has('c'),
                watch: f.has('w'),
                stat: f.has('s'),
            }
        }
        "reconfig" => parse_reconfig(rest)?,
        "whoami" => no_arguments(rest, Command::WhoAmI, usage)?,
        "getEphemerals" => Command::GetEphemerals {
            path: rest.first().cloned().unwrap_or_else(|| "/".into()),
        },
        "getAllChildrenNumber" => Command::GetAllChildrenNumber {
            path: exactly_one(rest, usage)?,
        },
        "addWatch" => {
            let f = Flags::parse(rest, "", "m")?;
            let [path] = one(&f.args).ok_or_else(usage)?;
            let recursive = match f.value('m') {
                None | Some("PERSISTENT_RECURSIVE") => true,
                Some("PERSISTENT") => false,
                Some(_) => return Err(usage()),
            };
            Command::AddWatch { path, recursive }
        }
        "removewatches" => {
            let f = Flags::parse(rest, "cdal", "")?;
            let [path] = one(&f.args).ok_or_else(usage)?;
            let kind = if f.has('c') {
                WatchKind::Children
            } else if f.has('d') {
                WatchKind::Data
            } else {
                WatchKind::Any
            };
            Command::RemoveWatches {
                path,
                kind,
                local: f.has('l'),
            }
        }
        "setquota" => {
            let f = Flags::parse(rest, "", "nbNB")?;
            let [path] = one(&f.args).ok_or_else(usage)?;
            let [(flag, value)] = <[_; 1]>::try_from(f.set).map_err(|_| usage())?;
            Command::SetQuota {
                path,
                field: quota_field(flag),
                value: number(&value.unwrap_or_default())?,
            }
        }
        "listquota" => Command::ListQuota {
            path: exactly_one(rest, usage)?,
        },
        "delquota" => {
            let f = Flags::parse(rest, "nbNB", "")?;
            let [path] = one(&f.args).ok_or_else(usage)?;
            Command::DelQuota {
                path,
                field: f.set.first().map(|(c, _)| quota_field(*c)),
            }
        }
        "find_super_nodes" => match rest {
            [threshold] => Command::FindSuperNodes {
                threshold: number(threshold)?,
                path: "/".into(),
            },
            [threshold, path] => Command::FindSuperNodes {
                threshold: number(threshold)?,
                path: path.clone(),
            },
            _ => return Err(usage()),
        },
        "find_big_family" => {
            let path = rest.first().cloned().unwrap_or_else(|| "/".into());
            let n = rest.get(1).map(|n| number(n)).transpose()?.unwrap_or(10);
            if rest.len() > 2 {
                return Err(usage());
            }
            Command::FindBigFamily { path, n }
        }
        "cp" | "cpr" => {
            let [from, to] = two(rest).ok_or_else(usage)?;
            Command::Copy {
                from,
                to,
                recursive: name == "cpr",
            }
        }
        "mv" | "mvr" => {
            let [from, to] = two(rest).ok_or_else(usage)?;
            Command::Move {
                from,
                to,
                recursive: name == "mvr",
            }
        }
        "touch" => Command::Touch {
            path: exactly_one(rest, usage)?,
        },
        "flwc" => match rest {
            [word] => Command::FourLetter {
                word: word.clone(),
                server: None,
            },
            [word, server] => Command::FourLetter {
                word: word.clone(),
                server: Some(server.clone()),
            },
            _ => return Err(usage()),
        },
        "history" => Command::History,
        "redo" => Command::Redo {
            index: number(&exactly_one(rest, usage)?)?,
        },
        "connect" => Command::Connect {
            server: exactly_one(rest, usage)?,
        },
        "close" => Command::Close,
        "quit" => Command::Quit,
        "help" => Command::Help,
        "printwatches" => Command::PrintWatches {
            on: rest.first().map(|w| w == "on"),
        },
        "version" => Command::Version,
        _ => unreachable!("every name in COMMANDS is parsed: {name}"),
    };
    Ok(Some(command))
}

fn parse_reconfig(words: &[String]) -> Result<Command, ParseError> {
    let usage = || ParseError::Usage("reconfig");
    let (mut add, mut remove) = (Vec::new(), Vec::new());
    let (mut members, mut file, mut version, mut stat) = (None, None, None, false);
    let mut words = words.iter();
    while let Some(word) = words.next() {
        let mut value = || words.next().cloned().ok_or_else(usage);
        match word.as_str() {
            "-add" => add.push(value()?),
            "-remove" => remove.push(value()?),
            "-members" => members = Some(value()?),
            "-file" => file = Some(value()?),
            "-v" => version = Some(parse_version(&value()?)?),
            "-s" => stat = true,
            _ => return Err(usage()),
        }
    }
    let incremental = !add.is_empty() || !remove.is_empty();
    let whole = members.is_some() || file.is_some();
    if incremental == whole || (members.is_some() && file.is_some()) {
        return Err(usage());
    }
    Ok(Command::Reconfig {
        add,
        remove,
        members,
        file,
        version,
        stat,
    })
}

/// zkCli's `-v` for reconfig is the config's version, in hex as `config` prints it.
fn parse_version(text: &str) -> Result<i64, ParseError> {
    let digits = text.trim_start_matches("0x");
    i64::from_str_radix(digits, 16)
        .map_err(|_| ParseError::Invalid(format!("For input string: \"{text}\"")))
}

fn quota_field(flag: char) -> QuotaField {
    match flag {
        'n' => QuotaField::Count,
        'b' => QuotaField::Bytes,
        'N' => QuotaField::CountHard,
        _ => QuotaField::BytesHard,
    }
}

fn one(args: &[String]) -> Option<[String; 1]> {
    <&[String; 1]>::try_from(args).ok().cloned()
}

fn two(args: &[String]) -> Option<[String; 2]> {
    <&[String; 2]>::try_from(args).ok().cloned()
}

fn exactly_one(args: &[String], usage: impl Fn() -> ParseError) -> Result<String, ParseError> {
    one(args).map(|[a]| a).ok_or_else(usage)
}

fn no_arguments(
    args: &[String],
    command: Command,
    usage: impl Fn() -> ParseError,
) -> Result<Command, ParseError> {
    if args.is_empty() {
        Ok(command)
    } else {
        Err(usage())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_line(line: &str) -> Result<Option<Command>, ParseError> {
        parse(&split_words(line))
    }

    #[test]
    fn quotes_group_words_and_go() {
        assert_eq!(
            split_words(r#"set /a "b c"  'd e' f"g"#),
            ["set", "/a", "b c", "d e", "f\"g"]
        );
        assert_eq!(split_words("  "), Vec::<String>::new());
        // An unclosed quote is part of a plain word, as in zkCli's pattern.
        assert_eq!(split_words(r#"set /a "b c"#), ["set", "/a", "\"b", "c"]);
    }

    #[test]
    fn flags_go_before_or_after_the_arguments_and_bundle() {
        let want = Command::Set {
            path: "/x".into(),
            data: "d".into(),
            stat: true,
            version: Some(3),
            base64: false,
        };
        assert_eq!(parse_line("set /x d -s -v 3"), Ok(Some(want.clone())));
        assert_eq!(parse_line("set -s -v 3 /x d"), Ok(Some(want)));
        assert_eq!(
            parse_line("ls -sR /"),
            Ok(Some(Command::Ls {
                path: "/".into(),
                stat: true,
                watch: false,
                recursive: true
            }))
        );
    }

    #[test]
    fn create_takes_every_mode_and_a_ttl() {
        let Ok(Some(Command::Create {
            sequential,
            ephemeral,
            container,
            ttl,
            data,
            acl,
            ..
        })) = parse_line("create -s -e -t 500 /p data world:anyone:r")
        else {
            panic!("create parses");
        };
        assert!(sequential && ephemeral && !container);
        assert_eq!(
            (ttl, data.as_deref(), acl.as_deref()),
            (Some(500), Some("data"), Some("world:anyone:r"))
        );
    }

    #[test]
    fn wrong_arguments_print_the_synopsis() {
        assert_eq!(
            parse_line("get").unwrap_err().to_string(),
            "get [-s] [-w] [-b] [-x] path"
        );
        assert_eq!(
            parse_line("ls -x /").unwrap_err().to_string(),
            "Unrecognized option: -x"
        );
        assert_eq!(
            parse_line("frob /").unwrap_err().to_string(),
            "Command not found frob"
        );
        assert_eq!(
            parse_line("delete -v x /a").unwrap_err().to_string(),
            "For input string: \"x\""
        );
    }

    #[test]
    fn reconfig_is_incremental_or_whole() {
        assert_eq!(
            parse_line("reconfig -remove 3 -v 100000000"),
            Ok(Some(Command::Reconfig {
                add: vec![],
                remove: vec!["3".into()],
                members: None,
                file: None,
                version: Some(0x1_0000_0000),
                stat: false
            }))
        );
        assert!(parse_line("reconfig -add a -members b").is_err());
        assert!(parse_line("reconfig").is_err());
    }

    #[test]
    fn aliases_and_quota_flags() {
        assert_eq!(
            parse_line("4lw srvr"),
            Ok(Some(Command::FourLetter {
                word: "srvr".into(),
                server: None
            }))
        );
        assert_eq!(
            parse_line("setquota -N 5 /q"),
            Ok(Some(Command::SetQuota {
                path: "/q".into(),
                field: QuotaField::CountHard,
                value: 5
            }))
        );
        assert!(parse_line("setquota -n 1 -b 2 /q").is_err());
        assert_eq!(parse_line(""), Ok(None));
    }
}
