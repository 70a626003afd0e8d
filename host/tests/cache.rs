//! The compile cache: a second start loads from it; a corrupt entry is detected and rebuilt.

use std::path::{Path, PathBuf};

use crate::common;

use chitin_host::Limits;
use chitin_host::cache::{CacheOutcome, CompileCache};
use chitin_host::host::Host;
use common::{TestEnv, component, repo, resign};
use serde_json::json;

/// `echo` on `host` answers `message`.
async fn echoes(host: &Host, message: &str) {
    let report = host
        .call("echo", &json!({ "message": message }).to_string())
        .await;
    assert_eq!(
        report.result.expect("echo").json(),
        Some(json!({ "message": message }))
    );
}

/// A host on `echo` alone in `data`, which compiled it into a fresh cache, and the paths of
/// that cache entry and its checksum.
async fn echo_compiled_in(data: &Path) -> (Host, PathBuf, PathBuf) {
    let echo = component("echo");
    let host = TestEnv::host_in(data, std::slice::from_ref(&echo), Limits::default()).await;
    assert_eq!(host.runtime().cache_stats().compiled, 1);
    let key = CompileCache::key(&std::fs::read(&echo).expect("echo")).expect("key");
    let (artifact, checksum) = host.runtime().cache().entry_paths(&key);
    (host, artifact, checksum)
}

#[tokio::test]
async fn a_second_start_loads_from_the_cache() {
    let data = tempfile::tempdir().expect("tempdir");
    let paths = [component("echo"), component("time")];

    let first = TestEnv::host_in(data.path(), &paths, Limits::default()).await;
    let stats = first.runtime().cache_stats();
    assert_eq!((stats.hits, stats.compiled, stats.rebuilt), (0, 2, 0));
    drop(first);

    let second = TestEnv::host_in(data.path(), &paths, Limits::default()).await;
    let stats = second.runtime().cache_stats();
    assert_eq!((stats.hits, stats.compiled, stats.rebuilt), (2, 0, 0));
    assert!(
        second
            .components()
            .iter()
            .all(|c| c.cache == CacheOutcome::Hit)
    );
    echoes(&second, "cached").await;
}

#[tokio::test]
async fn corrupt_and_truncated_cache_entries_are_rebuilt_not_trusted() {
    let data = tempfile::tempdir().expect("tempdir");
    let paths = [component("echo")];
    let (first, artifact, _) = echo_compiled_in(data.path()).await;
    drop(first);

    // Flip bytes in the middle of the precompiled code.
    let mut bytes = std::fs::read(&artifact).expect("cache entry");
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 64] {
        *b ^= 0xff;
    }
    std::fs::write(&artifact, &bytes).expect("corrupt");
    let second = TestEnv::host_in(data.path(), &paths, Limits::default()).await;
    let stats = second.runtime().cache_stats();
    assert_eq!((stats.hits, stats.rebuilt), (0, 1));
    let report = second.call("echo", r#"{"message":"rebuilt"}"#).await;
    assert!(report.result.is_ok());
    drop(second);

    // Truncate it.
    let len = std::fs::metadata(&artifact).expect("entry").len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&artifact)
        .expect("open");
    file.set_len(len / 3).expect("truncate");
    let third = TestEnv::host_in(data.path(), &paths, Limits::default()).await;
    assert_eq!(third.runtime().cache_stats().rebuilt, 1);
    drop(third);

    // After a rebuild the entry is good again.
    let fourth = TestEnv::host_in(data.path(), &paths, Limits::default()).await;
    assert_eq!(fourth.runtime().cache_stats().hits, 1);
}

#[tokio::test]
async fn a_changed_component_is_recompiled() {
    let data = tempfile::tempdir().expect("tempdir");
    let first = TestEnv::host_in(data.path(), &[component("echo")], Limits::default()).await;
    drop(first);
    let second = TestEnv::host_in(data.path(), &[component("json")], Limits::default()).await;
    assert_eq!(second.runtime().cache_stats().compiled, 1);
}

#[tokio::test]
async fn a_resigned_component_with_another_manifest_reuses_its_compiled_code() {
    let data = tempfile::tempdir().expect("tempdir");
    let echo = component("echo");
    let first = TestEnv::host_in(data.path(), std::slice::from_ref(&echo), Limits::default()).await;
    assert_eq!(first.runtime().cache_stats().compiled, 1);
    let first_hash = first.components()[0].hash;
    drop(first);

    let manifest = std::fs::read_to_string(repo().join("components/echo/manifest.toml"))
        .expect("manifest")
        .replace("the smallest tool", "re-signed with another description");
    let resigned = data.path().join("echo-resigned.wasm");
    std::fs::write(
        &resigned,
        resign(&std::fs::read(&echo).expect("echo"), &manifest),
    )
    .expect("write");
    let second = TestEnv::host_in(data.path(), &[resigned], Limits::default()).await;
    let stats = second.runtime().cache_stats();
    assert_eq!((stats.hits, stats.compiled, stats.rebuilt), (1, 0, 0));
    assert_ne!(second.components()[0].hash, first_hash);
    echoes(&second, "same code").await;
}

#[tokio::test]
async fn a_compiled_component_is_served_from_its_cache_entry() {
    let data = tempfile::tempdir().expect("tempdir");
    let (host, artifact, _) = echo_compiled_in(data.path()).await;
    // Its code is the entry's pages, mapped from the file, not a copy of the process's own.
    let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
    let artifact = artifact.canonicalize().expect("entry");
    assert!(
        maps.lines()
            .any(|line| line.ends_with(&*artifact.to_string_lossy())),
        "{} is not mapped",
        artifact.display()
    );
    echoes(&host, "mapped").await;
}

#[tokio::test]
async fn a_load_compiles_on_an_engine_it_drops_at_its_end() {
    let data = tempfile::tempdir().expect("tempdir");
    let (first, _, _) = echo_compiled_in(data.path()).await;
    assert!(
        first.runtime().cache().end_load(),
        "no compile engine to drop"
    );
    assert!(!first.runtime().cache().end_load());
    // What is served does not depend on the engine it was compiled on.
    echoes(&first, "after").await;
    drop(first);

    let second = TestEnv::host_in(data.path(), &[component("echo")], Limits::default()).await;
    assert_eq!(second.runtime().cache_stats().hits, 1);
    assert!(
        !second.runtime().cache().end_load(),
        "a load from the cache made a compile engine"
    );
}

#[tokio::test]
async fn a_cache_entry_that_cannot_be_written_still_serves_the_compiled_component() {
    let data = tempfile::tempdir().expect("tempdir");
    let (first, artifact, checksum) = echo_compiled_in(data.path()).await;
    drop(first);
    // A directory where the entry goes: the rename that writes it fails, even for root.
    std::fs::remove_file(&artifact).expect("remove entry");
    std::fs::remove_file(&checksum).expect("remove checksum");
    std::fs::create_dir(&artifact).expect("a directory in the entry's place");

    let second = TestEnv::host_in(data.path(), &[component("echo")], Limits::default()).await;
    assert_eq!(second.runtime().cache_stats().rebuilt, 1);
    assert!(artifact.is_dir() && !checksum.exists());
    echoes(&second, "from memory").await;
}

#[test]
fn hosts_starting_together_on_a_cold_cache_compile_each_component_once() {
    let data = tempfile::tempdir().expect("tempdir");
    let paths = [component("echo"), component("time")];
    // Each host on a thread and runtime of its own, as each would be a process of its own: the
    // lock is on the open lock file, so it excludes another open in the same process alike.
    const HOSTS: usize = 3;
    let together = std::sync::Barrier::new(HOSTS);
    let counts: Vec<_> = std::thread::scope(|scope| {
        let starts: Vec<_> = (0..HOSTS)
            .map(|_| {
                scope.spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("runtime");
                    runtime.block_on(async {
                        together.wait();
                        let host = TestEnv::host_in(data.path(), &paths, Limits::default()).await;
                        echoes(&host, "together").await;
                        host.runtime().cache_stats()
                    })
                })
            })
            .collect();
        starts
            .into_iter()
            .map(|start| start.join().expect("host"))
            .collect()
    });
    let compiled: u64 = counts.iter().map(|c| c.compiled).sum();
    let hits: u64 = counts.iter().map(|c| c.hits).sum();
    assert_eq!(
        (compiled, hits),
        (2, 2 * (HOSTS as u64 - 1)),
        "each component compiled once, by one host, and loaded by the others: {counts:?}"
    );
}
