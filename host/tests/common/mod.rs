//! Shared test environment: a host over a private data directory, loading built components.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chitin_host::data_dir::DataDir;
use chitin_host::engine::EngineOptions;
use chitin_host::policy::Policy;
use chitin_host::{CallReport, Host, Limits, Runtime, Services};
use chitin_registry::trust_store::TrustStore;
use serde_json::Value;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A built first-party component (`just build-components`).
pub fn component(name: &str) -> PathBuf {
    built("build/components", name, "just build-components")
}

/// A built test fixture (`just build-fixtures`).
pub fn fixture(name: &str) -> PathBuf {
    built("build/fixtures", name, "just build-fixtures")
}

fn built(dir: &str, name: &str, how: &str) -> PathBuf {
    let path = repo().join(dir).join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: run `{how}` first (`just test` does)",
        path.display()
    );
    path
}

/// Engine options for tests: a small pool, so many test hosts fit in one process.
pub fn test_engine() -> EngineOptions {
    EngineOptions {
        max_live_instances: 32,
        ..EngineOptions::default()
    }
}

/// One compile cache for every test process (`target/tmp/compile-cache`, which the end-to-end
/// tests' `chitin` commands share too), so each component compiles once in a run, not once per
/// test binary. Entries are keyed by code and engine settings, so sharing never changes what a
/// test loads; tests of the cache itself use a cache of their own.
pub fn shared_cache() -> &'static Path {
    Path::new(concat!(env!("CARGO_TARGET_TMPDIR"), "/compile-cache"))
}

/// The built-in policy with its limits replaced by `limits`.
pub fn policy(limits: Limits) -> Policy {
    let mut policy = Policy::builtin().expect("built-in policy");
    policy.limits = chitin_host::PolicyLimits::fixed(limits);
    policy
}

/// The trust store `just build-components` writes: the development key that signs the built
/// components and fixtures, trusted for the `chitin` namespace.
pub fn dev_trust() -> TrustStore {
    let path = repo().join("build/trusted_keys");
    assert!(
        path.is_file(),
        "{} is missing: run `just build-components` first (`just test` does)",
        path.display()
    );
    TrustStore::load(&path).expect("build/trusted_keys")
}

/// This test process's own signing key, trusted (besides the dev key) for the `chitin` and
/// `test` namespaces, so a test can re-sign a component after changing its manifest.
pub fn test_key() -> &'static chitin_registry::keys::SigningKey {
    static KEY: std::sync::OnceLock<chitin_registry::keys::SigningKey> = std::sync::OnceLock::new();
    KEY.get_or_init(chitin_registry::keys::SigningKey::generate)
}

/// `manifest` with the tool specs `wasm`'s own manifest records (as `chitin manifest embed`
/// would record them) when it records none itself: hand-written test manifests name only grants.
/// A manifest that does not parse is left as it is, for tests of bad manifests.
pub fn with_recorded_specs(wasm: &[u8], manifest: &str) -> String {
    use chitin_registry::manifest::Manifest;
    let built = chitin_registry::artifact::manifest_text(wasm)
        .ok()
        .flatten()
        .and_then(|t| Manifest::parse(t).ok());
    match (built, Manifest::parse(manifest)) {
        (Some(built), Ok(mut m)) if m.tool_specs().is_empty() => {
            for spec in built.tool_specs() {
                spec.record_in(m.tools.entry(spec.name.clone()).or_default());
            }
            m.to_toml()
        }
        _ => manifest.to_owned(),
    }
}

/// `wasm` with `manifest` embedded in place of its own (keeping its recorded tool specs, see
/// [`with_recorded_specs`]), signed by [`test_key`].
pub fn resign(wasm: &[u8], manifest: &str) -> Vec<u8> {
    let manifest = &with_recorded_specs(wasm, manifest);
    let bare = chitin_registry::signature::strip(wasm).expect("strip signatures");
    let embedded =
        chitin_registry::artifact::embed_manifest(&bare, manifest).expect("embed manifest");
    chitin_registry::signature::sign(&embedded, test_key()).expect("sign")
}

/// The dev key's trust store plus [`test_key`].
pub fn test_trust() -> TrustStore {
    use chitin_registry::trust_store::{Scope, TrustedKey};
    let mut store = dev_trust();
    let scopes = ["chitin/*", "test/*"]
        .iter()
        .map(|s| Scope::parse(s).expect("scope"))
        .collect();
    store
        .add(TrustedKey::new(test_key().public().clone(), "tests", scopes).expect("entry"))
        .expect("trust the test key");
    store
}

/// Services over `workspace` with data in `data`, trusting the development key and
/// [`test_key`].
pub fn services(data: &Path, workspace: &Path) -> Arc<Services> {
    let data = DataDir::resolve(Some(data)).expect("data dir");
    Arc::new(
        Services::new(workspace, data)
            .expect("services")
            .with_trust(test_trust()),
    )
}

/// A host over a temporary data directory and workspace.
pub struct TestEnv {
    pub data: tempfile::TempDir,
    pub workspace: tempfile::TempDir,
    pub host: Host,
}

impl TestEnv {
    /// A host with `paths` loaded under `limits`, sharing this test process's compile cache.
    pub async fn new(paths: &[PathBuf], limits: Limits) -> TestEnv {
        Self::with_policy(paths, policy(limits)).await
    }

    /// A host with `paths` loaded under `policy`, sharing this test process's compile cache.
    pub async fn with_policy(paths: &[PathBuf], policy: Policy) -> TestEnv {
        let data = tempfile::tempdir().expect("tempdir");
        let workspace = tempfile::tempdir().expect("tempdir");
        let runtime = Runtime::new(shared_cache(), &test_engine()).expect("runtime");
        let services = services(data.path(), workspace.path());
        let mut host = Host::new(runtime, policy, services);
        for path in paths {
            host.load_path(path).await.expect("load component");
        }
        TestEnv {
            data,
            workspace,
            host,
        }
    }

    /// A host with `paths` loaded under default limits.
    pub async fn with(paths: &[PathBuf]) -> TestEnv {
        Self::new(paths, Limits::default()).await
    }

    /// A host in its own data directory (to test the cache across starts), with the data
    /// directory's `workspace` folder as its workspace.
    pub async fn host_in(data: &Path, paths: &[PathBuf], limits: Limits) -> Host {
        let runtime = Runtime::new(&data.join("cache"), &test_engine()).expect("runtime");
        let workspace = data.join("workspace");
        std::fs::create_dir_all(&workspace).expect("workspace");
        let mut host = Host::new(runtime, policy(limits), services(data, &workspace));
        for path in paths {
            host.load_path(path).await.expect("load component");
        }
        host
    }

    /// Call a tool and return the parsed JSON result, panicking with the error otherwise.
    pub async fn ok(&self, tool: &str, args: Value) -> Value {
        let report = self.host.call(tool, &args.to_string()).await;
        match report.result {
            Ok(out) => out.json().expect("JSON result"),
            Err(e) => panic!("{tool} {args} failed: {e}"),
        }
    }

    /// Call a tool expecting an error; return the report.
    pub async fn call(&self, tool: &str, args: Value) -> CallReport {
        self.host.call(tool, &args.to_string()).await
    }
}

/// A `chitin serve --http` process on a loopback port, over a private data directory.
pub struct HttpServer {
    /// The `host:port` it listens on.
    pub addr: String,
    /// The static bearer token it wrote.
    pub token: String,
    _process: tokio::process::Child,
    _data: tempfile::TempDir,
}

/// Start `chitin serve --http 127.0.0.1:0` serving `components`; returns once it listens and
/// its token is written. The process is killed when the value is dropped.
pub async fn serve_http(components: &[PathBuf]) -> HttpServer {
    serve_http_with(components, &[]).await
}

/// [`serve_http`] with more arguments for `chitin serve`.
pub async fn serve_http_with(components: &[PathBuf], args: &[&str]) -> HttpServer {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let data = tempfile::tempdir().expect("data dir");
    // Beside the data directory, never holding it.
    let workspace = data.path().join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_chitin"));
    command.args(["serve", "--no-watch", "--http", "127.0.0.1:0"]);
    command.args(args);
    for component in components {
        command.arg("--components").arg(component);
    }
    let mut process = command
        .env("CHITIN_DATA_DIR", data.path())
        .env("CHITIN_CACHE_DIR", shared_cache())
        .env("CHITIN_WORKSPACE", &workspace)
        .env("CHITIN_TRUSTED_KEYS", repo().join("build/trusted_keys"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn chitin serve --http");
    let mut lines = BufReader::new(process.stderr.take().expect("stderr")).lines();
    let addr = loop {
        let line = lines
            .next_line()
            .await
            .expect("read the banner")
            .expect("chitin serve --http exited before listening");
        if let Some(at) = line.find("over HTTP at http://") {
            let rest = &line[at + "over HTTP at http://".len()..];
            break rest.split('/').next().unwrap_or_default().to_owned();
        }
    };
    // The address is announced once the token file is written.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let token = std::fs::read_to_string(data.path().join("http-token")).expect("token");
    HttpServer {
        addr,
        token: token.trim().to_owned(),
        _process: process,
        _data: data,
    }
}

/// A connection to `addr` from a socket of the user `nobody` (65534): to an HTTP server, another
/// client on this machine, whichever loopback address it comes from. Making it takes root
/// (`None` otherwise): the socket is made on a thread of its own that is `nobody` until it ends
/// (the user is per thread in Linux's own calls, which rustix makes).
pub fn connect_as_another_user(addr: &str) -> Option<tokio::net::TcpStream> {
    if rustix::process::geteuid().as_raw() != 0 {
        return None;
    }
    let addr: std::net::SocketAddr = addr.parse().expect("the server's address");
    let stream = std::thread::spawn(move || {
        let nobody = rustix::process::Uid::from_raw(65534);
        rustix::thread::set_thread_res_uid(nobody, nobody, None)
            .expect("become nobody on this thread");
        std::net::TcpStream::connect(addr).expect("connect as nobody")
    })
    .join()
    .expect("the thread connects");
    stream.set_nonblocking(true).expect("nonblocking");
    Some(tokio::net::TcpStream::from_std(stream).expect("a tokio stream"))
}
