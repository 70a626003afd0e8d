//! The WASI base every component gets: clocks, random, stdio (captured into the call's log),
//! environment (the granted keys, and [`OUTPUT_BYTES_ENV`] the host tells every call), exit, and the filesystem interfaces with only the granted
//! preopens — Rust's standard library imports those even when it never opens a file, and without
//! a preopen they reach nothing. `wasi:sockets` is linked because every ordinary toolchain
//! (componentize-py, jco, wasi-sdk) imports it, but deny-all whatever the grant: no address
//! passes the socket check, TCP, UDP and name lookup are off. Outbound network goes through
//! `wasi:http` and its grant only.

use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, io, random, sockets};
use wasmtime_wasi::random::WasiRandom;
use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView};
use wasmtime_wasi::{WasiCtxBuilder, WasiView};

mod cached_open;
mod cached_read;
mod cached_stat;
mod error_text;
pub mod open_files;
mod shared_inodes;
pub mod stdio;

use crate::call_log::{LogSource, SharedLog};
use stdio::CapturedOutput;

/// The interface wasmtime-wasi links the file functions in (components importing any 0.2.x
/// version reach it), where `cached_read`, `cached_open` and `cached_stat` replace some of them.
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// The interface prefixes this module links, for explaining a component's unmet imports.
pub const LINKS: &[&str] = &[
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:cli/",
    "wasi:filesystem/",
    "wasi:sockets/",
];

/// The environment variable that tells every call how many bytes of its result reach the agent
/// (its `output_bytes` limit): a tool that knows it can return a shorter, whole result rather
/// than have the host cut it. No grant may name it (`chitin_registry::manifest::env`).
pub const OUTPUT_BYTES_ENV: &str = "CHITIN_OUTPUT_BYTES";

/// The per-call WASI context before the grant's contributions (the files capability's
/// preopens, the env capability's variables): stdio into `log`, no args, no network, and the
/// call's output budget of `output_bytes` in the environment.
pub fn builder(log: &SharedLog, output_bytes: usize) -> WasiCtxBuilder {
    let mut builder = WasiCtxBuilder::new();
    builder
        .env(OUTPUT_BYTES_ENV, output_bytes.to_string())
        .stdout(CapturedOutput::new(log.clone(), LogSource::Stdout))
        .stderr(CapturedOutput::new(log.clone(), LogSource::Stderr))
        // No grant opens raw sockets; set every switch even where wasmtime's default is off,
        // so a change of default upstream cannot open them.
        .socket_addr_check(|_, _| Box::pin(async { false }))
        .allow_ip_name_lookup(false)
        .allow_tcp(false)
        .allow_udp(false);
    builder
}

struct Io;

impl HasData for Io {
    type Data<'a> = &'a mut ResourceTable;
}

/// Link the WASI base (async flavour).
pub fn add_to_linker<T: WasiView + open_files::CountsOpenFiles + 'static>(
    l: &mut Linker<T>,
) -> wasmtime::Result<()> {
    io::error::add_to_linker::<T, Io>(l, |t| t.ctx().table)?;
    error_text::add_to_linker(l)?;
    io::poll::add_to_linker::<T, Io>(l, |t| t.ctx().table)?;
    io::streams::add_to_linker::<T, Io>(l, |t| t.ctx().table)?;
    clocks::wall_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    clocks::monotonic_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    random::random::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    filesystem::preopens::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    filesystem::types::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    cached_read::add_to_linker(l)?;
    cached_open::add_to_linker(l)?;
    open_files::add_to_linker(l)?;
    cached_stat::add_to_linker(l)?;
    let no_options = sockets::network::LinkOptions::default();
    sockets::network::add_to_linker::<T, WasiSockets>(l, &no_options, T::sockets)?;
    sockets::instance_network::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::tcp::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::tcp_create_socket::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::udp::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::udp_create_socket::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::ip_name_lookup::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use wasmtime::component::{Linker, ResourceTable};
    use wasmtime_wasi::filesystem::WasiFilesystemView;

    use super::{FILESYSTEM_TYPES, cached_open, cached_read, cached_stat};

    #[test]
    fn the_replaced_functions_are_the_ones_wasmtime_wasi_links() {
        let engine = wasmtime::Engine::default();
        let mut linker = Linker::<Wasi>::new(&engine);
        wasmtime_wasi::p2::bindings::filesystem::types::add_to_linker::<
            Wasi,
            wasmtime_wasi::filesystem::WasiFilesystem,
        >(&mut linker, |s| s.filesystem())
        .expect("wasmtime-wasi links");
        // Every name is already defined in that instance: defining it again without shadowing
        // is refused. A wasmtime-wasi that moved one (another interface version) fails here
        // rather than leaving the replacement unused.
        for name in [
            cached_read::READ,
            cached_read::READ_VIA_STREAM,
            cached_open::OPEN_AT,
            cached_stat::STAT,
            cached_stat::STAT_AT,
            cached_stat::METADATA_HASH,
            cached_stat::METADATA_HASH_AT,
        ] {
            let mut instance = linker.instance(FILESYSTEM_TYPES).expect("instance");
            assert!(
                instance.func_wrap(name, |_, (): ()| Ok(())).is_err(),
                "{name}"
            );
        }
        cached_read::add_to_linker(&mut linker).expect("reads replaced");
        cached_open::add_to_linker(&mut linker).expect("opens replaced");
        cached_stat::add_to_linker(&mut linker).expect("metadata replaced");
    }

    /// A directory with `a.txt`, `sub/b.txt`, an inside symlink to `a.txt`, one to a file outside
    /// it, and a FIFO; and the directory outside it.
    pub(super) fn tree() -> (tempfile::TempDir, std::path::PathBuf) {
        let root = tempfile::tempdir().expect("tempdir");
        let inside = root.path().join("inside");
        std::fs::create_dir_all(inside.join("sub")).expect("dirs");
        std::fs::write(inside.join("a.txt"), "alpha\n").expect("a");
        std::fs::write(inside.join("sub/b.txt"), "beta\n").expect("b");
        std::fs::write(root.path().join("secret.txt"), "outside\n").expect("secret");
        std::os::unix::fs::symlink("a.txt", inside.join("to-a")).expect("link in");
        std::os::unix::fs::symlink(root.path().join("secret.txt"), inside.join("out"))
            .expect("link out");
        std::os::unix::fs::symlink("../secret.txt", inside.join("up")).expect("link up");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            inside.join("fifo"),
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .expect("fifo");
        (root, inside)
    }

    /// A store state with nothing but WASI.
    pub(super) struct Wasi {
        ctx: wasmtime_wasi::WasiCtx,
        table: ResourceTable,
        open_files: super::open_files::OpenFiles,
    }

    impl Wasi {
        /// WASI with `dir` as its one preopen, read-only.
        pub(super) fn with_preopen(dir: &std::path::Path) -> Self {
            let mut builder = wasmtime_wasi::WasiCtxBuilder::new();
            builder
                .preopened_dir(dir, "/", wasmtime_wasi::FsPerms::ReadOnly)
                .expect("preopen");
            Self {
                ctx: builder.build(),
                table: ResourceTable::new(),
                open_files: super::open_files::OpenFiles::new(
                    super::open_files::Share::of_this_process(),
                ),
            }
        }
    }

    impl super::open_files::CountsOpenFiles for Wasi {
        fn open_files(&mut self) -> &mut super::open_files::OpenFiles {
            &mut self.open_files
        }
    }

    impl wasmtime_wasi::WasiView for Wasi {
        fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
            wasmtime_wasi::WasiCtxView {
                ctx: &mut self.ctx,
                table: &mut self.table,
            }
        }
    }
}
