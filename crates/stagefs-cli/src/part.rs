//! Part profiles by name (`--part w25n01gv`): the simulator's built-in profiles of real
//! parts, matched ignoring case and punctuation.

use nand_hal::sim::profile::{self, Profile};

/// Most blocks a part the tool handles may have (the store's block table size).
pub const MAX_BLOCKS: usize = 2048;

/// Page size every supported part has (the file layer's page buffers).
pub const PAGE: usize = 2048;

fn key(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The profile called `name`, if the tool supports it.
pub fn by_name(name: &str) -> Result<Profile, String> {
    let want = key(name);
    let found = profile::ALL.iter().find(|p| key(p.name) == want);
    match found {
        Some(p) if p.geometry.page_size() as usize == PAGE && p.geometry.blocks() as usize <= MAX_BLOCKS => Ok(*p),
        Some(p) => Err(format!(
            "part {} is not supported by this tool ({} B pages, {} blocks; it handles {PAGE} B pages and up to {MAX_BLOCKS} blocks)",
            p.name,
            p.geometry.page_size(),
            p.geometry.blocks()
        )),
        None => Err(format!("unknown part '{name}'; known parts: {}", names().join(", "))),
    }
}

/// Names of the supported parts.
pub fn names() -> Vec<String> {
    profile::ALL
        .iter()
        .filter(|p| {
            p.geometry.page_size() as usize == PAGE && p.geometry.blocks() as usize <= MAX_BLOCKS
        })
        .map(|p| key(p.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_loosely_and_unknown_ones_say_what_is_known() {
        assert_eq!(by_name("W25N01GV").unwrap().name, profile::W25N01GV.name);
        assert_eq!(by_name("w25n01gv").unwrap().name, profile::W25N01GV.name);
        let e = by_name("nope").unwrap_err();
        assert!(e.contains("w25n01gv"), "{e}");
    }
}
