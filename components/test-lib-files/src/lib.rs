//! Test fixture: a library exporting `chitin:test-files/files`, reading workspace files under
//! its own files grant.

use std::sync::atomic::{AtomicU32, Ordering};

wit_bindgen::generate!({ path: "wit", world: "library" });

static CALLS: AtomicU32 = AtomicU32::new(0);

struct Files;

impl exports::chitin::test_files::files::Guest for Files {
    fn read(path: String) -> Result<String, String> {
        CALLS.fetch_add(1, Ordering::Relaxed);
        std::fs::read_to_string(std::path::Path::new("/workspace").join(&path))
            .map_err(|e| format!("cannot read `{path}`: {e}"))
    }

    fn calls() -> u32 {
        CALLS.fetch_add(1, Ordering::Relaxed) + 1
    }
}

export!(Files);
