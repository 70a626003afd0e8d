//! Files only their owner may read (signing keys, the secrets master key, the HTTP token):
//! created with mode 0600 atomically and durably, and refused when group or others have any
//! access to them, as OpenSSH refuses a private key others can read.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// A private file could not be read or created. Callers turn it into their own error, which
/// says what the file holds and what to do.
#[derive(Debug, thiserror::Error)]
pub enum PrivateFileError {
    /// Group or others have some access to the file, so what it holds may have leaked.
    #[error("{} has mode {mode:o}, so other users may read it", path.display())]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file system refused: not found, already there, no permission, disk full.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        cause: std::io::Error,
    },
}

/// The bytes of the private file `path`, unless group or others have access to it. The mode is
/// read from the opened file, so it is the mode of the file that is read.
pub fn read(path: &Path) -> Result<Vec<u8>, PrivateFileError> {
    let mut bytes = Vec::new();
    open_private(path)?
        .read_to_end(&mut bytes)
        .map_err(io_at(path))?;
    Ok(bytes)
}

/// As [`read`], for a file of UTF-8 text.
pub fn read_to_string(path: &Path) -> Result<String, PrivateFileError> {
    let mut text = String::new();
    open_private(path)?
        .read_to_string(&mut text)
        .map_err(io_at(path))?;
    Ok(text)
}

/// Create the private file `path` holding `contents`, with mode 0600, unless a file is already
/// there (then the error's kind is `AlreadyExists`). The contents go to a temporary file beside it, which is synced and then renamed into place
/// without replacing anything, and the directory is synced: a reader sees the whole file or
/// none, a crash leaves no partial file, and of two processes creating it at once one wins.
pub fn create_new(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".private-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o600));
    }
    let mut tmp = builder.tempfile_in(dir)?;
    tmp.write_all(contents)?;
    tmp.as_file().sync_all()?;
    tmp.persist_noclobber(path).map_err(|e| e.error)?;
    // The rename is durable only once the directory entry is.
    File::open(dir)?.sync_all()
}

/// `path` opened for reading, refused when group or others have access to it.
fn open_private(path: &Path) -> Result<File, PrivateFileError> {
    let file = File::open(path).map_err(io_at(path))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = file.metadata().map_err(io_at(path))?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(PrivateFileError::Exposed {
                path: path.to_owned(),
                mode,
            });
        }
    }
    Ok(file)
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> PrivateFileError + '_ {
    move |cause| PrivateFileError::Io {
        path: path.to_owned(),
        cause,
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_created_file_is_private_whole_and_alone_in_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        create_new(&path, b"value\n").unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(read(&path).unwrap(), b"value\n");
        assert_eq!(read_to_string(&path).unwrap(), "value\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["secret"], "no temporary file is left behind");
    }

    #[test]
    fn an_existing_file_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        create_new(&path, b"first").unwrap();
        let err = create_new(&path, b"second").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
        assert_eq!(read(&path).unwrap(), b"first");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_file_group_or_others_can_reach_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        create_new(&path, b"value").unwrap();
        for bits in [0o640, 0o604, 0o620, 0o601] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(bits)).unwrap();
            match read(&path) {
                Err(PrivateFileError::Exposed { mode, .. }) => assert_eq!(mode, bits),
                other => panic!("{bits:o}: {other:?}"),
            }
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(read(&path).unwrap(), b"value");
    }

    #[test]
    fn a_missing_file_says_so() {
        let dir = tempfile::tempdir().unwrap();
        match read(&dir.path().join("absent")) {
            Err(PrivateFileError::Io { cause, .. }) => {
                assert_eq!(cause.kind(), std::io::ErrorKind::NotFound)
            }
            other => panic!("{other:?}"),
        }
    }
}
