//! The environment a process gets: cleared, then a fixed allowlist of harmless variables taken
//! from the host, the private scratch directory as `HOME` and `TMPDIR`, and the extra keys the
//! grant allows the component to set. Secrets in the host's environment (`API_KEY`, `TOKEN`,
//! `AWS_*`, ...) are never passed on.

use std::ffi::OsString;
use std::path::Path;

/// Variables copied from the host's environment when set: locale, terminal, time zone, user.
pub const SAFE_VARS: &[&str] = &[
    "PATH",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_COLLATE",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NUMERIC",
    "LC_TIME",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "COLUMNS",
    "LINES",
];

/// `PATH` when the host has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

/// Variables the host sets itself; a component may not override them.
pub const HOST_SET: &[&str] = &["HOME", "TMPDIR", "SHELL"];

/// The environment for one process: safe host variables, then `HOME`/`TMPDIR` in `scratch`,
/// then `extra` (already checked against the grant).
pub fn build(scratch: &Path, extra: &[(String, String)]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = SAFE_VARS
        .iter()
        .filter_map(|key| std::env::var_os(key).map(|v| (OsString::from(key), v)))
        .collect();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    env.push(("HOME".into(), scratch.into()));
    env.push(("TMPDIR".into(), scratch.into()));
    env.push(("SHELL".into(), "/bin/sh".into()));
    env.extend(extra.iter().map(|(k, v)| (k.into(), v.into())));
    env
}

/// Whether `key` is a well-formed variable name (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn is_valid_key(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_variables_outside_the_allowlist_are_not_passed() {
        // SAFETY: tests in this module do not read the variable concurrently.
        unsafe { std::env::set_var("CHITIN_TEST_SECRET_TOKEN", "s3cr3t") };
        let env = build(Path::new("/scratch"), &[]);
        assert!(
            env.iter()
                .all(|(k, v)| k != "CHITIN_TEST_SECRET_TOKEN" && v != "s3cr3t")
        );
        assert!(env.iter().any(|(k, v)| k == "HOME" && v == "/scratch"));
        assert!(env.iter().any(|(k, _)| k == "PATH"));
    }

    #[test]
    fn variable_names_are_checked() {
        assert!(is_valid_key("RUST_LOG"));
        assert!(is_valid_key("_x1"));
        assert!(!is_valid_key("1X"));
        assert!(!is_valid_key("A=B"));
        assert!(!is_valid_key(""));
    }
}
