//! ZooKeeper paths: validation exactly as `PathUtils.validatePath` does it, and splitting.

/// Why ZooKeeper rejects a path (answered as BadArguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidPath {
    Empty,
    NotAbsolute,
    TrailingSlash,
    NullCharacter,
    EmptyName,
    Relative,
    InvalidCharacter,
}

/// Checks `path` as ZooKeeper's `PathUtils.validatePath` does. ZooKeeper works on UTF-16
/// units, so every character outside the Basic Multilingual Plane (a surrogate pair there) is
/// invalid, as are controls and the private-use and specials ranges.
pub fn validate(path: &str) -> Result<(), InvalidPath> {
    let bytes = path.as_bytes();
    if bytes.is_empty() {
        return Err(InvalidPath::Empty);
    }
    if bytes[0] != b'/' {
        return Err(InvalidPath::NotAbsolute);
    }
    if bytes.len() == 1 {
        return Ok(());
    }
    if bytes[bytes.len() - 1] == b'/' {
        return Err(InvalidPath::TrailingSlash);
    }
    for name in path[1..].split('/') {
        if name.is_empty() {
            return Err(InvalidPath::EmptyName);
        }
        if name == "." || name == ".." {
            return Err(InvalidPath::Relative);
        }
        for c in name.chars() {
            if c == '\0' {
                return Err(InvalidPath::NullCharacter);
            }
            if is_forbidden(c) {
                return Err(InvalidPath::InvalidCharacter);
            }
        }
    }
    Ok(())
}

fn is_forbidden(c: char) -> bool {
    let c = c as u32;
    (0x01..=0x1f).contains(&c)
        || (0x7f..=0x9f).contains(&c)
        || (0xd800..=0xf8ff).contains(&c)
        || (0xfff0..=0xffff).contains(&c)
        || c > 0xffff
}

/// Splits `path` at its last slash into the parent's path and the last name, as ZooKeeper's
/// `lastIndexOf('/')` does: the parent of `/a` is the root `/`.
pub fn split_parent(path: &str) -> Option<(&str, &str)> {
    let slash = path.rfind('/')?;
    let parent = if slash == 0 { "/" } else { &path[..slash] };
    Some((parent, &path[slash + 1..]))
}

/// The names along an absolute path, root excluded; `None` if the path is not absolute.
pub fn names(path: &str) -> Option<impl Iterator<Item = &str>> {
    let rest = path.strip_prefix('/')?;
    Some(rest.split('/').filter(|_| !rest.is_empty()))
}

/// Whether `path` is `root` or lies below it.
pub fn is_within(path: &str, root: &str) -> bool {
    if root == "/" {
        return path.starts_with('/');
    }
    path.strip_prefix(root)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Joins a parent path and a child name.
pub fn join(parent: &str, name: &str) -> String {
    let mut out = String::with_capacity(parent.len() + 1 + name.len());
    out.push_str(parent);
    if parent != "/" {
        out.push('/');
    }
    out.push_str(name);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Programmer's Guide, "ZNodes": "The following characters can't be used because they
    /// don't display well, or render in confusing ways: \u0001 - \u001F and \u007F -
    /// \u009F." "The null character (\u0000) cannot be part of a path name." "The characters
    /// \ud800 - uF8FF, \uFFF0 - uFFFF are not allowed." "The "." character can be used as
    /// part of another name, but "." and ".." cannot alone be used to indicate a node along a
    /// path." "The token "zookeeper" is reserved" is enforced elsewhere (deletes only).
    #[test]
    fn programmers_guide_path_rules() {
        for ok in [
            "/",
            "/a",
            "/a/b",
            "/a.b",
            "/..a",
            "/a/.b.",
            "/\u{e9}t\u{e9}",
            "/a b",
        ] {
            assert_eq!(validate(ok), Ok(()), "{ok}");
        }
        let bad = [
            ("", InvalidPath::Empty),
            ("a", InvalidPath::NotAbsolute),
            ("/a/", InvalidPath::TrailingSlash),
            ("/a//b", InvalidPath::EmptyName),
            ("/a/./b", InvalidPath::Relative),
            ("/a/..", InvalidPath::Relative),
            ("/a\0b", InvalidPath::NullCharacter),
            ("/a\u{1}", InvalidPath::InvalidCharacter),
            ("/a\u{85}", InvalidPath::InvalidCharacter),
            ("/a\u{e000}", InvalidPath::InvalidCharacter),
            ("/a\u{fff5}", InvalidPath::InvalidCharacter),
            ("/a\u{1f600}", InvalidPath::InvalidCharacter),
        ];
        for (path, why) in bad {
            assert_eq!(validate(path), Err(why), "{path:?}");
        }
    }

    #[test]
    fn parents_and_names() {
        assert_eq!(split_parent("/a"), Some(("/", "a")));
        assert_eq!(split_parent("/a/b"), Some(("/a", "b")));
        assert_eq!(names("/").unwrap().count(), 0);
        assert_eq!(names("/a/b").unwrap().collect::<Vec<_>>(), ["a", "b"]);
        assert!(names("a").is_none());
        assert!(is_within("/a/b", "/a") && is_within("/a", "/a") && !is_within("/ab", "/a"));
        assert!(is_within("/x", "/"));
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
    }
}
