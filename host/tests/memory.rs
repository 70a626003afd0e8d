//! The `memory` component over the kv capability: durable across host restarts, isolated per
//! component and per grant, BM25 order on a fixed corpus, and no lost writes under concurrency.

use crate::common;

use std::path::{Path, PathBuf};

use chitin_host::engine::EngineOptions;
use chitin_host::policy::Policy;
use chitin_host::{Host, Limits, Runtime, ToolError};
use common::{component, policy, resign, services, test_engine};
use futures::StreamExt;
use serde_json::{Value, json};

/// A host over `data` (its own workspace inside) with `components` loaded; enough pool slots
/// for 100 calls in flight.
async fn host(data: &Path, components: &[PathBuf]) -> Host {
    host_under(data, components, policy(Limits::default())).await
}

/// [`host`] under `policy`.
async fn host_under(data: &Path, components: &[PathBuf], mut policy: Policy) -> Host {
    let options = EngineOptions {
        max_live_instances: 128,
        ..test_engine()
    };
    let runtime = Runtime::new(common::shared_cache(), &options).expect("runtime");
    let ws = data.join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    // Variants under the `test` namespace carry the built-in tool names: isolation, not name
    // protection, is under test here.
    policy.tools.protected.clear();
    let mut host = Host::new(runtime, policy, services(data, &ws));
    for c in components {
        host.load_path(c).await.expect("load");
    }
    host
}

/// The memory component re-embedded under another `name` with `kv` as its kv section (None:
/// no kv grant).
fn memory_variant(dir: &Path, name: &str, kv: Option<&str>) -> PathBuf {
    let bytes = std::fs::read(component("memory")).expect("memory.wasm");
    let mut manifest = format!(
        "schema = 1\n[component]\nname = \"{name}\"\nnamespace = \"test\"\nversion = \"0.1.0\"\n\
         publisher = \"test\"\ndescription = \"memory under test\"\n"
    );
    if let Some(kv) = kv {
        manifest.push_str(&format!("[capabilities.kv]\nbuckets = {kv}\n"));
    }
    let out = dir.join(format!("{name}.wasm"));
    std::fs::write(&out, resign(&bytes, &manifest)).expect("write variant");
    out
}

async fn ok(host: &Host, tool: &str, args: Value) -> Value {
    match host.call(tool, &args.to_string()).await.result {
        Ok(out) => out.json().expect("JSON"),
        Err(e) => panic!("{tool} {args}: {e}"),
    }
}

async fn err(host: &Host, tool: &str, args: Value) -> ToolError {
    match host.call(tool, &args.to_string()).await.result {
        Ok(out) => panic!("{tool} {args} succeeded: {}", out.text),
        Err(e) => e,
    }
}

#[tokio::test]
async fn memory_survives_a_host_restart() {
    let data = tempfile::tempdir().expect("tempdir");
    {
        let h = host(data.path(), &[component("memory")]).await;
        ok(&h, "memory_write", json!({"content": "first note"})).await;
        ok(&h, "memory_write", json!({"content": "second note"})).await;
        ok(
            &h,
            "memory_write",
            json!({"content": "plan", "target": "projects/x.md"}),
        )
        .await;
    }
    let h = host(data.path(), &[component("memory")]).await;
    let out = ok(&h, "memory_read", json!({"path": "MEMORY.md"})).await;
    assert_eq!(out["content"], "first note\nsecond note");
    assert_eq!(out["entries"], 2);
    let out = ok(&h, "memory_tree", json!({"depth": 2})).await;
    assert_eq!(
        out["entries"],
        json!([
            {"path": "MEMORY.md", "type": "file", "depth": 1},
            {"path": "projects", "type": "dir", "depth": 1},
            {"path": "projects/x.md", "type": "file", "depth": 2},
        ])
    );
    let out = ok(&h, "memory_search", json!({"query": "plan"})).await;
    assert_eq!(out["results"][0]["path"], "projects/x.md");
}

#[tokio::test]
async fn search_ranks_a_fixed_corpus_in_bm25_order() {
    let data = tempfile::tempdir().expect("tempdir");
    let h = host(data.path(), &[component("memory")]).await;
    let corpus = [
        (
            "notes/rust.md",
            "Rust ownership and the borrow checker keep memory safe.",
        ),
        (
            "notes/python.md",
            "Python uses garbage collection and reference counting.",
        ),
        (
            "notes/borrow.md",
            "The borrow checker rejects aliasing mutable borrow patterns; borrow rules.",
        ),
        (
            "notes/cooking.md",
            "Borrow a cup of sugar from the neighbour for the cake recipe today.",
        ),
        (
            "notes/wasm.md",
            "WebAssembly components run in a sandbox with capability grants.",
        ),
    ];
    for (path, text) in corpus {
        ok(
            &h,
            "memory_write",
            json!({"content": text, "target": path, "append": false}),
        )
        .await;
    }
    let out = ok(
        &h,
        "memory_search",
        json!({"query": "borrow checker", "limit": 10}),
    )
    .await;
    let order: Vec<&str> = out["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["path"].as_str().expect("path"))
        .collect();
    assert_eq!(
        order,
        ["notes/borrow.md", "notes/rust.md", "notes/cooking.md"]
    );
    assert_eq!(out["matched"], 3);
    let scores: Vec<f64> = out["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["score"].as_f64().expect("score"))
        .collect();
    assert!(scores.windows(2).all(|w| w[0] > w[1]), "{scores:?}");
    assert!(
        out["results"][0]["snippet"]
            .as_str()
            .expect("snippet")
            .contains("borrow checker")
    );
    let out = ok(&h, "memory_search", json!({"query": "sandbox", "limit": 1})).await;
    assert_eq!(out["results"][0]["path"], "notes/wasm.md");
    let out = ok(&h, "memory_search", json!({"query": "nothing-like-this"})).await;
    assert_eq!(out, json!({"results": [], "matched": 0}));
}

#[tokio::test]
async fn overwrite_replaces_and_append_appends() {
    let data = tempfile::tempdir().expect("tempdir");
    let h = host(data.path(), &[component("memory")]).await;
    ok(
        &h,
        "memory_write",
        json!({"content": "old secret", "target": "a.md"}),
    )
    .await;
    ok(
        &h,
        "memory_write",
        json!({"content": "new", "target": "a.md", "append": false}),
    )
    .await;
    ok(
        &h,
        "memory_write",
        json!({"content": "more\n", "target": "a.md"}),
    )
    .await;
    let out = ok(&h, "memory_read", json!({"path": "a.md"})).await;
    assert_eq!(out["content"], "new\nmore\n");
    let out = ok(&h, "memory_search", json!({"query": "secret"})).await;
    assert_eq!(out["matched"], 0);
    let out = ok(
        &h,
        "memory_write",
        json!({"content": "today", "target": "daily_log"}),
    )
    .await;
    assert!(out["path"].as_str().expect("path").starts_with("daily/20"));
}

#[tokio::test]
async fn identity_files_and_escaping_paths_are_refused() {
    let data = tempfile::tempdir().expect("tempdir");
    let h = host(data.path(), &[component("memory")]).await;
    for target in ["IDENTITY.md", "SOUL.md", "agents.md", "./USER.md"] {
        let e = err(
            &h,
            "memory_write",
            json!({"content": "evil", "target": target}),
        )
        .await;
        assert!(matches!(e, ToolError::PermissionDenied(_)), "{target}: {e}");
    }
    for target in ["../x.md", "/etc/passwd", "a\0b", "C:x"] {
        let e = err(
            &h,
            "memory_write",
            json!({"content": "x", "target": target}),
        )
        .await;
        assert!(matches!(e, ToolError::InvalidPath(_)), "{target:?}: {e}");
    }
    let e = err(&h, "memory_read", json!({"path": "SOUL.md"})).await;
    assert!(matches!(e, ToolError::NotFound(_)), "{e}");
}

#[tokio::test]
async fn components_never_see_each_others_buckets() {
    let data = tempfile::tempdir().expect("tempdir");
    let variants = tempfile::tempdir().expect("tempdir");
    let other = memory_variant(variants.path(), "other", Some(r#"["memory"]"#));
    let first = host(data.path(), &[component("memory")]).await;
    ok(
        &first,
        "memory_write",
        json!({"content": "private to chitin/memory"}),
    )
    .await;
    drop(first);
    // Same bucket name, same database, another component (a third party's, so its tools carry
    // its namespace): an empty memory.
    let second = host(data.path(), &[other]).await;
    let e = err(&second, "test__memory_read", json!({"path": "MEMORY.md"})).await;
    assert!(matches!(e, ToolError::NotFound(_)), "{e}");
    let out = ok(&second, "test__memory_search", json!({"query": "private"})).await;
    assert_eq!(out["matched"], 0);
}

#[tokio::test]
async fn a_bucket_outside_the_grant_is_refused_by_name() {
    let data = tempfile::tempdir().expect("tempdir");
    let variants = tempfile::tempdir().expect("tempdir");
    let wrong = memory_variant(variants.path(), "wrong", Some(r#"["notes"]"#));
    let none = memory_variant(variants.path(), "none", None);
    let h = host(data.path(), &[wrong]).await;
    let e = err(&h, "test__memory_write", json!({"content": "x"})).await;
    assert!(
        matches!(&e, ToolError::PermissionDenied(m) if m.contains("`memory` is not granted") && m.contains("notes")),
        "{e}"
    );
    drop(h);
    // Without a kv section the component does not load at all: its keyvalue imports are not
    // covered by its manifest.
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let ws = data.path().join("workspace");
    let mut h = Host::new(
        runtime,
        policy(Limits::default()),
        services(data.path(), &ws),
    );
    let e = h.load_path(&none).await.expect_err("uncovered imports");
    assert!(e.to_string().contains("wasi:keyvalue"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_writes_lose_nothing() {
    let data = tempfile::tempdir().expect("tempdir");
    let h = std::sync::Arc::new(host(data.path(), &[component("memory")]).await);
    let calls: Vec<_> = (0..100)
        .map(|i| {
            let h = h.clone();
            tokio::spawn(async move {
                let args = json!({"content": format!("line {i} token{i}\n"), "target": "log.md"});
                h.call("memory_write", &args.to_string()).await.result
            })
        })
        .collect();
    let mut entries = Vec::new();
    for call in calls {
        let out = call.await.expect("join").expect("memory_write");
        entries.push(out.json().expect("JSON")["entry"].as_u64().expect("entry"));
    }
    entries.sort_unstable();
    entries.dedup();
    assert_eq!(entries.len(), 100, "entry numbers must be distinct");
    let out = ok(&h, "memory_read", json!({"path": "log.md"})).await;
    assert_eq!(out["entries"], 100);
    let content = out["content"].as_str().expect("content");
    for i in 0..100 {
        assert!(
            content.contains(&format!("line {i} token{i}\n")),
            "line {i} lost"
        );
    }
    let out = ok(&h, "memory_search", json!({"query": "token57"})).await;
    assert_eq!(out["matched"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_reads_folded_blocks_and_recent_entries_alike() {
    let data = tempfile::tempdir().expect("tempdir");
    let ws = data.path().join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    let services = services(data.path(), &ws);
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut h = Host::new(runtime, policy(Limits::default()), services.clone());
    h.load_path(&component("memory")).await.expect("load");
    let h = std::sync::Arc::new(h);

    // 300 documents, 16 writes in flight: enough for blocks to be folded while others land.
    let docs: Vec<_> = (0..300)
        .map(|i| {
            let h = h.clone();
            async move {
                let args = json!({
                    "content": format!("doc{i} common word{}", i % 7),
                    "target": format!("notes/{i}.md"),
                    "append": false,
                });
                h.call("memory_write", &args.to_string()).await.result
            }
        })
        .collect();
    for out in futures::stream::iter(docs)
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
    {
        out.expect("memory_write");
    }
    // An overwrite and an append to documents whose first entries are folded by now.
    let args = json!({"content": "replaced content", "target": "notes/3.md", "append": false});
    ok(&h, "memory_write", args).await;
    ok(
        &h,
        "memory_write",
        json!({"content": "extra5", "target": "notes/5.md"}),
    )
    .await;

    // The writes that finished blocks 2, 3 and 4 folded blocks 0, 1 and 2 into the index.
    let kv = services.kv().expect("kv");
    let place = chitin_host::caps::kv::Place {
        component: "chitin/memory".into(),
        bucket: "memory".into(),
        quota: u64::MAX,
    };
    for block in 0..3 {
        let key = format!("k:{block:010}");
        assert!(
            kv.get(&place, &key).expect("get").is_some(),
            "{key} missing"
        );
    }
    assert!(
        kv.get(&place, "y:0000000000:common")
            .expect("get")
            .is_some()
    );

    let found = |out: &Value| -> Vec<String> {
        out["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["path"].as_str().expect("path").to_owned())
            .collect()
    };
    let out = ok(&h, "memory_search", json!({"query": "doc3"})).await;
    assert_eq!(
        out["matched"], 0,
        "an overwritten entry is not found: {out}"
    );
    let out = ok(&h, "memory_search", json!({"query": "replaced"})).await;
    assert_eq!(found(&out), ["notes/3.md"]);
    for i in [0, 100, 150, 250, 299] {
        let out = ok(&h, "memory_search", json!({"query": format!("doc{i}")})).await;
        assert_eq!(found(&out), [format!("notes/{i}.md")], "doc{i}");
    }
    let out = ok(&h, "memory_search", json!({"query": "doc5 extra5"})).await;
    assert_eq!(found(&out), ["notes/5.md"]);
    let out = ok(&h, "memory_search", json!({"query": "common", "limit": 50})).await;
    assert_eq!(out["matched"], 299);
    assert_eq!(found(&out).len(), 50);

    let out = ok(&h, "memory_read", json!({"path": "notes/5.md"})).await;
    assert_eq!(out["entries"], 2);
    assert_eq!(out["content"], "doc5 common word5\nextra5");
    let out = ok(&h, "memory_read", json!({"path": "notes/3.md"})).await;
    assert_eq!(out["content"], "replaced content");
    let out = ok(&h, "memory_tree", json!({"path": "notes"})).await;
    assert_eq!(out["entries"].as_array().expect("entries").len(), 300);
}

/// Term counts stored in binary form (version byte, count, then length-prefixed terms and
/// counts), as the map earlier versions stored as JSON.
fn binary_terms(bytes: &[u8]) -> std::collections::BTreeMap<String, u64> {
    let mut at = terms_start(bytes);
    let n = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("count"));
    at += 4;
    let mut terms = std::collections::BTreeMap::new();
    for _ in 0..n {
        let len = usize::from(u16::from_le_bytes([bytes[at], bytes[at + 1]]));
        let term = std::str::from_utf8(&bytes[at + 2..at + 2 + len]).expect("UTF-8");
        at += 2 + len;
        let count = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("count"));
        at += 4;
        terms.insert(term.to_owned(), u64::from(count));
    }
    assert_eq!(at, bytes.len());
    terms
}

/// Where the term count begins in binary term counts: after the version byte, and in the form
/// that carries the write's entry, after the entry (path length, path, flag, length).
fn terms_start(bytes: &[u8]) -> usize {
    match bytes[0] {
        1 => 1,
        2 => 1 + 2 + usize::from(u16::from_le_bytes([bytes[1], bytes[2]])) + 1 + 4,
        v => panic!("binary term counts, not version {v}"),
    }
}

/// The key of write `seq`'s `part` (`e` entry, `f` term counts, `t` text): the three of a
/// write sort together.
fn part_key(seq: u64, part: char) -> String {
    format!("n:{seq:012}:{part}")
}

/// The same key as earlier versions stored it, apart from the write's other two.
fn earlier_part_key(seq: u64, part: char) -> String {
    format!("{part}:{seq:012}")
}

/// Write `seq`'s `part` and the key it is under, in either layout.
fn stored_part(
    kv: &chitin_host::caps::kv::KvStore,
    place: &chitin_host::caps::kv::Place,
    seq: u64,
    part: char,
) -> Option<(String, Vec<u8>)> {
    [part_key(seq, part), earlier_part_key(seq, part)]
        .into_iter()
        .find_map(|key| kv.get(place, &key).expect("get").map(|v| (key, v)))
}

/// Moves the keys of writes `seqs` to the layout earlier versions stored them in; how many
/// writes there were.
async fn to_earlier_layout(
    kv: &chitin_host::caps::kv::KvStore,
    place: &chitin_host::caps::kv::Place,
    seqs: std::ops::RangeInclusive<u64>,
) -> usize {
    let (mut pairs, mut gone) = (Vec::new(), Vec::new());
    for seq in seqs {
        for part in ['e', 'f', 't'] {
            if let Some(value) = kv.get(place, &part_key(seq, part)).expect("get") {
                pairs.push((earlier_part_key(seq, part), value));
                gone.push(part_key(seq, part));
            }
        }
    }
    kv.set_many(place, pairs).await.expect("set");
    kv.delete_many(place, gone.clone()).await.expect("delete");
    gone.len() / 3
}

/// Rewrites the stored term counts of writes `seqs` with `rewrite`; how many there were.
async fn rewrite_terms(
    kv: &chitin_host::caps::kv::KvStore,
    place: &chitin_host::caps::kv::Place,
    seqs: std::ops::RangeInclusive<u64>,
    rewrite: impl Fn(&[u8]) -> Vec<u8>,
) -> usize {
    let mut pairs = Vec::new();
    for seq in seqs {
        if let Some((key, bytes)) = stored_part(kv, place, seq, 'f') {
            pairs.push((key, rewrite(&bytes)));
        }
    }
    let rewritten = pairs.len();
    kv.set_many(place, pairs).await.expect("set");
    rewritten
}

/// Rewrites the term counts of writes `seqs` in the binary form before they carried the
/// write's entry.
async fn terms_without_entry(
    kv: &chitin_host::caps::kv::KvStore,
    place: &chitin_host::caps::kv::Place,
    seqs: std::ops::RangeInclusive<u64>,
) {
    let rewritten = rewrite_terms(kv, place, seqs, |bytes| {
        assert_eq!(bytes[0], 2, "written with the entry");
        let mut old = vec![1];
        old.extend_from_slice(&bytes[terms_start(bytes)..]);
        old
    })
    .await;
    assert!(rewritten > 0);
}

/// Rewrites the term counts of writes `seqs` as earlier versions stored them: JSON maps.
async fn terms_as_json(
    kv: &chitin_host::caps::kv::KvStore,
    place: &chitin_host::caps::kv::Place,
    seqs: std::ops::RangeInclusive<u64>,
) {
    rewrite_terms(kv, place, seqs, |bytes| {
        serde_json::to_vec(&binary_terms(bytes)).expect("json")
    })
    .await;
}

/// Rewrites folded `block` the way versions before the binary index stored it: a JSON record
/// `b:` and JSON posting lists `x:`, built from the block's entries, with its binary keys gone,
/// and its writes' term counts as JSON.
async fn refold_as_json(
    kv: &chitin_host::caps::kv::KvStore,
    place: &chitin_host::caps::kv::Place,
    block: u64,
) {
    let mut entries = Vec::new();
    let mut postings: std::collections::BTreeMap<String, Vec<(u64, u64)>> = Default::default();
    for seq in block * 64 + 1..=(block + 1) * 64 {
        let Some((_, entry)) = stored_part(kv, place, seq, 'e') else {
            continue;
        };
        let entry: Value = serde_json::from_slice(&entry).expect("entry JSON");
        let (_, terms) = stored_part(kv, place, seq, 'f').expect("terms");
        for (term, count) in binary_terms(&terms) {
            postings.entry(term).or_default().push((seq, count));
        }
        entries.push(json!([seq, entry]));
    }
    let binary: Vec<String> = all_keys(kv, place)
        .into_iter()
        .filter(|k| k == &format!("k:{block:010}") || k.starts_with(&format!("y:{block:010}:")))
        .collect();
    assert!(binary.len() > 1, "block {block} is folded");
    kv.delete_many(place, binary).await.expect("delete");
    let mut pairs: Vec<(String, Vec<u8>)> = postings
        .iter()
        .map(|(term, list)| {
            (
                format!("x:{block:010}:{term}"),
                serde_json::to_vec(list).expect("json"),
            )
        })
        .collect();
    pairs.push((
        format!("b:{block:010}"),
        serde_json::to_vec(&json!({"e": entries})).expect("json"),
    ));
    for page in pairs.chunks(1000) {
        kv.set_many(place, page.to_vec()).await.expect("set");
    }
}

/// Writes `n` entries: overwrites and appends to 40 notes, and documents of their own.
async fn write_mixed(h: &std::sync::Arc<Host>, n: u64) {
    let writes: Vec<_> = (0..n)
        .map(|i| {
            let h = h.clone();
            async move {
                let (target, append) = match i % 5 {
                    0 => (format!("notes/{}.md", i % 40), false),
                    1 => (format!("notes/{}.md", i % 40), true),
                    _ => (format!("docs/{i}.md"), false),
                };
                let args = json!({
                    "content": format!("entry{i} shared t{} Ünïcode w{} w{}", i % 7, i % 11, i % 13),
                    "target": target,
                    "append": append,
                });
                h.call("memory_write", &args.to_string()).await.result
            }
        })
        .collect();
    for out in futures::stream::iter(writes)
        .buffered(4)
        .collect::<Vec<_>>()
        .await
    {
        out.expect("memory_write");
    }
}

/// What searches, reads and the tree return.
async fn snapshot(h: &Host) -> Vec<Value> {
    let mut out = Vec::new();
    for q in [
        json!({"query": "shared", "limit": 50}),
        json!({"query": "t3 w5", "limit": 20}),
        json!({"query": "entry7 entry200 entry329 entry1100"}),
        json!({"query": "ünïcode w12", "limit": 50}),
    ] {
        out.push(ok(h, "memory_search", q).await);
    }
    for path in ["notes/0.md", "notes/1.md", "notes/21.md", "docs/2.md"] {
        out.push(ok(h, "memory_read", json!({"path": path})).await);
    }
    out.push(ok(h, "memory_tree", json!({"depth": 2})).await);
    out
}

/// Every key of the memory bucket.
fn all_keys(
    kv: &chitin_host::caps::kv::KvStore,
    place: &chitin_host::caps::kv::Place,
) -> Vec<String> {
    let mut keys = Vec::new();
    let mut cursor = Some(0);
    while let Some(at) = cursor {
        let (page, next) = kv.list_keys(place, at).expect("list");
        keys.extend(page);
        cursor = next;
    }
    keys
}

fn memory_place() -> chitin_host::caps::kv::Place {
    chitin_host::caps::kv::Place {
        component: "chitin/memory".into(),
        bucket: "memory".into(),
        quota: u64::MAX,
    }
}

async fn memory_host(
    data: &Path,
) -> (
    std::sync::Arc<Host>,
    std::sync::Arc<chitin_host::caps::kv::KvStore>,
) {
    let ws = data.join("workspace");
    std::fs::create_dir_all(&ws).expect("workspace");
    let services = services(data, &ws);
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut h = Host::new(runtime, policy(Limits::default()), services.clone());
    h.load_path(&component("memory")).await.expect("load");
    (std::sync::Arc::new(h), services.kv().expect("kv"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_folded_by_an_earlier_version_read_the_same() {
    let data = tempfile::tempdir().expect("tempdir");
    let (h, kv) = memory_host(data.path()).await;
    // Four folded blocks with overwrites and appends across them, then a loose tail.
    write_mixed(&h, 330).await;
    let before = snapshot(&h).await;
    assert!(
        before[0]["matched"].as_u64().expect("matched") > 40,
        "{}",
        before[0]
    );
    let place = memory_place();
    // Writes stored by earlier versions, their three keys apart: two folded blocks, part of
    // an unfolded one and the loose tail; the other writes keep theirs together.
    for (seqs, writes) in [
        (1..=64, 64),
        (129..=192, 64),
        (200..=230, 31),
        (300..=330, 31),
    ] {
        assert_eq!(to_earlier_layout(&kv, &place, seqs).await, writes);
    }
    assert_eq!(before, snapshot(&h).await);
    for block in [0, 2] {
        refold_as_json(&kv, &place, block).await;
        terms_as_json(&kv, &place, block * 64 + 1..=(block + 1) * 64).await;
    }
    // Writes not folded yet, with JSON term counts or binary ones without the entry: the
    // search reads them one by one, with their entry keys.
    terms_as_json(&kv, &place, 300..=315).await;
    terms_without_entry(&kv, &place, 316..=330).await;
    assert_eq!(before, snapshot(&h).await);
    // Folding a block whose writes hold JSON term counts (block 4: writes 257 to 320).
    write_mixed(&h, 64).await;
    assert!(kv.get(&place, "k:0000000004").expect("get").is_some());
    let out = ok(&h, "memory_search", json!({"query": "entry312"})).await;
    assert_eq!(out["results"][0]["path"], "docs/312.md", "{out}");
    assert_eq!(out["matched"], 1, "{out}");

    // A corrupt binary record is an error naming the block, not a silently shorter result.
    kv.set_many(&place, vec![("k:0000000001".into(), vec![1, 2, 3])])
        .await
        .expect("set");
    let e = err(&h, "memory_search", json!({"query": "shared"})).await;
    assert!(
        e.to_string().contains("memory index block 1 is corrupt"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folded_group_reads_the_same_as_its_blocks() {
    let data = tempfile::tempdir().expect("tempdir");
    let (h, kv) = memory_host(data.path()).await;
    // The write that finishes block 33 folds block 31, the last of group 1, and so the group.
    // Group 1's record says which of its documents a write before it wrote (the notes, not
    // the documents of their own), so a search carries only those overwrites on to group 0.
    write_mixed(&h, 2200).await;
    let place = memory_place();
    let keys = all_keys(&kv, &place);
    for group in ["K:0000000000", "K:0000000001"] {
        assert!(keys.contains(&group.to_owned()), "{group} is folded");
    }
    assert!(keys.iter().any(|k| k.starts_with("Y:0000000001:shared")));
    assert!(!keys.iter().any(|k| k.starts_with("K:0000000002")));
    let with_groups = snapshot(&h).await;
    // 1,320 documents of their own and 16 notes (8 overwritten, 8 appended to).
    assert_eq!(with_groups[0]["matched"], 1320 + 16, "{}", with_groups[0]);

    let groups: Vec<String> = keys
        .into_iter()
        .filter(|k| k.starts_with('K') || k.starts_with('Y'))
        .collect();
    for page in groups.chunks(1000) {
        kv.delete_many(&place, page.to_vec()).await.expect("delete");
    }
    assert_eq!(with_groups, snapshot(&h).await);

    // A corrupt group record is an error naming the group.
    write_mixed(&h, 0).await;
    kv.set_many(&place, vec![("K:0000000000".into(), vec![1])])
        .await
        .expect("set");
    let e = err(&h, "memory_search", json!({"query": "shared"})).await;
    assert!(
        e.to_string().contains("memory index group 0 is corrupt"),
        "{e}"
    );
}

/// A word no other call of this gives: 16 hex digits of a mixed counter (SplitMix64).
fn distinct_word(n: u64) -> String {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    format!("{:016x}", z ^ (z >> 31))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stays_readable_as_varied_text_fills_it() {
    // Log lines of request and user ids: nearly every word is new, so the index grows with the
    // text. Under the default 10 MiB of memory, reads failed from about 10 MB on (and a write
    // that folded a group was stored, then reported as failed).
    let data = tempfile::tempdir().expect("tempdir");
    // The shipped policy, so the component gets the memory its manifest asks for.
    let shipped = Policy::builtin().expect("built-in policy");
    let h = host_under(data.path(), &[component("memory")], shipped).await;
    ok(
        &h,
        "memory_write",
        json!({"target": "small.md", "content": "tiny note about giraffes"}),
    )
    .await;
    const WRITES: u64 = 192;
    const LINES: u64 = 600;
    for write in 0..WRITES {
        let content = (0..LINES)
            .map(|line| {
                let n = write * LINES + line;
                format!(
                    "2026-12-03T18:00:00Z request {} user {} took {}ms",
                    distinct_word(2 * n),
                    distinct_word(2 * n + 1),
                    n % 999
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        let args = json!({"target": format!("logs/{write}.md"), "content": content});
        if let Err(e) = h.call("memory_write", &args.to_string()).await.result {
            panic!("write {write} of {WRITES}: {e}");
        }
    }
    let read = ok(&h, "memory_read", json!({"path": "small.md"})).await;
    assert_eq!(read["content"], "tiny note about giraffes");
    let found = ok(&h, "memory_search", json!({"query": "giraffes"})).await;
    assert_eq!(found["results"][0]["path"], "small.md", "{found}");
    let last = distinct_word(2 * (WRITES * LINES - 1));
    let found = ok(&h, "memory_search", json!({ "query": last })).await;
    assert_eq!(
        found["results"][0]["path"],
        format!("logs/{}.md", WRITES - 1),
        "{found}"
    );
}

#[tokio::test]
async fn a_long_document_is_read_back_whole_in_pages() {
    // Several agents appending to one document: more than one call's 64 KiB of output.
    let data = tempfile::tempdir().expect("tempdir");
    let h = host(data.path(), &[component("memory")]).await;
    let mut written = String::new();
    for part in 0..4 {
        let content: String = (0..800)
            .map(|i| format!("part {part} line {i}: notes appended by one of several agents\n"))
            .collect();
        ok(
            &h,
            "memory_write",
            json!({"target": "shared.md", "content": content}),
        )
        .await;
        written.push_str(&content);
    }
    let (mut read, mut offset, mut pages) = (String::new(), 0, 0);
    loop {
        let page = ok(
            &h,
            "memory_read",
            json!({"path": "shared.md", "offset": offset}),
        )
        .await;
        read.push_str(page["content"].as_str().expect("content"));
        pages += 1;
        match page["next_offset"].as_u64() {
            Some(next) => {
                assert_eq!(page["truncated"], true, "{}", page["lines"]);
                offset = next;
            }
            None => break,
        }
    }
    assert_eq!(read, written);
    assert!(pages > 1, "{pages}");
    let two = ok(
        &h,
        "memory_read",
        json!({"path": "shared.md", "offset": 801, "limit": 2}),
    )
    .await;
    assert_eq!(
        two["content"],
        "part 1 line 1: notes appended by one of several agents\npart 1 line 2: notes appended by one of several agents\n"
    );
}
