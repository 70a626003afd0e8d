//! The `memory` component: durable agent memory kept in its own key-value bucket (seed 000
//! §4.7), not in the workspace. Documents are built from entries (each write or append);
//! search ranks them with BM25. The identity files cannot be written.

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use chitin_sdk::prelude::*;

mod block;
mod index;
mod page;
mod store;
mod target;

use index::{Corpus, Entry, live_entries, snippet};
use store::{Item, Memory};

/// Largest content one write accepts.
const MAX_CONTENT_BYTES: usize = 1024 * 1024;
/// Default and largest `memory_search` result count.
const DEFAULT_LIMIT: usize = 5;
const MAX_LIMIT: usize = 50;
/// Default and deepest `memory_tree` depth.
const DEFAULT_DEPTH: usize = 1;
const MAX_DEPTH: usize = 10;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// Text to store
    content: String,
    /// `memory` (MEMORY.md, the default), `daily_log` (daily/YYYY-MM-DD.md), `heartbeat`
    /// (HEARTBEAT.md), or a custom document path such as `projects/chitin.md`
    target: Option<String>,
    /// Append to the document (default true); false replaces it
    append: Option<bool>,
}

#[derive(Serialize, JsonSchema)]
struct WriteOutput {
    /// The document written
    path: String,
    /// The entry's number (increases with every write)
    entry: u64,
    /// Bytes stored
    bytes: u64,
    /// Whether the content was appended (false: it replaced the document)
    appended: bool,
}

fn memory_write(args: WriteArgs) -> Result<WriteOutput, ToolError> {
    if args.content.len() > MAX_CONTENT_BYTES {
        return Err(ToolError::invalid_args(format!(
            "content of {} bytes is over the {MAX_CONTENT_BYTES}-byte cap",
            args.content.len()
        )));
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let path = target::resolve(args.target.as_deref(), &target::date(now))?;
    let append = args.append.unwrap_or(true);
    let (entry, terms) = Entry::of(&path, !append, &args.content);
    let entry = Memory::open()?.put(&entry, &terms, &args.content)?;
    Ok(WriteOutput {
        path,
        entry,
        bytes: args.content.len() as u64,
        appended: append,
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// Document path, e.g. `MEMORY.md`, `daily/2026-01-31.md` or `memory`
    path: String,
    /// Number of lines to skip from the start (default 0)
    offset: Option<u64>,
    /// Most lines to return (default: all, up to 48 KiB of text or what the call may return)
    limit: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
struct ReadOutput {
    /// The document read
    path: String,
    /// The lines returned, with their line endings
    content: String,
    /// How many entries (writes since the last overwrite) it is made of
    entries: u64,
    /// Zero-based index of the first line returned
    offset: u64,
    /// How many lines were returned
    lines: u64,
    /// Whether more of the document follows what was returned
    truncated: bool,
    /// The offset to pass to read on from here, when truncated
    next_offset: Option<u64>,
}

fn memory_read(args: ReadArgs) -> Result<ReadOutput, ToolError> {
    let path = target::normalise(&args.path)?;
    let memory = Memory::open()?;
    let mut entries: Vec<(u64, bool)> = Vec::new();
    memory.load(&[])?.each(|l| {
        if l.path == path.as_bytes() {
            entries.push((l.seq, l.replace));
        }
        Ok(())
    })?;
    entries.sort_unstable();
    let seqs = live_entries(&entries);
    if seqs.is_empty() {
        return Err(ToolError::not_found(format!("no memory document `{path}`")));
    }
    let mut content = String::new();
    for text in memory.texts(&seqs)? {
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&text);
    }
    let offset = args.offset.unwrap_or(0);
    let budget = chitin_sdk::budget::output_bytes();
    Ok(page::within(&content, offset, args.limit, budget, |page| {
        ReadOutput {
            content: page.text.to_owned(),
            path: path.clone(),
            entries: seqs.len() as u64,
            offset,
            lines: page.lines,
            truncated: page.next.is_some(),
            next_offset: page.next,
        }
    }))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TreeArgs {
    /// Folder to show (default: everything)
    path: Option<String>,
    /// Levels to show below it (default 1, at most 10)
    depth: Option<usize>,
}

#[derive(Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
enum NodeKind {
    Dir,
    File,
}

#[derive(Serialize, JsonSchema)]
struct TreeNode {
    /// Full document or folder path
    path: String,
    /// `dir` or `file`
    #[serde(rename = "type")]
    kind: NodeKind,
    /// Level below the requested folder (1 for its direct children)
    depth: usize,
}

#[derive(Serialize, JsonSchema)]
struct TreeOutput {
    /// The folder shown (`` for everything)
    path: String,
    /// The tree, depth-first, each folder before its contents
    entries: Vec<TreeNode>,
}

fn memory_tree(args: TreeArgs) -> Result<TreeOutput, ToolError> {
    let base = match args.path.as_deref() {
        None | Some("") | Some(".") | Some("/") => String::new(),
        Some(raw) => target::normalise(raw)?,
    };
    let depth = args.depth.unwrap_or(DEFAULT_DEPTH).clamp(1, MAX_DEPTH);
    // Every document with an entry has a live one (its last overwrite, or its appends).
    let fetched = Memory::open()?.load(&[])?;
    let mut stored: BTreeSet<&[u8]> = BTreeSet::new();
    fetched.each(|l| {
        stored.insert(l.path);
        Ok(())
    })?;
    let docs = stored
        .into_iter()
        .map(utf8_path)
        .collect::<Result<Vec<&str>, ToolError>>()?;
    let base_parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    let mut nodes: BTreeSet<(Vec<&str>, NodeKind)> = BTreeSet::new();
    let mut found = base_parts.is_empty();
    for doc in &docs {
        let parts: Vec<&str> = doc.split('/').collect();
        if parts.len() < base_parts.len() || parts[..base_parts.len()] != base_parts[..] {
            continue;
        }
        found = true;
        let below = parts.len() - base_parts.len();
        for level in 1..=below.min(depth) {
            let kind = if level == below {
                NodeKind::File
            } else {
                NodeKind::Dir
            };
            nodes.insert((parts[..base_parts.len() + level].to_vec(), kind));
        }
    }
    if !found {
        return Err(ToolError::not_found(format!("no memory under `{base}`")));
    }
    let base_len = base_parts.len();
    Ok(TreeOutput {
        path: base.clone(),
        entries: nodes
            .into_iter()
            .map(|(parts, kind)| TreeNode {
                depth: parts.len() - base_len,
                path: parts.join("/"),
                kind,
            })
            .collect(),
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Words to look for
    query: String,
    /// Most documents to return (default 5, at most 50)
    limit: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
struct SearchResult {
    /// The document
    path: String,
    /// BM25 score of its best-matching entry (higher is better)
    score: f64,
    /// A passage of that entry around the first match
    snippet: String,
}

#[derive(Serialize, JsonSchema)]
struct SearchOutput {
    /// Best first
    results: Vec<SearchResult>,
    /// How many documents matched in all
    matched: u64,
}

fn memory_search(args: SearchArgs) -> Result<SearchOutput, ToolError> {
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let memory = Memory::open()?;
    let mut corpus = Corpus::new(&args.query);
    let fetched = memory.load(corpus.terms())?;
    corpus.reserve(fetched.len());
    fetched.each_or_span(|item| {
        match item {
            Item::Entry(l) => corpus.add(l.seq, l.path, l.replace, l.len, l.tf),
            Item::Span(rows) => corpus.add_span(&rows),
        }
        .map_err(|e| ToolError::execution_failed(format!("memory index is corrupt: {e}")))
    })?;
    let (hits, matched) = corpus.rank(limit);
    let seqs: Vec<u64> = hits.iter().map(|h| h.seq).collect();
    let texts = memory.texts(&seqs)?;
    Ok(SearchOutput {
        results: hits
            .into_iter()
            .zip(texts)
            .map(|(hit, text)| {
                Ok(SearchResult {
                    path: utf8_path(hit.path)?.to_owned(),
                    // Four decimals: stable across platforms, plenty to order by.
                    score: (hit.score * 10_000.0).round() / 10_000.0,
                    snippet: snippet(&text, &args.query),
                })
            })
            .collect::<Result<_, ToolError>>()?,
        matched: matched as u64,
    })
}

/// A stored document path as text; not UTF-8 only if the index is corrupt.
fn utf8_path(path: &[u8]) -> Result<&str, ToolError> {
    std::str::from_utf8(path).map_err(|_| {
        ToolError::execution_failed(format!(
            "memory index is corrupt: document path {} is not UTF-8",
            String::from_utf8_lossy(path)
        ))
    })
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "memory_write",
            "Store text in durable memory: `target` is `memory` (MEMORY.md, default), \
             `daily_log` (today's daily/YYYY-MM-DD.md), `heartbeat` (HEARTBEAT.md) or a custom \
             document path. Appends by default; `append: false` replaces the document. The \
             identity files (IDENTITY.md, SOUL.md, AGENTS.md, USER.md) cannot be written.",
            memory_write,
        )
        .output_schema::<WriteOutput>(),
        Tool::new(
            "memory_read",
            "Read a memory document by path (e.g. `MEMORY.md`, `daily/2026-01-31.md`), up to \
             48 KiB of its lines at a time (less when the call's result may hold less): \
             `offset` and `limit` (in lines) page through a longer one, and `next_offset` says \
             where the next page starts.",
            memory_read,
        )
        .read_only()
        .idempotent()
        .output_schema::<ReadOutput>(),
        Tool::new(
            "memory_tree",
            "List memory documents and folders under `path` (default everything), `depth` \
             levels deep (default 1, at most 10).",
            memory_tree,
        )
        .read_only()
        .idempotent()
        .output_schema::<TreeOutput>(),
        Tool::new(
            "memory_search",
            "Search memory for documents relevant to a query (BM25 ranking). Returns the best \
             documents with scores and snippets. Call it before answering questions about prior \
             work.",
            memory_search,
        )
        .read_only()
        .idempotent()
        .output_schema::<SearchOutput>(),
    ]
}

chitin_sdk::export_tools!(tools);
