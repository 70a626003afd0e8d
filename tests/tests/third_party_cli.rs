//! Third-party components beside the built-ins, through the `chitin` binary: one that cannot
//! load (its name taken, a replayed older version) is left out with a warning and the others
//! load; a broken first-party built-in still fails the start; a host fault (the database or the
//! secret store failing, before or inside a running capability) exits 1, naming what failed.

use std::path::{Path, PathBuf};
use std::process::Output;

use chitin_e2e::{built_dir, chitin, run_with_stdin, stderr, stdout};

/// A data directory whose trust store holds the development key and a test key `acme`,
/// trusted for `acme/*`.
struct Operator {
    _root: tempfile::TempDir,
    data: PathBuf,
    trust: PathBuf,
}

impl Operator {
    fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        let data = root.path().join("data");
        std::fs::create_dir_all(&data).expect("data");
        let trust = data.join("trusted_keys");
        std::fs::copy(chitin_e2e::repo().join("build/trusted_keys"), &trust).expect("trust");
        let op = Self {
            _root: root,
            data,
            trust,
        };
        op.ok(&["key", "generate", "acme"], &[]);
        let public = op.ok(&["key", "export", "acme"], &[]);
        op.ok(
            &[
                "trust",
                "add",
                public.trim(),
                "--publisher",
                "acme",
                "--scope",
                "acme/*",
            ],
            &[],
        );
        op
    }

    fn run(&self, args: &[&str], components: &[PathBuf]) -> Output {
        chitin(&self.data, components)
            .env("CHITIN_TRUSTED_KEYS", &self.trust)
            .args(args)
            .output()
            .expect("run chitin")
    }

    fn ok(&self, args: &[&str], components: &[PathBuf]) -> String {
        let out = self.run(args, components);
        assert_eq!(
            out.status.code(),
            Some(0),
            "chitin {args:?}\n{}{}",
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    }

    /// The echo component as `acme/NAME` at `version`, signed by acme, written to `dir`.
    fn acme(&self, dir: &Path, name: &str, version: &str) -> PathBuf {
        std::fs::create_dir_all(dir).expect("dir");
        let manifest = self.data.join(format!("{name}-{version}.toml"));
        std::fs::write(
            &manifest,
            format!(
                "schema = 1\n[component]\nname = \"{name}\"\nnamespace = \"acme\"\nversion = \
                 \"{version}\"\npublisher = \"acme\"\ndescription = \"acme's {name}\"\n"
            ),
        )
        .expect("manifest");
        let out = dir.join(format!("{name}.wasm"));
        let source = built_dir("components").join("echo.wasm");
        let path = |p: &Path| p.to_str().expect("utf-8").to_owned();
        self.ok(
            &[
                "manifest",
                "embed",
                &path(&source),
                &path(&manifest),
                "-o",
                &path(&out),
            ],
            &[],
        );
        self.ok(&["sign", &path(&out), "--key", "acme"], &[]);
        out
    }
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exit code")
}

#[test]
fn a_third_party_component_whose_tool_name_is_taken_is_left_out_and_the_others_load() {
    let op = Operator::new();
    let dir = op.data.join("thirdparty");
    // Both carry the tool `echo`, so both would be `acme__echo`: the second (by file name)
    // cannot load.
    op.acme(&dir, "echo", "1.0.0");
    op.acme(&dir, "parrot", "1.0.0");
    let out = op.run(&["list"], &[built_dir("components"), dir.clone()]);
    let (listed, err) = (stdout(&out), stderr(&out));
    assert_eq!(code(&out), 0, "{listed}{err}");
    assert!(
        err.contains("warning: component acme/parrot") && err.contains("left out"),
        "{err}"
    );
    assert!(err.contains("`acme__echo` is carried by both"), "{err}");
    assert!(listed.contains("acme__echo"), "{listed}");
    assert!(listed.contains("read_file"), "the built-ins load: {listed}");
    assert!(
        listed.contains("left out (could not load):") && listed.contains("acme/parrot"),
        "{listed}"
    );
}

#[test]
fn an_older_signed_version_dropped_into_a_components_dir_after_a_newer_was_pinned_is_refused() {
    let op = Operator::new();
    let dir = op.data.join("thirdparty");
    op.acme(&dir, "echo", "1.1.0");
    let listed = op.ok(&["list"], std::slice::from_ref(&dir));
    assert!(listed.contains("acme__echo"), "{listed}");
    // The replay: the older version, validly signed, in place of the newer.
    op.acme(&dir, "echo", "1.0.0");
    let out = op.run(&["list"], std::slice::from_ref(&dir));
    let (listed, err) = (stdout(&out), stderr(&out));
    assert_eq!(code(&out), 0, "{listed}{err}");
    assert!(
        !listed.lines().any(|l| l.starts_with("acme__echo")),
        "{listed}"
    );
    assert!(
        err.contains("acme/echo 1.0.0 is older than the pinned 1.1.0"),
        "{err}"
    );
    assert!(err.contains("chitin approvals revoke acme/echo"), "{err}");
}

#[test]
fn a_broken_first_party_built_in_still_fails_the_start() {
    let op = Operator::new();
    let dir = op.data.join("builtins");
    std::fs::create_dir_all(&dir).expect("dir");
    let mut bytes = std::fs::read(built_dir("components").join("echo.wasm")).expect("echo");
    // One byte of the code changed: the signature no longer covers the file.
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(dir.join("echo.wasm"), &bytes).expect("write");
    let out = op.run(&["list"], &[dir]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("echo.wasm"), "{}", stderr(&out));
}

#[test]
fn a_database_fault_is_a_host_error_exiting_1() {
    let op = Operator::new();
    // Not a database file: every use of the database fails.
    std::fs::write(op.data.join("chitin.db"), b"this is not a database").expect("write");
    let out = op.run(
        &["call", "write_file", r#"{"path": "a.txt", "content": "x"}"#],
        &[built_dir("components").join("fs.wasm")],
    );
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(err.contains("database"), "{err}");
}

#[test]
fn a_database_fault_inside_a_running_capability_exits_1_naming_the_file() {
    let op = Operator::new();
    let components = [
        built_dir("components").join("memory.wasm"),
        built_dir("components").join("echo.wasm"),
    ];
    let db = op.data.join("chitin.db");
    let write = ["call", "memory_write", r#"{"content": "a note"}"#];
    for broken in ["garbage", "a directory"] {
        if db.is_dir() {
            std::fs::remove_dir(&db).expect("remove");
        }
        if broken == "garbage" {
            std::fs::write(&db, b"this is not a database").expect("write");
        } else {
            std::fs::remove_file(&db).expect("remove");
            std::fs::create_dir(&db).expect("a directory in its place");
        }
        let out = op.run(&write, &components);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{broken}: {err}");
        assert!(err.contains("host fault"), "{broken}: {err}");
        assert!(err.contains(&db.display().to_string()), "{broken}: {err}");
        // A database problem fails only the calls that need it.
        op.ok(&["call", "echo", r#"{"message": "hi"}"#], &components);
    }
}

#[test]
fn a_secret_store_fault_inside_a_running_capability_exits_1() {
    let op = Operator::new();
    // The store is created under the master key file in the data directory...
    let set = run_with_stdin(
        chitin(&op.data, &[])
            .env("CHITIN_TRUSTED_KEYS", &op.trust)
            .env_remove("CHITIN_SECRETS_KEY")
            .args(["secret", "set", "unrelated"]),
        Some("value-0123456789\n"),
    );
    assert_eq!(code(&set), 0, "{}", stderr(&set));
    // ...and the call runs under another key, which opens nothing in it.
    let out = chitin(&op.data, &[built_dir("fixtures").join("test-http.wasm")])
        .env("CHITIN_TRUSTED_KEYS", &op.trust)
        .env("CHITIN_SECRETS_KEY", "11".repeat(32))
        .args(["call", "secret_exists", r#"{"name": "test_token"}"#])
        .output()
        .expect("run chitin");
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(err.contains("host fault"), "{err}");
    assert!(err.contains("does not match the secrets store"), "{err}");
}
