//! `chitin compose` and the audit's composition tree, end to end: an author composes a
//! capability-free library into a tool offline and signs the result; it runs with no library
//! beside it; a library with a grant of its own is refused for static composition; and the
//! audit of a tool whose dependencies resolve at load shows each part with its signer, hash
//! and grants.

use std::process::Output;

use chitin_e2e::{built_dir, chitin, stderr, stdout};

fn code(out: &Output) -> i32 {
    out.status.code().expect("exit code")
}

#[test]
fn an_author_composes_a_library_in_and_the_result_runs_alone() {
    let data = tempfile::tempdir().expect("tempdir");
    let fixtures = built_dir("fixtures");
    let out_file = data.path().join("composed.wasm");
    // Signed with the development key `just build-components` signs with (default data dir).
    let out = chitin(data.path(), &[])
        .env_remove("CHITIN_DATA_DIR")
        .arg("compose")
        .arg(fixtures.join("test-composed-b.wasm"))
        .arg(fixtures.join("test-lib-text.wasm"))
        .arg("-o")
        .arg(&out_file)
        .args(["--key", "dev"])
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("chitin/test-lib-text 0.1.2"),
        "{}",
        stderr(&out)
    );

    let out = chitin(data.path(), std::slice::from_ref(&out_file))
        .args(["call", "text_calls_b", "{}"])
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let result: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(result["calls"], serde_json::json!([1, 2]));

    let out = chitin(data.path(), std::slice::from_ref(&out_file))
        .args(["audit", out_file.to_str().expect("path")])
        .output()
        .expect("run");
    let text = stdout(&out);
    assert!(
        text.contains("chitin/test-lib-text 0.1.2, composed in by its author"),
        "{text}"
    );

    let out = chitin(data.path(), &[])
        .arg("compose")
        .arg(fixtures.join("test-composed.wasm"))
        .arg(fixtures.join("test-lib-files.wasm"))
        .arg("-o")
        .arg(data.path().join("refused.wasm"))
        .output()
        .expect("run");
    assert_ne!(code(&out), 0);
    assert!(
        stderr(&out).contains("has capabilities of its own"),
        "{}",
        stderr(&out)
    );
    assert!(!data.path().join("refused.wasm").exists());
}

#[test]
fn the_audit_shows_the_composition_tree() {
    let data = tempfile::tempdir().expect("tempdir");
    // The workspace beside the data directory, never holding it (chitin refuses that).
    let ws = &data.path().join("workspace");
    for dir in ["rootdir", "libdir"] {
        std::fs::create_dir_all(ws.join(dir)).expect("dir");
    }
    let fixtures = built_dir("fixtures");
    let libs = [
        fixtures.join("test-lib-text.wasm"),
        fixtures.join("test-lib-files.wasm"),
    ];
    let root = fixtures.join("test-composed.wasm");
    let out = chitin(data.path(), &libs)
        .arg("--workspace")
        .arg(ws)
        .args(["audit", root.to_str().expect("path")])
        .output()
        .expect("run");
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{text}\n{}", stderr(&out));
    assert!(text.contains("composition:"), "{text}");
    assert!(
        text.contains("├─ chitin/test-lib-text 0.1.2, composed statically"),
        "{text}"
    );
    assert!(
        text.contains("└─ chitin/test-lib-files 0.1.0, linked through the host"),
        "{text}"
    );
    assert!(text.contains("files: read-only `libdir`"), "{text}");

    let out = chitin(data.path(), &libs)
        .arg("--workspace")
        .arg(ws)
        .args(["audit", "--json", root.to_str().expect("path")])
        .output()
        .expect("run");
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let parts = json["composition"].as_array().expect("composition");
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[1]["component"], "chitin/test-lib-files");
    assert!(
        parts[1]["hash"]
            .as_str()
            .is_some_and(|h| h.starts_with("blake3:"))
    );
}
