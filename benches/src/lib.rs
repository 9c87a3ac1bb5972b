//! The side-by-side benchmark of bloomlsm against RocksDB: engines with
//! mirrored settings, workloads with checked answers, the kernel's I/O and
//! memory figures around each phase, scale mode, and the report.

pub mod device_probe;
pub mod engines;
pub mod keys;
pub mod paced;
pub mod plots;
pub mod probes;
pub mod procfs;
pub mod progress;
pub mod report;
pub mod rocks_probes;
pub mod rocks_ribbon;
pub mod run;
pub mod scale;
pub mod workload;
