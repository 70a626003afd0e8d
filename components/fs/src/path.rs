//! Lexical path checks: every path a tool receives is relative to the workspace root and may not
//! leave it. The host's preopen is the real boundary (it also stops symlinks); this is defence in
//! depth and gives the agent a clear `invalid-path` instead of an opaque I/O error.

use std::path::{Path, PathBuf};

use chitin_sdk::ToolError;

/// Longest path accepted, in bytes (Linux `PATH_MAX`).
const MAX_PATH_BYTES: usize = 4096;
/// Longest single component accepted, in bytes (`NAME_MAX`).
const MAX_NAME_BYTES: usize = 255;

/// Files at the workspace root that carry the agent's identity and instructions; tools never
/// write them (seed 000 §4.5). Compared case-insensitively, since some filesystems are.
const PROTECTED_FILES: &[&str] = &[
    "HEARTBEAT.md",
    "MEMORY.md",
    "IDENTITY.md",
    "SOUL.md",
    "AGENTS.md",
    "USER.md",
];
/// Directories at the workspace root owned by the memory system; tools never write into them.
const PROTECTED_DIRS: &[&str] = &["daily", "context"];

/// A checked path: relative, normalised, inside the workspace. Empty means the root itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelPath {
    parts: Vec<String>,
}

impl RelPath {
    /// Checks and normalises `raw`: `.` parts dropped, `a/..` folded; absolute paths, escapes
    /// above the root, NUL bytes, backslashes, drive prefixes and over-long paths are refused.
    pub fn parse(raw: &str) -> Result<Self, ToolError> {
        let refuse = |why: &str| ToolError::invalid_path(format!("`{}`: {why}", shown(raw)));
        if raw.len() > MAX_PATH_BYTES {
            return Err(refuse(&format!("longer than {MAX_PATH_BYTES} bytes")));
        }
        if raw.contains('\0') {
            return Err(refuse("contains a NUL byte"));
        }
        if raw.contains('\\') {
            return Err(refuse("contains a backslash; use `/` as the separator"));
        }
        if raw.starts_with('/') {
            return Err(refuse(
                "is absolute; give a path relative to the workspace root",
            ));
        }
        if has_drive_prefix(raw) {
            return Err(refuse(
                "starts with a drive prefix; give a workspace-relative path",
            ));
        }
        let mut parts: Vec<String> = Vec::new();
        for part in raw.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return Err(refuse("leaves the workspace through `..`"));
                    }
                }
                name if name.len() > MAX_NAME_BYTES => {
                    return Err(refuse(&format!(
                        "has a component longer than {MAX_NAME_BYTES} bytes"
                    )));
                }
                name => parts.push(name.to_owned()),
            }
        }
        Ok(Self { parts })
    }

    /// The path relative to the root, `/`-separated; `.` for the root itself.
    pub fn display(&self) -> String {
        if self.parts.is_empty() {
            ".".into()
        } else {
            self.parts.join("/")
        }
    }

    /// The path's components, in order.
    pub fn parts(&self) -> &[String] {
        &self.parts
    }

    /// Whether this is the workspace root.
    pub fn is_root(&self) -> bool {
        self.parts.is_empty()
    }

    /// The path under `root`.
    pub fn under(&self, root: &Path) -> PathBuf {
        let mut path = root.to_path_buf();
        path.extend(&self.parts);
        path
    }

    /// Refuses a write to a protected identity file or memory directory at the root.
    pub fn check_writable(&self) -> Result<(), ToolError> {
        let Some(first) = self.parts.first() else {
            return Err(ToolError::invalid_path("the workspace root is not a file"));
        };
        let file_hit = self.parts.len() == 1
            && PROTECTED_FILES
                .iter()
                .any(|p| p.eq_ignore_ascii_case(first));
        let dir_hit =
            self.parts.len() > 1 && PROTECTED_DIRS.iter().any(|p| p.eq_ignore_ascii_case(first));
        if file_hit || dir_hit {
            return Err(ToolError::permission_denied(format!(
                "`{}` is a protected identity or memory file; file tools cannot write it \
                 (use the memory tools for memory)",
                self.display()
            )));
        }
        Ok(())
    }
}

/// `C:`, `c:foo`, `\\?\` style prefixes: meaningless here, and a sign of a path meant for
/// another system.
fn has_drive_prefix(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

/// The path as shown in an error: NUL bytes made visible, long paths cut.
fn shown(raw: &str) -> String {
    let visible = raw.replace('\0', "\\0");
    match visible.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &visible[..cut]),
        None => visible,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(raw: &str) -> String {
        RelPath::parse(raw).expect(raw).display()
    }

    fn invalid(raw: &str) {
        match RelPath::parse(raw) {
            Err(ToolError::InvalidPath(_)) => {}
            other => panic!("{raw:?} gave {other:?}"),
        }
    }

    #[test]
    fn normalises_harmless_forms() {
        assert_eq!(ok(""), ".");
        assert_eq!(ok("."), ".");
        assert_eq!(ok("./a//b/./c"), "a/b/c");
        assert_eq!(ok("a/b/../c"), "a/c");
        assert_eq!(ok("a/.."), ".");
        assert_eq!(ok("dir/"), "dir");
        assert_eq!(ok("..."), "...");
        assert_eq!(ok("a..b"), "a..b");
    }

    #[test]
    fn refuses_escapes_and_foreign_forms() {
        for raw in [
            "/etc/passwd",
            "//etc",
            "..",
            "../x",
            "a/../../x",
            "./../../etc/shadow",
            "a/b/../../../c",
            "a\0b",
            "C:\\Windows",
            "c:/x",
            "C:",
            "..\\..\\etc",
            "\\\\?\\C:\\x",
            "/workspace/x",
        ] {
            invalid(raw);
        }
        invalid(&"a/".repeat(2100));
        invalid(&"x".repeat(256));
    }

    #[test]
    fn error_names_the_path_and_shows_nul() {
        let err = RelPath::parse("a\0b").unwrap_err();
        assert_eq!(err, ToolError::invalid_path("`a\\0b`: contains a NUL byte"));
    }

    #[test]
    fn protects_identity_files_at_the_root_only() {
        for raw in [
            "SOUL.md",
            "./IDENTITY.md",
            "agents.md",
            "x/../USER.md",
            "daily/2024.md",
            "context/a",
        ] {
            let path = RelPath::parse(raw).expect(raw);
            assert!(
                matches!(path.check_writable(), Err(ToolError::PermissionDenied(_))),
                "{raw}"
            );
        }
        for raw in ["docs/SOUL.md", "notes.md", "daily", "dailyx/a.md"] {
            RelPath::parse(raw).expect(raw).check_writable().expect(raw);
        }
        assert!(RelPath::parse(".").unwrap().check_writable().is_err());
    }
}
