//! Opens for reading that the kernel resolves from its caches, on the calling thread.
//!
//! wasmtime-wasi runs every `open-at` on tokio's blocking pool. After the page-cache reads
//! (`cached_read`), that hand-off was the one a `read_file` of a small file still made, and on
//! this project's VMs a hand-off to a sleeping pool thread and back costs tens of microseconds.
//! An open cannot simply run on the calling thread: opening a FIFO waits for a writer, a file
//! with a lease waits for its holder (up to `lease-break-time`), a path the dentry cache does not
//! hold waits for the disk, and a network filesystem waits for its server. So only an open
//! that can wait for none of these runs here; anything else goes to the pool (`without_waiting`):
//! wasmtime-wasi's open with `O_NONBLOCK`, so a FIFO is refused there rather than waited for.
//!
//! The open here is a read-only one (no open flag but `directory`, no descriptor flag but
//! `read`) and goes in three steps:
//! 1. `openat2` with `O_PATH` and `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` (the containment
//!    wasmtime-wasi's own open uses), plus `RESOLVE_CACHED` (fail rather than wait for storage)
//!    and `RESOLVE_NO_XDEV` (stay on the directory's filesystem, which is a local one:
//!    [`LOCAL_FILESYSTEMS`]). An `O_PATH` open runs no driver and opens no FIFO end.
//! 2. The located inode must be a regular file or a directory; anything else (a FIFO, a device,
//!    a socket, the symlink itself when links are not followed) goes to the pool.
//! 3. That inode is opened for reading through `/proc/self/fd`, with `O_NONBLOCK` so a lease
//!    makes the open fail rather than wait; the flag is then cleared.
//!
//! A kernel without `RESOLVE_CACHED` (before Linux 5.12) refuses the `openat2`, and a process
//! without `/proc` cannot reopen: every open then goes to the pool, as before.

use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::{Descriptor, Dir, File, WasiFilesystemView};
use wasmtime_wasi::p2::FsError;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, Host, HostDescriptor, OpenFlags, PathFlags,
};
use wasmtime_wasi::runtime::spawn_blocking;

use super::open_files::CountsOpenFiles;
use super::{FILESYSTEM_TYPES, shared_inodes};

/// The function replaced.
pub(super) const OPEN_AT: &str = "[method]descriptor.open-at";

/// Filesystems whose open of a cached regular file or directory does not wait on a device or
/// a server (`statfs` magic numbers): ext2/3/4, XFS, Btrfs, tmpfs, overlayfs.
const LOCAL_FILESYSTEMS: &[i64] = &[0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0x794C_7630];

/// Replace wasmtime-wasi's `descriptor.open-at` (linked before this) with the cached-first one,
/// which also counts the call's open files (`open_files`).
pub fn add_to_linker<T: WasiFilesystemView + CountsOpenFiles + 'static>(
    l: &mut Linker<T>,
) -> wasmtime::Result<()> {
    l.allow_shadowing(true);
    let replaced = l.instance(FILESYSTEM_TYPES).and_then(|mut instance| {
        instance.func_wrap_async(
            OPEN_AT,
            |mut store,
             (fd, path_flags, path, oflags, flags): (
                Resource<Descriptor>,
                PathFlags,
                String,
                OpenFlags,
                DescriptorFlags,
            )| {
                Box::new(async move {
                    // Past its bound the call is stopped: a descriptor is the host's.
                    store
                        .data_mut()
                        .open_files()
                        .admit()
                        .map_err(wasmtime::Error::new)?;
                    let mut view = store.data_mut().filesystem();
                    let held = shared_inodes::hold_back(oflags, flags);
                    let (oflags, flags) = (held.oflags, held.flags);
                    let opened = if let Some(opened) = dir_of(view.table, &fd)
                        .and_then(|dir| from_cache(dir, path_flags, &path, oflags, flags))
                    {
                        view.table.push(opened)?
                    } else {
                        let pooled = match dir_of(view.table, &fd) {
                            Some(dir) => {
                                without_waiting(dir, path_flags, &path, oflags, flags).await
                            }
                            None => None,
                        };
                        match pooled {
                            Some(Ok(opened)) => view.table.push(opened)?,
                            Some(Err(Refused::Code(code))) => return Ok((Err(code),)),
                            Some(Err(Refused::Io(e))) => {
                                return Ok((Err(view.convert_error_code(FsError::from(e))?),));
                            }
                            None => match HostDescriptor::open_at(
                                &mut view, fd, path_flags, path, oflags, flags,
                            )
                            .await
                            {
                                Ok(opened) => opened,
                                Err(error) => return Ok((Err(view.convert_error_code(error)?),)),
                            },
                        }
                    };
                    let settled = match shared_inodes::settle(view.table, opened, &held).await {
                        Ok(opened) => Ok(opened),
                        Err(shared_inodes::Refused::Code(code)) => Err(code),
                        Err(shared_inodes::Refused::Io(e)) => {
                            Err(view.convert_error_code(FsError::from(e))?)
                        }
                    };
                    if let Ok(opened) = &settled {
                        store.data_mut().open_files().opened(opened.rep());
                    }
                    Ok((settled,))
                })
            },
        )
    });
    l.allow_shadowing(false);
    replaced
}

/// The directory behind descriptor `fd`, if it is one.
pub(super) fn dir_of<'t>(table: &'t ResourceTable, fd: &Resource<Descriptor>) -> Option<&'t Dir> {
    match table.get(fd) {
        Ok(Descriptor::Dir(dir)) => Some(dir),
        _ => None,
    }
}

/// `path` under `dir` opened for reading, as wasmtime-wasi's open would open it, when the
/// kernel can do it without waiting; `None` sends the open to the pool.
fn from_cache(
    dir: &Dir,
    path_flags: PathFlags,
    path: &str,
    oflags: OpenFlags,
    flags: DescriptorFlags,
) -> Option<Descriptor> {
    if oflags & !OpenFlags::DIRECTORY != OpenFlags::empty()
        || flags & !DescriptorFlags::READ != DescriptorFlags::empty()
    {
        return None;
    }
    let (opened, is_dir) = open_cached(
        &dir.dir,
        path,
        path_flags.contains(PathFlags::SYMLINK_FOLLOW),
    )?;
    // `opendir` asks for a directory: anything else is wasmtime-wasi's `not-directory` error.
    if oflags.contains(OpenFlags::DIRECTORY) && !is_dir {
        return None;
    }
    // What wasmtime-wasi's open builds: the parent's permissions, read mode, and no blocking of
    // the calling thread (chitin never allows it: `caps::wasi::builder`).
    let file = std::fs::File::from(opened);
    Some(if is_dir {
        Descriptor::Dir(Dir::new(file, dir.perms, OpenMode::READ, false))
    } else {
        Descriptor::File(File::new(file, dir.perms, OpenMode::READ, false))
    })
}

/// Where an open that may wait goes: wasmtime-wasi's open (the same `openat2` containment,
/// flags, and the permission checks before it, which wasmtime-wasi makes when this gives the
/// open back) on the pool, with `O_NONBLOCK`. Opening a FIFO waits for its other end, and a
/// pool thread waiting there cannot be stopped: it outlived the call's deadline, and enough of
/// them stalled every file operation of the server. So a FIFO, socket or device is refused; a
/// regular file or directory is handed on with the flag cleared. `None` gives the open back to
/// wasmtime-wasi: an open it refuses before opening anything, or a kernel without `openat2`.
async fn without_waiting(
    dir: &Dir,
    path_flags: PathFlags,
    path: &str,
    oflags: OpenFlags,
    flags: DescriptorFlags,
) -> Option<Result<Descriptor, Refused>> {
    let syncs = DescriptorFlags::FILE_INTEGRITY_SYNC
        | DescriptorFlags::DATA_INTEGRITY_SYNC
        | DescriptorFlags::REQUESTED_WRITE_SYNC;
    let writes = oflags.intersects(OpenFlags::CREATE | OpenFlags::TRUNCATE)
        || flags.contains(DescriptorFlags::WRITE);
    if flags.intersects(syncs)
        || (oflags.contains(OpenFlags::DIRECTORY)
            && oflags.intersects(OpenFlags::CREATE | OpenFlags::EXCLUSIVE | OpenFlags::TRUNCATE))
        || (writes && dir.perms.write_not_permitted())
    {
        return None;
    }
    // wasmtime-wasi's modes: written when created, truncated or asked to; read when asked to
    // or when not written.
    let reads = flags.contains(DescriptorFlags::READ) || !flags.contains(DescriptorFlags::WRITE);
    let (mut how, open_mode) = match (reads, writes) {
        (true, true) => (OFlags::RDWR, OpenMode::READ | OpenMode::WRITE),
        (false, true) => (OFlags::WRONLY, OpenMode::WRITE),
        _ => (OFlags::RDONLY, OpenMode::READ),
    };
    how |= OFlags::CLOEXEC | OFlags::NONBLOCK;
    if oflags.contains(OpenFlags::CREATE) {
        how |= OFlags::CREATE;
        if oflags.contains(OpenFlags::EXCLUSIVE) {
            how |= OFlags::EXCL;
        }
    }
    if oflags.contains(OpenFlags::TRUNCATE) {
        how |= OFlags::TRUNC;
    }
    if !path_flags.contains(PathFlags::SYMLINK_FOLLOW) {
        how |= OFlags::NOFOLLOW;
    }
    let (start, path) = (dir.dir.clone(), path.to_owned());
    let opened = spawn_blocking(move || open_beneath(&start, &path, how)).await?;
    let (file, kind) = match opened {
        Ok(opened) => opened,
        Err(e) => return Some(Err(Refused::Io(e))),
    };
    Some(match kind {
        FileType::Directory => Ok(Descriptor::Dir(Dir::new(file, dir.perms, open_mode, false))),
        _ if oflags.contains(OpenFlags::DIRECTORY) => Err(Refused::Code(ErrorCode::NotDirectory)),
        FileType::RegularFile => Ok(Descriptor::File(File::new(
            file, dir.perms, open_mode, false,
        ))),
        _ => Err(Refused::Code(ErrorCode::Unsupported)),
    })
}

/// Why [`without_waiting`] refused an open.
enum Refused {
    /// The kernel's error, converted as wasmtime-wasi converts it.
    Io(std::io::Error),
    /// Not a regular file or directory, or not the directory asked for.
    Code(ErrorCode),
}

/// `path` under `start` opened with `how` (which holds `O_NONBLOCK`) as wasmtime-wasi opens it
/// (`RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, again after a rename raced it), and what it
/// is; for a regular file or directory `O_NONBLOCK` is cleared again. `None` when `openat2` is
/// missing or refused by a seccomp filter (`ENOSYS`, `EPERM`), where wasmtime-wasi falls back
/// to resolving the path itself.
fn open_beneath(
    start: &std::fs::File,
    path: &str,
    how: OFlags,
) -> Option<std::io::Result<(std::fs::File, FileType)>> {
    // `openat2` refuses a mode without `O_CREAT` (`EINVAL`).
    let mode = if how.contains(OFlags::CREATE) {
        Mode::from_bits_truncate(0o666)
    } else {
        Mode::empty()
    };
    let mut tries = 0;
    let opened = loop {
        match rustix::fs::openat2(
            start,
            path,
            how,
            mode,
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(opened) => break opened,
            Err(rustix::io::Errno::AGAIN) if tries < 3 => tries += 1,
            Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => return None,
            // wasmtime-wasi's error for a path that leads out.
            Err(rustix::io::Errno::XDEV) => {
                return Some(Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "a path led outside of the filesystem",
                )));
            }
            Err(e) => return Some(Err(e.into())),
        }
    };
    let kind = match rustix::fs::fstat(&opened) {
        Ok(stat) => FileType::from_raw_mode(stat.st_mode),
        Err(e) => return Some(Err(e.into())),
    };
    if matches!(kind, FileType::RegularFile | FileType::Directory) {
        let cleared = rustix::fs::fcntl_getfl(&opened)
            .and_then(|status| rustix::fs::fcntl_setfl(&opened, status - OFlags::NONBLOCK));
        if let Err(e) = cleared {
            return Some(Err(e.into()));
        }
    }
    Some(Ok((std::fs::File::from(opened), kind)))
}

/// The regular file or directory `path` names under `dir`, opened read-only, and whether it
/// is a directory; `None` for anything the kernel could not open without waiting, or that is
/// neither.
fn open_cached(dir: &impl AsFd, path: &str, follow: bool) -> Option<(OwnedFd, bool)> {
    let located = locate(dir, path, follow)?;
    let is_dir = match FileType::from_raw_mode(rustix::fs::fstat(&located).ok()?.st_mode) {
        FileType::RegularFile => false,
        FileType::Directory => true,
        _ => return None,
    };
    let reopen = format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&located)
    );
    let opened = rustix::fs::open(
        reopen.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    rustix::fs::fcntl_setfl(&opened, OFlags::empty()).ok()?;
    Some((opened, is_dir))
}

/// An `O_PATH` handle on what `path` names under `dir` (the link itself when `follow` is false
/// and the last component is one), when `dir` is on a local filesystem and the kernel resolves
/// the path from its caches without leaving `dir`; `None` otherwise, or on any error.
pub(super) fn locate(dir: &impl AsFd, path: &str, follow: bool) -> Option<OwnedFd> {
    if !is_local(dir) {
        return None;
    }
    let mut how = OFlags::PATH | OFlags::CLOEXEC;
    if !follow {
        how |= OFlags::NOFOLLOW;
    }
    // `EAGAIN` means the walk needs storage, or a write (a link whose access time is due), or
    // that a rename somewhere on the host raced it: the last passes on a second try.
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(
            dir,
            path,
            how,
            Mode::empty(),
            ResolveFlags::BENEATH
                | ResolveFlags::NO_MAGICLINKS
                | ResolveFlags::NO_XDEV
                | ResolveFlags::CACHED,
        ) {
            Ok(located) => return Some(located),
            Err(rustix::io::Errno::AGAIN) if tries < 2 => tries += 1,
            Err(_) => return None,
        }
    }
}

/// Whether `fd` is on one of the [`LOCAL_FILESYSTEMS`].
pub(super) fn is_local(fd: &impl AsFd) -> bool {
    rustix::fs::fstatfs(fd).is_ok_and(|s| LOCAL_FILESYSTEMS.contains(&s.f_type))
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::path::Path;
    use std::time::{Duration, Instant};

    use wasmtime_wasi::FsPerms;

    use super::*;
    use crate::caps::wasi::tests::tree;

    /// `path` opened as a directory handle, as a preopen holds it.
    fn handle(path: &Path) -> std::fs::File {
        std::fs::File::open(path).expect("open the directory")
    }

    fn contents(fd: OwnedFd) -> String {
        let mut text = String::new();
        std::fs::File::from(fd)
            .read_to_string(&mut text)
            .expect("read");
        text
    }

    #[test]
    fn a_cached_file_or_directory_is_opened_here_read_only_and_blocking() {
        let (_root, inside) = tree();
        let dir = handle(&inside);
        let magic = rustix::fs::fstatfs(&dir).expect("statfs").f_type;
        // The tests' temporary directory is on a local filesystem here and in CI; were it not,
        // every open would go to the pool and this test would say so.
        assert!(
            LOCAL_FILESYSTEMS.contains(&magic),
            "temporary directory on filesystem {magic:#x}"
        );
        let (a, is_dir) = open_cached(&dir, "a.txt", true).expect("a.txt opened here");
        assert!(!is_dir);
        let status = rustix::fs::fcntl_getfl(&a).expect("flags");
        assert!(!status.contains(OFlags::NONBLOCK), "{status:?}");
        assert_eq!(status & OFlags::RWMODE, OFlags::RDONLY, "{status:?}");
        assert!(
            rustix::io::write(&a, b"x").is_err(),
            "opened for reading only"
        );
        assert_eq!(contents(a), "alpha\n");
        let (b, _) = open_cached(&dir, "sub/b.txt", false).expect("sub/b.txt opened here");
        assert_eq!(contents(b), "beta\n");
        // Following a link whose access time is due needs a write, so `RESOLVE_CACHED` sends
        // it to the pool (a link just made is due). Once followed a clock tick later, it is
        // not due again for a day (`relatime`); on a `strictatime` mount it always is.
        std::thread::sleep(Duration::from_millis(50));
        std::fs::read(inside.join("to-a")).expect("follow the link");
        if let Some((linked, _)) = open_cached(&dir, "to-a", true) {
            assert_eq!(contents(linked), "alpha\n");
        }
        for directory in [".", "sub", "sub/.."] {
            let (_, is_dir) = open_cached(&dir, directory, false).expect(directory);
            assert!(is_dir, "{directory}");
        }
    }

    #[test]
    fn what_could_wait_or_leave_the_directory_goes_to_the_pool() {
        let (_root, inside) = tree();
        let dir = handle(&inside);
        let started = Instant::now();
        for (path, follow) in [
            // A FIFO would wait for a writer; its `O_PATH` open waits for nothing.
            ("fifo", true),
            // Out of the directory, by a link, `..` or an absolute path.
            ("out", true),
            ("out", false),
            ("up", true),
            ("../secret.txt", true),
            ("sub/../../secret.txt", true),
            ("/etc/hostname", true),
            // The link itself when links are not followed: wasmtime-wasi's open refuses it.
            ("to-a", false),
            ("missing", true),
            ("", true),
        ] {
            assert!(
                open_cached(&dir, path, follow).is_none(),
                "{path} (follow {follow})"
            );
        }
        assert!(started.elapsed() < Duration::from_secs(5), "nothing waited");
    }

    #[test]
    fn a_file_under_a_lease_is_not_waited_for() {
        let (_root, inside) = tree();
        let dir = handle(&inside);
        // A lease break signals the holder (this process) with SIGIO, whose default action ends
        // it; nothing else in the tests uses SIGIO.
        // SAFETY: setting a signal's disposition to ignore has no memory effects.
        unsafe { libc::signal(libc::SIGIO, libc::SIG_IGN) };
        let held = std::fs::File::open(inside.join("a.txt")).expect("open");
        // SAFETY: `held` is an open descriptor; F_SETLEASE takes an int argument.
        let leased = unsafe { libc::fcntl(held.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) };
        assert_eq!(leased, 0, "{}", std::io::Error::last_os_error());
        let started = Instant::now();
        assert!(open_cached(&dir, "a.txt", true).is_none());
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the lease was not waited for"
        );
        // SAFETY: as above.
        unsafe { libc::fcntl(held.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
        assert!(
            open_cached(&dir, "a.txt", true).is_some(),
            "once the lease is gone"
        );
    }

    #[test]
    fn only_a_plain_read_only_open_is_taken_and_it_keeps_the_parents_permissions() {
        let (_root, inside) = tree();
        let dir = Dir::new(handle(&inside), FsPerms::ReadOnly, OpenMode::READ, false);
        let plain =
            |oflags, flags| from_cache(&dir, PathFlags::SYMLINK_FOLLOW, "a.txt", oflags, flags);
        for flags in [DescriptorFlags::READ, DescriptorFlags::empty()] {
            match plain(OpenFlags::empty(), flags) {
                Some(Descriptor::File(file)) => {
                    assert_eq!(file.perms, FsPerms::ReadOnly);
                    assert_eq!(file.open_mode, OpenMode::READ);
                }
                _ => panic!("a plain read ({flags:?}) is opened here as a file"),
            }
        }
        for oflags in [
            OpenFlags::CREATE,
            OpenFlags::TRUNCATE,
            OpenFlags::EXCLUSIVE,
            OpenFlags::DIRECTORY | OpenFlags::CREATE,
            // A file asked for as a directory: the pool answers `not-directory`.
            OpenFlags::DIRECTORY,
        ] {
            assert!(plain(oflags, DescriptorFlags::READ).is_none(), "{oflags:?}");
        }
        for flags in [
            DescriptorFlags::WRITE,
            DescriptorFlags::READ | DescriptorFlags::WRITE,
            DescriptorFlags::READ | DescriptorFlags::MUTATE_DIRECTORY,
            DescriptorFlags::READ | DescriptorFlags::DATA_INTEGRITY_SYNC,
        ] {
            assert!(plain(OpenFlags::empty(), flags).is_none(), "{flags:?}");
        }
        for oflags in [OpenFlags::empty(), OpenFlags::DIRECTORY] {
            assert!(
                matches!(
                    from_cache(
                        &dir,
                        PathFlags::empty(),
                        "sub",
                        oflags,
                        DescriptorFlags::READ
                    ),
                    Some(Descriptor::Dir(_))
                ),
                "{oflags:?}"
            );
        }
    }
}
