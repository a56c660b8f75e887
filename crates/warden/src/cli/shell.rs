//! The shell's state between lines: the session, the watches it set (whose events it prints),
//! zkCli's numbered history; and one line's run from words to printed output.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use zookeeper_client as zk;

use super::command::{self, Command, ParseError, WatchKind};
use super::znode::{self, NewWatch, Reply};
use super::{operator, output, quota};

/// How many lines zkCli's `history` shows: the last ten and the current one.
const HISTORY_SHOWN: usize = 11;
/// How long closing a session may wait for the server's answer to CloseSession.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// The session shared with the completer, which lists children as the user types.
pub type SharedClient = Arc<Mutex<Option<zk::Client>>>;

/// Where watch events go: stdout, or above the prompt while a line is being edited.
pub struct EventPrinter {
    terminal: Mutex<Option<Box<dyn rustyline::ExternalPrinter + Send>>>,
    enabled: AtomicBool,
}

impl EventPrinter {
    pub fn new() -> EventPrinter {
        EventPrinter {
            terminal: Mutex::new(None),
            enabled: AtomicBool::new(true),
        }
    }

    pub fn use_terminal(&self, printer: Box<dyn rustyline::ExternalPrinter + Send>) {
        *self.terminal.lock().expect("printer lock") = Some(printer);
    }

    pub fn print(&self, text: String) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let mut terminal = self.terminal.lock().expect("printer lock");
        match terminal.as_mut() {
            Some(printer) => {
                // Without the newline the prompt, redrawn below, would overwrite the last line.
                let _ = printer.print(text + "\n");
            }
            None => {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{text}");
                let _ = stdout.flush();
            }
        }
    }
}

/// The connection options of zkCli (`-server`, `-timeout`, `-r`) and keeper-client's TLS ones.
#[derive(Clone, Debug)]
pub struct Options {
    pub server: String,
    pub timeout: Duration,
    pub read_only: bool,
    /// keeper-client's `-s/--secure`: TLS to every server of the connect string.
    pub tls: Option<TlsFiles>,
}

/// keeper-client's `--tls-ca-file`, `--tls-cert-file`, `--tls-key-file` (PEM), read at each
/// connect.
#[derive(Clone, Debug, Default)]
pub struct TlsFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl TlsFiles {
    /// The crate's TLS options: the CA is required (the crate has no system trust store), the
    /// client certificate optional, and needs its key.
    fn options(&self) -> Result<zk::TlsOptions, String> {
        let ca = self.ca.as_deref().ok_or(
            "--secure needs --tls-ca-file FILE, the CA (PEM) of the server's certificate: \
             the system's trust store is not read",
        )?;
        let options = zk::TlsOptions::new()
            .with_pem_ca(&read_pem("--tls-ca-file", ca)?)
            .map_err(|e| format!("--tls-ca-file {}: {e}", ca.display()))?;
        match (&self.cert, &self.key) {
            (None, None) => Ok(options),
            (Some(cert), Some(key)) => options
                .with_pem_identity(
                    &read_pem("--tls-cert-file", cert)?,
                    &read_pem("--tls-key-file", key)?,
                )
                .map_err(|e| format!("--tls-cert-file {}: {e}", cert.display())),
            _ => Err("--tls-cert-file and --tls-key-file go together".to_owned()),
        }
    }
}

fn read_pem(option: &str, path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{option} {}: {e}", path.display()))
}

/// A watch this shell set, until it fires (one-shot) or is removed.
struct Watch {
    path: String,
    kind: WatchKind,
    task: JoinHandle<()>,
}

/// What the caller does after a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Succeeded,
    Failed,
    /// zkCli exits with 127 for a command it does not know.
    NotFound,
    Quit,
}

pub struct Shell {
    runtime: Arc<Runtime>,
    options: Options,
    /// The connect string of the current or last session (zkCli's `host`).
    host: String,
    client: SharedClient,
    events: Arc<EventPrinter>,
    watches: Vec<Watch>,
    session_events: Option<JoinHandle<()>>,
    /// zkCli's numbered history, for `history` and `redo`.
    history: Vec<String>,
}

impl Shell {
    pub fn new(runtime: Arc<Runtime>, options: Options, events: Arc<EventPrinter>) -> Shell {
        Shell {
            runtime,
            host: options.server.clone(),
            options,
            client: Arc::new(Mutex::new(None)),
            events,
            watches: Vec::new(),
            session_events: None,
            history: Vec::new(),
        }
    }

    pub fn client(&self) -> SharedClient {
        Arc::clone(&self.client)
    }

    fn current(&self) -> Option<zk::Client> {
        self.client.lock().expect("client lock").clone()
    }

    /// zkCli's prompt: `[zk: host(STATE) n] `.
    pub fn prompt(&self) -> String {
        let state = self.current().map(|c| c.state());
        format!(
            "[zk: {}({}) {}] ",
            self.host,
            output::prompt_state(state),
            self.history.len()
        )
    }

    /// Opens a session to `server`, closing the current one. `report` prints the session's state
    /// changes as zkCli's default watcher does (not in one-shot runs, where they are noise).
    pub fn connect(&mut self, server: &str, report: bool) -> Result<(), String> {
        self.close();
        self.host = server.to_owned();
        let options = self.options.clone();
        let connector = zk::Client::connector()
            .with_session_timeout(options.timeout)
            .with_readonly(options.read_only);
        let tls = options.tls.as_ref().map(TlsFiles::options).transpose()?;
        let secure = tls.is_some();
        let session = async {
            match tls {
                Some(tls) => connector.with_tls(tls).secure_connect(server).await,
                None => connector.connect(server).await,
            }
        };
        let connecting = async { tokio::time::timeout(options.timeout, session).await };
        let client = match self.runtime.block_on(connecting) {
            Ok(Ok(client)) => client,
            Ok(Err(error)) if error != zk::Error::Timeout => {
                return Err(format!("Unable to connect to {server}: {error}"));
            }
            Ok(Err(_)) | Err(_) => {
                // The crate retries a refused handshake until the deadline, without saying why.
                let hint = if secure {
                    " (over TLS: is the port a secure one, --tls-ca-file the CA of the \
                     server's certificate, a client certificate needed?)"
                } else {
                    ""
                };
                return Err(format!(
                    "Unable to connect to {server}: no session within {} ms{hint}",
                    options.timeout.as_millis()
                ));
            }
        };
        if report {
            let connected = if client.state() == zk::SessionState::ConnectedReadOnly {
                zk::SessionState::ConnectedReadOnly
            } else {
                zk::SessionState::SyncConnected
            };
            self.events
                .print(output::watched_event(&zk::WatchedEvent::new_session(
                    connected,
                )));
            let mut states = client.state_watcher();
            let events = Arc::clone(&self.events);
            self.session_events = Some(self.runtime.spawn(async move {
                loop {
                    let state = states.changed().await;
                    events.print(output::watched_event(&zk::WatchedEvent::new_session(state)));
                    if state.is_terminated() {
                        break;
                    }
                }
            }));
        }
        *self.client.lock().expect("client lock") = Some(client);
        Ok(())
    }

    /// Ends the session and forgets its watches. Dropping the last handle makes the crate send
    /// CloseSession; waiting for the Closed state lets the server end the session (and delete
    /// its ephemerals) now rather than when it times out.
    pub fn close(&mut self) {
        for watch in self.watches.drain(..) {
            watch.task.abort();
        }
        if let Some(task) = self.session_events.take() {
            task.abort();
        }
        let Some(client) = self.client.lock().expect("client lock").take() else {
            return;
        };
        let mut states = client.state_watcher();
        drop(client);
        if states.peek_state().is_terminated() {
            return;
        }
        let closed = async move { while !states.changed().await.is_terminated() {} };
        let _ = self
            .runtime
            .block_on(async { tokio::time::timeout(CLOSE_TIMEOUT, closed).await });
    }

    /// Runs one line as zkCli's `executeLine`: numbered in the history, output on stdout, errors
    /// on stderr.
    pub fn execute_line(&mut self, line: &str) -> Flow {
        let words = command::split_words(line);
        if words.is_empty() {
            return Flow::Succeeded;
        }
        self.history.push(line.to_owned());
        self.execute_words(&words)
    }

    pub fn execute_words(&mut self, words: &[String]) -> Flow {
        let command = match command::parse(words) {
            Ok(Some(command)) => command,
            Ok(None) => return Flow::Succeeded,
            Err(error) => {
                let not_found = matches!(error, ParseError::NotFound(_));
                if not_found {
                    eprint!("{}", usage());
                }
                eprintln!("{error}");
                return if not_found {
                    Flow::NotFound
                } else {
                    Flow::Failed
                };
            }
        };
        match self.execute(command) {
            Ok(Some(out)) => {
                print!("{out}");
                let _ = std::io::stdout().flush();
                Flow::Succeeded
            }
            Ok(None) => Flow::Quit,
            Err(message) => {
                eprintln!("{message}");
                Flow::Failed
            }
        }
    }

    /// `Ok(None)` is `quit`.
    fn execute(&mut self, command: Command) -> Result<Option<String>, String> {
        let out = match command {
            Command::History => {
                let first = self.history.len().saturating_sub(HISTORY_SHOWN);
                let lines = self.history.iter().enumerate().skip(first);
                lines.map(|(i, line)| format!("{i} - {line}\n")).collect()
            }
            Command::Redo { index } => return self.redo(index).map(Some),
            Command::Connect { server } => {
                self.connect(&server, true)?;
                String::new()
            }
            Command::Close => {
                // zkCli's watcher reports its own session's end when state events are shown.
                let reporting = self.session_events.is_some();
                self.close();
                if reporting {
                    let closed = zk::WatchedEvent::new_session(zk::SessionState::Closed);
                    self.events.print(output::watched_event(&closed));
                }
                String::new()
            }
            Command::Quit => {
                self.close();
                return Ok(None);
            }
            Command::Help => usage(),
            Command::PrintWatches { on: None } => {
                let on = self.events.enabled.load(Ordering::Relaxed);
                format!("printwatches is {}\n", if on { "on" } else { "off" })
            }
            Command::PrintWatches { on: Some(on) } => {
                self.events.enabled.store(on, Ordering::Relaxed);
                String::new()
            }
            Command::Version => format!("Warden cli version: {}\n", env!("CARGO_PKG_VERSION")),
            Command::FourLetter { word, server } => {
                let server = server.unwrap_or_else(|| operator::first_server(&self.host));
                operator::four_letter(&word, &server)?
            }
            Command::RemoveWatches { path, kind, local } => {
                self.remove_watches(&path, kind, local)?
            }
            command => return self.request(command).map(Some),
        };
        Ok(Some(out))
    }

    fn redo(&mut self, index: usize) -> Result<String, String> {
        // The redo line itself is the last entry; it may not be redone.
        if index + 1 >= self.history.len() {
            return Err("Command index out of range".to_owned());
        }
        let line = self.history[index].clone();
        let words = command::split_words(&line);
        if words.first().map(String::as_str) == Some("redo") {
            return Err("No redoing redos".to_owned());
        }
        *self.history.last_mut().expect("the redo line") = line;
        match self.execute(
            command::parse(&words)
                .map_err(|e| e.to_string())?
                .expect("not empty"),
        )? {
            Some(out) => Ok(out),
            None => Err("quit cannot be redone".to_owned()),
        }
    }

    /// A command that talks to the server: needs a session.
    fn request(&mut self, command: Command) -> Reply {
        let client = self.current().ok_or_else(|| "Not connected".to_owned())?;
        let runtime = Arc::clone(&self.runtime);
        let (reply, watch) = runtime.block_on(run_request(&client, command));
        if let Some((path, kind, watch)) = watch {
            self.keep_watch(path, kind, watch);
        }
        reply
    }

    fn keep_watch(&mut self, path: String, kind: WatchKind, watch: NewWatch) {
        self.watches.retain(|w| !w.task.is_finished());
        let events = Arc::clone(&self.events);
        let task = match watch {
            NewWatch::Data(watcher) | NewWatch::Children(watcher) => {
                self.runtime.spawn(async move {
                    events.print(output::watched_event(&watcher.changed().await));
                })
            }
            NewWatch::Persistent(mut watcher) => self.runtime.spawn(async move {
                loop {
                    let event = watcher.changed().await;
                    events.print(output::watched_event(&event));
                    if event.session_state.is_terminated() {
                        break;
                    }
                }
            }),
        };
        self.watches.push(Watch { path, kind, task });
    }

    /// zkCli's `removewatches`. The crate removes a watch when its last watcher is dropped, on the
    /// server too; so `-l` (local only) cannot be expressed, and only this shell's watches can be
    /// removed (as with zkCli, which removes its own session's).
    fn remove_watches(&mut self, path: &str, kind: WatchKind, local: bool) -> Reply {
        if local {
            return Err(
                "removewatches -l is not supported: the zookeeper-client crate cannot \
                        remove a watch locally only"
                    .to_owned(),
            );
        }
        znode::check_path(path)?;
        self.watches.retain(|w| !w.task.is_finished());
        let (removed, kept): (Vec<Watch>, Vec<Watch>) = self
            .watches
            .drain(..)
            .partition(|w| w.path == path && (kind == WatchKind::Any || w.kind == kind));
        self.watches = kept;
        if removed.is_empty() {
            return Err(output::error(&zk::Error::NoWatcher, path));
        }
        for watch in removed {
            watch.task.abort();
            // Waiting for the task drops its watcher, which sends the removal to the server.
            let _ = self.runtime.block_on(watch.task);
        }
        Ok(String::new())
    }
}

/// A set watch with what `removewatches` matches it by.
type KeptWatch = (String, WatchKind, NewWatch);

async fn run_request(client: &zk::Client, command: Command) -> (Reply, Option<KeptWatch>) {
    let with_watch =
        |result: Result<(String, Option<NewWatch>), String>, path: String, kind| match result {
            Ok((out, watch)) => (Ok(out), watch.map(|w| (path, kind, w))),
            Err(message) => (Err(message), None),
        };
    let reply = match command {
        Command::Ls {
            path,
            stat,
            watch,
            recursive,
        } => {
            let result = znode::ls(client, &path, stat, watch, recursive).await;
            return with_watch(result, path, WatchKind::Children);
        }
        Command::Get {
            path,
            stat,
            watch,
            format,
        } => {
            let result = znode::get(client, &path, stat, watch, format).await;
            return with_watch(result, path, WatchKind::Data);
        }
        Command::Stat { path, watch } => {
            let (reply, watch) = znode::stat(client, &path, watch).await;
            return (reply, watch.map(|w| (path, WatchKind::Data, w)));
        }
        Command::Config {
            client: client_only,
            watch,
            stat,
        } => {
            let result = znode::config(client, client_only, stat, watch).await;
            return with_watch(result, "/zookeeper/config".to_owned(), WatchKind::Data);
        }
        Command::AddWatch { path, recursive } => {
            return match znode::add_watch(client, &path, recursive).await {
                Ok(watch) => (Ok(String::new()), Some((path, WatchKind::Any, watch))),
                Err(message) => (Err(message), None),
            };
        }
        Command::Set {
            path,
            data,
            stat,
            version,
            base64,
        } => znode::set(client, &path, &data, stat, version, base64).await,
        Command::Create {
            path,
            data,
            acl,
            sequential,
            ephemeral,
            container,
            ttl,
        } => {
            let request = znode::CreateRequest {
                path: &path,
                data: data.as_deref(),
                acl: acl.as_deref(),
                sequential,
                ephemeral,
                container,
                ttl,
            };
            znode::create(client, request).await
        }
        Command::Delete { path, version } => znode::delete(client, &path, version).await,
        Command::DeleteAll { path, batch } => znode::delete_all(client, &path, batch).await,
        Command::GetAcl { path, stat } => znode::get_acl(client, &path, stat).await,
        Command::SetAcl {
            path,
            acl,
            stat,
            version,
            recursive,
        } => znode::set_acl(client, &path, &acl, stat, version, recursive).await,
        Command::AddAuth { scheme, auth } => znode::add_auth(client, &scheme, &auth).await,
        Command::Sync { path } => znode::sync(client, &path).await,
        Command::Reconfig {
            add,
            remove,
            members,
            file,
            version,
            stat,
        } => {
            let request = znode::ReconfigRequest {
                add: &add,
                remove: &remove,
                members: members.as_deref(),
                file: file.as_deref(),
                version,
                stat,
            };
            znode::reconfig(client, request).await
        }
        Command::WhoAmI => znode::who_am_i(client).await,
        Command::GetEphemerals { path } => znode::get_ephemerals(client, &path).await,
        Command::GetAllChildrenNumber { path } => {
            znode::get_all_children_number(client, &path).await
        }
        Command::SetQuota { path, field, value } => {
            quota::set_quota(client, &path, field, value).await
        }
        Command::ListQuota { path } => quota::list_quota(client, &path).await,
        Command::DelQuota { path, field } => quota::del_quota(client, &path, field).await,
        Command::FindSuperNodes { threshold, path } => {
            operator::find_super_nodes(client, threshold, &path).await
        }
        Command::FindBigFamily { path, n } => operator::find_big_family(client, &path, n).await,
        Command::Copy {
            from,
            to,
            recursive: false,
        } => operator::copy(client, &from, &to).await,
        Command::Move {
            from,
            to,
            recursive: false,
        } => operator::move_node(client, &from, &to).await,
        Command::Copy { from, to, .. } => operator::transfer_tree(client, &from, &to, false).await,
        Command::Move { from, to, .. } => operator::transfer_tree(client, &from, &to, true).await,
        Command::Touch { path } => operator::touch(client, &path).await,
        other => unreachable!("handled by the shell itself: {other:?}"),
    };
    (reply, None)
}

/// `help`, and what an unknown command prints: zkCli's usage with Warden's options.
pub fn usage() -> String {
    let mut out = String::from(
        "warden cli -server host:port[,host:port...][/chroot] [-timeout ms] [-r] \
         [-s|--secure [--tls-ca-file FILE] [--tls-cert-file FILE --tls-key-file FILE]] \
         [cmd args]\n",
    );
    for (name, synopsis) in command::COMMANDS {
        out += &format!("\t{name} {synopsis}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_names_every_command_with_its_synopsis() {
        let usage = usage();
        for (name, synopsis) in command::COMMANDS {
            assert!(usage.contains(&format!("\t{name} {synopsis}\n")), "{name}");
        }
        assert!(usage.starts_with("warden cli -server host:port"));
    }
}
