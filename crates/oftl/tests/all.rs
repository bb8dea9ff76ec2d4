//! The integration tests of `oftl`, one test binary (each file its own module): a
//! binary per file compiled and linked the store again for every one of them, which
//! made up most of the CI's build time. Run one file's tests with a filter, e.g.
//! `cargo test --release -p oftl --features alloc --test all review_s48::`.

mod common;

mod basic;
mod cache_probe;
mod deferred_cut_blocks;
mod direct_damaged;
mod direct_objects;
mod full_device;
mod fuzz_regressions;
mod hardening;
mod id_reuse;
mod in_place;
mod log_positions;
mod model;
mod perf;
mod powerloss;
mod read_only_cache;
mod read_only_mounts;
#[cfg(feature = "alloc")]
mod rebuild;
mod recovery_copies;
mod reformat;
mod review_ckpt_blocks;
mod review_ckpt_search2;
mod review_defer_log;
mod review_id_reuse;
mod review_mount_retry;
mod review_probe;
#[cfg(feature = "alloc")]
mod review_recovery_slices;
mod review_s32b;
mod review_s32c;
mod review_s33b;
mod review_s34;
mod review_s35;
mod review_s36c;
mod review_s37;
mod review_s37b;
mod review_s38;
mod review_s38b;
mod review_s39;
mod review_s40b;
#[cfg(feature = "alloc")]
mod review_s41b;
mod review_s42;
mod review_s43;
mod review_s44;
mod review_s45;
mod review_s45b;
mod review_s46;
mod review_s48;
mod review_seq_wrap;
mod review_tail_run;
mod robustness;
mod salvage;
mod salvage_logs;
mod small_meta;
mod small_meta_review;
mod table_stress;
mod torn_erase_markers;
mod window;
