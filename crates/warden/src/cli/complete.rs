//! Tab completion, as zkCli's JLineZNodeCompleter: the first word from the command names, a
//! word starting with `/` from the children of its parent, listed from the server.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};
use tokio::runtime::Runtime;

use super::command;
use super::shell::SharedClient;

/// Completion waits this long for the server's list of children, then offers nothing.
const LIST_TIMEOUT: Duration = Duration::from_secs(2);

pub struct ShellHelper {
    pub runtime: Arc<Runtime>,
    pub client: SharedClient,
}

impl ShellHelper {
    fn children(&self, parent: &str) -> Vec<String> {
        let Some(client) = self.client.lock().expect("client lock").clone() else {
            return Vec::new();
        };
        let listing =
            async { tokio::time::timeout(LIST_TIMEOUT, client.list_children(parent)).await };
        match self.runtime.block_on(listing) {
            Ok(Ok(mut children)) => {
                children.sort();
                children
            }
            _ => Vec::new(),
        }
    }
}

/// The word under the cursor: where it starts, and whether it is the first of the line.
fn current_word(line: &str, pos: usize) -> (usize, bool) {
    let before = &line[..pos];
    let start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    (start, before[..start].trim().is_empty())
}

/// Candidates for a path prefix: the parent's children that start with the last part.
fn path_candidates(prefix: &str, children: &[String]) -> Vec<Pair> {
    let cut = prefix.rfind('/').map_or(0, |i| i + 1);
    let (dir, partial) = prefix.split_at(cut);
    children
        .iter()
        .filter(|c| c.starts_with(partial))
        .map(|c| Pair {
            display: c.clone(),
            replacement: format!("{dir}{c}"),
        })
        .collect()
}

fn parent_of(prefix: &str) -> &str {
    match prefix.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &prefix[..i],
    }
}

impl Completer for ShellHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let (start, first) = current_word(line, pos);
        let word = &line[start..pos];
        if first {
            let names = command::names()
                .filter(|n| n.starts_with(word))
                .map(|n| Pair {
                    display: n.to_owned(),
                    replacement: format!("{n} "),
                });
            return Ok((start, names.collect()));
        }
        if !word.starts_with('/') {
            return Ok((start, Vec::new()));
        }
        Ok((
            start,
            path_candidates(word, &self.children(parent_of(word))),
        ))
    }
}

impl Hinter for ShellHelper {
    type Hint = String;
}

impl Highlighter for ShellHelper {
    fn highlight_hint<'h>(&self, hint: &'h str) -> Cow<'h, str> {
        Cow::Borrowed(hint)
    }
}

impl Validator for ShellHelper {}

impl Helper for ShellHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_parents() {
        assert_eq!(current_word("ge", 2), (0, true));
        assert_eq!(current_word("get -s /a/b", 11), (7, false));
        assert_eq!(parent_of("/a/b"), "/a");
        assert_eq!(parent_of("/a"), "/");
        assert_eq!(parent_of("/"), "/");
    }

    #[test]
    fn path_candidates_keep_the_directory() {
        let children = vec!["alpha".to_owned(), "beta".to_owned()];
        let found = path_candidates("/x/al", &children);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].replacement, "/x/alpha");
        assert_eq!(path_candidates("/", &children).len(), 2);
    }
}
