//! The process's heap: mimalloc as the global allocator, and freed memory handed back to the
//! OS once a load is done.
//!
//! Every call allocates and frees some fifty blocks (instantiation, JSON, the MCP message).
//! glibc's malloc spent 22 % of an MCP call's instructions on them, mimalloc a third of that
//! (`docs/performance.md`). Set here so the binary, the tests and the benchmarks all use it.
//! Built without transparent huge pages (`no_thp`): with them an idle server held ~10 MiB more
//! for as long as it ran, against ~8 ms once at its start, and no measured gain in a call.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Return what a load freed to the OS. mimalloc gives back a thread's free pages only when that
/// thread allocates again, so a server kept the peak of its start for good: the buffers of
/// every thread that compiled (rayon's, when `compiled`) and of the loading thread.
pub fn release_after_load(compiled: bool) {
    if compiled {
        // SAFETY: `mi_collect` takes no pointer and may be called from any thread at any time.
        rayon::broadcast(|_| unsafe { libmimalloc_sys::mi_collect(true) });
    }
    // SAFETY: as above.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    const CHILD: &str = "CHITIN_HEAP_TEST_CHILD";
    const BLOCK: usize = 64 << 10;
    const BLOCKS: usize = 256;

    fn page_size() -> usize {
        // SAFETY: `sysconf` reads a constant of the system.
        usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).expect("a page size")
    }

    /// Pages of `blocks` (each `BLOCK` bytes from its address) resident in memory now.
    fn resident(blocks: &[usize]) -> usize {
        let page = page_size();
        let mut vec = vec![0u8; BLOCK / page + 1];
        blocks
            .iter()
            .map(|&at| {
                let start = at / page * page;
                // SAFETY: `vec` has a byte for each page of the range, which is mapped (a block
                // of this process's heap, freed but not unmapped: mimalloc keeps its arena).
                let rc =
                    unsafe { libc::mincore(start as *mut _, at + BLOCK - start, vec.as_mut_ptr()) };
                assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
                vec.iter().filter(|&&b| b & 1 == 1).count()
            })
            .sum()
    }

    /// Run in a process of its own (the test binary again, this test alone), so no other
    /// test's allocations take or touch the pages it frees.
    #[test]
    fn a_load_hands_the_compile_threads_freed_pages_back() {
        if std::env::var_os(CHILD).is_none() {
            let exe = std::env::current_exe().expect("the test binary");
            let out = Command::new(exe)
                .args([
                    "--exact",
                    "heap::tests::a_load_hands_the_compile_threads_freed_pages_back",
                ])
                .args(["--nocapture", "--test-threads=1"])
                .env(CHILD, "1")
                .output()
                .expect("the test binary runs");
            assert!(
                out.status.success(),
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        // What a compile does on rayon's threads: blocks written, then freed by the same thread.
        let blocks: Vec<usize> = rayon::broadcast(|_| {
            let held: Vec<Vec<u8>> = (0..BLOCKS).map(|i| vec![i as u8 | 1; BLOCK]).collect();
            let at: Vec<usize> = held.iter().map(|b| b.as_ptr() as usize).collect();
            drop(held);
            at
        })
        .concat();
        let before = resident(&blocks);
        super::release_after_load(true);
        let after = resident(&blocks);
        let pages = blocks.len() * BLOCK / page_size();
        assert!(
            before > pages / 2,
            "freed blocks were not kept ({before} of {pages} pages)"
        );
        assert!(
            after < pages / 10,
            "{after} of {pages} freed pages still resident"
        );
    }
}
