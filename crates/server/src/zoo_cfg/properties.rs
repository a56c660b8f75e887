//! The text format of `java.util.Properties.load`, which is how ZooKeeper reads zoo.cfg.
//!
//! - A natural line ends at `\n`, `\r` or `\r\n`. A line ending in an odd number of `\`
//!   continues on the next one, whose leading whitespace is dropped.
//! - A line whose first non-blank character is `#` or `!` is a comment; there are no comments
//!   at the end of a line (`clientPort=2181 # x` has the value `2181 # x`).
//! - The key ends at the first unescaped `=`, `:` or whitespace; blanks and at most one `=` or
//!   `:` separate it from the value, which is the rest of the line.
//! - `\t \n \r \f` and `\uXXXX` are escapes; `\` before any other character stands for that
//!   character (`\:`, `\=`, `\ `, `\\`).

/// One `key=value` of the file, unescaped, with the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    pub line: usize,
    pub key: String,
    pub value: String,
}

/// A line the format cannot read (only a malformed `\uXXXX` escape is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub line: usize,
    pub message: String,
}

/// Reads every property of `text`, in file order (a repeated key appears twice; in Java the
/// last one wins).
pub fn parse(text: &str) -> Result<Vec<Property>, SyntaxError> {
    let lines = natural_lines(text);
    let mut properties = Vec::new();
    let mut next = 0;
    while next < lines.len() {
        let line = next + 1;
        let first = trim_blanks_start(lines[next]);
        next += 1;
        if first.is_empty() || first.starts_with(['#', '!']) {
            continue;
        }
        let mut logical = first.to_string();
        while ends_in_continuation(&logical) {
            logical.pop();
            let Some(continued) = lines.get(next) else {
                break;
            };
            logical.push_str(trim_blanks_start(continued));
            next += 1;
        }
        let (key, value) = split_key_value(&logical);
        let syntax = |message| SyntaxError { line, message };
        properties.push(Property {
            line,
            key: unescape(key).map_err(syntax)?,
            value: unescape(value).map_err(syntax)?,
        });
    }
    Ok(properties)
}

fn natural_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some(end) = rest.find(['\n', '\r']) {
        lines.push(&rest[..end]);
        let terminator = if rest[end..].starts_with("\r\n") {
            2
        } else {
            1
        };
        rest = &rest[end + terminator..];
    }
    if !rest.is_empty() {
        lines.push(rest);
    }
    lines
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

fn trim_blanks_start(s: &str) -> &str {
    s.trim_start_matches(is_blank)
}

fn ends_in_continuation(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits a logical line into its still-escaped key and value.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    let mut separator_seen = false;
    for (i, c) in line.char_indices() {
        if !escaped && (c == '=' || c == ':' || is_blank(c)) {
            key_end = i;
            separator_seen = c == '=' || c == ':';
            break;
        }
        escaped = c == '\\' && !escaped;
    }
    let mut value = line[key_end..].get(1..).unwrap_or("");
    value = trim_blanks_start(value);
    if !separator_seen && let Some(rest) = value.strip_prefix(['=', ':']) {
        value = trim_blanks_start(rest);
    }
    (&line[..key_end], value)
}

fn unescape(s: &str) -> Result<String, String> {
    // Java strings are UTF-16: two `\u` escapes may make one character.
    let mut units: Vec<u16> = Vec::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        let c = if c == '\\' {
            match chars.next() {
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let well_formed = hex.len() == 4 && hex.bytes().all(|b| b.is_ascii_hexdigit());
                    let unit = well_formed
                        .then(|| u16::from_str_radix(&hex, 16).ok())
                        .flatten()
                        .ok_or_else(|| format!("malformed \\uxxxx escape: \\u{hex}"))?;
                    units.push(unit);
                    continue;
                }
                Some('t') => '\t',
                Some('n') => '\n',
                Some('r') => '\r',
                Some('f') => '\x0c',
                Some(other) => other,
                None => break,
            }
        } else {
            c
        };
        let mut buf = [0; 2];
        units.extend_from_slice(c.encode_utf16(&mut buf));
    }
    Ok(String::from_utf16_lossy(&units))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|p| (p.key, p.value))
            .collect()
    }

    fn one(text: &str) -> (String, String) {
        let mut all = pairs(text);
        assert_eq!(all.len(), 1, "{text:?} gave {all:?}");
        all.pop().unwrap()
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn separators() {
        for text in [
            "key=value",
            "key:value",
            "key value",
            "key = value",
            "key\t:\tvalue",
            "  key=value",
            "key =value",
            "key= value",
            "key :value",
        ] {
            assert_eq!(one(text), kv("key", "value"), "{text:?}");
        }
        assert_eq!(one("key=a=b:c"), kv("key", "a=b:c"));
        assert_eq!(
            one("key  =  =x"),
            kv("key", "=x"),
            "only one separator is skipped"
        );
        assert_eq!(one("key"), kv("key", ""));
        assert_eq!(one("key="), kv("key", ""));
        assert_eq!(
            one("key value  "),
            kv("key", "value  "),
            "trailing blanks stay"
        );
        assert_eq!(one("=value"), kv("", "value"));
    }

    #[test]
    fn comments_are_whole_lines_only() {
        assert_eq!(
            pairs("# a comment\n! another\n   # indented\n\n   \nkey=1 # not a comment\n"),
            [kv("key", "1 # not a comment")]
        );
    }

    #[test]
    fn continuation_lines() {
        assert_eq!(one("key=a,\\\n    b,\\\n\tc"), kv("key", "a,b,c"));
        assert_eq!(
            pairs("key=a\\\\\nother=b"),
            [kv("key", "a\\"), kv("other", "b")],
            "an even number of backslashes does not continue"
        );
        assert_eq!(
            one("key=a\\"),
            kv("key", "a"),
            "a continuation at the end of the file"
        );
        assert_eq!(
            one("key=a\\\n  # b"),
            kv("key", "a# b"),
            "a continued line is never a comment"
        );
        assert_eq!(
            pairs("key=a\\\n\nnext=b"),
            [kv("key", "a"), kv("next", "b")],
            "an empty continuation ends the line"
        );
        assert_eq!(
            one("# comment \\\nkey=v"),
            kv("key", "v"),
            "comments do not continue"
        );
    }

    #[test]
    fn escapes() {
        assert_eq!(one(r"a\=b\:c\ d=v"), kv("a=b:c d", "v"));
        assert_eq!(one(r"key=\t\n\r\f\\\q"), kv("key", "\t\n\r\x0c\\q"));
        assert_eq!(one(r"key=\u0041\u00e9"), kv("key", "Aé"));
        assert_eq!(
            one(r"key=\ud83d\ude00"),
            kv("key", "😀"),
            "a surrogate pair"
        );
        let err = parse("a=1\nkey=\\u12\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("\\u12"), "{}", err.message);
        assert!(parse(r"key=\uXYZW").is_err());
        assert!(
            parse(r"key=\u+123").is_err(),
            "Java takes exactly four hex digits"
        );
    }

    #[test]
    fn line_numbers_count_every_terminator() {
        let props = parse("a=1\r\nb=2\rc=3\n\nd=x\\\n  y\ne=5").unwrap();
        let lines: Vec<(String, usize)> = props.into_iter().map(|p| (p.key, p.line)).collect();
        assert_eq!(
            lines,
            [
                ("a".into(), 1),
                ("b".into(), 2),
                ("c".into(), 3),
                ("d".into(), 5),
                ("e".into(), 7)
            ]
        );
    }
}
