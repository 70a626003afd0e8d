//! Reading the workspace tree for walks and searches: directories' entries, and whole files of
//! a known size. In a component through `wasi:filesystem` itself: through wasi-libc, each entry
//! costs a `metadata-hash-at` (its `readdir` fills in an inode number), each size a `stat-at`
//! plus another `metadata-hash-at`, and each file read a `stat` and `metadata-hash` for its size
//! and a last read for its end, where the entry's own type, one `stat-at` per size and reads up
//! to that size are all a walk and a search need. Elsewhere (the component's native tests),
//! `std::fs`.

use crate::walk::Kind;

/// One entry of a directory: its name (UTF-8 names only), what it is, and its size when it is a
/// file whose size was asked for (0 otherwise, or when it could not be read).
#[derive(Debug)]
pub struct RawEntry {
    /// The entry's name.
    pub name: String,
    /// What it is; symlinks are not followed.
    pub kind: Kind,
    /// Size in bytes.
    pub size: u64,
}

#[cfg(target_os = "wasi")]
pub use wasi::{Dir, links, read};

#[cfg(not(target_os = "wasi"))]
pub use native::{Dir, links, read};

#[cfg(target_os = "wasi")]
mod wasi {
    use std::io;
    use std::path::{Component, Path};

    use wasip2::filesystem::preopens::get_directories;
    use wasip2::filesystem::types::{
        Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags,
    };

    use super::RawEntry;
    use crate::walk::Kind;

    /// An open directory.
    pub struct Dir(Descriptor);

    impl Dir {
        /// Open the directory at `path` (absolute, inside a preopen), following symlinks as
        /// `std::fs` does; the host's preopen decides what is reachable.
        pub fn open(path: &Path) -> io::Result<Self> {
            let (base, rest) = locate(path)?;
            let rest = if rest.is_empty() { "." } else { rest.as_str() };
            base.open_at(
                PathFlags::SYMLINK_FOLLOW,
                rest,
                OpenFlags::DIRECTORY,
                DescriptorFlags::READ,
            )
            .map(Self)
            .map_err(io_error)
        }

        /// Open the subdirectory `name`, not following a symlink.
        pub fn child(&self, name: &str) -> io::Result<Self> {
            self.0
                .open_at(
                    PathFlags::empty(),
                    name,
                    OpenFlags::DIRECTORY,
                    DescriptorFlags::READ,
                )
                .map(Self)
                .map_err(io_error)
        }

        /// Every entry, with files' sizes when `sizes` (a `stat-at` each, not following
        /// symlinks).
        pub fn entries(&self, sizes: bool) -> io::Result<Vec<RawEntry>> {
            let stream = self.0.read_directory().map_err(io_error)?;
            let mut entries = Vec::new();
            loop {
                let entry = match stream.read_directory_entry() {
                    Ok(Some(entry)) => entry,
                    Ok(None) => break,
                    // A name that is not UTF-8 cannot be named back by the agent: left out, as
                    // the stream goes on past it.
                    Err(ErrorCode::IllegalByteSequence) => continue,
                    Err(code) => return Err(io_error(code)),
                };
                let kind = match entry.type_ {
                    DescriptorType::RegularFile => Kind::File,
                    DescriptorType::Directory => Kind::Dir,
                    DescriptorType::SymbolicLink => Kind::Symlink,
                    _ => Kind::Other,
                };
                let size = if sizes && kind == Kind::File {
                    self.0
                        .stat_at(PathFlags::empty(), &entry.name)
                        .map_or(0, |stat| stat.size)
                } else {
                    0
                };
                entries.push(RawEntry {
                    name: entry.name,
                    kind,
                    size,
                });
            }
            Ok(entries)
        }
    }

    /// The bytes of the file at `path` (absolute, inside a preopen; a symlink is followed, as
    /// `std::fs::read` follows it), read up to its `size` as a walk found it, or when that is
    /// 0 to its end; stops once more than `limit` bytes are read.
    pub fn read(path: &Path, size: u64, limit: u64) -> io::Result<Vec<u8>> {
        let (base, rest) = locate(path)?;
        let file = base
            .open_at(
                PathFlags::SYMLINK_FOLLOW,
                &rest,
                OpenFlags::empty(),
                DescriptorFlags::READ,
            )
            .map_err(io_error)?;
        let mut bytes: Vec<u8> = Vec::new();
        loop {
            let have = bytes.len() as u64;
            if (size > 0 && have >= size) || have > limit {
                return Ok(bytes);
            }
            let want = if size > have {
                size - have
            } else {
                limit + 1 - have
            };
            let (chunk, _) = file.read(want, have).map_err(io_error)?;
            if chunk.is_empty() {
                return Ok(bytes);
            }
            if bytes.is_empty() {
                bytes = chunk;
            } else {
                bytes.extend_from_slice(&chunk);
            }
        }
    }

    /// How many names (hard links) the file at `path` has, symlinks followed.
    pub fn links(path: &Path) -> io::Result<u64> {
        let (base, rest) = locate(path)?;
        base.stat_at(PathFlags::SYMLINK_FOLLOW, &rest)
            .map(|stat| stat.link_count)
            .map_err(io_error)
    }

    /// The preopen holding `path` (the longest whose guest path is a whole-component prefix, as
    /// wasi-libc picks one) and the rest of the path relative to it.
    fn locate(path: &Path) -> io::Result<(Descriptor, String)> {
        let mut best: Option<(usize, Descriptor)> = None;
        for (descriptor, guest) in get_directories() {
            let prefix = Path::new(&guest).components().count();
            let holds = path.starts_with(&guest);
            if holds && best.as_ref().is_none_or(|(len, _)| prefix > *len) {
                best = Some((prefix, descriptor));
            }
        }
        let Some((prefix, descriptor)) = best else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no granted directory holds this path",
            ));
        };
        let rest: Vec<&str> = path
            .components()
            .skip(prefix)
            .filter_map(|part| match part {
                Component::Normal(name) => name.to_str(),
                _ => None,
            })
            .collect();
        Ok((descriptor, rest.join("/")))
    }

    /// The `std::io` error a `wasi:filesystem` error code stands for, as the tools map them.
    fn io_error(code: ErrorCode) -> io::Error {
        let kind = match code {
            ErrorCode::Access | ErrorCode::NotPermitted => io::ErrorKind::PermissionDenied,
            ErrorCode::NoEntry => io::ErrorKind::NotFound,
            ErrorCode::NotDirectory => io::ErrorKind::NotADirectory,
            ErrorCode::IsDirectory => io::ErrorKind::IsADirectory,
            ErrorCode::ReadOnly => io::ErrorKind::ReadOnlyFilesystem,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, code.message())
    }
}

#[cfg(not(target_os = "wasi"))]
mod native {
    /// The bytes of the file at `path`; `std::fs::read` reads it to its end whatever its size.
    pub fn read(path: &Path, _size: u64, _limit: u64) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    use std::fs;
    use std::io;
    use std::path::{Path, PathBuf};

    /// How many names (hard links) the file at `path` has, symlinks followed.
    pub fn links(path: &Path) -> io::Result<u64> {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(path).map(|m| m.nlink())
    }

    use super::RawEntry;
    use crate::walk::Kind;

    /// A directory, by path.
    pub struct Dir(PathBuf);

    impl Dir {
        /// The directory at `path`.
        pub fn open(path: &Path) -> io::Result<Self> {
            Ok(Self(path.to_owned()))
        }

        /// The subdirectory `name`.
        pub fn child(&self, name: &str) -> io::Result<Self> {
            Ok(Self(self.0.join(name)))
        }

        /// Every entry with a UTF-8 name, with files' sizes when `sizes`.
        pub fn entries(&self, sizes: bool) -> io::Result<Vec<RawEntry>> {
            let mut entries = Vec::new();
            for entry in fs::read_dir(&self.0)? {
                let entry = entry?;
                // Names that are not UTF-8 cannot be named back by the agent; leave them out.
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                let Ok(file_type) = entry.file_type() else {
                    continue;
                };
                let kind = if file_type.is_symlink() {
                    Kind::Symlink
                } else if file_type.is_dir() {
                    Kind::Dir
                } else if file_type.is_file() {
                    Kind::File
                } else {
                    Kind::Other
                };
                let size = if sizes && kind == Kind::File {
                    entry.metadata().map_or(0, |m| m.len())
                } else {
                    0
                };
                entries.push(RawEntry { name, kind, size });
            }
            Ok(entries)
        }
    }
}
