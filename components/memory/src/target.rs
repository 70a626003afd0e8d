//! Where a write goes: the named targets (`memory`, `daily_log`, `heartbeat`) or a custom
//! document path, checked lexically and kept off the identity files.

use chitin_sdk::ToolError;

/// Identity files injected into the agent's system prompt; tools never write them
/// (seed 000 §4.7). Compared case-insensitively.
const IDENTITY_FILES: &[&str] = &["IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md"];

/// Longest document path accepted, in bytes.
const MAX_PATH_BYTES: usize = 512;

/// The document path a write `target` names; `today` is `YYYY-MM-DD` for the daily log.
pub fn resolve(target: Option<&str>, today: &str) -> Result<String, ToolError> {
    match target.unwrap_or("memory") {
        "memory" => Ok("MEMORY.md".into()),
        "heartbeat" => Ok("HEARTBEAT.md".into()),
        "daily_log" => Ok(format!("daily/{today}.md")),
        custom => {
            let path = normalise(custom)?;
            if IDENTITY_FILES.iter().any(|f| f.eq_ignore_ascii_case(&path)) {
                return Err(ToolError::permission_denied(format!(
                    "`{path}` is an identity file; tools cannot write it"
                )));
            }
            Ok(path)
        }
    }
}

/// A document path in canonical form: relative, `/`-separated, no `.`/`..`/empty parts. The
/// named targets are accepted too, so a path read back is the path written.
pub fn normalise(raw: &str) -> Result<String, ToolError> {
    let refuse = |why: &str| ToolError::invalid_path(format!("`{}`: {why}", raw.escape_debug()));
    match raw {
        "memory" => return Ok("MEMORY.md".into()),
        "heartbeat" => return Ok("HEARTBEAT.md".into()),
        _ => {}
    }
    if raw.len() > MAX_PATH_BYTES {
        return Err(refuse(&format!("longer than {MAX_PATH_BYTES} bytes")));
    }
    if raw.contains(['\0', '\\']) || raw.chars().any(char::is_control) {
        return Err(refuse(
            "contains a NUL byte, a backslash or a control character",
        ));
    }
    if raw.starts_with('/') || raw.as_bytes().get(1) == Some(&b':') {
        return Err(refuse("must be relative, like `notes/project.md`"));
    }
    let mut parts = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(refuse("must not contain `..`")),
            name => parts.push(name),
        }
    }
    if parts.is_empty() {
        return Err(refuse("names no document"));
    }
    Ok(parts.join("/"))
}

/// `YYYY-MM-DD` (UTC) for seconds since the Unix epoch (Howard Hinnant's civil-from-days).
pub fn date(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_targets_and_custom_paths() {
        assert_eq!(resolve(None, "2026-01-02").unwrap(), "MEMORY.md");
        assert_eq!(
            resolve(Some("daily_log"), "2026-01-02").unwrap(),
            "daily/2026-01-02.md"
        );
        assert_eq!(resolve(Some("heartbeat"), "x").unwrap(), "HEARTBEAT.md");
        assert_eq!(resolve(Some("./notes//a.md"), "x").unwrap(), "notes/a.md");
    }

    #[test]
    fn identity_files_are_refused() {
        for path in ["SOUL.md", "identity.md", "./AGENTS.md", "USER.md"] {
            assert!(
                matches!(
                    resolve(Some(path), "x"),
                    Err(ToolError::PermissionDenied(_))
                ),
                "{path}"
            );
        }
    }

    #[test]
    fn escaping_paths_are_refused() {
        for path in ["/etc/x", "../x", "a/../b", "a\0b", "C:x", "", ".", "a\\b"] {
            assert!(
                matches!(normalise(path), Err(ToolError::InvalidPath(_))),
                "{path:?}"
            );
        }
    }

    #[test]
    fn dates() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(951_782_400), "2000-02-29");
        assert_eq!(date(1_763_683_200), "2025-11-21");
    }
}
