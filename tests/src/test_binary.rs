//! The check each merged test binary runs on itself: with `autotests = false`, a file in a
//! crate's `tests/` folder that is not a module of its one test binary would never build or run.

use std::path::Path;

/// Panics naming every `*.rs` file in `tests_dir` that `binary_source` (the binary's own root
/// file, `binary`.rs) does not declare as `mod NAME;`; the files named in `apart` are skipped.
pub fn assert_every_file_is_a_module(
    tests_dir: &Path,
    binary: &str,
    binary_source: &str,
    apart: &[&str],
) {
    let entries = std::fs::read_dir(tests_dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", tests_dir.display()));
    let mut missing = Vec::new();
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let is_rust = path.extension().is_some_and(|e| e == "rs");
        let declared = binary_source.contains(&format!("\nmod {stem};\n"));
        if is_rust && stem != binary && !apart.contains(&stem) && !declared {
            missing.push(format!("tests/{stem}.rs"));
        }
    }
    assert!(
        missing.is_empty(),
        "not modules of tests/{binary}.rs, so they never run: {}",
        missing.join(", ")
    );
}
