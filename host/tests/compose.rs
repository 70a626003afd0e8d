//! Composition at load: library components resolved from a tool's `[[dependencies]]`, a
//! capability-free one composed statically and one with its own grant linked through the host.
//! Each part keeps its own rights; a tampered, untrusted, wrongly signed or incompatible
//! library is refused by name.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chitin_host::approver::{CallContext, Consenter};
use chitin_host::engine::EngineOptions;
use chitin_host::error::LoadError;
use chitin_host::policy::ProcessPolicy;
use chitin_host::runtime::LibraryUse;
use chitin_host::{Host, Limits, Runtime, ToolError};
use common::{fixture, policy, resign, services, test_engine};
use serde_json::{Value, json};

const TEXT_MANIFEST: &str = "schema = 1\n[component]\nname = \"test-lib-text\"\n\
    namespace = \"chitin\"\nversion = \"VERSION\"\npublisher = \"chitin\"\nkind = \"library\"\n";

/// An empty host over a workspace holding `rootdir/f.txt` (the tool's grant) and
/// `libdir/f.txt` (the files library's grant).
fn host(data: &Path) -> Host {
    host_on(data, &test_engine())
}

/// As [`host`], on an engine built with `options`.
fn host_on(data: &Path, options: &EngineOptions) -> Host {
    let ws = data.join("workspace");
    for dir in ["rootdir", "libdir"] {
        std::fs::create_dir_all(ws.join(dir)).expect("dir");
        std::fs::write(ws.join(dir).join("f.txt"), dir).expect("file");
    }
    let runtime = Runtime::new(common::shared_cache(), options).expect("runtime");
    Host::new(runtime, policy(Limits::default()), services(data, &ws))
}

async fn load(host: &mut Host, paths: &[PathBuf]) {
    for p in paths {
        host.load_path(p).await.expect("load");
    }
}

/// Load the composed tool with both its libraries.
async fn load_composed(host: &mut Host) {
    let parts = ["test-lib-text", "test-lib-files", "test-composed"];
    load(host, &parts.map(fixture)).await;
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write");
    path
}

async fn ok(host: &Host, tool: &str, args: Value) -> Value {
    match host.call(tool, &args.to_string()).await.result {
        Ok(out) => out.json().expect("JSON"),
        Err(e) => panic!("{tool} {args}: {e}"),
    }
}

async fn err(host: &Host, tool: &str, args: Value) -> ToolError {
    match host.call(tool, &args.to_string()).await.result {
        Ok(out) => panic!("{tool} {args} succeeded: {}", out.text),
        Err(e) => e,
    }
}

#[tokio::test]
async fn composed_and_linked_libraries_work_and_keep_their_own_rights() {
    let data = tempfile::tempdir().expect("tempdir");
    let mut h = host(data.path());
    // Loaded file by file, so libraries come before the tools that depend on them.
    load(
        &mut h,
        &[
            fixture("test-lib-text"),
            fixture("test-lib-files"),
            fixture("test-composed"),
            fixture("test-composed-b"),
        ],
    )
    .await;
    let composed = h
        .components()
        .iter()
        .find(|c| c.name() == "chitin/test-composed")
        .expect("loaded");
    let uses: Vec<(String, LibraryUse)> = composed
        .libraries
        .iter()
        .map(|(l, u)| (l.id(), *u))
        .collect();
    assert_eq!(
        uses,
        [
            ("chitin/test-lib-text".to_owned(), LibraryUse::Composed),
            ("chitin/test-lib-files".to_owned(), LibraryUse::Linked),
        ]
    );

    let out = ok(&h, "shout", json!({"text": "quiet"})).await;
    assert_eq!(out["text"], "QUIET");

    // The linked library reads under its own grant, not the tool's...
    let out = ok(&h, "lib_read", json!({"path": "libdir/f.txt"})).await;
    assert_eq!(out["text"], "libdir");
    let e = err(&h, "lib_read", json!({"path": "rootdir/f.txt"})).await;
    assert!(matches!(e, ToolError::PermissionDenied(_)), "{e:?}");
    // ...and the tool reads under its own, not the library's.
    let out = ok(&h, "own_read", json!({"path": "rootdir/f.txt"})).await;
    assert_eq!(out["text"], "rootdir");
    let e = err(&h, "own_read", json!({"path": "libdir/f.txt"})).await;
    assert!(matches!(e, ToolError::PermissionDenied(_)), "{e:?}");

    // A composed library lives in the tool's instance: fresh per call, shared within one.
    for _ in 0..2 {
        let out = ok(&h, "text_calls", json!({})).await;
        assert_eq!(out["calls"], json!([1, 2]));
        let out = ok(&h, "text_calls_b", json!({})).await;
        assert_eq!(out["calls"], json!([1, 2]));
    }
    // A linked library runs each call in a fresh instance of its own.
    let out = ok(&h, "files_calls", json!({})).await;
    assert_eq!(out["calls"], json!([1, 1]));
}

#[tokio::test]
async fn a_missing_dependency_is_refused_by_name() {
    let data = tempfile::tempdir().expect("tempdir");
    let mut h = host(data.path());
    load(&mut h, &[fixture("test-lib-files")]).await;
    let e = h
        .load_path(&fixture("test-composed"))
        .await
        .expect_err("refused");
    let text = e.to_string();
    assert!(matches!(e, LoadError::Dependency { .. }), "{text}");
    assert!(
        text.contains("dependency `chitin/test-lib-text` ^0.1 is not loaded"),
        "{text}"
    );
}

#[tokio::test]
async fn a_tampered_or_untrusted_library_never_loads() {
    let data = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut bytes = std::fs::read(fixture("test-lib-text")).expect("read");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    let tampered = write(dir.path(), "tampered.wasm", &bytes);
    let mut h = host(data.path());
    let e = h.load_path(&tampered).await.expect_err("tampered");
    assert!(matches!(e, LoadError::Signature { .. }), "{e}");

    let bare = chitin_registry::signature::strip(&std::fs::read(fixture("test-lib-text")).unwrap())
        .expect("strip");
    let stranger = chitin_registry::keys::SigningKey::generate();
    let untrusted = chitin_registry::signature::sign(&bare, &stranger).expect("sign");
    let untrusted = write(dir.path(), "untrusted.wasm", &untrusted);
    let e = h.load_path(&untrusted).await.expect_err("untrusted");
    assert!(matches!(e, LoadError::Signature { .. }), "{e}");
    assert!(h.libraries().is_empty());
}

#[tokio::test]
async fn a_library_signed_by_another_publisher_or_at_another_version_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wasm = std::fs::read(fixture("test-lib-text")).expect("read");

    // Trusted for `chitin/*`, but as publisher `tests`; the tool asks for `chitin`.
    let other_signer = resign(&wasm, &TEXT_MANIFEST.replace("VERSION", "0.1.2"));
    let other_signer = write(dir.path(), "text.wasm", &other_signer);
    let data = tempfile::tempdir().expect("tempdir");
    let mut h = host(data.path());
    load(&mut h, &[other_signer, fixture("test-lib-files")]).await;
    let e = h
        .load_path(&fixture("test-composed"))
        .await
        .expect_err("refused");
    let text = e.to_string();
    assert!(text.contains("requires publisher `chitin`"), "{text}");

    // Version 0.2 is outside ^0.1.
    let newer = resign(&wasm, &TEXT_MANIFEST.replace("VERSION", "0.2.0"));
    let newer = write(dir.path(), "text2.wasm", &newer);
    let data = tempfile::tempdir().expect("tempdir");
    let mut h = host(data.path());
    load(&mut h, &[newer, fixture("test-lib-files")]).await;
    let e = h
        .load_path(&fixture("test-composed-b"))
        .await
        .expect_err("refused");
    let text = e.to_string();
    assert!(
        text.contains("`chitin/test-lib-text` ^0.1: only version 0.2.0 is loaded"),
        "{text}"
    );
}

#[tokio::test]
async fn a_library_cannot_use_a_capability_its_own_manifest_lacks() {
    // The files library without its files section (its process grant kept): it loads (its file imports are linked with
    // no preopens) and reaches nothing, whatever the tools that import it are granted.
    let dir = tempfile::tempdir().expect("tempdir");
    let wasm = std::fs::read(fixture("test-lib-files")).expect("read");
    let manifest = "schema = 1\n[component]\nname = \"test-lib-files\"\nnamespace = \"chitin\"\n\
                    version = \"0.1.0\"\npublisher = \"chitin\"\nkind = \"library\"\n\
                    [capabilities.process]\nprograms = [\"/bin/sh\"]\n";
    let stripped = write(dir.path(), "files.wasm", &resign(&wasm, manifest));
    let data = tempfile::tempdir().expect("tempdir");
    let mut h = host(data.path());
    load(
        &mut h,
        &[fixture("test-lib-text"), stripped, fixture("test-composed")],
    )
    .await;
    for path in ["libdir/f.txt", "rootdir/f.txt"] {
        err(&h, "lib_read", json!({ "path": path })).await;
    }
    let out = ok(&h, "own_read", json!({"path": "rootdir/f.txt"})).await;
    assert_eq!(out["text"], "rootdir");
}

/// The calling tool's caller, over `consenter`.
async fn call_as(
    host: &Host,
    consenter: Consenter,
    tool: &str,
    args: Value,
) -> Result<Value, ToolError> {
    let ctx = CallContext {
        consenter,
        ..CallContext::default()
    };
    let report = host.call_in(tool, &args.to_string(), &ctx).await;
    report.result.map(|out| out.json().expect("JSON"))
}

/// A library's processes count against the OAuth user whose call reached it, so no tool gets
/// round a user's share of the host's processes through a library with a process grant.
#[tokio::test]
async fn a_librarys_processes_count_against_the_calling_user() {
    let data = tempfile::tempdir().expect("tempdir");
    let mut h = host(data.path());
    load_composed(&mut h).await;
    let h = Arc::new(h);
    let ws = data.path().join("workspace");
    let alice = Consenter::Holder {
        holder: "oauth:\"app\" for \"alice\"".into(),
        person: "oauth user \"alice\"".into(),
    };
    let share = ProcessPolicy::default().max_running_per_user;
    let running: Vec<_> = (0..share)
        .map(|n| {
            let (h, alice) = (h.clone(), alice.clone());
            let command = format!("touch started-{n}; while [ ! -e gate ]; do sleep 0.05; done");
            tokio::spawn(async move {
                call_as(&h, alice, "lib_run", json!({ "command": command })).await
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !(0..share).all(|n| ws.join(format!("started-{n}")).exists()) {
        assert!(Instant::now() < deadline, "alice's processes did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let echo = json!({ "command": "echo mine" });
    match call_as(&h, alice.clone(), "lib_run", echo.clone()).await {
        Err(ToolError::ExecutionFailed(why)) => assert!(
            why.contains("alice") && why.contains("limit for one user"),
            "{why}"
        ),
        other => panic!("alice's process past her share was not refused: {other:?}"),
    }
    let out = call_as(&h, Consenter::Operator, "lib_run", echo)
        .await
        .expect("the operator's process runs while alice holds her share");
    assert_eq!(out["text"], "mine\n");
    std::fs::write(ws.join("gate"), "").expect("open the gate");
    for run in running {
        run.await.expect("join").expect("alice's long process");
    }
}

/// A call that finds the engine's pool full is told to retry, not that its tool crashed.
#[tokio::test]
async fn a_call_finding_the_pool_full_is_told_to_retry() {
    let data = tempfile::tempdir().expect("tempdir");
    // Room for 2 component and 8 core instances: the composed tool fits alone, but not with the
    // instance of the files library its `lib_run` links in (each part several core modules).
    let options = EngineOptions {
        max_live_instances: 2,
        ..test_engine()
    };
    let mut h = host_on(data.path(), &options);
    load_composed(&mut h).await;
    let report = h
        .call("lib_run", &json!({ "command": "echo hi" }).to_string())
        .await;
    match &report.result {
        Err(ToolError::RateLimited(why)) => assert!(
            why.contains("as many calls as its engine has room for")
                && why.contains("maximum concurrent limit")
                && why.contains("retry when one ends"),
            "{why}"
        ),
        other => panic!("a call finding the pool full was not told to retry: {other:?}"),
    }
    assert!(!report.crashed, "a full pool is not the tool crashing");
    let out = ok(&h, "shout", json!({ "text": "hi" })).await;
    assert_eq!(out["text"], "HI");
}
