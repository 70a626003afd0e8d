//! Auditing runs no code with rights: `chitin manifest embed`, `audit`, `publish` and `install`
//! of a component whose `specs()` reaches for its files and process grants leave no trace, and
//! the tools an audit shows come from the signed manifest, even from its manifest part alone.

use std::path::{Path, PathBuf};
use std::process::Output;

use chitin_e2e::{built_dir, chitin, run_with_stdin, stderr, stdout};

/// Files `test-specs`' `specs()` would create with its grant.
const MARKERS: [&str; 2] = ["specs-wrote-this", "specs-ran-this"];

/// Run chitin with data in `data` and `ws` as the workspace (and current directory).
fn run(data: &Path, ws: &Path, args: &[&str]) -> Output {
    run_with_stdin(
        chitin(data, &[])
            .arg("--workspace")
            .arg(ws)
            .current_dir(ws)
            .env_remove("CHITIN_SECRETS_KEY")
            .args(args),
        None,
    )
}

fn ok(data: &Path, ws: &Path, args: &[&str]) -> String {
    let out = run(data, ws, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "chitin {args:?}\nstdout: {}\nstderr: {}",
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

fn assert_untouched(ws: &Path, step: &str) {
    for marker in MARKERS {
        assert!(
            !ws.join(marker).exists(),
            "{step} ran specs() with its grant: {marker} exists"
        );
    }
}

fn fixture() -> PathBuf {
    built_dir("fixtures").join("test-specs.wasm")
}

#[test]
fn embed_audit_publish_and_install_run_nothing_with_rights() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, ws) = (dir.path().join("data"), dir.path().join("ws"));
    std::fs::create_dir_all(&data).expect("data");
    std::fs::create_dir_all(&ws).expect("ws");
    let file = fixture();
    let file = file.to_str().expect("utf-8");

    let embedded = dir.path().join("embedded.wasm");
    let manifest = chitin_e2e::repo().join("components/test-specs/manifest.toml");
    ok(
        &data,
        &ws,
        &[
            "manifest",
            "embed",
            file,
            manifest.to_str().expect("utf-8"),
            "-o",
            embedded.to_str().expect("utf-8"),
        ],
    );
    assert_untouched(&ws, "manifest embed");
    let recorded = ok(
        &data,
        &ws,
        &["manifest", "check", embedded.to_str().unwrap()],
    );
    assert!(recorded.contains("chitin/test-specs"), "{recorded}");

    let audit = ok(&data, &ws, &["audit", file]);
    assert_untouched(&ws, "audit");
    assert!(
        audit.contains("  ping [approval: never]: Answers pong."),
        "{audit}"
    );

    ok(
        &data,
        &ws,
        &["publish", file, "--registry", "local", "--replace"],
    );
    assert_untouched(&ws, "publish");
    let found = ok(&data, &ws, &["search", "test-specs", "--registry", "local"]);
    assert!(found.contains("ping"), "{found}");
    let installed = ok(
        &data,
        &ws,
        &[
            "install",
            "chitin/test-specs",
            "--registry",
            "local",
            "--yes",
        ],
    );
    assert_untouched(&ws, "install");
    assert!(installed.contains("tools: ping"), "{installed}");
}

#[test]
fn the_manifest_part_alone_audits_with_its_tools() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, ws) = (dir.path().join("data"), dir.path().join("ws"));
    std::fs::create_dir_all(&data).expect("data");
    std::fs::create_dir_all(&ws).expect("ws");
    let bytes = std::fs::read(built_dir("components").join("fs.wasm")).expect("fs");
    let part = chitin_registry::signature::manifest_part(&bytes).expect("a manifest part");
    let prefix = dir.path().join("fs-manifest-part.wasm");
    std::fs::write(&prefix, part).expect("write");
    let audit = ok(&data, &ws, &["audit", prefix.to_str().expect("utf-8")]);
    assert!(audit.contains("trust:       TRUSTED"), "{audit}");
    assert!(audit.contains("  read_file"), "{audit}");
    assert!(audit.contains("imports:     not checked"), "{audit}");
}

#[test]
fn the_audit_notes_plain_exports_a_chitin_tool_component_does_not_serve() {
    let data = tempfile::tempdir().expect("tempdir");
    let ws = tempfile::tempdir().expect("tempdir");
    let file = built_dir("fixtures").join("test-mixed.wasm");
    let file = file.to_str().expect("utf-8");
    let out = ok(data.path(), ws.path(), &["audit", file]);
    assert!(
        out.contains("note: also exports extra, which chitin does not serve"),
        "{out}"
    );
    let out = ok(data.path(), ws.path(), &["audit", file, "--json"]);
    let audit: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        audit["unserved_exports"],
        serde_json::json!(["extra"]),
        "{out}"
    );
}
