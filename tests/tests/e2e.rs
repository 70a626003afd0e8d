//! The end-to-end tests, one module per file, built as one test binary: one link instead of one
//! per file in every test build (`cargo test --test e2e cli::` runs one file's tests).

mod cli;
mod compose_cli;
mod crash;
mod registry_cli;
mod secret_cli;
mod shared_state;
mod specs_cli;
mod third_party_cli;
mod trust_cli;
mod workspace_cli;

/// With `autotests = false`, a file in `tests/` that is not a module above would never build or
/// run: every one must be declared here.
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let this = include_str!("e2e.rs");
    for entry in std::fs::read_dir(&dir).expect("tests/tests") {
        let path = entry.expect("entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs") && stem != "e2e" {
            assert!(
                this.contains(&format!("\nmod {stem};\n")),
                "tests/{stem}.rs is not a module of tests/e2e.rs"
            );
        }
    }
}
