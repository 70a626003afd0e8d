//! The compile cache: precompiled components on disk, keyed by the hash of the component's code
//! (the file without chitin's manifest and signature sections) and the engine's settings, loaded
//! by mmap. An entry is trusted only if its own BLAKE3 hash, kept beside it, matches; a missing,
//! corrupt or truncated entry is recompiled and rewritten. Processes sharing the cache compile
//! an entry once: the first takes the entry's lock file, the others wait for it and load what
//! it wrote.
//!
//! Deserialising a precompiled artifact runs whatever machine code it holds, so the cache
//! directory must be as private as the data directory it lives in (created 0700).

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chitin_registry::artifact::{self, ContentHash};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::file_lock::{FileLock, LockError};

/// Errors of the cache itself (compilation errors are reported by the caller).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The cache directory could not be created or written.
    #[error("compile cache at {path}: {cause}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
}

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from a valid cache entry.
    Hit,
    /// No entry: compiled and stored.
    Compiled,
    /// An entry existed but was corrupt or stale: recompiled and replaced.
    Rebuilt,
}

/// Counters of cache outcomes since the cache was opened.
#[derive(Debug, Default)]
pub struct CacheStats {
    hits: AtomicU64,
    compiled: AtomicU64,
    rebuilt: AtomicU64,
}

/// A snapshot of [`CacheStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounts {
    /// Loaded from the cache.
    pub hits: u64,
    /// Compiled because there was no entry.
    pub compiled: u64,
    /// Recompiled because the entry was corrupt.
    pub rebuilt: u64,
}

impl CacheStats {
    /// Current counts.
    pub fn snapshot(&self) -> CacheCounts {
        CacheCounts {
            hits: self.hits.load(Ordering::Relaxed),
            compiled: self.compiled.load(Ordering::Relaxed),
            rebuilt: self.rebuilt.load(Ordering::Relaxed),
        }
    }

    fn record(&self, outcome: CacheOutcome) {
        let counter = match outcome {
            CacheOutcome::Hit => &self.hits,
            CacheOutcome::Compiled => &self.compiled,
            CacheOutcome::Rebuilt => &self.rebuilt,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The `tracing` target of what a person waiting on a load should see (the CLI shows it by
/// default): compiles and waits for another process's, seconds each on a first start.
pub const PROGRESS: &str = "chitin::progress";

/// Longest wait for another process compiling the same entry before compiling it too: longer
/// than most compiles (the largest components take Cranelift tens of seconds on a small
/// machine), short of what an MCP client allows a server to start, for a holder that was
/// stopped (Ctrl-Z) mid-compile.
const COMPILE_WAIT: Duration = Duration::from_secs(60);

/// The on-disk compile cache for one engine configuration.
pub struct CompileCache {
    dir: PathBuf,
    stats: CacheStats,
    /// The engine this load compiles on, made at its first compile and dropped by
    /// [`CompileCache::end_load`]: wasmtime keeps the compiler's working memory for an engine's
    /// whole life (~54 MiB after the default set), and the serving engine lives as long as the
    /// server.
    compiler: Mutex<Option<Engine>>,
}

impl CompileCache {
    /// Open (creating) the cache under `root` for `engine`'s settings.
    pub fn open(root: &Path, engine: &Engine) -> Result<Self, CacheError> {
        // The root too: it may be a `--cache-dir` of its own, not inside the private data
        // directory.
        create_private_dir(root)?;
        let dir = root.join(engine_key(engine));
        create_private_dir(&dir)?;
        Ok(Self {
            dir,
            stats: CacheStats::default(),
            compiler: Mutex::new(None),
        })
    }

    /// The load is done: drop the engine it compiled on, if any (with the memory its compiler
    /// kept). Returns whether there was one.
    pub fn end_load(&self) -> bool {
        let compiler = self
            .compiler
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        compiler.is_some()
    }

    /// The engine to compile on for `engine`: one of its own with the same settings, or
    /// `engine` itself where such an engine cannot be made or would write artifacts `engine`
    /// does not load.
    fn compiler(&self, engine: &Engine) -> Engine {
        let mut compiler = self.compiler.lock().unwrap_or_else(|e| e.into_inner());
        compiler
            .get_or_insert_with(|| match crate::engine::compile_only() {
                Ok(own) if engine_key(&own) == engine_key(engine) => own,
                Ok(_) => {
                    tracing::warn!("a compile engine would write incompatible artifacts; compiling on the serving engine");
                    engine.clone()
                }
                Err(e) => {
                    tracing::warn!(error = %e, "no compile engine; compiling on the serving engine");
                    engine.clone()
                }
            })
            .clone()
    }

    /// The directory holding this engine's entries.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Counters since the cache was opened.
    pub fn stats(&self) -> CacheCounts {
        self.stats.snapshot()
    }

    /// Paths of the precompiled artifact and its hash file for the code with hash `key` (see
    /// [`CompileCache::key`]).
    pub fn entry_paths(&self, key: &ContentHash) -> (PathBuf, PathBuf) {
        let hex = key.to_hex();
        (
            self.dir.join(format!("{hex}.cwasm")),
            self.dir.join(format!("{hex}.cwasm.b3")),
        )
    }

    /// The key of the component in `bytes`: the hash of its code, which leaves out the
    /// manifest and signature sections ([`artifact::code_ranges`]). A re-signed component, or
    /// one whose manifest changed, is the same entry.
    pub fn key(bytes: &[u8]) -> Result<ContentHash, LoadOrCompileError> {
        let mut hasher = blake3::Hasher::new();
        for part in code(bytes)? {
            hasher.update(part);
        }
        Ok(ContentHash(*hasher.finalize().as_bytes()))
    }

    /// Load the component in `bytes` from the cache, or compile its code and store the result.
    /// `compile` errors are returned as-is (the component is bad, not the cache). With a
    /// `label`, a compile and a wait for another process's are reported on [`PROGRESS`]; without
    /// one the caller reports them.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        label: Option<&str>,
    ) -> Result<(Component, CacheOutcome), LoadOrCompileError> {
        let (artifact, checksum) = self.entry_paths(&Self::key(bytes)?);
        let present = || artifact.exists() || checksum.exists();
        if present()
            && let Ok(component) = self.load_verified(engine, &artifact, &checksum)
        {
            self.stats.record(CacheOutcome::Hit);
            return Ok((component, CacheOutcome::Hit));
        }
        // One process compiles an entry; the others on this cache wait, then load what it
        // wrote. Servers started together on a cold cache each compiled every component.
        let _compiling = self.compile_lock(&artifact, label);
        let existed = present();
        if existed {
            match self.load_verified(engine, &artifact, &checksum) {
                Ok(component) => {
                    self.stats.record(CacheOutcome::Hit);
                    return Ok((component, CacheOutcome::Hit));
                }
                Err(reason) => {
                    tracing::warn!(entry = %artifact.display(), %reason, "compile cache entry rejected; recompiling");
                }
            }
        }
        if let Some(label) = label {
            tracing::info!(target: PROGRESS, "compiling {label} for this machine (once: later starts load it from the compile cache)");
        }
        // What is compiled is exactly what the key hashes, so an entry never holds code
        // compiled from bytes other than those its name stands for.
        let compiled = Component::new(&self.compiler(engine), code(bytes)?.concat())
            .and_then(|component| component.serialize())
            .map_err(|e| LoadOrCompileError::Compile(format!("{e:#}")))?;
        let outcome = if existed {
            CacheOutcome::Rebuilt
        } else {
            CacheOutcome::Compiled
        };
        // Served from the entry just written, as every later start is: its code is then the
        // file's pages, which every process on this cache shares, not a private copy this
        // process would hold as long as it runs. A failure to write the cache costs speed next
        // time, not correctness now.
        let stored = match self.store(&compiled, &artifact, &checksum) {
            Ok(()) => self.load_verified(engine, &artifact, &checksum),
            Err(e) => Err(e.to_string()),
        };
        let component = match stored {
            Ok(component) => component,
            Err(reason) => {
                tracing::warn!(entry = %artifact.display(), %reason, "compile cache not written or not readable; serving the code from memory");
                // SAFETY: the bytes were serialised by this process, just now, from a
                // component compiled on an engine whose settings match `engine`'s.
                unsafe { Component::deserialize(engine, &compiled) }
                    .map_err(|e| LoadOrCompileError::Compile(format!("{e:#}")))?
            }
        };
        self.stats.record(outcome);
        Ok((component, outcome))
    }

    /// The lock on compiling the entry at `artifact`, once no other process holds it; none when
    /// it cannot be had within [`COMPILE_WAIT`] (a holder stopped mid-compile, say) or at all,
    /// and then this process compiles alongside: a lock only spares work.
    fn compile_lock(&self, artifact: &Path, label: Option<&str>) -> Option<FileLock> {
        let mut path = artifact.as_os_str().to_owned();
        path.push(".lock");
        let path = Path::new(&path);
        let taken = match FileLock::acquire(path, Duration::ZERO) {
            Err(LockError::Busy { .. }) => {
                if let Some(label) = label {
                    tracing::info!(target: PROGRESS, "waiting for another chitin process compiling {label}");
                }
                FileLock::acquire(path, COMPILE_WAIT)
            }
            taken => taken,
        };
        match taken {
            Ok((lock, _)) => Some(lock),
            Err(reason) => {
                tracing::warn!(%reason, "compiling without the compile cache's lock");
                None
            }
        }
    }

    fn load_verified(
        &self,
        engine: &Engine,
        artifact: &Path,
        checksum: &Path,
    ) -> Result<Component, String> {
        let expected =
            std::fs::read_to_string(checksum).map_err(|e| format!("no readable checksum ({e})"))?;
        // Hashed as it is read, through a fixed buffer: an entry is megabytes, and a start reads
        // every one of them.
        let mut hasher = blake3::Hasher::new();
        std::fs::File::open(artifact)
            .and_then(|file| hasher.update_reader(file).map(|_| ()))
            .map_err(|e| format!("unreadable ({e})"))?;
        let actual = hasher.finalize().to_hex();
        if expected.trim() != actual.as_str() {
            return Err("checksum mismatch (corrupt or truncated)".into());
        }
        // SAFETY: the file is the one this cache wrote (its BLAKE3 hash matches the hash written
        // beside it after a successful compile), in a directory only the operator can write.
        unsafe { Component::deserialize_file(engine, artifact) }
            .map_err(|e| format!("rejected by wasmtime ({e:#})"))
    }

    fn store(&self, bytes: &[u8], artifact: &Path, checksum: &Path) -> Result<(), CacheError> {
        write_atomic(artifact, bytes)?;
        write_atomic(checksum, blake3::hash(bytes).to_hex().as_bytes())
    }
}

/// A component could not be obtained from the cache or by compiling it.
#[derive(Debug, thiserror::Error)]
pub enum LoadOrCompileError {
    /// wasmtime refused the component.
    #[error("{0}")]
    Compile(String),
}

/// The code of the component in `bytes`, as slices of it ([`artifact::code_ranges`]).
fn code(bytes: &[u8]) -> Result<Vec<&[u8]>, LoadOrCompileError> {
    let unreadable =
        |reason: String| LoadOrCompileError::Compile(format!("cannot read its sections: {reason}"));
    artifact::code_ranges(bytes)
        .map_err(|e| unreadable(e.to_string()))?
        .into_iter()
        .map(|range| {
            bytes
                .get(range)
                .ok_or_else(|| unreadable("a section ends past the file".into()))
        })
        .collect()
}

/// A directory name unique to the engine's compilation settings (wasmtime's version included), so
/// an upgrade or a settings change never picks up an incompatible artifact.
fn engine_key(engine: &Engine) -> String {
    struct Blake3Hasher(blake3::Hasher);
    impl Hasher for Blake3Hasher {
        fn finish(&self) -> u64 {
            let hash = self.0.finalize();
            let mut first = [0u8; 8];
            first.copy_from_slice(&hash.as_bytes()[..8]);
            u64::from_le_bytes(first)
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut hasher = Blake3Hasher(blake3::Hasher::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("engine-{:016x}", hasher.finish())
}

/// Write `bytes` to `path` whole or not at all: a reader, or a crash, never sees part of them.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CacheError> {
    let io = |cause| CacheError::Io {
        path: path.to_owned(),
        cause,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    tmp.write_all(bytes).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// Create a directory (and parents) readable only by the owner
/// ([`crate::private_dir::create`]).
pub fn create_private_dir(dir: &Path) -> Result<(), CacheError> {
    crate::private_dir::create(dir).map_err(|cause| CacheError::Io {
        path: dir.to_owned(),
        cause,
    })
}
