//! `[capabilities.files]`: which parts of the operator's workspace the component may reach.

use serde::{Deserialize, Serialize};

use super::ManifestError;
use super::audit_line::AuditLine;
use crate::capability::Section;
use crate::manifest::Capabilities;

/// Workspace paths the component may open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesGrant {
    /// Paths relative to the workspace (`.` is the whole workspace).
    pub paths: Vec<PathGrant>,
}

impl Section for FilesGrant {
    const NAME: &'static str = "files";
    const IMPORTS: &'static [&'static str] = &["wasi:filesystem"];
    const LINKED_WITHOUT_GRANT: bool = true;

    fn check(&self, _all: &Capabilities) -> Result<(), ManifestError> {
        self.validate()
    }

    fn widenings(&self, old: Option<&Self>, out: &mut Vec<String>) {
        widen(old, self, out);
    }

    fn audit_lines(&self) -> Vec<AuditLine> {
        FilesGrant::audit_lines(self)
    }
}

/// Each widening from `old` to `new`, as `key: what changed`.
fn widen(old: Option<&FilesGrant>, new: &FilesGrant, out: &mut Vec<String>) {
    let old = old.map(|g| g.paths.as_slice()).unwrap_or_default();
    for grant in &new.paths {
        let want = path_segments(&grant.path);
        let covered = old
            .iter()
            .any(|o| want.starts_with(&path_segments(&o.path)) && o.access >= grant.access);
        if covered {
            continue;
        }
        let same = old.iter().find(|o| path_segments(&o.path) == want);
        out.push(match same {
            Some(o) => format!(
                "capabilities.files.paths: `{}` goes from {} to {}",
                grant.path,
                access_name(o.access),
                access_name(grant.access)
            ),
            None => format!(
                "capabilities.files.paths: adds {} `{}`",
                access_name(grant.access),
                grant.path
            ),
        });
    }
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

/// A workspace path as segments (`.` and empty segments dropped), so `./a/` is `a`.
fn path_segments(path: &str) -> Vec<&str> {
    path.split(['/', '\\'])
        .filter(|s| !s.is_empty() && *s != ".")
        .collect()
}

fn access_name(access: FileAccess) -> &'static str {
    match access {
        FileAccess::ReadOnly => "read-only",
        FileAccess::ReadWrite => "read-write",
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
