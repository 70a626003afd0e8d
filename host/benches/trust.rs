//! Trust benchmarks, printed as a table: verifying a signed component (the whole file, against
//! the development key) for each built-in, and the remembered-verification lookup that replaces
//! it on later loads. Run with `cargo bench -p chitin-host --bench trust` after
//! `just build-components`. Timings are reported, never asserted.

use std::path::Path;
use std::time::{Duration, Instant};

use chitin_host::signing_keys::VerifiedCache;
use chitin_registry::artifact::ContentHash;
use chitin_registry::signature;
use chitin_registry::trust_store::TrustStore;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(f());
                start.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let trust = TrustStore::load(&root.join("build/trusted_keys")).expect("build/trusted_keys");
    let scratch = tempfile::tempdir().expect("tempdir");
    let cache = VerifiedCache::new(scratch.path().join("verified"));
    println!(
        "{:<8} {:>10} {:>14} {:>12} {:>16}",
        "component", "bytes", "verify (p50)", "blake3", "remembered (p50)"
    );
    for name in ["echo", "time", "json"] {
        let bytes = std::fs::read(root.join(format!("build/components/{name}.wasm")))
            .expect("run `just build-components` first");
        let verify = time(20, || signature::verify(&bytes, &trust).expect("verifies"));
        let hash = ContentHash::of(&bytes);
        let hashing = time(20, || ContentHash::of(&bytes));
        cache.put(&hash, &trust, &trust.keys()[0].key.fingerprint());
        let lookup = time(200, || cache.get(&hash, &trust).expect("remembered"));
        println!(
            "{name:<8} {:>10} {:>14.2?} {:>12.2?} {:>16.2?}",
            bytes.len(),
            verify,
            hashing,
            lookup
        );
    }
}
