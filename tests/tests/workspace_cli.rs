//! The README's desktop-client config, verbatim, started the way desktop clients start servers:
//! from `/`, from `$HOME`, and with the data directory inside the workspace. Each refuses with a
//! message that says what to change; the config as written starts.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use chitin_e2e::{chitin_bin, repo, run_with_stdin, shared_cache, stderr};
use serde_json::Value;

/// The command and arguments of the README's `mcpServers` config.
fn readme_config() -> (String, Vec<String>) {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let start = readme
        .find("```json\n{ \"mcpServers\"")
        .expect("the README shows a desktop-client config");
    let block = &readme[start + "```json\n".len()..];
    let block = &block[..block.find("```").expect("end of the config block")];
    let config: Value = serde_json::from_str(block).expect("the config is JSON");
    let server = &config["mcpServers"]["chitin"];
    let command = server["command"].as_str().expect("command").to_owned();
    let args = server["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg").to_owned())
        .collect();
    (command, args)
}

/// Start the README config as a desktop client would: from `cwd`, with only `HOME` and `PATH`
/// (and the data directory when given) in its environment, besides the test run's shared compile
/// cache (which spares only compiling the built-ins again), `/path/to/project` standing for
/// `workspace` (or the `--workspace` pair left out when `None`), stdin closed at once.
fn start(cwd: &Path, home: &Path, data: Option<&Path>, workspace: Option<&Path>) -> Output {
    let (command, args) = readme_config();
    assert!(command.ends_with("/target/debug/chitin"), "{command}");
    let chitin = repo().to_string_lossy().into_owned();
    let mut argv = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--workspace" {
            let value = args.next().expect("--workspace takes a value");
            assert_eq!(value, "/path/to/project");
            if let Some(ws) = workspace {
                argv.push(arg);
                argv.push(ws.to_string_lossy().into_owned());
            }
            continue;
        }
        argv.push(arg.replace("/path/to/chitin", &chitin));
    }
    let mut cmd = Command::new(chitin_bin());
    cmd.args(&argv)
        .current_dir(cwd)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        // The development key that signed the built components, so the accepted case loads.
        .env("CHITIN_TRUSTED_KEYS", repo().join("build/trusted_keys"))
        .env("CHITIN_CACHE_DIR", shared_cache());
    if let Some(data) = data {
        cmd.env("CHITIN_DATA_DIR", data);
    }
    run_with_stdin(&mut cmd, None)
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exit code")
}

/// A home directory and a project directory beside it.
fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = tempfile::tempdir().expect("tempdir");
    let home = root.path().join("home");
    let project = root.path().join("project");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&project).expect("project");
    (root, home, project)
}

#[test]
fn the_readme_config_without_a_workspace_started_from_the_root_is_refused() {
    let (_root, home, _) = dirs();
    let out = start(Path::new("/"), &home, None, None);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(err.contains("no workspace was given"), "{err}");
    assert!(err.contains("the root directory /"), "{err}");
    assert!(err.contains("--workspace"), "{err}");
}

#[test]
fn the_readme_config_without_a_workspace_started_from_home_is_refused() {
    let (_root, home, _) = dirs();
    let out = start(&home, &home, None, None);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(err.contains("no workspace was given"), "{err}");
    assert!(err.contains("the home directory"), "{err}");
    assert!(err.contains("--workspace"), "{err}");
}

#[test]
fn the_readme_config_naming_the_root_or_home_as_workspace_is_refused() {
    let (_root, home, _) = dirs();
    for ws in [Path::new("/"), home.as_path()] {
        let out = start(Path::new("/"), &home, None, Some(ws));
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{err}");
        assert!(err.contains("every tool granted files"), "{err}");
        assert!(err.contains("pass --workspace DIR"), "{err}");
    }
}

#[test]
fn the_readme_config_with_the_data_directory_inside_the_workspace_is_refused_naming_both() {
    let (_root, home, project) = dirs();
    let data = project.join(".chitin");
    let out = start(Path::new("/"), &home, Some(&data), Some(&project));
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    let project = project.canonicalize().expect("canonical");
    assert!(
        err.contains(&format!("workspace {}", project.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "data directory {}",
            project.join(".chitin").display()
        )),
        "{err}"
    );
    assert!(
        err.contains("--workspace DIR") && err.contains("--data-dir DIR"),
        "{err}"
    );
}

#[test]
fn the_readme_config_as_written_starts_from_the_root() {
    let (_root, home, project) = dirs();
    let out = start(Path::new("/"), &home, None, Some(&project));
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    let project = project.canonicalize().expect("canonical");
    assert!(
        err.contains(&format!("workspace: {}", project.display())),
        "{err}"
    );
}

/// The account's home directory, as the user database has it (`HOME` aside).
fn account_home() -> PathBuf {
    let out = Command::new("sh")
        .args(["-c", "getent passwd \"$(id -u)\" | cut -d: -f6"])
        .output()
        .expect("getent");
    PathBuf::from(String::from_utf8(out.stdout).expect("utf-8").trim())
}

#[test]
fn the_readme_config_naming_a_directory_holding_a_home_is_refused_whatever_home_says() {
    let (root, home, _) = dirs();
    let account = account_home();
    assert!(account.is_dir(), "the account's home {account:?}");
    // A parent of `$HOME`, and the account's own home with `HOME` pointed elsewhere: either
    // would hand every tool the user's dotfiles, keys and the default data directory.
    for (ws, names) in [(root.path(), &home), (account.as_path(), &account)] {
        let out = start(Path::new("/"), &home, None, Some(ws));
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{}: {err}", ws.display());
        let names = names.canonicalize().expect("canonical");
        assert!(
            err.contains("the home directory") && err.contains("pass --workspace DIR"),
            "{err}"
        );
        assert!(
            ws == account || err.contains(&names.display().to_string()),
            "{err}"
        );
    }
}

#[test]
fn the_readme_config_with_a_workspace_inside_chitins_own_folders_is_refused() {
    let (root, home, _) = dirs();
    let data = root.path().join("data");
    for folder in ["registry/chitin", "components/old", "mine"] {
        std::fs::create_dir_all(data.join(folder)).expect("folder");
    }
    for (folder, what) in [
        ("registry/chitin", "local registry"),
        ("components/old", "installed components"),
    ] {
        let out = start(Path::new("/"), &home, Some(&data), Some(&data.join(folder)));
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{folder}: {err}");
        assert!(
            err.contains(&format!("lies inside chitin's {what}")),
            "{folder}: {err}"
        );
    }
    // A folder of its own in the data directory reaches nothing else there.
    let out = start(Path::new("/"), &home, Some(&data), Some(&data.join("mine")));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}
