//! The workspace check: the directory tools may reach never holds chitin's own state (data
//! directory, trust store, policy file, signing keys), lies inside none of it, and is never `/`,
//! the home directory or a directory holding it. A tool granted the workspace could otherwise rewrite the trust store or the compile
//! cache, or read `/etc/shadow`.

use std::path::{Path, PathBuf};

/// Why a workspace is refused.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The directory does not exist or cannot be resolved.
    #[error("workspace {path}: {cause}")]
    Resolve {
        /// The directory given.
        path: PathBuf,
        /// Why it cannot be resolved.
        cause: std::io::Error,
    },
    /// `/`, the home directory or a directory holding it was named as the workspace.
    #[error(
        "the workspace {workspace} is {what}: every tool granted files or processes would reach \
         all of it; pass --workspace DIR (or set CHITIN_WORKSPACE) naming the project directory \
         tools may use"
    )]
    TooWide {
        /// The workspace, canonical.
        workspace: PathBuf,
        /// `/`, the home directory or a directory holding it.
        what: String,
    },
    /// No workspace was given, and the current directory is `/` or the home directory (where
    /// desktop MCP clients start servers).
    #[error(
        "no workspace was given, so it defaulted to the current directory {workspace}, which is \
         {what} (desktop MCP clients start servers there); pass --workspace DIR (or set \
         CHITIN_WORKSPACE) naming the project directory tools may use, e.g. in the client's \
         config: \"args\": [\"serve\", \"--workspace\", \"/path/to/project\"]"
    )]
    DefaultTooWide {
        /// The current directory, canonical.
        workspace: PathBuf,
        /// `/`, the home directory or a directory holding it.
        what: String,
    },
    /// The workspace contains part of chitin's own state.
    #[error(
        "the workspace {workspace} contains chitin's {what} {path}, which tools must never \
         reach; pass --workspace DIR naming a directory that does not contain it, or {fix} to \
         keep it outside the workspace"
    )]
    HoldsState {
        /// The workspace, canonical.
        workspace: PathBuf,
        /// Which state.
        what: &'static str,
        /// Where it is.
        path: PathBuf,
        /// The option that moves it.
        fix: &'static str,
    },
    /// The workspace lies inside part of chitin's own state.
    #[error(
        "the workspace {workspace} lies inside chitin's {what} {path}, which tools must never \
         reach; pass --workspace DIR naming a directory outside it"
    )]
    InsideState {
        /// The workspace, canonical.
        workspace: PathBuf,
        /// Which state.
        what: &'static str,
        /// Where it is.
        path: PathBuf,
    },
}

/// One piece of chitin's state, and the option that moves it elsewhere.
#[derive(Debug, Clone, Copy)]
pub struct StatePath<'a> {
    /// What it is (`data directory`, `trust store`, …).
    pub what: &'static str,
    /// Where it is (need not exist yet).
    pub path: &'a Path,
    /// The option that puts it elsewhere (`--data-dir DIR`, …).
    pub fix: &'static str,
    /// Whether a workspace may lie inside it: a folder of its own in the data directory
    /// reaches nothing else there, but one inside the keys, the compile cache or the installed
    /// components reaches them.
    pub may_hold_workspace: bool,
}

/// Resolve `workspace` (canonical) and refuse it when it is `/`, holds a home directory of the
/// user chitin runs as ([`homes`]), holds any of `state` or lies inside it. `defaulted` says the
/// workspace is the current directory because none was given, so the refusal explains how to
/// give one.
pub fn resolve(
    workspace: &Path,
    defaulted: bool,
    state: &[StatePath<'_>],
) -> Result<PathBuf, WorkspaceError> {
    let canonical = workspace
        .canonicalize()
        .map_err(|cause| WorkspaceError::Resolve {
            path: workspace.to_owned(),
            cause,
        })?;
    if let Some(what) = too_wide(&canonical, &homes()) {
        return Err(if defaulted {
            WorkspaceError::DefaultTooWide {
                workspace: canonical,
                what,
            }
        } else {
            WorkspaceError::TooWide {
                workspace: canonical,
                what,
            }
        });
    }
    for s in state {
        let path = canonical_or_self(s.path);
        if path.starts_with(&canonical) {
            return Err(WorkspaceError::HoldsState {
                workspace: canonical,
                what: s.what,
                path,
                fix: s.fix,
            });
        }
        if !s.may_hold_workspace && canonical.starts_with(&path) {
            return Err(WorkspaceError::InsideState {
                workspace: canonical,
                what: s.what,
                path,
            });
        }
    }
    Ok(canonical)
}

/// What makes `canonical` too wide a workspace: it is `/` or holds one of `homes`.
fn too_wide(canonical: &Path, homes: &[PathBuf]) -> Option<String> {
    if canonical.parent().is_none() {
        return Some("the root directory /".to_owned());
    }
    let home = homes.iter().find(|home| home.starts_with(canonical))?;
    Some(if home == canonical {
        "the home directory".to_owned()
    } else {
        format!("a directory holding the home directory {}", home.display())
    })
}

/// The home directories of the user chitin runs as, canonical: `$HOME`, and the account's own
/// from the user database, which a changed `HOME` does not hide.
pub fn homes() -> Vec<PathBuf> {
    let account = nix::unistd::User::from_uid(nix::unistd::Uid::current())
        .ok()
        .flatten()
        .map(|user| user.dir);
    let mut homes: Vec<PathBuf> = dirs::home_dir()
        .into_iter()
        .chain(account)
        .filter(|home| home.is_absolute())
        .map(|home| canonical_or_self(&home))
        .collect();
    homes.dedup();
    homes
}

/// `path` with symlinks resolved as far as it exists: a file not created yet is placed by its
/// nearest existing ancestor, so a later symlinked component cannot hide it inside the workspace.
fn canonical_or_self(path: &Path) -> PathBuf {
    if let Ok(canonical) = path.canonicalize() {
        return canonical;
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut rest = Vec::new();
    let mut current = absolute.as_path();
    while let Some(parent) = current.parent() {
        if let Some(name) = current.file_name() {
            rest.push(name.to_owned());
        }
        if let Ok(base) = parent.canonicalize() {
            return rest.iter().rev().fold(base, |p, n| p.join(n));
        }
        current = parent;
    }
    absolute
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(path: &Path) -> [StatePath<'_>; 1] {
        [StatePath {
            what: "data directory",
            path,
            fix: "--data-dir DIR",
            may_hold_workspace: false,
        }]
    }

    #[test]
    fn a_workspace_holding_the_data_directory_is_refused_naming_both() {
        let ws = tempfile::tempdir().unwrap();
        let inside = ws.path().join("a/not-yet/chitin");
        let err = resolve(ws.path(), false, &data(&inside)).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, WorkspaceError::HoldsState { .. }), "{text}");
        assert!(text.contains("--data-dir DIR"), "{text}");
        assert!(text.contains("--workspace DIR"), "{text}");
        assert!(text.contains("not-yet/chitin"), "{text}");
    }

    #[test]
    fn a_workspace_beside_the_data_directory_is_accepted() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("ws")).unwrap();
        let got = resolve(
            &root.path().join("ws"),
            false,
            &data(&root.path().join("data")),
        );
        assert_eq!(got.unwrap(), root.path().join("ws").canonicalize().unwrap());
    }

    #[test]
    fn a_workspace_inside_chitins_state_is_refused_naming_it() {
        let data_dir = tempfile::tempdir().unwrap();
        let inside = data_dir.path().join("registry");
        std::fs::create_dir(&inside).unwrap();
        let err = resolve(&inside, false, &data(data_dir.path())).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, WorkspaceError::InsideState { .. }), "{text}");
        assert!(
            text.contains("lies inside chitin's data directory"),
            "{text}"
        );
        // A folder of its own in a state directory that may hold one is accepted.
        let own = [StatePath {
            may_hold_workspace: true,
            ..data(data_dir.path())[0]
        }];
        assert_eq!(
            resolve(&inside, false, &own).unwrap(),
            inside.canonicalize().unwrap(),
            "{text}"
        );
    }

    #[test]
    fn a_home_and_every_directory_holding_it_are_too_wide() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let home = root.join("home/alice");
        std::fs::create_dir_all(home.join("project")).unwrap();
        let homes = [PathBuf::from("/nonexistent/chitin-home"), home.clone()];
        assert_eq!(
            too_wide(&home, &homes).as_deref(),
            Some("the home directory")
        );
        for holder in [root.join("home"), root.clone()] {
            let what = too_wide(&holder, &homes).expect("a directory holding a home");
            assert!(
                what.contains("holding the home directory") && what.contains("home/alice"),
                "{what}"
            );
        }
        assert_eq!(too_wide(&home.join("project"), &homes), None);
        assert_eq!(too_wide(&root.join("home2"), &homes), None);
    }

    #[test]
    fn the_root_is_refused_and_a_defaulted_root_says_how_to_pass_a_workspace() {
        let err = resolve(Path::new("/"), false, &[]).unwrap_err();
        assert!(matches!(err, WorkspaceError::TooWide { .. }), "{err}");
        let err = resolve(Path::new("/"), true, &[]).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::DefaultTooWide { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("--workspace"), "{err}");
    }
}
