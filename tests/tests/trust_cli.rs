//! The trust commands end to end: keys, sign, verify, trust, audit (golden output for the
//! built-in components, human and JSON), policy explain, approvals.

use std::path::{Path, PathBuf};
use std::process::Output;

use chitin_e2e::{built_dir, chitin, repo, stderr, stdout};
use serde_json::Value;

fn run_in(data: &Path, args: &[&str]) -> Output {
    chitin(data, &[built_dir("components")])
        .args(args)
        .output()
        .expect("run chitin")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exit code")
}

/// A private data directory with its own trust store file (never the shared build one).
fn private() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let trust = dir.path().join("trusted_keys");
    (dir, trust)
}

#[test]
fn keys_are_generated_private_listed_and_exported() {
    let (dir, _) = private();
    let out = run_in(dir.path(), &["key", "generate", "acme"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let key = dir.path().join("keys/acme.key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).expect("key").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let out = run_in(dir.path(), &["key", "list"]);
    assert!(stdout(&out).contains("acme"), "{}", stdout(&out));
    let out = run_in(dir.path(), &["key", "export", "acme"]);
    assert!(
        stdout(&out).starts_with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn sign_verify_and_trust_round_trip() {
    let (dir, trust) = private();
    let trust = trust.to_str().expect("utf-8");
    let file = dir.path().join("echo.wasm");
    std::fs::copy(built_dir("components").join("echo.wasm"), &file).expect("copy");
    let file = file.to_str().expect("utf-8");
    assert_eq!(code(&run_in(dir.path(), &["key", "generate", "acme"])), 0);

    // Nobody trusted yet: the dev signature is from an unknown key.
    let out = run_in(dir.path(), &["--trusted-keys", trust, "verify", file]);
    assert_eq!(code(&out), 4, "{}", stdout(&out));
    assert!(stderr(&out).contains("unknown signer"), "{}", stderr(&out));

    // A countersignature, then trust that key.
    let out = run_in(dir.path(), &["sign", file, "--key", "acme"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run_in(
        dir.path(),
        &[
            "--trusted-keys",
            trust,
            "trust",
            "add",
            "acme",
            "--publisher",
            "acme",
            "--scope",
            "chitin/echo",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run_in(dir.path(), &["--trusted-keys", trust, "verify", file]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("acme ("), "{}", stdout(&out));
    assert!(stdout(&out).contains("valid"), "{}", stdout(&out));

    // One flipped byte in the code.
    let mut bytes = std::fs::read(file).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(file, bytes).expect("write");
    let out = run_in(dir.path(), &["--trusted-keys", trust, "verify", file]);
    assert_eq!(code(&out), 4);
    assert!(stderr(&out).contains("tampered code"), "{}", stderr(&out));
}

#[test]
fn an_untrusted_component_is_refused_at_load() {
    let (dir, trust) = private();
    let out = run_in(
        dir.path(),
        &["--trusted-keys", trust.to_str().expect("utf-8"), "list"],
    );
    assert_ne!(code(&out), 0);
    assert!(stderr(&out).contains("unknown signer"), "{}", stderr(&out));
    // A shell with another data directory reads another store: the refusal names the one read.
    let read = format!("the trust store read was {}", trust.display());
    assert!(stderr(&out).contains(&read), "{}", stderr(&out));
}

/// Every `blake3:<64 hex>` content hash in `text` (a composition's parts) masked.
fn mask_hashes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("blake3:") {
        let (head, tail) = rest.split_at(at + "blake3:".len());
        out.push_str(head);
        let hex = tail.bytes().take_while(u8::is_ascii_hexdigit).count();
        if hex == 64 {
            out.push_str("<hash>");
            rest = &tail[64..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// Mask what changes from build to build (path, size, hash, key) so the rest compares exactly.
fn mask_text(text: &str) -> String {
    let text = mask_hashes(text);
    text.lines()
        .map(|line| {
            for key in ["file:", "size:", "hash:"] {
                if line.starts_with(key) {
                    return format!("{key} <{}>", key.trim_end_matches(':'));
                }
            }
            match line.find("SHA256:") {
                Some(at) => {
                    let end = line[at..].find(')').map_or(line.len(), |e| at + e);
                    format!("{}SHA256:<fingerprint>{}", &line[..at], &line[end..])
                }
                None => line.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Keys whose values depend on the machine or the build (paths, sizes, hashes, keys), masked
/// wherever they appear: top level, signers, composed parts, lockfile words.
const MACHINE_KEYS: [&str; 6] = ["file", "size", "hash", "signer", "fingerprint", "key_id"];

/// Mask every [`MACHINE_KEYS`] value in `value`, at any depth.
fn mask_machine_values(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
                if MACHINE_KEYS.contains(&key.as_str()) && !inner.is_null() {
                    *inner = Value::String(format!("<{key}>"));
                } else {
                    mask_machine_values(inner);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask_machine_values),
        _ => {}
    }
}

fn mask_json(mut value: Value) -> String {
    mask_machine_values(&mut value);
    mask_hashes(&serde_json::to_string_pretty(&value).expect("json")) + "\n"
}

/// Compare with `tests/golden/NAME`; `CHITIN_BLESS=1` rewrites the golden file instead.
fn golden(name: &str, actual: &str) {
    let path = repo().join("tests/golden").join(name);
    if std::env::var_os("CHITIN_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("dir")).expect("golden dir");
        std::fs::write(&path, actual).expect("bless");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (CHITIN_BLESS=1 writes it)", path.display()));
    assert_eq!(
        actual,
        expected,
        "audit output differs from {}",
        path.display()
    );
}

#[test]
fn audit_of_the_built_in_components_matches_the_golden_output() {
    let (dir, _) = private();
    for name in [
        "echo",
        "time",
        "json",
        "fs",
        "memory",
        "shell",
        "http",
        "web-fetch",
        "html-to-markdown",
    ] {
        let id = format!("chitin/{name}");
        let out = run_in(dir.path(), &["audit", &id]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        golden(&format!("audit-{name}.txt"), &mask_text(&stdout(&out)));
        let out = run_in(dir.path(), &["audit", &id, "--json"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let value: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        golden(&format!("audit-{name}.json"), &mask_json(value));
    }
}

#[test]
fn policy_explain_names_the_deciding_rule() {
    let (dir, _) = private();
    let out = run_in(dir.path(), &["policy", "explain", "echo"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("offered:     yes (tools.allow entry `*`)"),
        "{text}"
    );
    assert!(text.contains("protected:   yes"), "{text}");
    assert!(text.contains("none beyond the WASI base"), "{text}");
    assert!(
        text.contains(
            "at once:     1000 calls on the host, 16 of them for one OAuth user ([calls])\n"
        ),
        "{text}"
    );
    let out = run_in(dir.path(), &["policy", "explain", "shell"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "at once:     1000 calls on the host, 16 of them for one OAuth user ([calls]); its processes 5 on the host, 2 \
             of them for one OAuth user ([processes])"
        ),
        "{text}"
    );
}

#[test]
fn approvals_start_empty() {
    let (dir, _) = private();
    let out = run_in(dir.path(), &["approvals", "list"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("approvals (0)"), "{}", stdout(&out));
    let out = run_in(dir.path(), &["approvals", "revoke", "echo"]);
    assert_ne!(code(&out), 0);
}

#[test]
fn the_data_directory_that_built_the_fixtures_does_not_trust_them() {
    // Its own trust store, as `just run` and a desktop client use it: the built-ins verify, and
    // a fixture (a hostile one, or a shell without approval) put in a served folder does not.
    let chitin = || {
        let mut cmd = std::process::Command::new(chitin_e2e::chitin_bin());
        cmd.env_remove("CHITIN_TRUSTED_KEYS")
            .env_remove("CHITIN_COMPONENTS")
            .env("CHITIN_CACHE_DIR", chitin_e2e::shared_cache());
        cmd
    };
    let verify = |file: PathBuf| {
        chitin()
            .arg("verify")
            .arg(&file)
            .output()
            .expect("run chitin verify")
    };
    let echo = verify(built_dir("components").join("echo.wasm"));
    assert_eq!(code(&echo), 0, "{}", stderr(&echo));
    for fixture in ["test-hostile", "test-composed"] {
        let out = verify(built_dir("fixtures").join(format!("{fixture}.wasm")));
        assert_ne!(code(&out), 0, "{fixture}: {}", stdout(&out));
        assert!(stderr(&out).contains("unknown signer"), "{}", stderr(&out));
    }
    // The tests' own trust store trusts the fixtures' key for their names only.
    let tests_trust = std::fs::read_to_string(repo().join("build/trusted_keys")).expect("trust");
    let fixtures_line = tests_trust
        .lines()
        .find(|l| l.contains("chitin/test-hostile"))
        .expect("the fixtures' key");
    assert!(!fixtures_line.contains("chitin/*"), "{fixtures_line}");
}
