//! `bloomlsm`: inspect tables, trace lookups, read and write a store, size
//! filters, and print the lecture's numbers. Aligned text by default (fields
//! in reading order: what was asked, the answer, then the details), JSON
//! with the same fields in the same order with `--json`.
//!
//! Exit status: 0 success, 1 `get` of a key that is not found, 2 an error
//! or bad arguments (either: one line on stderr). A reader that closes stdout
//! early (`| head`) is no error: the status is the answer's.

mod args;
mod commands;
mod output;
mod render;

use std::io::Write;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

use crate::args::{Cli, WalRecoveryArg};
use crate::commands::Status;

/// `get` found no value.
const EXIT_NOT_FOUND: u8 = 1;
/// The command failed (clap uses the same status for bad arguments).
const EXIT_ERROR: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return bad_arguments(&e),
    };
    let printed = commands::run(&cli).and_then(|outcome| {
        let text = if cli.json {
            output::to_json(&outcome.value)? + "\n"
        } else {
            render::render(&outcome.value)
        };
        match std::io::stdout().lock().write_all(text.as_bytes()) {
            // The reader stopped early (`bloomlsm scan DB | head`): not an
            // error, and the answer's status stands.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            written => written?,
        }
        Ok(outcome.status)
    });
    match printed {
        Ok(Status::Success) => ExitCode::SUCCESS,
        Ok(Status::NotFound) => ExitCode::from(EXIT_NOT_FOUND),
        Ok(Status::Damaged(damage)) => {
            commands::to_stderr(&format!("error: {}", damage.replace(['\n', '\r'], " ")));
            ExitCode::from(EXIT_ERROR)
        }
        Err(e) => {
            let hint = if wal_damage(&e) && cli.wal_recovery != WalRecoveryArg::PointInTime {
                " (--wal-recovery point-in-time opens the store with the writes before the damage)"
            } else {
                ""
            };
            commands::to_stderr(&format!("error: {}{hint}", one_line(&e)));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// What clap found wrong with the command line, as every error is
/// printed: one line, `error: ` first (clap's own message, its lines
/// joined, then the command's usage), exit status 2. Help and the version
/// are answers, printed as clap prints them (stdout, status 0), and so is
/// the help printed when no command is given (stderr, status 2).
fn bad_arguments(e: &clap::Error) -> ExitCode {
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        // Help on a closed stdout is no error either.
        let _ = e.print();
        return ExitCode::from(if e.use_stderr() { EXIT_ERROR } else { 0 });
    }
    let usage = command_usage(std::env::args_os().skip(1));
    commands::to_stderr(&usage_error_line(&e.render().to_string(), &usage));
    ExitCode::from(EXIT_ERROR)
}

/// The usage of the command `args` (the command line after the program's
/// name) names, as clap renders it after `Usage: `: the first word that is
/// a command's name and not a global option's value; the program's usage
/// when there is none. clap renders a usage with some errors only (a
/// missing or unknown argument, not a refused value).
fn command_usage(args: impl Iterator<Item = std::ffi::OsString>) -> String {
    let mut cli = Cli::command();
    cli.build();
    let mut named = None;
    let mut skip_value = false;
    for arg in args {
        let Ok(arg) = arg.into_string() else {
            skip_value = false;
            continue;
        };
        if std::mem::take(&mut skip_value) {
            continue;
        }
        if let Some(long) = arg.strip_prefix("--").filter(|l| !l.contains('=')) {
            skip_value = cli
                .get_arguments()
                .any(|a| a.get_long() == Some(long) && a.get_action().takes_values());
        } else if cli.find_subcommand(&arg).is_some() {
            named = Some(arg);
            break;
        }
    }
    let command = match named.and_then(|n| cli.find_subcommand_mut(n)) {
        Some(command) => command,
        None => &mut cli,
    };
    let usage = command.render_usage().to_string();
    let usage = usage.trim();
    usage.strip_prefix("Usage: ").unwrap_or(usage).to_string()
}

/// clap's rendered error on one line: the message's lines joined with a
/// space (a list of missing arguments after its colon), `; usage: ...`
/// after them (clap's, else `command_usage`), and the closing "For more
/// information" left out (the usage is the information).
fn usage_error_line(rendered: &str, command_usage: &str) -> String {
    let mut message = String::new();
    let mut usage = None;
    for line in rendered.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("For more information") {
            continue;
        }
        if let Some(u) = line.strip_prefix("Usage: ") {
            usage = Some(u.to_string());
            continue;
        }
        if !message.is_empty() {
            message.push_str(if line.starts_with("tip:") { "; " } else { " " });
        }
        message.push_str(line);
    }
    message.push_str("; usage: ");
    message.push_str(usage.as_deref().unwrap_or(command_usage));
    message
}

/// Whether the store was refused for a damaged WAL record, which
/// point-in-time recovery would read up to.
fn wal_damage(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<bloomlsm::Error>(),
        Some(bloomlsm::Error::Corruption {
            reason: bloomlsm::Damage::Wal(_),
            ..
        })
    )
}

/// The error and its causes joined with ": " on one line, each cause once:
/// the store's errors already print their cause in their own message (an
/// OS error, a corruption's reason), so a cause whose text is already there
/// is left out rather than repeated.
fn one_line(e: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message.replace(['\n', '\r'], " ")
}
