//! Auditing runs no code with rights: `chitin manifest embed`, `audit`, `publish`, `install` and
//! loading a component whose `specs()` reaches for its files, HTTP and process grants leave no
//! trace (no file, no request to a real server on loopback), and the tools an audit shows come
//! from the signed manifest, even from its manifest part alone.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chitin_e2e::{built_dir, chitin, run_with_stdin, stderr, stdout};

/// Files `test-specs`' `specs()` would create with its grant.
const MARKERS: [&str; 2] = ["specs-wrote-this", "specs-ran-this"];

/// An HTTP server on 127.0.0.1 that answers every request `200 ok` and counts the requests it
/// saw; its thread ends with the test process.
fn counting_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            if head.starts_with(b"GET ") {
                count.fetch_add(1, Ordering::SeqCst);
            }
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    (port, seen)
}

/// The default policy, admitting plain HTTP to 127.0.0.1 (for the test server only), written
/// into `dir`.
fn loopback_policy(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(chitin_e2e::repo().join("policies/default.toml"))
        .expect("default policy")
        .replace(
            "plain_http_hosts = []",
            "plain_http_hosts = [\"127.0.0.1\"]",
        )
        .replace("allow_addresses = []", "allow_addresses = [\"127.0.0.1\"]");
    assert!(text.contains("allow_addresses = [\"127.0.0.1\"]"), "{text}");
    let path = dir.join("loopback-policy.toml");
    std::fs::write(&path, text).expect("write policy");
    path
}

/// A data directory, a workspace beside it, and the policy and trust store chitin runs under
/// (the defaults when `None`).
struct Dirs {
    data: PathBuf,
    ws: PathBuf,
    policy: Option<PathBuf>,
    trust: Option<PathBuf>,
}

impl Dirs {
    fn new(root: &Path) -> Self {
        let (data, ws) = (root.join("data"), root.join("ws"));
        std::fs::create_dir_all(&data).expect("data");
        std::fs::create_dir_all(&ws).expect("ws");
        Self {
            data,
            ws,
            policy: None,
            trust: None,
        }
    }

    /// Run chitin on these directories, the workspace also its current directory.
    fn run(&self, args: &[&str]) -> Output {
        let mut cmd = chitin(&self.data, &[]);
        if let Some(policy) = &self.policy {
            cmd.arg("--policy").arg(policy);
        }
        if let Some(trust) = &self.trust {
            cmd.env("CHITIN_TRUSTED_KEYS", trust);
        }
        run_with_stdin(
            cmd.arg("--workspace")
                .arg(&self.ws)
                .current_dir(&self.ws)
                .env_remove("CHITIN_SECRETS_KEY")
                .args(args),
            None,
        )
    }

    /// Run chitin and require success; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "chitin {args:?}\nstdout: {}\nstderr: {}",
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    }
}

fn assert_untouched(ws: &Path, seen: &AtomicUsize, step: &str) {
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "{step} ran specs() with its grant: the server saw a request"
    );
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
    let mut dirs = Dirs::new(dir.path());
    let ws = dirs.ws.clone();
    let (port, seen) = counting_server();
    std::fs::write(
        ws.join("specs-url"),
        format!("http://127.0.0.1:{port}/from-specs"),
    )
    .expect("url");
    dirs.policy = Some(loopback_policy(dir.path()));
    // A key of the test's own, trusted for the fixture, signs it with its HTTP grant narrowed
    // to the server's port (an absent port is 80).
    let trust = dir.path().join("trusted_keys");
    std::fs::copy(chitin_e2e::repo().join("build/trusted_keys"), &trust).expect("trust");
    dirs.trust = Some(trust);
    dirs.ok(&["key", "generate", "specs-test"]);
    let public = dirs.ok(&["key", "export", "specs-test"]);
    dirs.ok(&[
        "trust",
        "add",
        public.trim(),
        "--publisher",
        "chitin",
        "--scope",
        "chitin/test-specs",
    ]);
    let authored =
        std::fs::read_to_string(chitin_e2e::repo().join("components/test-specs/manifest.toml"))
            .expect("manifest");
    let narrowed = authored.replace(
        "allow = [{ host = \"*\", scheme = \"http\" }]",
        &format!("allow = [{{ host = \"127.0.0.1\", scheme = \"http\", port = {port} }}]"),
    );
    assert_ne!(
        narrowed, authored,
        "the fixture's grant changed: update this test"
    );
    let manifest = dir.path().join("test-specs.toml");
    std::fs::write(&manifest, narrowed).expect("manifest");
    let embedded = dir.path().join("test-specs.wasm");
    let file = embedded.to_str().expect("utf-8");

    dirs.ok(&[
        "manifest",
        "embed",
        fixture().to_str().expect("utf-8"),
        manifest.to_str().expect("utf-8"),
        "-o",
        file,
    ]);
    assert_untouched(&ws, &seen, "manifest embed");
    let recorded = dirs.ok(&["manifest", "check", file]);
    assert!(recorded.contains("chitin/test-specs"), "{recorded}");
    dirs.ok(&["sign", file, "--key", "specs-test"]);

    let audit = dirs.ok(&["audit", file]);
    assert_untouched(&ws, &seen, "audit");
    assert!(
        audit.contains("  ping [approval: never]: Answers pong."),
        "{audit}"
    );

    dirs.ok(&["publish", file, "--registry", "local", "--replace"]);
    assert_untouched(&ws, &seen, "publish");
    let found = dirs.ok(&["search", "test-specs", "--registry", "local"]);
    assert!(found.contains("ping"), "{found}");
    let installed = dirs.ok(&[
        "install",
        "chitin/test-specs",
        "--registry",
        "local",
        "--yes",
    ]);
    assert_untouched(&ws, &seen, "install");
    assert!(installed.contains("tools: ping"), "{installed}");

    // Loading the installed component runs its own specs(), with no grant.
    let listed = dirs.ok(&["list"]);
    assert!(listed.contains("ping"), "{listed}");
    assert_untouched(&ws, &seen, "loading (chitin list)");

    // The grant itself is real: the tool, called, writes its marker and reaches the server, so
    // the silence above is the host's doing, not a test that could not have failed.
    dirs.ok(&["call", "ping", "{}"]);
    // (`ping` reaches out, and so does the SDK's tool lookup, which calls `tools()` in the call.)
    assert!(
        seen.load(Ordering::SeqCst) > 0,
        "the call reached the server"
    );
    assert!(
        ws.join("specs-wrote-this").exists(),
        "the call wrote its file"
    );
}

#[test]
fn the_manifest_part_alone_audits_with_its_tools() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dirs = Dirs::new(dir.path());
    let bytes = std::fs::read(built_dir("components").join("fs.wasm")).expect("fs");
    let part = chitin_registry::signature::manifest_part(&bytes).expect("a manifest part");
    let prefix = dir.path().join("fs-manifest-part.wasm");
    std::fs::write(&prefix, part).expect("write");
    let audit = dirs.ok(&["audit", prefix.to_str().expect("utf-8")]);
    assert!(audit.contains("trust:       TRUSTED"), "{audit}");
    assert!(audit.contains("  read_file"), "{audit}");
    assert!(audit.contains("imports:     not checked"), "{audit}");
}

#[test]
fn the_audit_notes_plain_exports_a_chitin_tool_component_does_not_serve() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dirs = Dirs::new(dir.path());
    let file = built_dir("fixtures").join("test-mixed.wasm");
    let file = file.to_str().expect("utf-8");
    let out = dirs.ok(&["audit", file]);
    assert!(
        out.contains("note: also exports extra, which chitin does not serve"),
        "{out}"
    );
    let out = dirs.ok(&["audit", file, "--json"]);
    let audit: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        audit["unserved_exports"],
        serde_json::json!(["extra"]),
        "{out}"
    );
}
