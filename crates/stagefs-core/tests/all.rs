//! The integration tests of `stagefs-core`, one test binary (each file its own module:
//! a binary per file compiled and linked the file layer and the store again for each).
//! Run one file's tests with a filter, e.g.
//! `cargo test --release -p stagefs-core --test all review_s47::`.

mod aim;
mod model;
mod support;

mod basic;
mod dir_count;
mod full_bucket;
mod id_reuse;
mod listing;
mod model_based;
mod powerloss;
mod read_disturb;
mod repair_log;
mod review_faults3;
mod review_id_reuse;
mod review_probe;
mod review_s32;
mod review_s32b;
mod review_s33;
mod review_s33b;
mod review_s36;
mod review_s36b;
mod review_s36c;
mod review_s37b;
mod review_s40;
mod review_s41;
mod review_s41b;
mod review_s43c;
mod review_s44b;
mod review_s44c;
mod review_s47;
mod review_s50;
mod review_s51;
mod review_s52;
mod review_s54;
mod review_s55;
mod review_s56;
mod review_s56b;
mod review_s57;
#[cfg(feature = "alloc")]
mod unnamed;
mod wear_out;
