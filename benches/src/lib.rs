//! The side-by-side benchmark of bloomlsm against RocksDB: engines with
//! mirrored settings, workloads with checked answers, and the report.

pub mod engines;
pub mod keys;
pub mod report;
pub mod run;
pub mod workload;
