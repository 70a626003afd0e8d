//! File reads that take what the page cache already holds on the calling thread.
//!
//! wasmtime-wasi runs every filesystem operation on tokio's blocking pool, and on a small VM each
//! hand-off to the pool and back costs ~19 µs: a `read_file` of a small file made three (open,
//! read, the closing read at the end of the file), half of its time in process
//! (`docs/performance.md`). Running file operations on the calling thread outright
//! (`allow_blocking_current_thread`) is not safe: a read of a slow disk or a stuck network
//! filesystem would stall every call of the server, and its deadline with it. So only a read the
//! kernel promises not to wait for runs here: `preadv2` with `RWF_NOWAIT` copies bytes already in
//! the page cache and answers `EAGAIN` instead of going to storage or waiting for a lock (the
//! kernel may still record the access time, on a `relatime` mount at most once a day per file
//! or after it changed: a journal entry, not a read of storage). Anything else (data not
//! cached, a filesystem or device without `RWF_NOWAIT`, a pipe, any error) goes to the pool as
//! before, so what the guest sees (bytes, end of file, errors) is what wasmtime-wasi gives.
//! Opens are `cached_open`'s; writes and every other operation stay on the pool.
//!
//! Two ways in are replaced: `descriptor.read`, and the input stream `descriptor.read-via-stream`
//! hands out (what wasi-libc, and so Rust's, Python's and C's file reads, use). The stream is
//! wasmtime-wasi's `FileInputStream` with the cache tried before each hand-off.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use bytes::Bytes;
use rustix::buffer::spare_capacity;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{ErrorCode, Host, HostDescriptor};
use wasmtime_wasi::p2::{DynInputStream, InputStream, Pollable, StreamError, StreamResult};
use wasmtime_wasi::runtime::{AbortOnDropJoinHandle, spawn_blocking};

use super::FILESYSTEM_TYPES;

/// The functions replaced.
pub(super) const READ: &str = "[method]descriptor.read";
pub(super) const READ_VIA_STREAM: &str = "[method]descriptor.read-via-stream";
/// The most bytes one read returns: what wasmtime-wasi allocates at most for one.
const MAX_READ: usize = 64 * 1024;
/// What a stream polled before any read reads, as wasmtime-wasi's does.
const POLL_READ: usize = 4096;

/// Replace wasmtime-wasi's `descriptor.read` and `descriptor.read-via-stream` (linked before
/// this) with the cached-first ones.
pub fn add_to_linker<T: WasiFilesystemView + 'static>(l: &mut Linker<T>) -> wasmtime::Result<()> {
    l.allow_shadowing(true);
    let replaced = l.instance(FILESYSTEM_TYPES).and_then(|mut instance| {
        instance.func_wrap_async(
            READ,
            |mut store, (fd, len, offset): (Resource<Descriptor>, u64, u64)| {
                Box::new(async move {
                    let mut view = store.data_mut().filesystem();
                    let len_bytes = usize::try_from(len).unwrap_or(usize::MAX);
                    if let Some(read) =
                        file_of(view.table, &fd).and_then(|f| from_cache(f, offset, len_bytes))
                    {
                        // wasmtime-wasi's rule: a read of nothing is the end of the file.
                        let ended = read.is_empty();
                        return Ok((Ok((read, ended)),));
                    }
                    let read: Result<(Vec<u8>, bool), ErrorCode> =
                        match HostDescriptor::read(&mut view, fd, len, offset).await {
                            Ok(read) => Ok(read),
                            Err(error) => Err(view.convert_error_code(error)?),
                        };
                    Ok((read,))
                })
            },
        )?;
        instance.func_wrap(
            READ_VIA_STREAM,
            |mut store, (fd, offset): (Resource<Descriptor>, u64)| {
                let mut view = store.data_mut().filesystem();
                let stream: Result<Resource<DynInputStream>, ErrorCode> =
                    match file_of(view.table, &fd) {
                        Some(file) => {
                            let stream: DynInputStream = Box::new(CachedFileInput {
                                file: file.clone(),
                                position: offset,
                                state: ReadState::Idle,
                            });
                            Ok(view.table.push(stream)?)
                        }
                        // A directory, or a descriptor the table does not hold: wasmtime-wasi's
                        // answer (is-directory, or a trap).
                        None => match HostDescriptor::read_via_stream(&mut view, fd, offset) {
                            Ok(stream) => Ok(stream),
                            Err(error) => Err(view.convert_error_code(error)?),
                        },
                    };
                Ok((stream,))
            },
        )
    });
    l.allow_shadowing(false);
    replaced
}

/// The open file behind descriptor `fd`, if it is one.
fn file_of<'t>(
    table: &'t ResourceTable,
    fd: &Resource<Descriptor>,
) -> Option<&'t Arc<std::fs::File>> {
    match table.get(fd) {
        Ok(Descriptor::File(file)) => Some(&file.file),
        _ => None,
    }
}

/// Up to `len` bytes of `file` at `offset` (at most [`MAX_READ`]), empty at the end of the file,
/// when the kernel can copy them without waiting; `None` sends the read to the pool.
fn from_cache(file: &std::fs::File, offset: u64, len: usize) -> Option<Vec<u8>> {
    // `preadv2` reads at the file's cursor for an offset of -1; wasmtime-wasi's `pread` refuses
    // offsets past `i64::MAX`, so those go to it.
    if i64::try_from(offset).is_err() {
        return None;
    }
    // The kernel writes into the buffer's spare room, not zero-filled first: a megabyte read
    // in 64 KiB reads zero-filled a megabyte the read then overwrote.
    let mut buffer: Vec<u8> = Vec::with_capacity(len.min(MAX_READ));
    let room = buffer.spare_capacity_mut();
    let iov = libc::iovec {
        iov_base: room.as_mut_ptr().cast(),
        iov_len: room.len(),
    };
    // SAFETY: the one `iovec` covers the vector's spare capacity, which the vector owns and
    // nothing else reads while the call runs; `offset` fits an `i64` (checked above).
    let read = unsafe {
        libc::preadv2(
            file.as_raw_fd(),
            &iov,
            1,
            offset as libc::off_t,
            libc::RWF_NOWAIT,
        )
    };
    let read = usize::try_from(read).ok()?;
    // SAFETY: the kernel wrote the first `read` bytes (at most the capacity), so they are
    // initialised.
    unsafe { buffer.set_len(read) };
    Some(buffer)
}

/// A file's input stream: wasmtime-wasi's `FileInputStream`, reading from the page cache on the
/// calling thread when it can and on the pool otherwise.
struct CachedFileInput {
    file: Arc<std::fs::File>,
    /// Where the next byte handed to the guest comes from.
    position: u64,
    state: ReadState,
}

enum ReadState {
    Idle,
    Waiting(AbortOnDropJoinHandle<ReadState>),
    DataAvailable(Bytes),
    Error(io::Error),
    Closed,
}

impl ReadState {
    /// What a read of `bytes` leaves: the end of the file when it read nothing.
    fn of(bytes: Vec<u8>) -> Self {
        if bytes.is_empty() {
            Self::Closed
        } else {
            Self::DataAvailable(Bytes::from(bytes))
        }
    }
}

impl CachedFileInput {
    /// Read `size` bytes at the position: at once from the cache, else a read on the pool.
    fn start(&self, size: usize) -> ReadState {
        match from_cache(&self.file, self.position, size) {
            Some(bytes) => ReadState::of(bytes),
            None => {
                let (file, position) = (self.file.clone(), self.position);
                ReadState::Waiting(spawn_blocking(move || pool_read(&file, position, size)))
            }
        }
    }

    /// Wait for a read on the pool, without starting one.
    async fn wait_ready(&mut self) {
        if let ReadState::Waiting(task) = &mut self.state {
            self.state = task.await;
        }
    }
}

/// wasmtime-wasi's read on the pool: `pread`, again when interrupted.
fn pool_read(file: &std::fs::File, offset: u64, size: usize) -> ReadState {
    // Read into the spare room, not a zero-filled buffer (as `from_cache`).
    let mut buffer: Vec<u8> = Vec::with_capacity(size.min(MAX_READ));
    loop {
        // A read of nothing still asks the kernel, for its error (a pipe has no offsets).
        let read = match buffer.capacity() {
            0 => rustix::io::pread(file, &mut [0u8; 0][..], offset),
            _ => rustix::io::pread(file, spare_capacity(&mut buffer), offset),
        };
        match read {
            Ok(_) => return ReadState::of(buffer),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return ReadState::Error(e.into()),
        }
    }
}

#[wasmtime_wasi::async_trait]
impl InputStream for CachedFileInput {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        if let ReadState::Idle = self.state {
            if size == 0 {
                return Ok(Bytes::new());
            }
            self.state = self.start(size);
        }
        match &mut self.state {
            ReadState::DataAvailable(bytes) => {
                let chunk = bytes.split_to(bytes.len().min(size));
                if bytes.is_empty() {
                    self.state = ReadState::Idle;
                }
                self.position += chunk.len() as u64;
                Ok(chunk)
            }
            ReadState::Idle | ReadState::Waiting(_) => Ok(Bytes::new()),
            ReadState::Error(_) => match std::mem::replace(&mut self.state, ReadState::Closed) {
                ReadState::Error(e) => Err(StreamError::LastOperationFailed(e.into())),
                _ => Err(StreamError::Closed),
            },
            ReadState::Closed => Err(StreamError::Closed),
        }
    }

    async fn blocking_read(&mut self, size: usize) -> StreamResult<Bytes> {
        self.wait_ready().await;
        if let ReadState::Idle = self.state {
            self.state = self.start(size);
            self.wait_ready().await;
        }
        self.read(size)
    }

    async fn cancel(&mut self) {
        if let ReadState::Waiting(task) = std::mem::replace(&mut self.state, ReadState::Closed) {
            // A read already running on the pool cannot be stopped; wait for it, as
            // wasmtime-wasi's stream does, rather than leave it behind.
            task.cancel().await;
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CachedFileInput {
    async fn ready(&mut self) {
        if let ReadState::Idle = self.state {
            self.state = self.start(POLL_READ);
        }
        self.wait_ready().await;
    }
}

#[cfg(test)]
mod tests {
    use std::io::IoSliceMut;
    use std::os::unix::fs::FileExt;

    use rustix::io::ReadWriteFlags;
    use wasmtime_wasi::filesystem::{Dir, File};
    use wasmtime_wasi::{FsPerms, OpenMode};

    use super::*;

    /// A file of `size` bytes that are not all alike, in `dir`.
    fn file_of_size(dir: &std::path::Path, size: u32) -> (std::fs::File, Vec<u8>) {
        let path = dir.join(format!("data-{size}"));
        let content: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &content).expect("write");
        (std::fs::File::open(&path).expect("open"), content)
    }

    /// Whether this filesystem answers `RWF_NOWAIT` reads at all (most local ones do; one that
    /// does not sends every read to the pool).
    fn nowait_supported(file: &std::fs::File) -> bool {
        rustix::io::preadv2(
            file,
            &mut [IoSliceMut::new(&mut [0; 1])],
            0,
            ReadWriteFlags::NOWAIT,
        )
        .is_ok()
    }

    /// What wasmtime-wasi's read returns: `pread` into a buffer of at most 64 KiB.
    fn pread(file: &std::fs::File, offset: u64, len: usize) -> Vec<u8> {
        let mut buffer = vec![0; len.min(MAX_READ)];
        let read = file.read_at(&mut buffer, offset).expect("pread");
        buffer.truncate(read);
        buffer
    }

    #[test]
    fn a_read_from_the_cache_gives_the_bytes_wasmtime_wasi_gives() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (file, content) = file_of_size(dir.path(), 100_000);
        let supported = nowait_supported(&file);
        let size = content.len() as u64;
        let mut answered = 0;
        for offset in [
            0,
            1,
            4095,
            4096,
            65_535,
            65_536,
            size - 1,
            size,
            size + 1,
            1 << 40,
        ] {
            for len in [0, 1, 8192, 65_536, 65_537, 1 << 20, usize::MAX] {
                match from_cache(&file, offset, len) {
                    Some(read) => {
                        answered += 1;
                        assert_eq!(read, pread(&file, offset, len), "{offset}+{len}");
                    }
                    None => assert!(!supported, "{offset}+{len} not answered from the cache"),
                }
            }
        }
        assert_eq!(answered > 0, supported);
    }

    #[test]
    fn a_read_on_the_pool_gives_the_bytes_wasmtime_wasi_gives() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (file, content) = file_of_size(dir.path(), 100_000);
        let size = content.len() as u64;
        for offset in [0, 1, 65_535, 65_536, size - 1, size, size + 1, 1 << 40] {
            for len in [0, 1, 8192, 65_536, 65_537, usize::MAX] {
                match pool_read(&file, offset, len) {
                    ReadState::DataAvailable(read) => {
                        assert_eq!(read, pread(&file, offset, len), "{offset}+{len}");
                    }
                    ReadState::Closed => {
                        assert!(pread(&file, offset, len).is_empty(), "{offset}+{len}");
                    }
                    _ => panic!("{offset}+{len}: not a read"),
                }
            }
        }
        // What the kernel refuses is the read's error, as `pread` reports it.
        for (file, offset) in [(file, 1 << 63), (fifo(dir.path()), 0)] {
            let ReadState::Error(e) = pool_read(&file, offset, 4) else {
                panic!("{offset}: not an error");
            };
            let expected = file.read_at(&mut [0; 4], offset).expect_err("refused");
            assert_eq!(e.raw_os_error(), expected.raw_os_error());
        }
    }

    #[test]
    fn what_the_cache_cannot_answer_goes_to_the_pool() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (file, _) = file_of_size(dir.path(), 10);
        // Past `i64::MAX` `preadv2` would read at the cursor; wasmtime-wasi refuses it.
        assert_eq!(from_cache(&file, 1 << 63, 4), None);
        assert_eq!(from_cache(&file, u64::MAX, 4), None);
        // A pipe has no offsets: the pool's read reports it.
        assert_eq!(from_cache(&fifo(dir.path()), 0, 4), None);

        // A directory is not a file: wasmtime-wasi answers it (is-directory, bad descriptor).
        let mut table = ResourceTable::new();
        let dir_fd = table
            .push(Descriptor::Dir(Dir::new(
                std::fs::File::open(dir.path()).expect("open dir"),
                FsPerms::ReadOnly,
                OpenMode::READ,
                false,
            )))
            .expect("push");
        assert!(file_of(&table, &dir_fd).is_none());
        // A descriptor the table no longer holds: wasmtime-wasi traps.
        let stale = Resource::<Descriptor>::new_borrow(dir_fd.rep());
        table.delete(dir_fd).expect("delete");
        assert!(file_of(&table, &stale).is_none());
        let file_fd = table
            .push(Descriptor::File(File::new(
                file,
                FsPerms::ReadOnly,
                OpenMode::READ,
                false,
            )))
            .expect("push");
        assert!(file_of(&table, &file_fd).is_some());
    }

    /// A named pipe in `dir`, opened for reading and writing so the open does not wait.
    fn fifo(dir: &std::path::Path) -> std::fs::File {
        let path = dir.join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .expect("mkfifo");
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open fifo")
    }

    fn stream(file: std::fs::File, position: u64) -> CachedFileInput {
        CachedFileInput {
            file: Arc::new(file),
            position,
            state: ReadState::Idle,
        }
    }

    #[tokio::test]
    async fn a_stream_reads_the_whole_file_then_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        for size in [0, 1, 200, 8192, 65_536, 65_537, 300_000] {
            let (file, content) = file_of_size(dir.path(), size);
            // Blocking reads of assorted sizes, from an offset.
            let mut input = stream(file.try_clone().expect("clone"), 3);
            let mut read = Vec::new();
            let mut sizes = [1, 8192, 100_000, 7].into_iter().cycle();
            let end = loop {
                match input.blocking_read(sizes.next().unwrap_or(1)).await {
                    Ok(chunk) => read.extend_from_slice(&chunk),
                    Err(end) => break end,
                }
            };
            assert!(matches!(end, StreamError::Closed), "{size}: {end}");
            assert_eq!(read, content.get(3..).unwrap_or_default(), "{size}");

            // Polled, non-blocking reads: what a guest's `subscribe` and `read` do.
            let mut input = stream(file, 0);
            let mut read = Vec::new();
            let end = loop {
                input.ready().await;
                match input.read(5000) {
                    Ok(chunk) => read.extend_from_slice(&chunk),
                    Err(end) => break end,
                }
            };
            assert!(matches!(end, StreamError::Closed), "{size}: {end}");
            assert_eq!(read, content, "{size}");
        }
    }

    #[tokio::test]
    async fn a_stream_of_a_pipe_fails_as_wasmtime_wasis_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut input = stream(fifo(dir.path()), 0);
        // `pread` of a pipe fails (ESPIPE) on the pool: the read reports it once, then the
        // stream is closed.
        let failed = input.blocking_read(10).await;
        assert!(
            matches!(failed, Err(StreamError::LastOperationFailed(_))),
            "{failed:?}"
        );
        assert!(matches!(input.read(10), Err(StreamError::Closed)));
    }
}
