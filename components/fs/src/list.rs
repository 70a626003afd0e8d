//! `list_dir`: a directory's entries, optionally recursive, capped at 500.

use chitin_sdk::prelude::*;

use crate::Workspace;
use crate::path::RelPath;
use crate::walk::{Kind, walk};

/// Most entries one call returns (seed 000 §4.5 `MAX_DIR_ENTRIES`).
pub const MAX_ENTRIES: usize = 500;
/// Deepest a recursive listing goes when no depth is given, and the most it may be asked for.
pub const MAX_DEPTH: u32 = 20;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Directory relative to the workspace root (default: the root)
    pub path: Option<String>,
    /// List subdirectories too (default false)
    #[serde(default)]
    pub recursive: bool,
    /// How many levels to descend when recursive (default and maximum 20)
    pub max_depth: Option<u32>,
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct ListEntry {
    /// Path relative to the workspace root
    pub path: String,
    /// What the entry is; symlinks are reported, never followed
    #[serde(rename = "type")]
    pub kind: Kind,
    /// Size in bytes (files only; 0 otherwise)
    pub size: u64,
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct ListOutput {
    /// The directory listed, normalised
    pub path: String,
    /// Entries in name order, depth-first
    pub entries: Vec<ListEntry>,
    /// Whether the 500-entry cap or the call's output budget cut the listing short
    pub truncated: bool,
}

/// Lists a directory. Version-control, dependency and build directories are listed but not
/// descended into.
pub fn list_dir(ws: &Workspace, args: ListArgs) -> Result<ListOutput, ToolError> {
    let path = RelPath::parse(args.path.as_deref().unwrap_or("."))?;
    let depth = if args.recursive {
        args.max_depth.unwrap_or(MAX_DEPTH).clamp(1, MAX_DEPTH)
    } else {
        1
    };
    let mut entries = Vec::new();
    let mut truncated = false;
    walk(&ws.root, &path, depth, true, &mut |entry| {
        if entries.len() == MAX_ENTRIES {
            truncated = true;
            return false;
        }
        entries.push(ListEntry {
            path: entry.path.clone(),
            kind: entry.kind,
            size: entry.size,
        });
        true
    })?;
    let mut out = ListOutput {
        path: path.display(),
        entries,
        truncated,
    };
    out.truncated |= ws.fit(&mut out, |o| &mut o.entries);
    Ok(out)
}
