//! The module floors of `host/src`, checked on the source: a capability (`caps/<name>`) imports
//! only the core, never the host, the runtime, the store state, the grant or another
//! capability; the core imports no capability; and no import cycle joins two modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Modules above the capabilities: a capability importing one would reach back up.
const ABOVE_CAPABILITIES: &[&str] = &[
    "host", "runtime", "state", "grant", "library", "sandbox", "contract", "error", "cli", "mcp",
];

/// The core capabilities are built on; none may import a capability.
const CORE: &[&str] = &[
    "call",
    "call_log",
    "capability",
    "services",
    "policy",
    "tool_error",
    "events",
    "approver",
    "client",
    "fault",
    "leak",
    "limits",
    "secrets",
    "state_db",
    "heap",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's code: without its unit-test module (tests may reach anywhere) and without
/// comment lines (a doc link is no import).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read");
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text,
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every module path `file` names, as segments from the crate root: `crate::a::b` as written,
/// and `super::` paths resolved against the file's own module (`super::super::secrets` in
/// `caps/http/mod.rs` is `caps::secrets`). `crate::caps::{x, y}` gives `caps`, ``.
fn crate_paths(file: &Path) -> Vec<Vec<String>> {
    paths_in(&module_of(file), &code(file))
}

/// [`crate_paths`] of `code`, the text of `module`.
fn paths_in(module: &[String], code: &str) -> Vec<Vec<String>> {
    let segments = |rest: &str| -> Vec<String> {
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        rest[..end].split("::").map(str::to_owned).collect()
    };
    // The start of a path, not the tail of another (`a::super::` or a word ending in `crate`).
    let starts_path =
        |i: usize| !code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':');
    let mut paths: Vec<Vec<String>> = code
        .match_indices("crate::")
        .filter(|(i, _)| starts_path(*i))
        .map(|(i, m)| segments(&code[i + m.len()..]))
        .collect();
    for (i, _) in code
        .match_indices("super::")
        .filter(|(i, _)| starts_path(*i))
    {
        let mut rest = &code[i..];
        let mut up = 0;
        while let Some(tail) = rest.strip_prefix("super::") {
            rest = tail;
            up += 1;
        }
        let Some(base) = module.len().checked_sub(up) else {
            continue;
        };
        let mut path = module[..base].to_vec();
        path.extend(segments(rest));
        paths.push(path);
    }
    paths
}

/// The module a file under `src` is, as segments (`caps/http/outgoing.rs` is caps, http,
/// outgoing; `lib.rs` is empty).
fn module_of(path: &Path) -> Vec<String> {
    let rel = path
        .strip_prefix(src())
        .expect("under src")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

#[test]
fn a_capability_imports_neither_the_host_the_runtime_nor_another_capability() {
    let mut files = Vec::new();
    rust_files(&src().join("caps"), &mut files);
    let capabilities: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_of(f).get(1).cloned())
        .collect();
    let mut wrong = Vec::new();
    for file in &files {
        let module = module_of(file);
        // `caps/mod.rs` is the table: it lists the capabilities and may name them all.
        let Some(own) = module.get(1) else { continue };
        for path in crate_paths(file) {
            let top = path[0].as_str();
            // `crate::caps::{..}` or `crate::caps` alone cannot name only its own module; a
            // `super::` path out of an inline module may name an item of the table's module.
            let other_capability = top == "caps"
                && path.get(1).is_none_or(|name| {
                    name != own && (name.is_empty() || capabilities.contains(name))
                });
            if ABOVE_CAPABILITIES.contains(&top) || other_capability {
                wrong.push(format!(
                    "{}: crate::{}",
                    file.strip_prefix(src()).unwrap_or(file).display(),
                    path.join("::")
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "capability imports that reach up or across:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_core_imports_no_capability() {
    let mut wrong = Vec::new();
    for name in CORE {
        let file = src().join(format!("{name}.rs"));
        for path in crate_paths(&file) {
            if path[0] == "caps" || ABOVE_CAPABILITIES.contains(&path[0].as_str()) {
                wrong.push(format!("{name}.rs: crate::{}", path.join("::")));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "core imports that reach up:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_import_cycle_joins_two_modules() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    // Modules two levels deep (`caps::http`), each file counted as the module it belongs to.
    let depth = 2;
    let known: BTreeSet<Vec<String>> = files
        .iter()
        .map(|f| module_of(f).into_iter().take(depth).collect())
        .collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in &files {
        let from: Vec<String> = module_of(file).into_iter().take(depth).collect();
        for path in crate_paths(file) {
            // The longest known module the path names.
            let to = (1..=depth.min(path.len()))
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|m| known.contains(m));
            if let Some(to) = to
                && to != from
                && !from.starts_with(&to)
            {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    // A parent names its child modules (`caps` links `caps::kv`), whatever paths it uses.
    for module in &known {
        if module.len() > 1 {
            let parent = module[..module.len() - 1].to_vec();
            edges.entry(parent).or_default().insert(module.clone());
        }
    }
    // A module on a cycle reaches itself.
    let mut cycles = Vec::new();
    for start in edges.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&Vec<String>> = edges[start].iter().collect();
        while let Some(m) = stack.pop() {
            if m == start {
                cycles.push(start.join("::"));
                break;
            }
            if seen.insert(m) {
                stack.extend(edges.get(m).into_iter().flatten());
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "modules on an import cycle: {}",
        cycles.join(", ")
    );
}

#[test]
fn super_paths_resolve_against_the_files_module() {
    let module: Vec<String> = ["caps", "http", "outgoing"].map(String::from).to_vec();
    let code =
        "use super::super::secrets::SecretsCtx;\nuse super::tls;\nuse crate::leak::LeakScanner;";
    let paths = paths_in(&module, code);
    let want = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(
        paths.contains(&want(&["caps", "secrets", "SecretsCtx"])),
        "{paths:?}"
    );
    assert!(paths.contains(&want(&["caps", "http", "tls"])), "{paths:?}");
    assert!(paths.contains(&want(&["leak", "LeakScanner"])), "{paths:?}");
}
