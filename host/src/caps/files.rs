//! Files: the operator's workspace through `wasi:filesystem` preopens (wasmtime-wasi over
//! cap-std). A component reaches exactly the granted paths, read-only or read-write; cap-std
//! refuses `..` and symlinks that lead outside a preopen, so nothing beyond it is reachable.
//! A granted sub-directory is opened again for every call beneath the workspace root, never by
//! its path alone: a link put in its place since the grant was checked leads nowhere.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};

use chitin_registry::manifest::{FileAccess, FilesGrant};
use wasmtime::component::Linker;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::call::Call;
use crate::capability::{Capability, CapabilityError, Cut, Holds, Load};
use crate::services::Services;

/// Where the workspace root appears inside a component.
pub const GUEST_ROOT: &str = "/workspace";

/// The resolved files grant: directories to preopen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilesConfig {
    /// One entry per granted path.
    pub preopens: Vec<Preopen>,
}

/// One directory a component may open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preopen {
    /// The canonical host directory.
    pub host: PathBuf,
    /// The canonical workspace root it was found in.
    pub root: PathBuf,
    /// Its path under `root` (empty for the root itself).
    pub within: PathBuf,
    /// Its path inside the component (`/workspace` or `/workspace/<sub>`).
    pub guest: String,
    /// Read-only or read-write.
    pub access: FileAccess,
}

/// The files capability: `wasi:filesystem` is linked for every component by the WASI base
/// (`caps::wasi`); this grant decides the preopens.
pub struct Files;

impl Capability for Files {
    type Section = FilesGrant;
    type Config = FilesConfig;
    type Ctx = ();
    const LINKS: &'static [&'static str] = &[];

    fn configure(
        section: Option<&FilesGrant>,
        load: &Load<'_>,
        _cuts: &mut Vec<Cut>,
    ) -> Result<FilesConfig, CapabilityError> {
        configure(section, load.services).map_err(CapabilityError::new::<Self>)
    }

    fn ctx(_config: &FilesConfig, _call: &Call<'_>) {}

    fn wasi(config: &FilesConfig, builder: &mut WasiCtxBuilder) -> std::io::Result<()> {
        apply(config, builder)
    }

    fn add_to_linker<T: Holds<Self>>(_linker: &mut Linker<T>) -> wasmtime::Result<()> {
        Ok(())
    }
}

/// A granted workspace path cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("files grant `{path}`: {reason}")]
pub struct FilesError {
    /// The path as the manifest names it.
    pub path: String,
    /// Why it cannot be granted.
    pub reason: String,
}

/// Resolve a files grant against the workspace. Each granted path must exist, be a directory,
/// and stay inside the workspace once symlinks are resolved.
pub fn configure(
    grant: Option<&FilesGrant>,
    services: &Services,
) -> Result<FilesConfig, FilesError> {
    let Some(grant) = grant else {
        return Ok(FilesConfig::default());
    };
    let root = services.workspace();
    let mut preopens = Vec::with_capacity(grant.paths.len());
    for path_grant in &grant.paths {
        let refuse = |reason: String| FilesError {
            path: path_grant.path.clone(),
            reason,
        };
        let host = root.join(&path_grant.path).canonicalize().map_err(|e| {
            refuse(format!(
                "cannot resolve it in workspace {}: {e}",
                root.display()
            ))
        })?;
        let relative = host.strip_prefix(root).map_err(|_| {
            refuse(format!(
                "resolves to {}, outside workspace {}",
                host.display(),
                root.display()
            ))
        })?;
        if !host.is_dir() {
            return Err(refuse("is not a directory".into()));
        }
        let guest = if relative.as_os_str().is_empty() {
            GUEST_ROOT.to_owned()
        } else {
            format!("{GUEST_ROOT}/{}", relative.to_string_lossy())
        };
        let within = relative.to_owned();
        preopens.push(Preopen {
            host,
            root: root.to_owned(),
            within,
            guest,
            access: path_grant.access,
        });
    }
    // A read-only path inside a read-write one is writable through the latter: refused, so
    // that the manifest says what the component can do.
    let named = |p: &Preopen| {
        if p.within.as_os_str().is_empty() {
            ".".to_owned()
        } else {
            p.within.display().to_string()
        }
    };
    for ro in preopens.iter().filter(|p| p.access == FileAccess::ReadOnly) {
        if let Some(rw) = preopens
            .iter()
            .find(|p| p.access == FileAccess::ReadWrite && ro.host.starts_with(&p.host))
        {
            return Err(FilesError {
                path: named(ro),
                reason: format!(
                    "it is granted read-only but lies inside `{}`, granted read-write, through \
                     which the component can write it; grant the read-write path narrower or \
                     drop the read-only one",
                    named(rw)
                ),
            });
        }
    }
    Ok(FilesConfig { preopens })
}

/// Preopen the granted directories in a call's WASI context.
pub fn apply(config: &FilesConfig, builder: &mut WasiCtxBuilder) -> Result<(), std::io::Error> {
    for p in &config.preopens {
        let perms = match p.access {
            FileAccess::ReadOnly => FsPerms::ReadOnly,
            FileAccess::ReadWrite => FsPerms::ReadWrite,
        };
        if p.within.as_os_str().is_empty() {
            // The workspace root: nothing a tool reaches can replace it.
            builder
                .preopened_dir(&p.host, &p.guest, perms)
                .map_err(|e| std::io::Error::other(format!("{}: {e:#}", p.guest)))?;
            continue;
        }
        // Anything that writes in the workspace can replace a sub-directory with a link (even
        // a relative `..`) after the grant was checked, so its path is followed only beneath
        // the root, and wasmtime-wasi opens the very directory found (through its descriptor).
        let dir = open_beneath(&p.root, &p.within).map_err(|cause| {
            std::io::Error::other(FilesError {
                path: p.within.display().to_string(),
                reason: format!(
                    "cannot open it inside the workspace ({cause}); if a link now stands where \
                     the directory was, put the directory back"
                ),
            })
        })?;
        let by_descriptor = format!("/proc/self/fd/{}", dir.as_raw_fd());
        builder
            .preopened_dir(&by_descriptor, &p.guest, perms)
            .map_err(|e| std::io::Error::other(format!("{}: {e:#}", p.guest)))?;
    }
    Ok(())
}

/// The directory `within` names under `root`, as an `O_PATH` handle, when resolving it never
/// leaves `root` (no `..` above it, no absolute or `/proc` link).
fn open_beneath(root: &Path, within: &Path) -> rustix::io::Result<OwnedFd> {
    let how = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let root = rustix::fs::open(root, how, Mode::empty())?;
    rustix::fs::openat2(
        &root,
        within,
        how,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data_dir::DataDir;
    use chitin_registry::manifest::PathGrant;

    fn services(workspace: &std::path::Path, data: &std::path::Path) -> Services {
        Services::new(workspace, DataDir::resolve(Some(data)).expect("data")).expect("services")
    }

    fn grant(path: &str, access: FileAccess) -> FilesGrant {
        FilesGrant {
            paths: vec![PathGrant {
                path: path.into(),
                access,
            }],
        }
    }

    #[test]
    fn the_root_and_sub_paths_map_under_the_guest_root() {
        let ws = tempfile::tempdir().expect("tempdir");
        let data = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(ws.path().join("docs")).expect("mkdir");
        let s = services(ws.path(), data.path());
        let root = configure(Some(&grant(".", FileAccess::ReadWrite)), &s).expect("root");
        assert_eq!(root.preopens[0].guest, "/workspace");
        assert_eq!(root.preopens[0].host, s.workspace());
        let docs = configure(Some(&grant("docs", FileAccess::ReadOnly)), &s).expect("docs");
        assert_eq!(docs.preopens[0].guest, "/workspace/docs");
        assert_eq!(docs.preopens[0].access, FileAccess::ReadOnly);
    }

    #[test]
    fn a_read_only_path_inside_a_read_write_one_is_refused() {
        let ws = tempfile::tempdir().expect("tempdir");
        let data = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(ws.path().join("src/docs")).expect("mkdir");
        let s = services(ws.path(), data.path());
        let both = |paths: &[(&str, FileAccess)]| FilesGrant {
            paths: paths
                .iter()
                .map(|(path, access)| PathGrant {
                    path: (*path).into(),
                    access: *access,
                })
                .collect(),
        };
        let (ro, rw) = (FileAccess::ReadOnly, FileAccess::ReadWrite);
        let err = configure(Some(&both(&[(".", rw), ("src/docs", ro)])), &s).expect_err("nested");
        let text = err.to_string();
        assert!(
            text.contains("`src/docs`") && text.contains("inside `.`, granted read-write"),
            "{text}"
        );
        let err = configure(Some(&both(&[("src/docs", ro), ("src", rw)])), &s).expect_err("nested");
        assert!(err.to_string().contains("inside `src`"), "{err}");
        // The other way round says what it means: a writable corner of a read-only tree.
        let config = configure(Some(&both(&[(".", ro), ("src", rw)])), &s).expect("rw in ro");
        assert_eq!(config.preopens.len(), 2);
    }

    #[test]
    fn a_symlink_out_of_the_workspace_is_refused() {
        let ws = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(outside.path(), ws.path().join("out")).expect("symlink");
        let s = services(ws.path(), outside.path());
        let err = configure(Some(&grant("out", FileAccess::ReadOnly)), &s).expect_err("escape");
        assert!(err.to_string().contains("outside workspace"), "{err}");
    }

    #[test]
    fn a_missing_path_or_a_file_is_refused() {
        let ws = tempfile::tempdir().expect("tempdir");
        let data = tempfile::tempdir().expect("tempdir");
        std::fs::write(ws.path().join("f"), "x").expect("write");
        let s = services(ws.path(), data.path());
        let err = configure(Some(&grant("nope", FileAccess::ReadOnly)), &s).expect_err("missing");
        assert!(err.to_string().contains("`nope`"), "{err}");
        let err = configure(Some(&grant("f", FileAccess::ReadOnly)), &s).expect_err("file");
        assert!(err.to_string().contains("not a directory"), "{err}");
    }
}
