//! `[capabilities.files]`: which parts of the operator's workspace the component may reach.

use serde::{Deserialize, Serialize};

use super::ManifestError;
use super::audit_line::AuditLine;

/// Workspace paths the component may open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesGrant {
    /// Paths relative to the workspace (`.` is the whole workspace).
    pub paths: Vec<PathGrant>,
}

/// One granted path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathGrant {
    /// Relative to the workspace root; no `..`, no absolute paths.
    pub path: String,
    /// Read-only or read-write.
    pub access: FileAccess,
}

/// How a granted path may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileAccess {
    /// Read files and list directories.
    ReadOnly,
    /// Also create, write and remove.
    ReadWrite,
}

impl FilesGrant {
    /// Every path is relative, stays inside the workspace and is listed once.
    pub fn validate(&self) -> Result<(), ManifestError> {
        if self.paths.is_empty() {
            return Err(ManifestError::invalid(
                "capabilities.files.paths",
                "is empty: name at least one path, or drop the section",
            ));
        }
        for (i, grant) in self.paths.iter().enumerate() {
            let field = format!("capabilities.files.paths[{i}].path");
            let p = grant.path.as_str();
            let bad = if p.is_empty() {
                Some("is empty (use `.` for the whole workspace)")
            } else if p.contains('\0') {
                Some("contains a NUL byte")
            } else if p.starts_with('/') || p.starts_with('\\') || p.get(1..2) == Some(":") {
                Some("must be relative to the workspace")
            } else if p.split(['/', '\\']).any(|seg| seg == "..") {
                Some("must not contain `..`")
            } else {
                None
            };
            if let Some(reason) = bad {
                return Err(ManifestError::invalid(field, format!("`{p}` {reason}")));
            }
            if self.paths[..i].iter().any(|g| g.path == grant.path) {
                return Err(ManifestError::invalid(
                    field,
                    format!("`{p}` is listed twice"),
                ));
            }
        }
        Ok(())
    }
}

impl FilesGrant {
    /// Each granted path in plain words, with what it lets the component do.
    pub fn audit_lines(&self) -> Vec<AuditLine> {
        self.paths
            .iter()
            .map(|p| {
                let place = workspace_place(&p.path);
                let (scope, risk) = match p.access {
                    FileAccess::ReadOnly => (
                        format!("read-only {place}"),
                        format!("can read every file under {place}"),
                    ),
                    FileAccess::ReadWrite => (
                        format!("read-write {place}"),
                        format!("can read, change and delete files under {place}"),
                    ),
                };
                AuditLine {
                    name: "files",
                    scope,
                    risk,
                }
            })
            .collect()
    }
}

/// A granted path, as a person reads it.
fn workspace_place(path: &str) -> String {
    if path == "." || path.is_empty() {
        "the whole workspace".to_owned()
    } else {
        format!("`{path}` in the workspace")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(path: &str) -> FilesGrant {
        FilesGrant {
            paths: vec![PathGrant {
                path: path.into(),
                access: FileAccess::ReadOnly,
            }],
        }
    }

    #[test]
    fn escaping_paths_are_refused() {
        for p in ["", "/etc", "\\x", "C:/x", "a/../../b", "..", "a\0b"] {
            assert!(grant(p).validate().is_err(), "{p:?} accepted");
        }
        for p in [".", "docs", "src/lib"] {
            assert!(grant(p).validate().is_ok(), "{p:?} refused");
        }
    }
}
