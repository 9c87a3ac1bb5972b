//! `bloomlsm`: inspect tables, trace lookups, read and write a store, size
//! filters, and print the lecture's numbers. Aligned text by default (fields
//! in reading order: what was asked, the answer, then the details), JSON
//! with the same fields in the same order with `--json`.
//!
//! Exit status: 0 success, 1 `get` of a key that is not found, 2 an error
//! or bad arguments (either: one line on stderr). A reader that closes stdout
//! early (`| head`) is no error: the status is the answer's.

mod args;
mod bad_arguments;
mod commands;
mod output;
mod render;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, WalRecoveryArg};
use crate::commands::Status;

/// `get` found no value.
const EXIT_NOT_FOUND: u8 = 1;
/// The command failed (clap uses the same status for bad arguments).
pub(crate) const EXIT_ERROR: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return bad_arguments::report(&e),
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
