//! The `fs` component: workspace file tools. The host preopens the granted workspace at
//! `/workspace` (read-only or read-write); every path the agent gives is relative to it. What is
//! reachable is the host's decision — these tools add lexical checks, caps and the protected
//! identity files on top.

use std::path::PathBuf;

use chitin_sdk::prelude::*;

mod io;
pub mod list;
pub mod path;
pub mod read;
pub mod search;
mod tree;
pub mod walk;
pub mod write;

/// Where the host preopens the workspace inside the component.
pub const WORKSPACE_ROOT: &str = "/workspace";

/// The directory the tools work in, and how long a result may be.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The workspace root as the component sees it.
    pub root: PathBuf,
    /// The call's output budget in bytes (`chitin_sdk::budget`); results are fitted within it.
    pub budget: Option<usize>,
}

impl Workspace {
    /// Drop the last items of `out`'s list until `out` fits the call's output budget; whether
    /// any were dropped.
    pub fn fit<O: Serialize, T: Serialize>(
        &self,
        out: &mut O,
        list: fn(&mut O) -> &mut Vec<T>,
    ) -> bool {
        self.budget
            .is_some_and(|budget| chitin_sdk::budget::keep_within(out, list, budget))
    }
}

/// The tools over the workspace at `root`, fitting their results within `budget` bytes.
pub fn tools_at(root: impl Into<PathBuf>, budget: Option<usize>) -> Vec<Tool> {
    let root: PathBuf = root.into();
    let ws = || Workspace {
        root: root.clone(),
        budget,
    };
    let (w1, w2, w3, w4, w5, w6) = (ws(), ws(), ws(), ws(), ws(), ws());
    vec![
        Tool::new_json(
            "read_file",
            "Read a text file in the workspace. `offset` skips lines, `limit` caps them; at most \
             1 MiB of content per call, and no more than the call's result may hold \
             (`truncated` and `next_offset` say where to continue).",
            move |args| read::read_file(&w1, args),
        )
        .read_only()
        .idempotent()
        .output_schema::<read::ReadOutput>(),
        Tool::new(
            "write_file",
            "Create or replace a file in the workspace with the given content (at most 5 MiB), \
             creating missing parent directories. The identity files at the root (IDENTITY.md, \
             SOUL.md, AGENTS.md, USER.md, MEMORY.md, HEARTBEAT.md, daily/, context/) are \
             refused.",
            move |args| write::write_file(&w2, args),
        )
        .destructive()
        .idempotent()
        .output_schema::<write::WriteOutput>(),
        Tool::new(
            "list_dir",
            "List a workspace directory (default the root), optionally recursive up to \
             `max_depth`; at most 500 entries. `.git`, `node_modules`, `target` and similar are \
             listed but not descended into; symlinks are reported, never followed.",
            move |args| list::list_dir(&w3, args),
        )
        .read_only()
        .idempotent()
        .output_schema::<list::ListOutput>(),
        Tool::new(
            "apply_patch",
            "Replace exact text in a workspace file: `old_string` must occur exactly once, or set \
             `replace_all`. Zero or several matches is an error stating the count.",
            move |args| write::apply_patch(&w4, args),
        )
        .destructive()
        .output_schema::<write::PatchOutput>(),
        Tool::new(
            "glob",
            "Find workspace paths matching a glob pattern such as `src/**/*.rs` (`*` stays in \
             one directory, `**` crosses directories); at most 1000 paths.",
            move |args| search::glob(&w5, args),
        )
        .read_only()
        .idempotent()
        .output_schema::<search::GlobOutput>(),
        Tool::new(
            "grep",
            "Search workspace files for lines matching a regular expression; returns file, line \
             number and line for each match (default 100, at most 1000). Binary files and files \
             over 5 MiB are skipped; `glob` narrows the files searched.",
            move |args| search::grep(&w6, args),
        )
        .read_only()
        .idempotent()
        .output_schema::<search::GrepOutput>(),
    ]
}

fn tools() -> Vec<Tool> {
    tools_at(WORKSPACE_ROOT, chitin_sdk::budget::output_bytes())
}

chitin_sdk::export_tools!(tools);

#[cfg(test)]
mod tests;
