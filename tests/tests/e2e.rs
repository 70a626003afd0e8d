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

/// Every file in `tests/` is one of the modules above.
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    chitin_e2e::test_binary::assert_every_file_is_a_module(
        &dir,
        "e2e",
        include_str!("e2e.rs"),
        &[],
    );
}
