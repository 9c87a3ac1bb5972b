//! Bad arguments: clap's error as one line on stderr, like every other
//! error, ending with the usage of the command the line names.

use std::process::ExitCode;

use clap::CommandFactory;
use clap::error::ErrorKind;

use crate::EXIT_ERROR;
use crate::args::Cli;
use crate::commands;

/// What clap found wrong with the command line, as every error is
/// printed: one line, `error: ` first (clap's own message, its lines
/// joined, then the command's usage), exit status 2. Help and the version
/// are answers, printed as clap prints them (stdout, status 0), and so is
/// the help printed when no command is given (stderr, status 2).
pub fn report(e: &clap::Error) -> ExitCode {
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
