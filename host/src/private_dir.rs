//! Directories only their owner reads: the data directory, the compile cache, the keys. A
//! directory is made private by taking permissions away (group and others), never by adding
//! any: an operator's `chmod 500` stays, and a directory already private is left untouched, so a
//! read-only mount of one starts.

use std::path::Path;

/// Create `dir` (and its parents), and take group's and others' permissions from it.
pub fn create(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir)?.permissions().mode() & 0o7777;
        let private = mode & 0o700;
        if mode != private {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(private)).map_err(
                |e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("cannot take group's and others' access away (mode {mode:o}): {e}"),
                    )
                },
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(dir: &Path) -> u32 {
        std::fs::metadata(dir).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_or_open_directory_is_made_owner_only() {
        let root = tempfile::tempdir().unwrap();
        let new = root.path().join("a/b");
        create(&new).unwrap();
        assert_eq!(mode(&new), 0o700);
        std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o755)).unwrap();
        create(&new).unwrap();
        assert_eq!(mode(&new), 0o700);
    }

    #[test]
    fn an_owner_only_directory_keeps_what_its_owner_took_away() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ro");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o500)).unwrap();
        create(&dir).unwrap();
        assert_eq!(mode(&dir), 0o500, "no permission is added back");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}
