//! A bounded, sorted walk of a directory tree that never follows symlinks and skips the large
//! generated directories an agent never wants listed or searched.

use std::fs;
use std::path::Path;

use chitin_sdk::ToolError;

use crate::io::error;
use crate::path::RelPath;
use crate::tree::Dir;

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
/// `max_depth` levels down; files' sizes are read only when `sizes` (0 otherwise). `visit`
/// returns `false` to stop the walk.
pub fn walk(
    root: &Path,
    start: &RelPath,
    max_depth: u32,
    sizes: bool,
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
    let opened = Dir::open(&dir).map_err(|e| error(start, "list", e))?;
    let walk = Walk {
        max_depth,
        sizes,
        start,
    };
    walk.dir(&opened, &prefix, 1, visit)?;
    Ok(())
}

/// What stays the same down a walk.
struct Walk<'a> {
    max_depth: u32,
    sizes: bool,
    /// The path the walk started from, which errors name.
    start: &'a RelPath,
}

impl Walk<'_> {
    /// Visit `dir`'s entries, depth `depth`, their paths under `prefix`; `false` when the
    /// visitor asked to stop.
    fn dir(
        &self,
        dir: &Dir,
        prefix: &str,
        depth: u32,
        visit: &mut dyn FnMut(&Entry) -> bool,
    ) -> Result<bool, ToolError> {
        let mut entries = dir
            .entries(self.sizes)
            .map_err(|e| error(self.start, "list", e))?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for raw in entries {
            let entry = Entry {
                path: format!("{prefix}{}", raw.name),
                kind: raw.kind,
                size: raw.size,
                depth,
            };
            if !visit(&entry) {
                return Ok(false);
            }
            let descend = entry.kind == Kind::Dir
                && depth < self.max_depth
                && !SKIPPED_DIRS.contains(&raw.name.as_str());
            if descend {
                let child = dir
                    .child(&raw.name)
                    .map_err(|e| error(self.start, "list", e))?;
                let child_prefix = format!("{}/", entry.path);
                if !self.dir(&child, &child_prefix, depth + 1, visit)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}
