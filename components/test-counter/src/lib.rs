//! Test fixture: `count` returns how many calls this instance has served, so the host can prove
//! each call gets a fresh instance (the answer is then always 1).

use std::sync::atomic::{AtomicU32, Ordering};

use chitin_sdk::prelude::*;

static COUNT: AtomicU32 = AtomicU32::new(0);

#[derive(Serialize, JsonSchema)]
struct CountOutput {
    /// Calls served by this instance, this one included
    count: u32,
}

fn count(_: NoArgs) -> Result<CountOutput, ToolError> {
    Ok(CountOutput {
        count: COUNT.fetch_add(1, Ordering::Relaxed) + 1,
    })
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("count", "Counts the calls this instance has served.", count)
            .output_schema::<CountOutput>(),
    ]
}

chitin_sdk::export_tools!(tools);
