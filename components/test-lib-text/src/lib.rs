//! Test fixture: a capability-free library exporting `chitin:test-text/text`.

use std::sync::atomic::{AtomicU32, Ordering};

wit_bindgen::generate!({ path: "wit", world: "library" });

static CALLS: AtomicU32 = AtomicU32::new(0);

struct Text;

impl exports::chitin::test_text::text::Guest for Text {
    fn upper(s: String) -> String {
        CALLS.fetch_add(1, Ordering::Relaxed);
        s.to_uppercase()
    }

    fn calls() -> u32 {
        CALLS.fetch_add(1, Ordering::Relaxed) + 1
    }
}

export!(Text);
