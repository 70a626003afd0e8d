//! The `fs` component under real grants: every path attack of "Paths" in the adversarial list
//! is refused (by the component's lexical checks or by the host's preopen), and nothing outside
//! the grant is read or changed.

use crate::common;

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chitin_host::{Host, Limits, Runtime, ToolError};
use common::{component, policy, resign, services, test_engine};
use serde_json::{Value, json};

/// The fs component re-embedded with a manifest granting `files` (TOML array items).
fn fs_granting(dir: &Path, files: &str) -> PathBuf {
    let bytes = std::fs::read(component("fs")).expect("fs.wasm");
    let manifest = format!(
        "schema = 1\n[component]\nname = \"fs\"\nnamespace = \"chitin\"\nversion = \"0.1.0\"\n\
         publisher = \"chitin\"\ndescription = \"fs under test\"\n\
         [capabilities.files]\npaths = [{files}]\n"
    );
    let out = dir.join("fs-variant.wasm");
    std::fs::write(&out, resign(&bytes, &manifest)).expect("write variant");
    out
}

/// A host over `<tmp>/workspace`, with an "outside" sibling named to confuse prefix checks
/// (`<tmp>/workspace-evil`) holding a secret.
struct Setup {
    host: Host,
    root: tempfile::TempDir,
    outside: PathBuf,
}

impl Setup {
    /// The stock fs component (whole workspace, read-write).
    async fn new() -> Self {
        Self::granting(None, |_| {}).await
    }

    /// The fs component granted `files`, after `prepare` has shaped the workspace (grants are
    /// resolved at load, so granted sub-paths must exist by then).
    async fn granting(files: Option<&str>, prepare: impl FnOnce(&Path)) -> Self {
        Self::granting_under(files, roomy(), prepare).await
    }

    /// As [`Setup::granting`], under `limits`.
    async fn granting_under(
        files: Option<&str>,
        limits: Limits,
        prepare: impl FnOnce(&Path),
    ) -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        let ws = root.path().join("workspace");
        let outside = root.path().join("workspace-evil");
        for dir in [&ws, &outside, &root.path().join("data")] {
            std::fs::create_dir_all(dir).expect("mkdir");
        }
        std::fs::write(outside.join("secret.txt"), "TOP SECRET\n").expect("secret");
        prepare(&ws);
        let wasm = match files {
            Some(files) => fs_granting(root.path(), files),
            None => component("fs"),
        };
        let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
        let services = services(&root.path().join("data"), &ws);
        // The tools themselves are under test here, not the policy's approval rules.
        let mut policy = policy(limits);
        policy.approval.clear();
        let mut host = Host::new(runtime, policy, services);
        host.load_path(&wasm).await.expect("load fs");
        Setup {
            host,
            root,
            outside,
        }
    }

    fn ws(&self) -> PathBuf {
        self.root.path().join("workspace")
    }

    async fn ok(&self, tool: &str, args: Value) -> Value {
        match self.host.call(tool, &args.to_string()).await.result {
            Ok(out) => out.json().expect("JSON"),
            Err(e) => panic!("{tool} {args}: {e}"),
        }
    }

    async fn err(&self, tool: &str, args: Value) -> ToolError {
        match self.host.call(tool, &args.to_string()).await.result {
            Ok(out) => panic!("{tool} {args} succeeded: {}", out.text),
            Err(e) => e,
        }
    }

    /// The outside directory still holds exactly the secret, unchanged.
    fn outside_untouched(&self) {
        let names: Vec<String> = std::fs::read_dir(&self.outside)
            .expect("read outside")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["secret.txt"], "something was created outside");
        assert_eq!(
            std::fs::read_to_string(self.outside.join("secret.txt")).expect("secret"),
            "TOP SECRET\n"
        );
    }
}

/// Limits with room for the tool's own caps: a 5 MiB write needs more than the default 10 MiB
/// of memory (arguments and decoded content), a 1 MiB read more than the default 64 KiB result.
fn roomy() -> Limits {
    Limits {
        memory_bytes: 64 * 1024 * 1024,
        output_bytes: 4 * 1024 * 1024,
        ..Limits::default()
    }
}

fn is_refusal(e: &ToolError) -> bool {
    matches!(
        e,
        ToolError::InvalidPath(_) | ToolError::PermissionDenied(_)
    )
}

#[tokio::test]
async fn lexical_escapes_are_invalid_path_for_every_tool() {
    let s = Setup::new().await;
    let evil = "workspace-evil";
    let escapes = [
        s.outside.join("secret.txt").display().to_string(),
        "/etc/passwd".into(),
        format!("../{evil}/secret.txt"),
        format!("a/b/../../../{evil}/secret.txt"),
        format!("./.././{evil}/secret.txt"),
        "secret\0.txt".into(),
        "C:\\Windows\\system.ini".into(),
        "c:/x".into(),
        "..\\..\\etc\\passwd".into(),
        format!("{}/x", "a/".repeat(3000)),
    ];
    for path in &escapes {
        for (tool, args) in [
            ("read_file", json!({"path": path})),
            ("write_file", json!({"path": path, "content": "pwned"})),
            ("list_dir", json!({"path": path})),
            (
                "apply_patch",
                json!({"path": path, "old_string": "TOP", "new_string": "pwned"}),
            ),
            ("grep", json!({"pattern": "SECRET", "path": path})),
            ("glob", json!({"pattern": "*", "path": path})),
        ] {
            let e = s.err(tool, args).await;
            assert!(
                matches!(e, ToolError::InvalidPath(_)),
                "{tool} {path:?}: {e}"
            );
        }
    }
    for pattern in [format!("../{evil}/*"), "/etc/*".into()] {
        let e = s.err("glob", json!({"pattern": pattern})).await;
        assert!(matches!(e, ToolError::InvalidPath(_)), "{pattern}: {e}");
    }
    s.outside_untouched();
}

#[tokio::test]
async fn a_file_symlink_out_of_the_workspace_is_refused() {
    let s = Setup::new().await;
    std::os::unix::fs::symlink(s.outside.join("secret.txt"), s.ws().join("link.txt"))
        .expect("symlink");
    let e = s.err("read_file", json!({"path": "link.txt"})).await;
    assert!(is_refusal(&e), "{e}");
    assert!(!e.to_string().contains("TOP SECRET"), "{e}");
    let e = s
        .err(
            "write_file",
            json!({"path": "link.txt", "content": "pwned"}),
        )
        .await;
    assert!(is_refusal(&e), "{e}");
    let e = s
        .err(
            "apply_patch",
            json!({"path": "link.txt", "old_string": "TOP", "new_string": "pwned"}),
        )
        .await;
    assert!(is_refusal(&e), "{e}");
    let out = s.ok("grep", json!({"pattern": "SECRET"})).await;
    assert_eq!(out["matches"], json!([]));
    let out = s.ok("list_dir", json!({})).await;
    assert_eq!(
        out["entries"],
        json!([{"path": "link.txt", "type": "symlink", "size": 0}])
    );
    s.outside_untouched();
}

#[tokio::test]
async fn a_hard_link_to_a_file_outside_is_never_written_through() {
    // As uv links its cache into `.venv`: a name inside the workspace for a file outside it.
    let s = Setup::new().await;
    std::fs::hard_link(s.outside.join("secret.txt"), s.ws().join("linked.txt")).expect("hard link");
    for (tool, args) in [
        (
            "write_file",
            json!({"path": "linked.txt", "content": "pwned"}),
        ),
        (
            "apply_patch",
            json!({"path": "linked.txt", "old_string": "TOP", "new_string": "pwned"}),
        ),
    ] {
        let e = s.err(tool, args).await;
        assert!(
            matches!(e, ToolError::PermissionDenied(_)) && e.to_string().contains("hard link"),
            "{tool}: {e}"
        );
    }
    s.outside_untouched();
    // Nothing was truncated before the refusal, and the file is still there to read.
    let out = s.ok("read_file", json!({"path": "linked.txt"})).await;
    assert_eq!(out["content"], "TOP SECRET\n");
    // Once the shared name is removed, a write makes a file of the workspace's own.
    std::fs::remove_file(s.ws().join("linked.txt")).expect("unlink");
    s.ok(
        "write_file",
        json!({"path": "linked.txt", "content": "mine"}),
    )
    .await;
    s.ok(
        "write_file",
        json!({"path": "linked.txt", "content": "mine, again"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(s.ws().join("linked.txt")).expect("read"),
        "mine, again"
    );
    s.outside_untouched();
}

#[tokio::test]
async fn a_directory_symlink_out_of_the_workspace_is_refused() {
    let s = Setup::new().await;
    std::os::unix::fs::symlink(&s.outside, s.ws().join("door")).expect("symlink");
    let e = s.err("read_file", json!({"path": "door/secret.txt"})).await;
    assert!(is_refusal(&e), "{e}");
    let e = s
        .err(
            "write_file",
            json!({"path": "door/new.txt", "content": "pwned"}),
        )
        .await;
    assert!(is_refusal(&e), "{e}");
    let e = s
        .err(
            "write_file",
            json!({"path": "door/sub/new.txt", "content": "pwned"}),
        )
        .await;
    assert!(is_refusal(&e), "{e}");
    let e = s.err("list_dir", json!({"path": "door"})).await;
    assert!(is_refusal(&e), "{e}");
    let e = s
        .err("grep", json!({"pattern": "SECRET", "path": "door"}))
        .await;
    assert!(is_refusal(&e), "{e}");
    let out = s.ok("glob", json!({"pattern": "**/*.txt"})).await;
    assert_eq!(out["paths"], json!([]));
    let out = s.ok("list_dir", json!({"recursive": true})).await;
    assert_eq!(out["entries"].as_array().expect("entries").len(), 1);
    s.outside_untouched();
}

#[tokio::test]
async fn a_narrowed_grant_does_not_admit_a_prefix_sibling() {
    let s = Setup::granting(Some(r#"{ path = "ctx", access = "read-write" }"#), |ws| {
        std::fs::create_dir_all(ws.join("ctx")).expect("ctx");
        std::fs::create_dir_all(ws.join("ctx-secret")).expect("ctx-secret");
        std::fs::write(ws.join("ctx/a.txt"), "inside\n").expect("a");
        std::fs::write(ws.join("ctx-secret/s.txt"), "CTX SECRET\n").expect("s");
        std::fs::write(ws.join("top.txt"), "top\n").expect("top");
    })
    .await;
    let out = s.ok("read_file", json!({"path": "ctx/a.txt"})).await;
    assert_eq!(out["content"], "inside\n");
    s.ok(
        "write_file",
        json!({"path": "ctx/new.txt", "content": "ok"}),
    )
    .await;
    for path in ["ctx-secret/s.txt", "top.txt", "ctx/../ctx-secret/s.txt"] {
        let e = s.err("read_file", json!({"path": path})).await;
        assert!(
            is_refusal(&e) || matches!(e, ToolError::NotFound(_)),
            "{path}: {e}"
        );
        assert!(!e.to_string().contains("SECRET"), "{e}");
    }
    let e = s
        .err(
            "write_file",
            json!({"path": "ctx-secret/x.txt", "content": "pwned"}),
        )
        .await;
    assert!(is_refusal(&e) || matches!(e, ToolError::NotFound(_)), "{e}");
    assert!(!s.ws().join("ctx-secret/x.txt").exists());
    assert!(!s.ws().join("x.txt").exists());
    s.outside_untouched();
}

#[tokio::test]
async fn walks_and_searches_report_the_tree_as_it_is() {
    use std::os::unix::ffi::OsStrExt;
    // The component reads directories and searched files through `wasi:filesystem` itself:
    // kinds from the entries, sizes from one `stat-at`, a file read up to its size in host
    // reads of at most 64 KiB, the preopen found by the longest prefix.
    let long = format!("{}needle at the end\n", "filler line\n".repeat(20_000));
    let s = Setup::granting(
        Some(r#"{ path = ".", access = "read-only" }, { path = "src", access = "read-write" }"#),
        |ws| {
            for dir in ["docs/sub", "docs/node_modules/pkg", "src"] {
                std::fs::create_dir_all(ws.join(dir)).expect("mkdir");
            }
            std::fs::write(ws.join("docs/a.md"), "alpha\n").expect("a");
            std::fs::write(ws.join("docs/empty.md"), "").expect("empty");
            std::fs::write(ws.join("docs/sub/b.md"), "beta needle\n").expect("b");
            std::fs::write(ws.join("docs/sub/long.txt"), &long).expect("long");
            std::fs::write(ws.join("docs/node_modules/pkg/c.md"), "needle\n").expect("c");
            std::fs::write(ws.join("src/main.rs"), "fn main() {} // needle\n").expect("main");
            std::os::unix::fs::symlink("main.rs", ws.join("src/link.rs")).expect("symlink");
            // A name that is not UTF-8 is left out, and the listing goes on past it.
            let bad = std::ffi::OsStr::from_bytes(b"docs/bad\xff needle.md");
            std::fs::write(ws.join(bad), "needle\n").expect("not UTF-8");
        },
    )
    .await;
    let out = s
        .ok("list_dir", json!({"path": "docs", "recursive": true}))
        .await;
    assert_eq!(
        out["entries"],
        json!([
            {"path": "docs/a.md", "type": "file", "size": 6},
            {"path": "docs/empty.md", "type": "file", "size": 0},
            {"path": "docs/node_modules", "type": "dir", "size": 0},
            {"path": "docs/sub", "type": "dir", "size": 0},
            {"path": "docs/sub/b.md", "type": "file", "size": 12},
            {"path": "docs/sub/long.txt", "type": "file", "size": long.len()},
        ])
    );
    // Under the nested read-write preopen, and from the root's above it.
    for (path, recursive) in [("src", false), (".", true)] {
        let out = s
            .ok("list_dir", json!({"path": path, "recursive": recursive}))
            .await;
        let entries = out["entries"].as_array().expect("entries");
        assert!(
            entries.contains(&json!({"path": "src/link.rs", "type": "symlink", "size": 0}))
                && entries.contains(&json!({"path": "src/main.rs", "type": "file", "size": 23})),
            "{path}: {out}"
        );
    }
    let out = s
        .ok("glob", json!({"pattern": "**/*.md", "path": "docs"}))
        .await;
    assert_eq!(
        out["paths"],
        json!(["docs/a.md", "docs/empty.md", "docs/sub/b.md"])
    );
    let out = s.ok("grep", json!({"pattern": "needle"})).await;
    let found: Vec<(&str, u64)> = out["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .map(|m| {
            (
                m["path"].as_str().expect("path"),
                m["line_number"].as_u64().expect("line"),
            )
        })
        .collect();
    // Not node_modules (listed, never descended), not the symlink (reported, never followed).
    assert_eq!(
        found,
        [
            ("docs/sub/b.md", 1),
            ("docs/sub/long.txt", 20_001),
            ("src/main.rs", 1)
        ]
    );
    assert_eq!(out["files_searched"], 5);
    // A file named outright is read through a symlink, as `read_file` reads it.
    let out = s
        .ok("grep", json!({"pattern": "needle", "path": "src/link.rs"}))
        .await;
    assert_eq!(out["matches"][0]["path"], "src/link.rs");
    assert_eq!(out["files_searched"], 1);
}

#[tokio::test]
async fn a_read_only_grant_reads_but_cannot_write() {
    let s = Setup::granting(Some(r#"{ path = ".", access = "read-only" }"#), |ws| {
        std::fs::write(ws.join("f.txt"), "one\n").expect("f");
    })
    .await;
    let out = s.ok("read_file", json!({"path": "f.txt"})).await;
    assert_eq!(out["content"], "one\n");
    for (tool, args) in [
        ("write_file", json!({"path": "f.txt", "content": "two"})),
        ("write_file", json!({"path": "new.txt", "content": "two"})),
        ("write_file", json!({"path": "d/new.txt", "content": "two"})),
        (
            "apply_patch",
            json!({"path": "f.txt", "old_string": "one", "new_string": "two"}),
        ),
    ] {
        let e = s.err(tool, args.clone()).await;
        assert!(
            matches!(e, ToolError::PermissionDenied(_)),
            "{tool} {args}: {e}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(s.ws().join("f.txt")).expect("f"),
        "one\n"
    );
    assert!(!s.ws().join("new.txt").exists() && !s.ws().join("d").exists());
}

#[tokio::test]
async fn no_files_grant_reaches_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let ws = root.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(ws.join("f.txt"), "x").expect("f");
    let bytes = std::fs::read(component("fs")).expect("fs.wasm");

    // A manifest without a files section: the file imports are linked with no preopens, and a
    // policy that does not allow files cuts the grant the same way. Either way nothing is reached.
    let undeclared = "schema = 1\n[component]\nname = \"fs\"\nnamespace = \"chitin\"\n\
                      version = \"0.1.0\"\npublisher = \"chitin\"\ndescription = \"no grant\"\n";
    let wasm = root.path().join("fs-undeclared.wasm");
    std::fs::write(&wasm, resign(&bytes, undeclared)).expect("write");
    let mut no_files = policy(Limits::default());
    no_files.capabilities.allow.retain(|c| c != "files");
    no_files.approval.clear();
    let mut open = policy(Limits::default());
    open.approval.clear();
    // Each case in its own data directory: the first would pin chitin/fs without files.
    for (i, (path, policy)) in [(wasm, open), (component("fs"), no_files)]
        .into_iter()
        .enumerate()
    {
        let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
        let data = root.path().join(format!("data-{i}"));
        let mut host = Host::new(runtime, policy, services(&data, &ws));
        host.load_path(&path).await.expect("load");
        for (tool, args) in [
            ("read_file", json!({"path": "f.txt"})),
            ("read_file", json!({"path": "/etc/passwd"})),
            ("write_file", json!({"path": "g.txt", "content": "x"})),
            ("list_dir", json!({})),
        ] {
            let e = host
                .call(tool, &args.to_string())
                .await
                .result
                .expect_err(tool);
            assert!(
                matches!(
                    e,
                    ToolError::PermissionDenied(_)
                        | ToolError::NotFound(_)
                        | ToolError::InvalidPath(_)
                ),
                "{}: {tool}: {e}",
                path.display()
            );
        }
    }
    assert!(!ws.join("g.txt").exists());
}

#[tokio::test]
async fn size_caps_protected_files_and_patch_ambiguity() {
    let s = Setup::granting(None, |ws| {
        let line = format!("{}\n", "y".repeat(1023));
        std::fs::write(ws.join("big.txt"), line.repeat(2048)).expect("big");
        std::fs::write(ws.join("SOUL.md"), "kind\n").expect("soul");
        std::fs::write(ws.join("code.rs"), "x = 1;\nx = 1;\n").expect("code");
    })
    .await;
    let out = s.ok("read_file", json!({"path": "big.txt"})).await;
    assert_eq!(out["content"].as_str().expect("content").len(), 1024 * 1024);
    assert_eq!(out["truncated"], true);
    assert_eq!(out["next_offset"], 1024);

    let e = s
        .err(
            "write_file",
            json!({"path": "huge.txt", "content": "z".repeat(5 * 1024 * 1024 + 1)}),
        )
        .await;
    assert!(
        matches!(e, ToolError::InvalidArgs(ref m) if m.contains("write cap")),
        "{e}"
    );
    assert!(!s.ws().join("huge.txt").exists());

    for path in [
        "SOUL.md",
        "IDENTITY.md",
        "agents.md",
        "USER.md",
        "MEMORY.md",
        "daily/x.md",
    ] {
        let e = s
            .err("write_file", json!({"path": path, "content": "evil"}))
            .await;
        assert!(matches!(e, ToolError::PermissionDenied(_)), "{path}: {e}");
    }
    let e = s
        .err(
            "apply_patch",
            json!({"path": "SOUL.md", "old_string": "kind", "new_string": "cruel"}),
        )
        .await;
    assert!(matches!(e, ToolError::PermissionDenied(_)), "{e}");
    assert_eq!(
        std::fs::read_to_string(s.ws().join("SOUL.md")).expect("soul"),
        "kind\n"
    );

    let e = s
        .err(
            "apply_patch",
            json!({"path": "code.rs", "old_string": "x = 1", "new_string": "x = 2"}),
        )
        .await;
    assert!(
        matches!(e, ToolError::InvalidArgs(ref m) if m.contains("matches 2 times")),
        "{e}"
    );
    let e = s
        .err(
            "apply_patch",
            json!({"path": "code.rs", "old_string": "y = 1", "new_string": "x = 2"}),
        )
        .await;
    assert!(
        matches!(e, ToolError::InvalidArgs(ref m) if m.contains("0 matches")),
        "{e}"
    );
    let out = s
        .ok(
            "apply_patch",
            json!({"path": "code.rs", "old_string": "x = 1", "new_string": "x = 2", "replace_all": true}),
        )
        .await;
    assert_eq!(out["replacements"], 2);
    s.outside_untouched();
}

#[tokio::test]
async fn secrets_anywhere_in_a_mebibyte_read_are_redacted() {
    // Built at run time, so no credential-shaped literal sits in the source.
    let token = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
    let key = format!("AKIA{}", "IOSFODNN7EXAMPLE");
    let line = format!("{}\n", "x".repeat(1023));
    let mut text = format!("{token} at the start\n");
    // The rest of the window: lines of filler, a key across every 64 KiB read boundary, and a
    // token ending exactly at the 1 MiB cap.
    while text.len() < 1024 * 1024 - 2 * 1024 {
        let boundary = (text.len() / 65_536 + 1) * 65_536;
        if text.len() + 2 * line.len() > boundary && text.len() < boundary {
            let pad = boundary - text.len() - key.len() / 2;
            text.push_str(&" ".repeat(pad));
            text.push_str(&key);
            text.push('\n');
        } else {
            text.push_str(&line);
        }
    }
    let last = format!(
        "{}{token}\n",
        " ".repeat(1024 * 1024 - text.len() - token.len() - 1)
    );
    text.push_str(&last);
    assert_eq!(text.len(), 1024 * 1024);
    text.push_str("beyond the cap\n");
    let s = Setup::granting(None, |ws| {
        std::fs::write(ws.join("big.txt"), &text).expect("big");
    })
    .await;
    let out = s.ok("read_file", json!({"path": "big.txt"})).await;
    let content = out["content"].as_str().expect("content");
    assert_eq!(out["truncated"], true);
    assert!(!content.contains(&token) && !content.contains(&key));
    assert!(content.starts_with("[REDACTED:github_token] at the start\n"));
    assert!(content.ends_with("[REDACTED:github_token]\n"));
    assert_eq!(content.matches("[REDACTED:aws_access_key_id]").count(), 15);
}

/// A tool's result is JSON: a credential at the start of a line follows the escape `\n`, a
/// quoted one the escape `\"`. Each is found through the escape and redacted, and the result is
/// still JSON with the rest of the file as written.
#[tokio::test]
async fn credentials_after_a_line_break_a_tab_or_a_quote_are_redacted() {
    // Built at run time, so no credential-shaped literal sits in the source.
    let token = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
    let key = format!("AKIA{}", "IOSFODNN7EXAMPLE");
    let password = "Xk9vLq2mZp7wRt4yB3";
    let config =
        format!("[db]\npassword = \"{password}\"\n{key}\n\t{token}\napi_key: \"{token}\"\n");
    let s = Setup::granting(None, |ws| {
        std::fs::write(ws.join("app.toml"), &config).expect("config");
    })
    .await;
    let out = s.ok("read_file", json!({"path": "app.toml"})).await;
    let content = out["content"].as_str().expect("content");
    assert_eq!(
        content,
        "[db]\npassword = \"[REDACTED:secret_assignment]\"\n[REDACTED:aws_access_key_id]\n\t\
         [REDACTED:github_token]\napi_key: \"[REDACTED:github_token]\"\n"
    );
}

#[tokio::test]
async fn a_token_encoded_across_the_lines_of_base64s_output_is_redacted_with_them() {
    let token = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
    // `base64 config.toml`: 76 characters a line, the token's encoding across the first break.
    let config = format!("[github]\nnote = \"rotated monthly\"\ntoken = \"{token}\"\n");
    let encoded = STANDARD.encode(&config);
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(76)
        .map(|l| std::str::from_utf8(l).expect("ascii"))
        .collect();
    let start = config.find("ghp_").expect("token");
    let end = start + token.len();
    assert!(
        start * 4 / 3 < 76 && (end * 4).div_ceil(3) > 76,
        "across the break"
    );
    let file = format!("{}\n", lines.join("\n"));
    let s = Setup::granting(None, |ws| {
        std::fs::write(ws.join("config.b64"), &file).expect("file");
    })
    .await;
    let out = s.ok("read_file", json!({"path": "config.b64"})).await;
    assert_eq!(out["content"], "[REDACTED:github_token]\n");
}

#[tokio::test]
async fn read_file_hands_back_every_byte_as_written() {
    // Every byte that JSON escapes, and multi-byte characters, at every offset of the
    // component's SIMD steps (sixty-four bytes, then sixteen, then the tail), between clean runs
    // of every length up to 150.
    let specials: Vec<String> = (0u8..0x20)
        .map(|b| char::from(b).to_string())
        .chain(["\"", "\\", "\u{7f}", "é", "✓", "🦀", "\u{2028}"].map(str::to_owned))
        .collect();
    let clean = "abcdefghijklmnopqrstuvwxyz0123456789ABCD".repeat(4);
    let mut text = String::new();
    for (i, special) in specials.iter().enumerate() {
        for run in 0..150 {
            text.push_str(&clean[..run]);
            text.push_str(special);
            text.push_str(&specials[(i + run) % specials.len()]);
        }
        text.push('\n');
    }
    let s = Setup::granting(None, |ws| {
        std::fs::write(ws.join("mixed.txt"), &text).expect("mixed");
    })
    .await;
    let out = s.ok("read_file", json!({"path": "mixed.txt"})).await;
    assert_eq!(out["content"].as_str(), Some(text.as_str()));
    assert_eq!(out["lines"], text.matches('\n').count());
}

#[tokio::test(flavor = "current_thread")]
async fn read_file_checks_utf8_in_its_escaping_pass_wherever_ascii_ends() {
    // The component's escaper checks ASCII text in its own pass and hands what follows the
    // first other byte to a UTF-8 check: that byte at every offset of its SIMD steps, after
    // escapes or a clean run, as a valid character, an invalid byte, or a character cut off at
    // the end of the file.
    let prefix = |at: usize| -> Vec<u8> {
        (0..at)
            .map(|i| match i % 23 {
                7 => b'"',
                19 => b'\n',
                _ => b'a' + (i % 26) as u8,
            })
            .collect()
    };
    let s = Setup::granting(None, |ws| {
        for at in 0..140 {
            let mut good = prefix(at);
            good.extend_from_slice("é and 🦀 \" after\n".as_bytes());
            std::fs::write(ws.join(format!("good{at}.txt")), good).expect("good");
            let mut bad = prefix(at);
            bad.extend_from_slice(b"\xff then ASCII\n");
            std::fs::write(ws.join(format!("bad{at}.txt")), bad).expect("bad");
            let mut cut = prefix(at);
            cut.extend_from_slice(&"🦀".as_bytes()[..3]);
            std::fs::write(ws.join(format!("cut{at}.txt")), cut).expect("cut");
        }
    })
    .await;
    for at in 0..140 {
        let mut good = prefix(at);
        good.extend_from_slice("é and 🦀 \" after\n".as_bytes());
        let out = s
            .ok("read_file", json!({"path": format!("good{at}.txt")}))
            .await;
        assert_eq!(
            out["content"].as_str().map(str::as_bytes),
            Some(good.as_slice()),
            "good{at}.txt"
        );
        // The escaper counts the lines, on both sides of the first byte outside ASCII.
        let newlines = |bytes: &[u8]| bytes.iter().filter(|&&b| b == b'\n').count();
        assert_eq!(out["lines"], newlines(&good), "good{at}.txt");
        let err = s
            .err("read_file", json!({"path": format!("bad{at}.txt")}))
            .await;
        assert!(
            matches!(&err, ToolError::InvalidArgs(m) if m.contains("is not UTF-8 text")),
            "bad{at}.txt: {err}"
        );
        // A file that ends inside a character reads as the text before it.
        let out = s
            .ok("read_file", json!({"path": format!("cut{at}.txt")}))
            .await;
        assert_eq!(
            out["content"].as_str().map(str::as_bytes),
            Some(prefix(at).as_slice()),
            "cut{at}.txt"
        );
        // Its last line, cut inside its character, still counts.
        assert_eq!(out["lines"], newlines(&prefix(at)) + 1, "cut{at}.txt");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_fifo_without_a_writer_is_refused_without_waiting() {
    // Opens and stats the kernel can do from its caches run on the calling thread; a FIFO's
    // open waits for a writer, so it must not run there: on this one-thread runtime (as in
    // stdio serving) an open waiting here would stop every other call. On the pool it is made
    // with `O_NONBLOCK` and refused, so no pool thread waits for a writer either.
    let s = Setup::granting(None, |ws| {
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            ws.join("pipe"),
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .expect("fifo");
        std::fs::write(ws.join("small.txt"), "small\n").expect("small");
    })
    .await;
    // Were the open on this thread, nothing here could time out: the watchdog fails the run
    // instead of letting it hang.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watched = done.clone();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(90));
        if !watched.load(std::sync::atomic::Ordering::SeqCst) {
            eprintln!("a FIFO's open stalled the runtime thread for 90 s");
            std::process::abort();
        }
    });
    let started = std::time::Instant::now();
    for (tool, args) in [
        ("read_file", json!({"path": "pipe"})),
        ("write_file", json!({"path": "pipe", "content": "x"})),
        (
            "apply_patch",
            json!({"path": "pipe", "old_string": "a", "new_string": "b"}),
        ),
        ("grep", json!({"pattern": "x", "path": "pipe"})),
    ] {
        let e = s.err(tool, args.clone()).await;
        assert!(!matches!(e, ToolError::Timeout(_)), "{tool} {args}: {e}");
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the FIFO was waited for"
    );
    // A listing stats every entry, the FIFO too, on this thread: a `stat` opens nothing.
    let listed = s.ok("list_dir", json!({})).await;
    assert!(
        listed["entries"].as_array().is_some_and(|e| e
            .iter()
            .any(|e| e["path"] == "pipe" && e["type"] == "other")),
        "{listed}"
    );
    let read = s.ok("read_file", json!({"path": "small.txt"})).await;
    assert_eq!(read["content"], "small\n");
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

#[tokio::test]
async fn a_granted_sub_directory_swapped_for_a_link_out_reaches_nothing_outside() {
    // The grant `ctx` is resolved inside the workspace when the component loads; each call
    // opens it again. Between calls, anything that writes in the workspace (another tool
    // granted the root, which `symlink-at` lets make a relative link; a shell command) can put
    // a link `ctx -> ..` where the directory was: the next call must not get the parent.
    let s = Setup::granting(Some(r#"{ path = "ctx", access = "read-write" }"#), |ws| {
        std::fs::create_dir_all(ws.join("ctx")).expect("ctx");
        std::fs::write(ws.join("ctx/a.txt"), "inside\n").expect("a");
    })
    .await;
    let out = s.ok("read_file", json!({"path": "ctx/a.txt"})).await;
    assert_eq!(out["content"], "inside\n");
    let ws = s.ws();
    std::fs::rename(ws.join("ctx"), ws.join("ctx-moved")).expect("move ctx away");
    std::os::unix::fs::symlink("..", ws.join("ctx")).expect("ctx -> ..");
    let e = s
        .err(
            "read_file",
            json!({"path": "ctx/workspace-evil/secret.txt"}),
        )
        .await;
    assert!(!e.to_string().contains("SECRET"), "{e}");
    let e = s
        .err(
            "write_file",
            json!({"path": "ctx/workspace-evil/pwned.txt", "content": "pwned"}),
        )
        .await;
    assert!(!e.to_string().contains("SECRET"), "{e}");
    s.outside_untouched();
    // A directory put back where the grant names it is reached again.
    std::fs::remove_file(ws.join("ctx")).expect("remove the link");
    std::fs::rename(ws.join("ctx-moved"), ws.join("ctx")).expect("put ctx back");
    let out = s.ok("read_file", json!({"path": "ctx/a.txt"})).await;
    assert_eq!(out["content"], "inside\n");
}

#[test]
fn a_fifo_left_without_a_writer_holds_no_pool_thread_past_its_call() {
    // An open that may wait runs on the blocking pool, where a thread waiting in `open` cannot
    // be stopped: a FIFO's open (for reading or for writing) waits for its other end, past the
    // call's deadline, for good. Two such calls on a pool of two threads left none for any
    // other file operation of the server, and every later write timed out.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // A panic here is reported, not hidden behind a runtime drop waiting for stuck threads.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            let limits = Limits {
                timeout_ms: 2_000,
                ..roomy()
            };
            let s = Setup::granting_under(None, limits, |ws| {
                rustix::fs::mkfifoat(
                    rustix::fs::CWD,
                    ws.join("pipe"),
                    rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
                )
                .expect("fifo");
            })
            .await;
            let read = s.err("read_file", json!({"path": "pipe"})).await;
            assert!(!matches!(read, ToolError::Timeout(_)), "{read}");
            let written = s
                .err("write_file", json!({"path": "pipe", "content": "x"}))
                .await;
            assert!(!matches!(written, ToolError::Timeout(_)), "{written}");
            // Writes go to the pool: they find a thread.
            let out = s
                .ok(
                    "write_file",
                    json!({"path": "after.txt", "content": "after"}),
                )
                .await;
            assert_eq!(out["bytes"], 5);
            assert_eq!(
                std::fs::read_to_string(s.ws().join("after.txt")).expect("after"),
                "after"
            );
        })
    }));
    runtime.shutdown_background();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

#[tokio::test]
async fn under_the_shipped_policy_a_write_reaches_the_tools_own_cap() {
    let root = tempfile::tempdir().expect("tempdir");
    let ws = root.path().join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut policy = chitin_host::policy::Policy::builtin().expect("built-in policy");
    policy.approval.clear();
    let mut host = Host::new(runtime, policy, services(&root.path().join("data"), &ws));
    host.load_path(&component("fs")).await.expect("load fs");
    let call = |content: String| {
        let args = json!({"path": "big.txt", "content": content}).to_string();
        let host = &host;
        async move { host.call("write_file", &args).await.result }
    };
    let near = 5 * 1024 * 1024 - 1024;
    let written = call("a".repeat(near)).await.expect("a write under the cap");
    assert_eq!(written.json().expect("JSON")["bytes"], near);
    match call("a".repeat(5 * 1024 * 1024 + 1)).await {
        Err(ToolError::InvalidArgs(why)) => assert!(why.contains("5242880"), "{why}"),
        other => panic!("a write over the cap: {other:?}"),
    }
}
