//! `chitin secret` end to end: a value goes in through stdin, only its name comes out, and the
//! plaintext is nowhere in the data directory.

use std::path::Path;
use std::process::Output;

use chitin_e2e::{chitin, run_with_stdin, stderr, stdout};

/// A value no file would contain by chance.
const VALUE: &str = "e2e-plaintext-9f3b1c7d-do-not-store";

fn run(data: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    run_with_stdin(
        chitin(data, &[])
            .args(args)
            .env_remove("CHITIN_SECRETS_KEY"),
        stdin,
    )
}

/// Whether any file under `dir` contains `needle`.
fn found_in(dir: &Path, needle: &[u8]) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            if let Some(hit) = found_in(&path, needle) {
                return Some(hit);
            }
        } else if std::fs::read(&path)
            .expect("read file")
            .windows(needle.len())
            .any(|w| w == needle)
        {
            return Some(path);
        }
    }
    None
}

#[test]
fn set_list_remove_without_plaintext_at_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();

    let out = run(
        data,
        &["secret", "set", "api_token"],
        Some(&format!("{VALUE}\n")),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stdout(&out).contains(VALUE) && !stderr(&out).contains(VALUE));

    let out = run(data, &["secret", "list"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "api_token\n");
    let out = run(data, &["secret", "list", "--json"], None);
    assert_eq!(stdout(&out).trim(), r#"["api_token"]"#);

    assert!(data.join("chitin.db").is_file(), "the database exists");
    assert_eq!(found_in(data, VALUE.as_bytes()), None, "plaintext at rest");
    assert_eq!(
        found_in(data, &VALUE.as_bytes()[4..20]),
        None,
        "part of the plaintext at rest"
    );

    let out = run(data, &["secret", "set", "empty"], Some("\n"));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("empty"), "{}", stderr(&out));

    let out = run(data, &["secret", "remove", "api_token"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("removed"), "{}", stderr(&out));
    let out = run(data, &["secret", "remove", "api_token"], None);
    assert!(stderr(&out).contains("was not set"), "{}", stderr(&out));
    assert_eq!(stdout(&run(data, &["secret", "list"], None)), "");
}

#[test]
fn a_world_readable_key_file_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let out = run(data, &["secret", "set", "a"], Some("value-123456"));
    assert!(out.status.success(), "{}", stderr(&out));
    let key = data.join("secrets.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = run(data, &["secret", "list"], None);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("chmod 600 {}", key.display())),
        "{}",
        stderr(&out)
    );
}
