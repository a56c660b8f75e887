//! `warden cli`: an interactive client with zkCli 3.9's commands, options and output, plus
//! ClickHouse keeper-client's operator helpers; it talks to any ZooKeeper-compatible server
//! through the independent zookeeper-client crate, never through Warden's own protocol code.
//!
//! - `command`: a line into words (zkCli's quoting) and words into a [`command::Command`].
//! - `shell`: the session, the watches it set, the numbered history; one line's run.
//! - `znode`: zkCli's commands on znodes, ACLs, sessions and the ensemble.
//! - `quota`: setquota/listquota/delquota, client-side as in zkCli.
//! - `operator`: keeper-client's find_super_nodes, find_big_family, cp, mv, cpr, mvr, touch, flwc.
//! - `output`: zkCli's texts: Stat, ACLs, errors, watch events, the prompt's state.
//! - `complete`: tab completion of command names and znode paths.
//!
//! Three ways to run, as zkCli: `warden cli -server S cmd args` runs one command (exit 0, or 1
//! with the error on stderr, 127 for an unknown command); with stdin not a terminal, one command per line (the exit code is
//! the last command's); otherwise an interactive shell with line editing and a history file.

mod command;
mod complete;
mod operator;
mod output;
mod quota;
mod shell;
mod znode;

use std::io::{BufRead as _, IsTerminal as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;

use shell::{EventPrinter, Flow, Options, Shell, TlsFiles};

/// zkCli's defaults.
const SERVER_DEFAULT: &str = "localhost:2181";
const TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// The history file under the user's home (keeper-client keeps `~/.keeper-client-history`).
const HISTORY_FILE: &str = ".warden_cli_history";
/// How many lines the history file keeps.
const HISTORY_LINES_MAX: usize = 1000;

#[derive(clap::Args)]
#[command(disable_help_flag = true)]
pub struct CliArgs {
    /// zkCli's options, then an optional command to run:
    /// -server host:port[,host:port...][/chroot] (default localhost:2181), -timeout ms (session
    /// timeout, default 30000), -r (read-only servers allowed); keeper-client's -s/--secure (TLS)
    /// with --tls-ca-file, --tls-cert-file, --tls-key-file (PEM); `help` lists the commands.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<String>,
}

/// The options and the command words, parsed as zkCli's `MyCommandOptions.parseOptions`.
fn parse_options(args: &[String]) -> Result<(Options, Vec<String>), String> {
    let mut options = Options {
        server: SERVER_DEFAULT.to_owned(),
        timeout: Duration::from_millis(TIMEOUT_MS_DEFAULT),
        read_only: false,
        tls: None,
    };
    let (mut secure, mut files) = (false, TlsFiles::default());
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .cloned()
                .ok_or(format!("Error: no argument found for option {arg}"))
        };
        match arg.as_str() {
            "-server" => options.server = value()?,
            "-timeout" => {
                let text = value()?;
                let ms = text
                    .parse()
                    .map_err(|_| format!("-timeout: not a number of ms: {text}"))?;
                options.timeout = Duration::from_millis(ms);
            }
            "-r" => options.read_only = true,
            "-s" | "--secure" => secure = true,
            "--tls-ca-file" => files.ca = Some(value()?.into()),
            "--tls-cert-file" => files.cert = Some(value()?.into()),
            "--tls-key-file" => files.key = Some(value()?.into()),
            "-h" | "-help" | "--help" => return Ok((options, vec!["help".to_owned()])),
            other if other.starts_with('-') => return Err(format!("unknown option {other}")),
            _ => {
                let words = std::iter::once(arg.clone()).chain(args.cloned()).collect();
                return Ok((with_tls(options, secure, files)?, words));
            }
        }
    }
    Ok((with_tls(options, secure, files)?, Vec::new()))
}

/// The TLS files mean something only with `--secure`; a file given without it is a mistake.
fn with_tls(mut options: Options, secure: bool, files: TlsFiles) -> Result<Options, String> {
    let given = files.ca.is_some() || files.cert.is_some() || files.key.is_some();
    if given && !secure {
        return Err("--tls-ca-file, --tls-cert-file and --tls-key-file need -s/--secure".into());
    }
    if secure {
        // zookeeper-client builds its rustls config with the process's default provider; two
        // are compiled in (ring, aws-lc-rs), so one is named: ring, as the server uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        options.tls = Some(files);
    }
    Ok(options)
}

pub fn run(args: CliArgs) -> ExitCode {
    let (options, words) = match parse_options(&args.args) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("{message}");
            eprint!("{}", shell::usage());
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let runtime = Arc::new(runtime);
    let events = Arc::new(EventPrinter::new());
    let mut shell = Shell::new(Arc::clone(&runtime), options.clone(), Arc::clone(&events));
    if words.first().map(String::as_str) == Some("help") {
        print!("{}", shell::usage());
        return ExitCode::SUCCESS;
    }
    let code = if !words.is_empty() {
        one_command(&mut shell, &options, &words)
    } else if std::io::stdin().is_terminal() {
        interactive(&mut shell, &options, runtime, &events)
    } else {
        script(&mut shell, &options)
    };
    shell.close();
    code
}

fn exit_code(flow: Flow) -> ExitCode {
    match flow {
        Flow::Succeeded | Flow::Quit => ExitCode::SUCCESS,
        Flow::Failed => ExitCode::FAILURE,
        Flow::NotFound => ExitCode::from(127),
    }
}

/// `warden cli -server S get /x`: no banner and no session events, only the command's output.
fn one_command(shell: &mut Shell, options: &Options, words: &[String]) -> ExitCode {
    if let Err(message) = shell.connect(&options.server, false) {
        eprintln!("{message}");
        return ExitCode::FAILURE;
    }
    exit_code(shell.execute_words(words))
}

/// Commands from a pipe or file, one a line, without prompts; watch events print as they come.
fn script(shell: &mut Shell, options: &Options) -> ExitCode {
    if let Err(message) = shell.connect(&options.server, false) {
        eprintln!("{message}");
        return ExitCode::FAILURE;
    }
    let mut last = Flow::Succeeded;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        last = shell.execute_line(&line);
        if last == Flow::Quit {
            break;
        }
    }
    exit_code(last)
}

fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(HISTORY_FILE))
}

fn interactive(
    shell: &mut Shell,
    options: &Options,
    runtime: Arc<tokio::runtime::Runtime>,
    events: &EventPrinter,
) -> ExitCode {
    println!("Connecting to {}", options.server);
    let config = rustyline::Config::builder()
        .max_history_size(HISTORY_LINES_MAX)
        .and_then(|b| b.history_ignore_dups(true))
        // Bash's way (and jline's in zkCli): Tab completes the common prefix, a second Tab lists.
        .map(|b| {
            b.auto_add_history(false)
                .completion_type(rustyline::CompletionType::List)
                .build()
        });
    let editor =
        config.and_then(rustyline::Editor::<complete::ShellHelper, FileHistory>::with_config);
    let mut editor = match editor {
        Ok(editor) => editor,
        Err(error) => {
            eprintln!("warden cli: the terminal cannot be used: {error}");
            return ExitCode::FAILURE;
        }
    };
    editor.set_helper(Some(complete::ShellHelper {
        runtime,
        client: shell.client(),
    }));
    if let Ok(printer) = editor.create_external_printer() {
        events.use_terminal(Box::new(printer));
    }
    let history = history_path();
    if let Some(path) = &history {
        // A missing file is a first run.
        let _ = editor.load_history(path);
    }
    println!("Welcome to Warden's cli!");
    if let Err(message) = shell.connect(&options.server, true) {
        eprintln!("{message}");
    }
    let mut last = Flow::Succeeded;
    loop {
        match editor.readline(&shell.prompt()) {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.as_str());
                    if let Some(path) = &history {
                        let _ = editor.append_history(path);
                    }
                }
                last = shell.execute_line(&line);
                if last == Flow::Quit {
                    break;
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(error) => {
                eprintln!("warden cli: {error}");
                return ExitCode::FAILURE;
            }
        }
    }
    exit_code(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn options_then_the_command() {
        let (options, command) =
            parse_options(&words("-server h:1/app -timeout 5000 -r get -s /x")).unwrap();
        assert_eq!(options.server, "h:1/app");
        assert_eq!(options.timeout, Duration::from_millis(5000));
        assert!(options.read_only);
        assert_eq!(command, words("get -s /x"));
        let (options, command) = parse_options(&[]).unwrap();
        assert_eq!(
            (options.server.as_str(), command.len()),
            ("localhost:2181", 0)
        );
        assert!(parse_options(&words("-server")).is_err());
    }

    #[test]
    fn keeper_client_tls_options() {
        let (options, command) = parse_options(&words(
            "-s --tls-ca-file ca.pem --tls-cert-file c.pem --tls-key-file c.key whoami",
        ))
        .unwrap();
        let tls = options.tls.expect("secure");
        assert_eq!(
            (tls.ca, tls.cert, tls.key),
            (
                Some("ca.pem".into()),
                Some("c.pem".into()),
                Some("c.key".into())
            )
        );
        assert_eq!(command, words("whoami"));
        assert!(parse_options(&words("--secure")).unwrap().0.tls.is_some());
        assert!(parse_options(&[]).unwrap().0.tls.is_none());
        assert!(parse_options(&words("--tls-ca-file ca.pem ls /")).is_err());
    }
}
