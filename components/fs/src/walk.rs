//! A bounded, sorted walk of a directory tree that never follows symlinks and skips the large
//! generated directories an agent never wants listed or searched.

use std::fs;
use std::path::Path;

use chitin_sdk::ToolError;

use crate::io::error;
use crate::path::RelPath;

/// Directory names not descended into: version control, dependencies, build output, caches.
pub const SKIPPED_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "target",
    "__pycache__",
    ".venv",
    "venv",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".cache",
    ".next",
];

/// What a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed).
    Symlink,
    /// Anything else (socket, device, fifo).
    Other,
}

/// One entry met on a walk.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Path relative to the workspace root, `/`-separated.
    pub path: String,
    /// What it is.
    pub kind: Kind,
    /// Size in bytes (files; 0 otherwise).
    pub size: u64,
    /// Depth below the walk's start (1 for direct children).
    pub depth: u32,
}

/// Walks `start` (a directory) depth-first in name order, calling `visit` for each entry up to
/// `max_depth` levels down. `visit` returns `false` to stop the walk.
pub fn walk(
    root: &Path,
    start: &RelPath,
    max_depth: u32,
    visit: &mut dyn FnMut(&Entry) -> bool,
) -> Result<(), ToolError> {
    let dir = start.under(root);
    let meta = fs::metadata(&dir).map_err(|e| error(start, "list", e))?;
    if !meta.is_dir() {
        return Err(ToolError::invalid_args(format!(
            "`{}` is not a directory",
            start.display()
        )));
    }
    let prefix = if start.is_root() {
        String::new()
    } else {
        format!("{}/", start.display())
    };
    walk_dir(&dir, &prefix, 1, max_depth, start, visit)?;
    Ok(())
}

/// Returns `false` when the visitor asked to stop.
fn walk_dir(
    dir: &Path,
    prefix: &str,
    depth: u32,
    max_depth: u32,
    start: &RelPath,
    visit: &mut dyn FnMut(&Entry) -> bool,
) -> Result<bool, ToolError> {
    let mut names: Vec<(String, fs::FileType, u64)> = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| error(start, "list", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| error(start, "list", e))?;
        // Names that are not UTF-8 cannot be named back by the agent; leave them out.
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        let size = if file_type.is_file() {
            entry.metadata().map(|m| m.len()).unwrap_or(0)
        } else {
            0
        };
        names.push((name, file_type, size));
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, file_type, size) in names {
        let kind = if file_type.is_symlink() {
            Kind::Symlink
        } else if file_type.is_dir() {
            Kind::Dir
        } else if file_type.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        let path = format!("{prefix}{name}");
        let entry = Entry {
            path,
            kind,
            size,
            depth,
        };
        if !visit(&entry) {
            return Ok(false);
        }
        if kind == Kind::Dir && depth < max_depth && !SKIPPED_DIRS.contains(&name.as_str()) {
            let child = dir.join(&name);
            let child_prefix = format!("{}/", entry.path);
            if !walk_dir(&child, &child_prefix, depth + 1, max_depth, start, visit)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}
