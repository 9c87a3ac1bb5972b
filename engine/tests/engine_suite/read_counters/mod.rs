//! The read numbers users study (`Db::stats`, traced gets, the CLI's
//! `trace` and `stats`) against ground truth: a counting file system logs
//! every table read, a model of the tree built from the manifest and the
//! table files gives each get's expected steps, and every counter delta,
//! trace step and logged read must agree. One binary, one module per
//! family of shapes.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod concurrent;
mod direct;
mod failed_get;
mod level_figures;
mod lifecycle;
mod open_files;
mod random;
mod scans_and_opens;
mod snapshots;
mod truth;
