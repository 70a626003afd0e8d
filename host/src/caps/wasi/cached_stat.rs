//! File metadata the kernel answers from its caches, on the calling thread.
//!
//! wasmtime-wasi runs every `stat`, `stat-at`, `metadata-hash` and `metadata-hash-at` on tokio's
//! blocking pool. A directory listing in a guest makes two of them per entry (wasi-libc's
//! `readdir` asks `metadata-hash-at` for each entry's inode number, and the entry's metadata is
//! a `stat-at`), and reading a file asks `stat` for its size; on this project's VMs each
//! hand-off to a pool thread and back costs tens of microseconds, so a `list_dir` of twenty
//! files took milliseconds.
//!
//! A `stat` opens nothing, so it cannot wait for a FIFO's writer or a lease; what it can wait for
//! is the disk (a path or inode not in memory) and a network filesystem's server. So the path is
//! located as `cached_open` locates it (`openat2` with `O_PATH`, the containment wasmtime-wasi
//! uses, `RESOLVE_CACHED`, on a local filesystem only), and the located inode, in memory once its
//! dentry is, is `statx`ed through that handle. A descriptor's own `stat` is taken here when
//! it is on a local filesystem. Anything else, and every error, goes to wasmtime-wasi's function
//! on the pool, so errors are exactly wasmtime-wasi's.
//!
//! What is answered reproduces wasmtime-wasi 48's conversion field by field (its own is
//! private): the type (FIFOs and sockets are `unknown`), link count, size, access and
//! modification times, the birth time as the status-change time, each time missing when the
//! kernel did not report it or it is before 1970; the hash is `DefaultHasher` over (device,
//! inode). A test holds both against wasmtime-wasi's answers.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::fd::AsFd;

use rustix::fs::{AtFlags, FileType, Statx, StatxFlags, StatxTimestamp};
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::clocks::wall_clock::Datetime;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorStat, DescriptorType, ErrorCode, Host, HostDescriptor, MetadataHashValue, PathFlags,
};

use super::FILESYSTEM_TYPES;
use super::cached_open::{dir_of, is_local, locate};

/// The functions replaced.
pub(super) const STAT: &str = "[method]descriptor.stat";
/// See [`STAT`].
pub(super) const STAT_AT: &str = "[method]descriptor.stat-at";
/// See [`STAT`].
pub(super) const METADATA_HASH: &str = "[method]descriptor.metadata-hash";
/// See [`STAT`].
pub(super) const METADATA_HASH_AT: &str = "[method]descriptor.metadata-hash-at";

/// What wasmtime-wasi xors a metadata hash with to make its upper half.
const HASH_UPPER_XOR: u64 = 4614256656552045848;

/// Replace wasmtime-wasi's four metadata functions (linked before this) with cached-first ones.
pub fn add_to_linker<T: WasiFilesystemView + 'static>(l: &mut Linker<T>) -> wasmtime::Result<()> {
    l.allow_shadowing(true);
    let replaced = replace(l);
    l.allow_shadowing(false);
    replaced
}

fn replace<T: WasiFilesystemView + 'static>(l: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut instance = l.instance(FILESYSTEM_TYPES)?;
    instance.func_wrap_async(STAT, |mut store, (fd,): (Resource<Descriptor>,)| {
        Box::new(async move {
            let mut view = store.data_mut().filesystem();
            if let Some(found) = descriptor_statx(view.table, &fd) {
                return Ok((Ok::<_, ErrorCode>(descriptor_stat(&found)),));
            }
            let stat = match HostDescriptor::stat(&mut view, fd).await {
                Ok(stat) => Ok(stat),
                Err(error) => Err(view.convert_error_code(error)?),
            };
            Ok((stat,))
        })
    })?;
    instance.func_wrap_async(
        STAT_AT,
        |mut store, (fd, path_flags, path): (Resource<Descriptor>, PathFlags, String)| {
            Box::new(async move {
                let mut view = store.data_mut().filesystem();
                if let Some(found) = path_statx(view.table, &fd, path_flags, &path) {
                    return Ok((Ok::<_, ErrorCode>(descriptor_stat(&found)),));
                }
                let stat = match HostDescriptor::stat_at(&mut view, fd, path_flags, path).await {
                    Ok(stat) => Ok(stat),
                    Err(error) => Err(view.convert_error_code(error)?),
                };
                Ok((stat,))
            })
        },
    )?;
    instance.func_wrap_async(
        METADATA_HASH,
        |mut store, (fd,): (Resource<Descriptor>,)| {
            Box::new(async move {
                let mut view = store.data_mut().filesystem();
                if let Some(found) = descriptor_statx(view.table, &fd) {
                    return Ok((Ok::<_, ErrorCode>(metadata_hash(&found)),));
                }
                let hash = match HostDescriptor::metadata_hash(&mut view, fd).await {
                    Ok(hash) => Ok(hash),
                    Err(error) => Err(view.convert_error_code(error)?),
                };
                Ok((hash,))
            })
        },
    )?;
    instance.func_wrap_async(
        METADATA_HASH_AT,
        |mut store, (fd, path_flags, path): (Resource<Descriptor>, PathFlags, String)| {
            Box::new(async move {
                let mut view = store.data_mut().filesystem();
                if let Some(found) = path_statx(view.table, &fd, path_flags, &path) {
                    return Ok((Ok::<_, ErrorCode>(metadata_hash(&found)),));
                }
                let hash =
                    match HostDescriptor::metadata_hash_at(&mut view, fd, path_flags, path).await {
                        Ok(hash) => Ok(hash),
                        Err(error) => Err(view.convert_error_code(error)?),
                    };
                Ok((hash,))
            })
        },
    )?;
    Ok(())
}

/// What the file or directory behind descriptor `fd` is, when it is on a local filesystem.
fn descriptor_statx(table: &ResourceTable, fd: &Resource<Descriptor>) -> Option<Statx> {
    match table.get(fd).ok()? {
        Descriptor::File(file) => statx_local(&*file.file),
        Descriptor::Dir(dir) => statx_local(&*dir.dir),
    }
}

fn statx_local(fd: &impl AsFd) -> Option<Statx> {
    is_local(fd).then(|| statx(fd)).flatten()
}

/// What `path` names under directory descriptor `fd`, when the kernel can say without waiting.
fn path_statx(
    table: &ResourceTable,
    fd: &Resource<Descriptor>,
    path_flags: PathFlags,
    path: &str,
) -> Option<Statx> {
    let dir = dir_of(table, fd)?;
    let located = locate(
        &*dir.dir,
        path,
        path_flags.contains(PathFlags::SYMLINK_FOLLOW),
    )?;
    statx(&located)
}

/// The inode behind `fd` itself (for an `O_PATH` handle on a link, the link), without syncing
/// with a server, as `stat` does.
fn statx(fd: &impl AsFd) -> Option<Statx> {
    rustix::fs::statx(
        fd,
        "",
        AtFlags::EMPTY_PATH | AtFlags::STATX_SYNC_AS_STAT,
        StatxFlags::BASIC_STATS | StatxFlags::BTIME,
    )
    .ok()
}

/// wasmtime-wasi's `descriptor-stat` of `found`.
fn descriptor_stat(found: &Statx) -> DescriptorStat {
    let time = |flag: StatxFlags, at: &StatxTimestamp| {
        (found.stx_mask & flag.bits() != 0)
            .then(|| datetime(at))
            .flatten()
    };
    DescriptorStat {
        type_: descriptor_type(FileType::from_raw_mode(found.stx_mode.into())),
        link_count: found.stx_nlink.into(),
        size: found.stx_size,
        data_access_timestamp: time(StatxFlags::ATIME, &found.stx_atime),
        data_modification_timestamp: time(StatxFlags::MTIME, &found.stx_mtime),
        status_change_timestamp: time(StatxFlags::BTIME, &found.stx_btime),
    }
}

/// A time on the WASI wall clock, which has none before 1970.
fn datetime(at: &StatxTimestamp) -> Option<Datetime> {
    Some(Datetime {
        seconds: u64::try_from(at.tv_sec).ok()?,
        nanoseconds: at.tv_nsec,
    })
}

fn descriptor_type(kind: FileType) -> DescriptorType {
    match kind {
        FileType::Directory => DescriptorType::Directory,
        FileType::Symlink => DescriptorType::SymbolicLink,
        FileType::RegularFile => DescriptorType::RegularFile,
        FileType::BlockDevice => DescriptorType::BlockDevice,
        FileType::CharacterDevice => DescriptorType::CharacterDevice,
        _ => DescriptorType::Unknown,
    }
}

/// wasmtime-wasi's metadata hash of `found`: its (device, inode).
fn metadata_hash(found: &Statx) -> MetadataHashValue {
    let device = rustix::fs::makedev(found.stx_dev_major, found.stx_dev_minor);
    let mut hasher = DefaultHasher::new();
    (device, found.stx_ino).hash(&mut hasher);
    let lower = hasher.finish();
    MetadataHashValue {
        lower,
        upper: lower ^ HASH_UPPER_XOR,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use wasmtime_wasi::p2::bindings::filesystem::preopens::Host as _;

    use super::*;
    use crate::caps::wasi::tests::{Wasi, tree};

    /// The shared test tree (see [`tree`]), with a dangling link, a socket, a file dated before
    /// 1970 and `a.txt`'s four times all different.
    fn stat_tree() -> tempfile::TempDir {
        let (root, inside) = tree();
        std::os::unix::fs::symlink("missing", inside.join("dangling")).expect("dangling");
        std::os::unix::net::UnixListener::bind(inside.join("socket")).expect("socket");
        // A time before 1970, which the WASI clock cannot show.
        let old = std::fs::File::options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(inside.join("old.txt"))
            .expect("old");
        old.set_modified(std::time::UNIX_EPOCH - std::time::Duration::from_secs(86_400))
            .expect("set a time before 1970");
        // Every time of `a.txt` different: accessed, modified, changed and born.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let a = std::fs::File::options()
            .write(true)
            .open(inside.join("a.txt"))
            .expect("a");
        a.set_times(
            std::fs::FileTimes::new()
                .set_accessed(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000))
                .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(2_000_000)),
        )
        .expect("times");
        root
    }

    /// The descriptor of the only preopen, and the view over it.
    fn preopen(wasi: &mut Wasi) -> Resource<Descriptor> {
        let mut view = wasi.filesystem();
        let mut dirs = view.get_directories().expect("preopens");
        dirs.pop().expect("one preopen").0
    }

    fn borrow(fd: &Resource<Descriptor>) -> Resource<Descriptor> {
        Resource::new_borrow(fd.rep())
    }

    fn same_stat(ours: &DescriptorStat, theirs: &DescriptorStat) -> bool {
        // Debug output covers every field; the types implement no `PartialEq`.
        format!("{ours:?}") == format!("{theirs:?}")
    }

    fn same_hash(ours: &MetadataHashValue, theirs: &MetadataHashValue) -> bool {
        (ours.lower, ours.upper) == (theirs.lower, theirs.upper)
    }

    #[tokio::test]
    async fn answers_here_are_the_ones_wasmtime_wasi_gives() {
        let root = stat_tree();
        let inside = root.path().join("inside");
        let mut wasi = Wasi::with_preopen(&inside);
        let dir = preopen(&mut wasi);
        let mut answered_here = 0;
        for path in [
            "a.txt",
            ".",
            "sub",
            "sub/b.txt",
            "sub/..",
            "to-a",
            "up",
            "dangling",
            "fifo",
            "socket",
            "old.txt",
        ] {
            for path_flags in [PathFlags::empty(), PathFlags::SYMLINK_FOLLOW] {
                let mut view = wasi.filesystem();
                let theirs =
                    HostDescriptor::stat_at(&mut view, borrow(&dir), path_flags, path.into())
                        .await
                        .ok();
                let theirs_hash = HostDescriptor::metadata_hash_at(
                    &mut view,
                    borrow(&dir),
                    path_flags,
                    path.into(),
                )
                .await
                .ok();
                let ours = path_statx(view.table, &dir, path_flags, path);
                let Some(found) = ours else {
                    continue;
                };
                answered_here += 1;
                let what = format!("{path} ({path_flags:?})");
                let theirs = theirs.unwrap_or_else(|| panic!("{what}: answered here only"));
                assert!(
                    same_stat(&descriptor_stat(&found), &theirs),
                    "{what}: {theirs:?}"
                );
                let theirs_hash = theirs_hash.expect("hashed by wasmtime-wasi");
                assert!(same_hash(&metadata_hash(&found), &theirs_hash), "{what}");
            }
        }
        // Every path but the link out of the directory (and what the dangling link names) is
        // answered here, both ways.
        assert!(answered_here >= 18, "only {answered_here} answered here");
        // A descriptor's own metadata, for a directory and for a file.
        let mut view = wasi.filesystem();
        let file = HostDescriptor::open_at(
            &mut view,
            borrow(&dir),
            PathFlags::empty(),
            "sub/b.txt".into(),
            wasmtime_wasi::p2::bindings::filesystem::types::OpenFlags::empty(),
            wasmtime_wasi::p2::bindings::filesystem::types::DescriptorFlags::READ,
        )
        .await
        .expect("open");
        for fd in [&dir, &file] {
            let found = descriptor_statx(view.table, fd).expect("answered here");
            let theirs = HostDescriptor::stat(&mut view, borrow(fd))
                .await
                .expect("stat");
            assert!(same_stat(&descriptor_stat(&found), &theirs), "{theirs:?}");
            let theirs = HostDescriptor::metadata_hash(&mut view, borrow(fd))
                .await
                .expect("hash");
            assert!(same_hash(&metadata_hash(&found), &theirs));
        }
    }

    #[test]
    fn what_leaves_the_directory_or_is_missing_goes_to_the_pool() {
        let root = stat_tree();
        let inside = root.path().join("inside");
        let mut wasi = Wasi::with_preopen(&inside);
        let dir = preopen(&mut wasi);
        let view = wasi.filesystem();
        for (path, path_flags) in [
            ("up", PathFlags::SYMLINK_FOLLOW),
            ("../secret.txt", PathFlags::empty()),
            ("sub/../../secret.txt", PathFlags::empty()),
            ("/etc/hostname", PathFlags::empty()),
            ("dangling", PathFlags::SYMLINK_FOLLOW),
            ("missing", PathFlags::empty()),
            ("", PathFlags::empty()),
        ] {
            assert!(
                path_statx(view.table, &dir, path_flags, path).is_none(),
                "{path} ({path_flags:?})"
            );
        }
        assert!(Path::new(&root.path().join("secret.txt")).exists());
    }
}
