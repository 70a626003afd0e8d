//! A write never changes a file that other names share. A hard link inside the workspace may
//! name a file outside it: package managers link their caches into projects (uv's `.venv`,
//! pnpm's `node_modules`), and so does `cp -al`. The preopen checks paths, not inodes, so a
//! write through such a link would change the file outside, and every other project that links
//! it. So a regular file opened for writing that has more than one link is refused
//! (`not-permitted`), and a truncating open is split in two: opened without `O_TRUNC`, checked,
//! and only then truncated, so nothing changes before the check.

use rustix::fs::FileType;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::{DescriptorFlags, ErrorCode, OpenFlags};
use wasmtime_wasi::runtime::spawn_blocking;

/// What an open asked for, with truncation held back until the file is checked.
pub(super) struct HeldBack {
    /// The open flags to open with.
    pub oflags: OpenFlags,
    /// The descriptor flags to open with.
    pub flags: DescriptorFlags,
    /// Whether the file is to be truncated once checked.
    truncate: bool,
}

/// `oflags` and `flags` with `truncate` taken out (the open writes instead, as wasmtime-wasi's
/// truncating open does); a directory open is left as asked, for wasmtime-wasi to refuse.
pub(super) fn hold_back(oflags: OpenFlags, flags: DescriptorFlags) -> HeldBack {
    let truncate = oflags.contains(OpenFlags::TRUNCATE) && !oflags.contains(OpenFlags::DIRECTORY);
    if !truncate {
        return HeldBack {
            oflags,
            flags,
            truncate,
        };
    }
    HeldBack {
        oflags: oflags & !OpenFlags::TRUNCATE,
        flags: flags | DescriptorFlags::WRITE,
        truncate,
    }
}

/// Why an opened file was given back.
pub(super) enum Refused {
    /// The file has other names, or is not what the open may write.
    Code(ErrorCode),
    /// The check or the truncation failed.
    Io(std::io::Error),
}

/// Check `opened` (in `table`): a file opened for writing must have no other name; then
/// truncate it if the open asked to. A refused descriptor is dropped from the table.
pub(super) async fn settle(
    table: &mut ResourceTable,
    opened: Resource<Descriptor>,
    held: &HeldBack,
) -> Result<Resource<Descriptor>, Refused> {
    let file = match table.get(&opened) {
        Ok(Descriptor::File(file)) if file.open_mode.contains(OpenMode::WRITE) => file.file.clone(),
        _ => return Ok(opened),
    };
    let checked = match rustix::fs::fstat(&*file) {
        Ok(stat)
            if stat.st_nlink > 1
                && FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile =>
        {
            Err(Refused::Code(ErrorCode::NotPermitted))
        }
        Ok(_) => Ok(()),
        Err(e) => Err(Refused::Io(e.into())),
    };
    let done = match checked {
        Ok(()) if held.truncate => match spawn_blocking(move || file.set_len(0)).await {
            Ok(()) => Ok(()),
            Err(e) => Err(Refused::Io(e)),
        },
        other => other,
    };
    match done {
        Ok(()) => Ok(opened),
        Err(refused) => {
            // Dropped here, the descriptor closes: the guest never held it.
            let _closed = table.delete(opened);
            Err(refused)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime_wasi::FsPerms;
    use wasmtime_wasi::filesystem::File;

    /// `name` in a fresh directory holding "shared", with a second name when `linked`; settled
    /// as opened with `oflags` and `flags`. Returns the outcome and the text left behind.
    fn open_and_settle(linked: bool, oflags: OpenFlags, flags: DescriptorFlags) -> (bool, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("name.txt");
        std::fs::write(&path, "shared").expect("write");
        if linked {
            std::fs::hard_link(&path, dir.path().join("other.txt")).expect("link");
        }
        let held = hold_back(oflags, flags);
        let writes = held.flags.contains(DescriptorFlags::WRITE);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(writes)
            .open(&path)
            .expect("open");
        let mode = if writes {
            OpenMode::READ | OpenMode::WRITE
        } else {
            OpenMode::READ
        };
        let mut table = ResourceTable::new();
        let opened = table
            .push(Descriptor::File(File::new(
                file,
                FsPerms::ReadWrite,
                mode,
                false,
            )))
            .expect("push");
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let settled = runtime.block_on(settle(&mut table, opened, &held));
        let kept = match settled {
            Ok(opened) => table.get(&opened).is_ok(),
            Err(Refused::Code(ErrorCode::NotPermitted)) => false,
            Err(Refused::Code(code)) => panic!("refused with {code:?}"),
            Err(Refused::Io(e)) => panic!("{e}"),
        };
        (kept, std::fs::read_to_string(&path).expect("read back"))
    }

    #[test]
    fn a_truncating_write_to_a_file_with_other_names_is_refused_before_it_truncates() {
        let (kept, text) = open_and_settle(true, OpenFlags::TRUNCATE, DescriptorFlags::WRITE);
        assert!(!kept);
        assert_eq!(text, "shared");
        let (kept, text) = open_and_settle(true, OpenFlags::empty(), DescriptorFlags::WRITE);
        assert!(!kept);
        assert_eq!(text, "shared");
    }

    #[test]
    fn a_file_of_one_name_is_truncated_and_a_shared_one_still_read() {
        let (kept, text) = open_and_settle(false, OpenFlags::TRUNCATE, DescriptorFlags::WRITE);
        assert!(kept);
        assert_eq!(text, "");
        let (kept, text) = open_and_settle(true, OpenFlags::empty(), DescriptorFlags::READ);
        assert!(kept);
        assert_eq!(text, "shared");
    }
}
