//! Helpers for end-to-end tests: find the `chitin` binary and the built components, run the CLI.

pub mod postgres;
pub mod test_binary;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `chitin` binary cargo built next to this test executable (`target/<profile>/chitin`).
pub fn chitin_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> → target/<profile>/chitin
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    let bin = dir.join("chitin");
    assert!(
        bin.is_file(),
        "{} is missing: build it with `cargo build --bin chitin` (`just test` does)",
        bin.display()
    );
    bin
}

/// The compile cache every [`chitin`] command of a test run shares, and the host's own tests
/// too (`target/tmp/compile-cache`): each component compiles once in a run, not once per data
/// directory. Entries are keyed by code and engine settings, so sharing never changes what a
/// command loads; a test of the data directory's own cache removes `CHITIN_CACHE_DIR`.
pub fn shared_cache() -> PathBuf {
    let bin = chitin_bin();
    // target/<profile>/chitin → target/tmp/compile-cache
    let target = bin
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    target.join("tmp").join("compile-cache")
}

/// A directory of built components (`build/components`, `build/fixtures`).
pub fn built_dir(name: &str) -> PathBuf {
    let dir = repo().join("build").join(name);
    assert!(
        dir.is_dir(),
        "{} is missing: run `just build-components build-fixtures` (`just test` does)",
        dir.display()
    );
    dir
}

/// The workspace [`chitin`] gives a command on `data_dir`: its `workspace` folder (created), so
/// the workspace never holds the data directory.
pub fn workspace(data_dir: &Path) -> PathBuf {
    let dir = data_dir.join("workspace");
    std::fs::create_dir_all(&dir).expect("create the workspace");
    dir
}

/// A `chitin` command with a private data directory, its [`workspace`], and the given component
/// sources.
/// The files of the compile cache under `data_dir` (one folder per engine configuration).
pub fn cached_files(data_dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(data_dir.join("cache"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|engine| {
            std::fs::read_dir(engine.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|entry| entry.path())
        .collect()
}

pub fn chitin(data_dir: &Path, components: &[PathBuf]) -> Command {
    let mut cmd = Command::new(chitin_bin());
    cmd.env_remove("CHITIN_COMPONENTS")
        .env_remove("CHITIN_POLICY")
        .env_remove("RUST_LOG")
        .env("CHITIN_DATA_DIR", data_dir)
        .env("CHITIN_CACHE_DIR", shared_cache())
        .env("CHITIN_WORKSPACE", workspace(data_dir))
        // The development key that signed the built components (`just build-components`).
        .env("CHITIN_TRUSTED_KEYS", repo().join("build/trusted_keys"))
        .current_dir(data_dir);
    for c in components {
        cmd.arg("--components").arg(c);
    }
    cmd
}

/// Stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Run `cmd` with `stdin` as its standard input (empty when `None`), capturing its output.
pub fn run_with_stdin(cmd: &mut Command, stdin: Option<&str>) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run chitin");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(input);
    child.wait_with_output().expect("wait")
}
