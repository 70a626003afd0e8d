//! The host's integration tests, one module per file, built as one test binary: each binary links
//! all of chitin, wasmtime and Cranelift, so one binary instead of one per file saves a link per
//! file in every test build (`cargo test --test integration http::` runs one file's tests).
//! The test-only probe capability is a binary of its own (`tests/probe.rs`): it needs a feature.

mod common;
mod https_server;
// The one throwaway-server helper, shared with the end-to-end tests (which use all of it).
#[allow(dead_code)]
#[path = "../../tests/src/postgres.rs"]
mod postgres;
#[path = "../../tests/src/test_binary.rs"]
mod test_binary;

mod bad_input;
mod cache;
mod calls;
mod client;
mod compose;
mod fs;
mod host_fault;
mod http;
mod invoke;
mod layering;
mod mcp_http_connections;
mod mcp_http_direct;
mod mcp_http_keepalive;
mod mcp_http_sessions;
mod mcp_stdio_direct;
mod memory;
mod process;
mod redaction;
mod replicas;
mod sandbox;
mod specs;
mod storage;
mod tools;
mod trust;
mod typed_exports;

/// Every file in `tests/` is one of the modules above (`probe.rs` is its own binary).
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    test_binary::assert_every_file_is_a_module(
        &dir,
        "integration",
        include_str!("integration.rs"),
        &["probe"],
    );
}
