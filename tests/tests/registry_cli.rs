//! Registries end to end, through the `chitin` binary: a third party (`acme`) signs and
//! publishes, an operator who trusts acme for its namespace searches, installs, calls, updates
//! and removes. Against a real OCI registry in-process on loopback (`container-registry`,
//! anonymous reads, basic-auth writes) and against a local directory registry.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use chitin_e2e::{built_dir, cached_files, chitin, run_with_stdin, stderr, stdout};
use container_registry::auth::{AuthProvider, Permissions, Unverified, ValidCredentials};
use container_registry::storage::ImageLocation;
use container_registry::{ContainerRegistry, ImageDigest};
use serde_json::{Value, json};

/// A data directory with its own trust store: the publisher's machine or the operator's.
struct Party {
    data: PathBuf,
    trust: PathBuf,
    /// Compile into the data directory's own cache, not the run's shared one.
    own_cache: bool,
}

impl Party {
    fn new(root: &Path, name: &str) -> Self {
        let data = root.join(name);
        std::fs::create_dir_all(&data).expect("data dir");
        let trust = data.join("trusted_keys");
        std::fs::write(&trust, "").expect("trust store");
        Self {
            data,
            trust,
            own_cache: false,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, None)
    }

    /// A `chitin` command as this party.
    fn command(&self) -> std::process::Command {
        let mut cmd = chitin(&self.data, &[]);
        if self.own_cache {
            cmd.env_remove("CHITIN_CACHE_DIR");
        }
        cmd.env("CHITIN_TRUSTED_KEYS", &self.trust)
            .env_remove("CHITIN_SECRETS_KEY");
        cmd
    }

    fn run_with(&self, args: &[&str], stdin: Option<&str>) -> Output {
        run_with_stdin(self.command().args(args), stdin)
    }

    /// Run and require success.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "chitin {args:?}\nstdout: {}\nstderr: {}",
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    }

    /// Run, require exit `code`, and return stderr.
    fn fails(&self, code: i32, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "chitin {args:?}\nstdout: {}\nstderr: {}",
            stdout(&out),
            stderr(&out)
        );
        stderr(&out)
    }

    fn lock(&self) -> String {
        std::fs::read_to_string(self.data.join("components/chitin.lock")).unwrap_or_default()
    }

    fn installed(&self) -> Vec<Value> {
        let text = self.ok(&["list", "--installed", "--json"]);
        serde_json::from_str::<Vec<Value>>(&text).expect("json")
    }

    /// The files in the installed-components folder and the downloads folder.
    fn files(&self) -> Vec<String> {
        let mut names = Vec::new();
        for dir in ["components", "downloads"] {
            if let Ok(entries) = std::fs::read_dir(self.data.join(dir)) {
                for e in entries.flatten() {
                    names.push(format!("{dir}/{}", e.file_name().to_string_lossy()));
                }
            }
        }
        names.sort();
        names
    }
}

/// The publisher `acme` with its key trusted for `acme/*` on its own machine, and an operator
/// who trusts that key for `acme/*` only.
fn parties(root: &Path) -> (Party, Party) {
    let publisher = Party::new(root, "publisher");
    publisher.ok(&["key", "generate", "acme"]);
    let public_key = publisher.ok(&["key", "export", "acme"]);
    let public_key = public_key.trim();
    publisher.ok(&[
        "trust",
        "add",
        public_key,
        "--publisher",
        "acme",
        "--scope",
        "acme/*",
    ]);
    let operator = Party::new(root, "operator");
    operator.ok(&[
        "trust",
        "add",
        public_key,
        "--publisher",
        "acme",
        "--scope",
        "acme/*",
    ]);
    (publisher, operator)
}

/// acme's echo at `version`, its manifest carrying `extra`, signed by acme.
fn acme_echo(publisher: &Party, version: &str, description: &str, extra: &str) -> PathBuf {
    let manifest = publisher.data.join(format!("echo-{version}.toml"));
    std::fs::write(
        &manifest,
        format!(
            "schema = 1\n[component]\nname = \"echo\"\nnamespace = \"acme\"\nversion = \
             \"{version}\"\npublisher = \"acme\"\ndescription = \"{description}\"\n{extra}"
        ),
    )
    .expect("manifest");
    let out = publisher.data.join(format!("acme-echo-{version}.wasm"));
    let source = built_dir("components").join("echo.wasm");
    publisher.ok(&[
        "manifest",
        "embed",
        source.to_str().expect("utf-8"),
        manifest.to_str().expect("utf-8"),
        "-o",
        out.to_str().expect("utf-8"),
    ]);
    publisher.ok(&["sign", out.to_str().expect("utf-8"), "--key", "acme"]);
    out
}

/// Anyone may read; only `user` with `password` may write.
struct ReadAnyoneWriteOne {
    user: &'static str,
    password: &'static str,
}

#[async_trait::async_trait]
impl AuthProvider for ReadAnyoneWriteOne {
    async fn check_credentials(&self, unverified: &Unverified) -> Option<ValidCredentials> {
        match unverified {
            Unverified::NoCredentials => Some(ValidCredentials::new(false)),
            Unverified::UsernameAndPassword { username, password } => (username == self.user
                && password.reveal() == self.password)
                .then(|| ValidCredentials::new(true)),
        }
    }

    async fn image_permissions(&self, creds: &ValidCredentials, _: &ImageLocation) -> Permissions {
        if *creds.extract_ref::<bool>() {
            Permissions::ReadWrite
        } else {
            Permissions::ReadOnly
        }
    }

    async fn blob_permissions(&self, creds: &ValidCredentials, _: &ImageDigest) -> Permissions {
        if *creds.extract_ref::<bool>() {
            Permissions::ReadWrite
        } else {
            Permissions::ReadOnly
        }
    }
}

/// `path` from the OCI registry at `addr`, read anonymously as any other client would, as JSON.
/// HTTP/1.0, so the body comes whole and unchunked, ending when the server closes.
fn oci_get(addr: std::net::SocketAddr, path: &str) -> Value {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the registry");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .expect("timeout");
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\
         Accept: application/vnd.oci.image.manifest.v1+json, */*\r\n\r\n"
    )
    .expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read");
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

const WIDER: &str = "[capabilities.env]\nkeys = [\"LANG\"]\n";

/// A loopback TCP proxy to `upstream` that cuts each connection once more than `limit` bytes
/// came back through it: a download interrupted mid-transfer.
fn cutting_proxy(upstream: std::net::SocketAddr, limit: usize) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for client in listener.incoming().take(64).flatten() {
            let Ok(server) = TcpStream::connect(upstream) else {
                continue;
            };
            let (mut c_read, mut s_write) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c_read, &mut s_write);
            });
            let (mut s_read, mut c_write) = (server, client);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut sent = 0;
                loop {
                    let n = match s_read.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let n = n.min(limit.saturating_sub(sent));
                    if n == 0 || c_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    sent += n;
                }
                let _ = c_write.shutdown(Shutdown::Both);
                let _ = s_read.shutdown(Shutdown::Both);
            });
        }
    });
    port
}

#[test]
fn oci_registry_publish_search_install_update_and_refusals() {
    let root = tempfile::tempdir().expect("tempdir");
    let (publisher, operator) = parties(root.path());

    // Anonymous clients may read; acme writes with basic auth.
    let storage = root.path().join("oci-storage");
    std::fs::create_dir_all(&storage).expect("storage");
    let running = ContainerRegistry::builder()
        .storage(&storage)
        .auth_provider(Arc::new(ReadAnyoneWriteOne {
            user: "acme",
            password: "s3cret-pw",
        }))
        .build_for_testing()
        .run_in_background();
    let addr = running.bound_addr();
    let url = format!("oci+http://127.0.0.1:{}", addr.port());
    std::fs::write(
        publisher.data.join("registries.toml"),
        format!(
            "default = \"lab\"\n[registries.lab]\nurl = \"{url}\"\nusername = \"acme\"\n\
             password_secret = \"lab-pw\"\n"
        ),
    )
    .expect("config");
    let out = publisher.run_with(&["secret", "set", "lab-pw"], Some("s3cret-pw\n"));
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(
        operator.data.join("registries.toml"),
        format!("[registries.lab]\nurl = \"{url}\"\n"),
    )
    .expect("config");

    // Publishing needs a signature and credentials.
    let v1 = acme_echo(&publisher, "1.0.0", "Echo, by acme", "");
    let unsigned = publisher.data.join("unsigned.wasm");
    std::fs::copy(&v1, &unsigned).expect("copy");
    publisher.ok(&[
        "manifest",
        "embed",
        unsigned.to_str().unwrap(),
        publisher.data.join("echo-1.0.0.toml").to_str().unwrap(),
        "-o",
        unsigned.to_str().unwrap(),
    ]);
    let err = publisher.fails(4, &["publish", unsigned.to_str().unwrap()]);
    assert!(err.contains("no signature"), "{err}");
    let err = publisher.fails(1, &["publish", v1.to_str().unwrap(), "--registry", &url]);
    assert!(err.contains("refused access"), "anonymous write: {err}");
    let out = publisher.ok(&["publish", v1.to_str().unwrap()]);
    assert!(out.contains("published acme/echo@1.0.0 to lab"), "{out}");

    // On the wire it is the CNCF wasm artifact other OCI wasm tools read: one `application/wasm`
    // layer under a wasm config that describes the component.
    let manifest = oci_get(addr, "/v2/acme/echo/manifests/1.0.0");
    assert_eq!(
        manifest["mediaType"], "application/vnd.oci.image.manifest.v1+json",
        "{manifest}"
    );
    assert_eq!(
        manifest["config"]["mediaType"], "application/vnd.wasm.config.v0+json",
        "{manifest}"
    );
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], "application/wasm", "{manifest}");
    let config_digest = manifest["config"]["digest"]
        .as_str()
        .expect("config digest");
    let config = oci_get(addr, &format!("/v2/acme/echo/blobs/{config_digest}"));
    assert_eq!(
        (&config["architecture"], &config["os"]),
        (&json!("wasm"), &json!("wasip2")),
        "{config}"
    );
    assert_eq!(
        config["layerDigests"],
        json!([layers[0]["digest"]]),
        "{config}"
    );
    let exports = config["component"]["exports"].as_array().expect("exports");
    assert!(
        exports.iter().any(|e| e
            .as_str()
            .is_some_and(|e| e.starts_with("chitin:tool/tool@"))),
        "{config}"
    );

    // Search by tool name, description and publisher.
    for query in ["echo", "by acme", "ACME"] {
        let out = operator.ok(&["search", query, "--registry", "lab"]);
        assert!(out.contains("acme/echo@1.0.0"), "{query}: {out}");
    }
    assert!(
        operator
            .ok(&["search", "nothing-like-this", "--registry", "lab"])
            .contains("no component")
    );

    // Without --yes and without a terminal, nothing is installed.
    let err = operator.fails(4, &["install", "acme/echo", "--registry", "lab"]);
    assert!(err.contains("not approved"), "{err}");
    assert!(operator.installed().is_empty());
    assert!(
        !operator.files().iter().any(|f| f.ends_with(".wasm")),
        "{:?}",
        operator.files()
    );

    // Installed, audited and approved: callable under its namespaced name.
    let out = operator.run(&["install", "acme/echo", "--registry", "lab", "--yes"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("acme__echo"), "{}", stdout(&out));
    assert!(stdout(&out).contains("acme/echo") || stderr(&out).contains("acme/echo"));
    let installed = operator.installed();
    assert_eq!(installed.len(), 1);
    assert_eq!(installed[0]["version"], "1.0.0");
    assert_eq!(installed[0]["registry"], "lab");
    assert!(
        installed[0]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(installed[0]["signers"].as_array().unwrap().len(), 1);
    let out = operator.ok(&["call", "acme__echo", r#"{"message":"from the registry"}"#]);
    assert!(out.contains("from the registry"), "{out}");

    // An update that widens the grant asks again.
    let v2 = acme_echo(&publisher, "1.1.0", "Echo, by acme", WIDER);
    publisher.ok(&["publish", v2.to_str().unwrap()]);
    let err = operator.fails(4, &["update", "acme/echo"]);
    assert!(err.contains("not approved"), "{err}");
    assert_eq!(operator.installed()[0]["version"], "1.0.0");
    let out = operator.run(&["update", "acme/echo", "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("widens"), "{}", stderr(&out));
    assert_eq!(operator.installed()[0]["version"], "1.1.0");

    // The registry moves the 1.1.0 tag to other content: the pin refuses it.
    let moved = acme_echo(&publisher, "1.1.0", "Echo, by acme (moved)", WIDER);
    let err = publisher.fails(1, &["publish", moved.to_str().unwrap()]);
    assert!(err.contains("already published"), "{err}");
    publisher.ok(&["publish", moved.to_str().unwrap(), "--replace"]);
    let lock_before = operator.lock();
    let err = operator.fails(
        4,
        &["install", "acme/echo@1.1.0", "--registry", "lab", "--yes"],
    );
    assert!(err.contains("moved tag"), "{err}");
    assert_eq!(operator.lock(), lock_before);

    // A downgrade is refused unless forced.
    let err = operator.fails(4, &["update", "acme/echo@1.0.0", "--yes"]);
    assert!(err.contains("downgrade"), "{err}");

    // 1.2.0 whose stored blob is corrupted: the digest check refuses it.
    let v3 = acme_echo(&publisher, "1.2.0", "Echo, by acme", WIDER);
    publisher.ok(&["publish", v3.to_str().unwrap()]);
    let digest = chitin_digest(&v3);
    let blob = storage.join("blobs").join(&digest);
    let mut bytes = std::fs::read(&blob).expect("blob stored under its digest");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&blob, &bytes).expect("corrupt");
    let files_before = operator.files();
    let out = operator.run(&["update", "acme/echo", "--yes"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("digest"), "{}", stderr(&out));
    assert_eq!(operator.lock(), lock_before);
    assert_eq!(operator.files(), files_before);
    std::fs::write(&blob, std::fs::read(&v3).unwrap()).expect("repair");

    // The download is cut mid-transfer: a clear error, nothing half-installed.
    let proxy = cutting_proxy(addr, 64 * 1024);
    let through = format!("oci+http://127.0.0.1:{proxy}");
    let out = operator.run(&[
        "install",
        "acme/echo@1.2.0",
        "--registry",
        &through,
        "--yes",
    ]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(stderr(&out).contains("registry"), "{}", stderr(&out));
    assert_eq!(operator.lock(), lock_before);
    assert_eq!(operator.files(), files_before);

    // The registry down: a clear error naming it.
    drop(running);
    let err = operator.fails(
        1,
        &["install", "acme/echo@1.2.0", "--registry", "lab", "--yes"],
    );
    assert!(err.contains("cannot reach registry lab"), "{err}");
    assert_eq!(operator.lock(), lock_before);

    // Removal leaves nothing behind.
    operator.ok(&["remove", "acme/echo"]);
    assert!(operator.installed().is_empty());
    assert!(
        !operator.files().iter().any(|f| f.ends_with(".wasm")),
        "{:?}",
        operator.files()
    );
}

/// The hex of the sha256 digest of `file` (how the OCI registry names its blob).
fn chitin_digest(file: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(file)
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("digest")
        .to_owned()
}

#[test]
fn local_registry_versions_side_by_side_pins_and_tampering() {
    let root = tempfile::tempdir().expect("tempdir");
    let (publisher, operator) = parties(root.path());
    let registry = root.path().join("shared-registry");
    let reg = registry.to_str().expect("utf-8");

    let v1 = acme_echo(&publisher, "1.0.0", "Echo, by acme", "");
    let v2 = acme_echo(&publisher, "1.1.0", "Echo, by acme, faster", "");
    publisher.ok(&["publish", v1.to_str().unwrap(), "--registry", reg]);
    publisher.ok(&["publish", v2.to_str().unwrap(), "--registry", reg]);
    assert!(registry.join("acme/echo/1.0.0.wasm").is_file());
    assert!(registry.join("acme/echo/1.1.0.wasm").is_file());
    assert!(registry.join("index.json").is_file());

    // Two versions side by side: install the older, then update to the newer without asking
    // (nothing widened).
    operator.ok(&["install", "acme/echo@1.0.0", "--registry", reg, "--yes"]);
    assert_eq!(operator.installed()[0]["version"], "1.0.0");
    let out = operator.run(&["update"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no capability widened"),
        "{}",
        stderr(&out)
    );
    assert_eq!(operator.installed()[0]["version"], "1.1.0");
    let err = operator.fails(4, &["update", "acme/echo@1.0.0"]);
    assert!(err.contains("downgrade"), "{err}");
    operator.ok(&["update", "acme/echo@1.0.0", "--force"]);
    assert_eq!(operator.installed()[0]["version"], "1.0.0");
    operator.ok(&["update"]);
    let lock = operator.lock();

    // A moved version and a corrupted file are both refused.
    let moved = acme_echo(&publisher, "1.1.0", "Echo, by acme, moved", "");
    publisher.ok(&[
        "publish",
        moved.to_str().unwrap(),
        "--registry",
        reg,
        "--replace",
    ]);
    let err = operator.fails(4, &["install", "acme/echo@1.1.0", "--registry", reg]);
    assert!(err.contains("moved tag"), "{err}");
    let v3 = acme_echo(&publisher, "1.2.0", "Echo, by acme", "");
    publisher.ok(&["publish", v3.to_str().unwrap(), "--registry", reg]);
    let artifact = registry.join("acme/echo/1.2.0.wasm");
    let mut bytes = std::fs::read(&artifact).expect("artifact");
    bytes.push(0);
    std::fs::write(&artifact, bytes).expect("corrupt");
    let err = operator.fails(1, &["update"]);
    assert!(err.contains("digest mismatch"), "{err}");
    assert_eq!(operator.lock(), lock);

    // An interrupted install's leftovers are ignored and swept; a file changed after install
    // is refused at load.
    let components = operator.data.join("components");
    std::fs::write(components.join(".tmp-abc.part"), b"half").expect("leftover");
    std::fs::write(
        components.join("acme__echo-0123456789abcdef.wasm"),
        b"orphan",
    )
    .expect("orphan");
    let out = operator.ok(&["call", "acme__echo", r#"{"message":"still here"}"#]);
    assert!(out.contains("still here"), "{out}");
    let installed = operator.installed();
    let file = components.join(installed[0]["file"].as_str().unwrap());
    let original = std::fs::read(&file).expect("installed file");
    let mut bytes = original.clone();
    bytes.push(0);
    std::fs::write(&file, bytes).expect("tamper");
    // A third-party component that cannot load is left out with a warning naming why, so its
    // tool is not found (exit 7) while every other component still loads.
    let err = operator.fails(7, &["call", "acme__echo", r#"{"message":"x"}"#]);
    assert!(err.contains("left out"), "{err}");
    assert!(err.contains("changed after install"), "{err}");
    std::fs::write(&file, original).expect("restore");
    operator.ok(&["remove", "acme/echo"]);
    assert!(
        !operator
            .files()
            .iter()
            .any(|f| f.contains(".tmp-") || f.ends_with(".wasm")),
        "{:?}",
        operator.files()
    );

    // Outside its trust scope: acme's key does not vouch for a `chitin/` component.
    let stranger = Party::new(root.path(), "stranger");
    let err = stranger.fails(
        4,
        &["install", "acme/echo@1.0.0", "--registry", reg, "--yes"],
    );
    assert!(err.contains("trust"), "{err}");
    assert!(stranger.installed().is_empty());
}

/// A third-party example built by `just build-thirdparty` (`wordcount-js`, `textstats-py`,
/// `measure-rs`).
fn thirdparty(name: &str) -> PathBuf {
    let file = chitin_e2e::repo().join(format!("build/thirdparty/{name}.wasm"));
    assert!(
        file.is_file(),
        "{} is missing: run `just build-thirdparty` (`just test` does)",
        file.display()
    );
    file
}

/// acme signs `example` with its own key and publishes it into a local registry under `root`,
/// and the operator installs `id` from there under the default policy; returns the operator and
/// what the install printed (the audit). With `own_cache` the operator compiles into its data
/// directory's cache rather than the run's shared one.
fn publish_and_install(root: &Path, example: &str, id: &str, own_cache: bool) -> (Party, String) {
    let (publisher, mut operator) = parties(root);
    operator.own_cache = own_cache;
    let registry = root.join("registry");
    let reg = registry.to_str().expect("utf-8");
    let file = publisher.data.join(format!("{example}.wasm"));
    std::fs::copy(thirdparty(example), &file).expect("copy");
    let file = file.to_str().expect("utf-8");
    publisher.ok(&["sign", file, "--key", "acme"]);
    let out = publisher.ok(&["publish", file, "--registry", reg]);
    assert!(out.contains(&format!("published {id}@1.0.0")), "{out}");
    let out = operator.run(&["install", id, "--registry", reg, "--yes"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    (operator, stdout(&out))
}

#[test]
fn a_python_third_party_tool_runs_under_the_default_policy_and_reaches_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let (operator, audit) =
        publish_and_install(root.path(), "textstats-py", "acme/textstats", false);
    // The install approval shows the memory asked (above the default, within the ceiling) and
    // the standard WASI imports linked with every use refused.
    assert!(
        audit.contains("memory_bytes: 67108864 -> 67108864"),
        "{audit}"
    );
    assert!(
        audit.contains("wasi:sockets/tcp@")
            && audit.contains("linked, every use refused (no grant"),
        "{audit}"
    );
    let over_mcp = call_over_mcp(
        &operator,
        "acme__describe_numbers",
        serde_json::json!({"numbers": [1, 2, 3, 4]}),
    );
    assert_eq!(over_mcp["isError"], false, "{over_mcp}");
    assert_eq!(over_mcp["structuredContent"]["median"], 2.5, "{over_mcp}");
    let out = operator.ok(&["call", "acme__describe_numbers", r#"{"numbers":[1,2,3,4]}"#]);
    let result: Value = serde_json::from_str(out.trim()).expect("json result");
    assert_eq!(result["count"], 4, "{out}");
    assert_eq!(result["median"], 2.5, "{out}");
    // Arguments outside the tool's input schema are refused by the host, naming the field.
    let out = operator.run(&["call", "acme__describe_numbers", r#"{"numbers":"x"}"#]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("invalid arguments") && stderr(&out).contains("`/numbers`"),
        "{}",
        stderr(&out)
    );

    // A socket, a name lookup and /etc/passwd: each refused, and the call returns cleanly.
    let out = operator.ok(&["call", "acme__sandbox_probe", "{}"]);
    let result: Value = serde_json::from_str(out.trim()).expect("json result");
    for attempt in ["connect", "lookup", "open_passwd"] {
        let got = result[attempt].as_str().unwrap_or_default();
        assert!(got.starts_with("error: "), "{attempt}: {out}");
    }
}

#[test]
fn a_manifest_asking_above_the_ceiling_is_clamped_and_the_audit_says_so() {
    let root = tempfile::tempdir().expect("tempdir");
    let (publisher, operator) = parties(root.path());
    let file = acme_echo(
        &publisher,
        "1.0.0",
        "greedy",
        "[limits]\nmemory_bytes = 1073741824\ntimeout_ms = 1000\n",
    );
    let out = operator.ok(&["audit", file.to_str().expect("utf-8")]);
    assert!(
        out.contains("memory_bytes: 1073741824 -> 268435456"),
        "{out}"
    );
    assert!(
        out.contains(
            "policy cuts limits.memory_bytes: asked 1073741824, clamped to the policy's ceiling \
             268435456"
        ),
        "{out}"
    );
    assert!(out.contains("timeout_ms: 1000 -> 1000"), "{out}");
    assert!(out.contains("fuel: policy default -> 5000000000"), "{out}");
}

#[test]
fn a_javascript_third_party_tool_is_published_trusted_installed_audited_and_called() {
    let root = tempfile::tempdir().expect("tempdir");
    let (publisher, operator) = parties(root.path());
    let registry = root.path().join("registry");
    let reg = registry.to_str().expect("utf-8");

    // acme signs its JavaScript component with its own key and publishes it.
    let file = publisher.data.join("wordcount.wasm");
    std::fs::copy(thirdparty("wordcount-js"), &file).expect("copy");
    let file = file.to_str().expect("utf-8");
    publisher.ok(&["sign", file, "--key", "acme"]);
    let out = publisher.ok(&["publish", file, "--registry", reg]);
    assert!(out.contains("published acme/wordcount@1.0.0"), "{out}");

    // The operator finds it by its tool, under the name agents will see.
    let out = operator.ok(&["search", "word", "--registry", reg]);
    assert!(
        out.contains("acme/wordcount@1.0.0") && out.contains("acme__word_count"),
        "{out}"
    );

    // Install shows the audit (no capabilities) before pinning it.
    let out = operator.run(&["install", "acme/wordcount", "--registry", reg, "--yes"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let audit = stdout(&out);
    assert!(audit.contains("acme/wordcount"), "{audit}");
    assert!(audit.contains("acme__word_count"), "{audit}");
    let installed = operator.installed();
    assert_eq!(installed[0]["name"], "acme/wordcount");
    assert_eq!(installed[0]["grants"], serde_json::json!([]));

    let out = operator.ok(&["call", "acme__word_count", r#"{"text":"one two\nthree\n"}"#]);
    let result: Value = serde_json::from_str(out.trim()).expect("json result");
    assert_eq!(result["words"], 3, "{out}");
    assert_eq!(result["lines"], 2, "{out}");
    // The bare name belongs to nobody: third-party tools never shadow anything.
    operator.fails(7, &["call", "word_count", r#"{"text":"x"}"#]);
    // And through MCP, as an agent calls it.
    let over_mcp = call_over_mcp(
        &operator,
        "acme__word_count",
        serde_json::json!({"text": "one two\nthree\n"}),
    );
    assert_eq!(over_mcp["isError"], false, "{over_mcp}");
    assert_eq!(over_mcp["structuredContent"]["words"], 3, "{over_mcp}");
}

/// Starts `chitin serve` for `party`'s installed components and completes the MCP handshake;
/// the server and its response lines.
fn serve_mcp(party: &Party) -> (std::process::Child, std::sync::mpsc::Receiver<Value>) {
    use std::io::BufRead;
    let mut child = party
        .command()
        .arg("serve")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start chitin serve");
    let out = child.stdout.take().expect("stdout");
    let (lines, responses) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if let Ok(value) = serde_json::from_str::<Value>(&line)
                && lines.send(value).is_err()
            {
                break;
            }
        }
    });
    let init = request(
        &mut child,
        &responses,
        0,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "registry-cli-test", "version": "0"}}),
    );
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    let stdin = child.stdin.as_mut().expect("stdin");
    writeln!(
        stdin,
        "{}",
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .expect("initialized");
    (child, responses)
}

/// Send one JSON-RPC request with `id` and wait (bounded) for its response.
fn request(
    child: &mut std::process::Child,
    responses: &std::sync::mpsc::Receiver<Value>,
    id: u64,
    method: &str,
    params: Value,
) -> Value {
    let stdin = child.stdin.as_mut().expect("stdin");
    let message =
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    writeln!(stdin, "{message}").expect("send");
    stdin.flush().expect("flush");
    loop {
        let response = responses
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("a response within 60 s");
        if response["id"] == id {
            return response;
        }
    }
}

/// Serve `party`'s installed components over MCP stdio, call `tool` with `args` once, and
/// return the `tools/call` result.
fn call_over_mcp(party: &Party, tool: &str, args: Value) -> Value {
    let (mut server, responses) = serve_mcp(party);
    let response = request(
        &mut server,
        &responses,
        1,
        "tools/call",
        serde_json::json!({"name": tool, "arguments": args}),
    );
    server.kill().ok();
    server.wait().ok();
    response["result"].clone()
}

#[test]
fn a_rust_component_of_typed_wit_exports_is_installed_and_called_over_mcp() {
    let root = tempfile::tempdir().expect("tempdir");
    let (operator, audit) = publish_and_install(root.path(), "measure-rs", "acme/measure", true);
    // Compiled at install, before any call, so the first call finds it in the cache.
    let cache = cached_files(&operator.data)
        .iter()
        .filter(|path| path.extension().is_some_and(|e| e == "cwasm"))
        .count();
    assert!(cache >= 1, "nothing compiled at install");
    // One tool per exported function: world-level ones by their name, interface ones prefixed.
    for tool in [
        "acme__greet",
        "acme__parse_int",
        "acme__repeat",
        "acme__stats_summarize",
        "acme__stats_manhattan",
    ] {
        assert!(
            audit.contains(tool),
            "{tool} missing from the audit: {audit}"
        );
    }

    let (mut server, responses) = serve_mcp(&operator);
    let list = request(
        &mut server,
        &responses,
        1,
        "tools/list",
        serde_json::json!({}),
    );
    let tools = list["result"]["tools"].as_array().expect("tools");
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {list}"))
            .clone()
    };
    // Descriptions come from the WIT doc comments, schemas from the WIT types.
    let greet = tool("acme__greet");
    assert_eq!(
        greet["description"],
        "Greet someone by name; `excited` ends the greeting with an exclamation mark."
    );
    assert_eq!(
        greet["inputSchema"]["required"],
        serde_json::json!(["name"])
    );
    assert_eq!(
        greet["inputSchema"]["properties"]["excited"],
        serde_json::json!({"type": "boolean"})
    );
    let manhattan = tool("acme__stats_manhattan");
    assert_eq!(
        manhattan["inputSchema"]["properties"]["a"]["properties"]["x"],
        serde_json::json!({"type": "integer", "minimum": -2147483648i64, "maximum": 2147483647})
    );
    assert_eq!(
        manhattan["outputSchema"]["properties"]["result"]["maximum"],
        serde_json::json!(u64::MAX)
    );

    let call = |server: &mut std::process::Child, id: u64, name: &str, args: Value| {
        request(
            server,
            &responses,
            id,
            "tools/call",
            serde_json::json!({"name": name, "arguments": args}),
        )["result"]
            .clone()
    };
    let out = call(
        &mut server,
        2,
        "acme__greet",
        serde_json::json!({"name": "Ada", "excited": true}),
    );
    assert_eq!(
        out["structuredContent"],
        serde_json::json!({"result": "Hello, Ada!"}),
        "{out}"
    );
    let out = call(
        &mut server,
        3,
        "acme__greet",
        serde_json::json!({"name": "Ada"}),
    );
    assert_eq!(out["structuredContent"]["result"], "Hello, Ada.", "{out}");
    let out = call(
        &mut server,
        4,
        "acme__stats_summarize",
        serde_json::json!({"numbers": [1, 2, 3, 4]}),
    );
    assert_eq!(
        out["structuredContent"]["result"],
        serde_json::json!({"count": 4, "total": 10, "mean": 2.5}),
        "{out}"
    );
    let out = call(
        &mut server,
        5,
        "acme__parse_int",
        serde_json::json!({"text": "-42"}),
    );
    assert_eq!(out["structuredContent"]["result"], -42, "{out}");
    // A `result` error is the call's execution-failed error, carrying the error value.
    let out = call(
        &mut server,
        6,
        "acme__parse_int",
        serde_json::json!({"text": "12x"}),
    );
    assert_eq!(out["isError"], true, "{out}");
    let text = out["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("execution-failed: ") && text.contains("`12x` is not a decimal integer"),
        "{out}"
    );
    // Arguments that do not fit the WIT types are refused before anything runs, naming the field.
    let out = call(
        &mut server,
        7,
        "acme__stats_manhattan",
        serde_json::json!({"a": {"x": 3.5, "y": 0}, "b": {"x": 0, "y": 0}}),
    );
    assert_eq!(out["isError"], true, "{out}");
    let text = out["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(
        text,
        "invalid-args: invalid arguments: a.x: expected an integer in \
         -2147483648..=2147483647, got 3.5",
        "{out}"
    );
    let out = call(
        &mut server,
        8,
        "acme__stats_manhattan",
        serde_json::json!({"a": {"x": -3, "y": 4}, "b": {"x": 2, "y": -1}}),
    );
    assert_eq!(out["structuredContent"]["result"], 10, "{out}");
    server.kill().expect("stop chitin serve");
    server.wait().expect("reap chitin serve");
}
