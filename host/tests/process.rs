//! The process capability: what a granted program can and cannot do under confinement.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chitin_host::caps::process::confine::Support;
use chitin_host::caps::process::run::OUTPUT_CAP;
use chitin_host::caps::process::{
    ProcessConfig, ProcessGrant, ProcessHost, Request, RunError,
};

/// A workspace and a data directory side by side, and a host offering them.
struct Env {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    data: PathBuf,
    host: ProcessHost,
}

fn env() -> Env {
    let root = tempfile::tempdir().expect("tempdir");
    let workspace = root.path().join("workspace");
    let data = root.path().join("data");
    std::fs::create_dir_all(&workspace).expect("workspace");
    std::fs::create_dir_all(&data).expect("data");
    std::fs::write(data.join("chitin.redb"), "private").expect("data file");
    let workspace = workspace.canonicalize().expect("canonical");
    let host = ProcessHost::new(workspace.clone(), data.clone());
    Env {
        _root: root,
        workspace,
        data,
        host,
    }
}

fn sh_grant() -> ProcessGrant {
    ProcessGrant {
        programs: vec!["/bin/sh".into()],
        ..ProcessGrant::default()
    }
}

fn config(env: &Env, grant: &ProcessGrant) -> ProcessConfig {
    ProcessConfig::resolve(grant, &env.host).expect("grant resolves")
}

fn sh(script: &str) -> Request {
    Request {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        timeout: Some(Duration::from_secs(10)),
        ..Request::default()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn runs_a_granted_program_in_the_workspace() {
    let env = env();
    let config = config(&env, &sh_grant());
    assert!(config.is_confined(), "Landlock should be available here");
    let out = config.run(sh("pwd; echo hi >&2; exit 3")).await.expect("runs");
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(text(&out.stdout.bytes).trim(), env.workspace.display().to_string());
    assert_eq!(text(&out.stderr.bytes), "hi\n");
    assert!(!out.timed_out);
}
