//! Replay tokens: parsing any string as a `FaultPlan` never panics, and whatever parses
//! displays to a token that parses back to the same plan.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nand_hal::sim::FaultPlan;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = core::str::from_utf8(data) else {
        return;
    };
    let Ok(plan) = text.parse::<FaultPlan>() else {
        return;
    };
    let token = plan.to_string();
    assert_eq!(
        token.parse::<FaultPlan>(),
        Ok(plan),
        "{text:?} parsed, but its token {token:?} does not parse back to the same plan"
    );
});
