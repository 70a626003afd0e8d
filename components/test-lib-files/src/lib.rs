//! Test fixture: a library exporting `chitin:test-files/files`, reading workspace files,
//! sending GETs and running `/bin/sh` under grants of its own.

use std::sync::atomic::{AtomicU32, Ordering};

use chitin_sdk::http;

wit_bindgen::generate!({ path: "wit", world: "library" });

/// Bindings of the host's process interface, which this library imports.
mod host {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package chitin:test-files-imports;
                 world imports { import chitin:host/process@0.1.0; }",
        world: "chitin:test-files-imports/imports",
        generate_all,
    });
}

use host::chitin::host::process;

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

    fn fetch(url: String) -> Result<String, String> {
        let request = http::Request {
            method: "GET".into(),
            url,
            headers: Vec::new(),
            body: None,
            timeout_ms: None,
            max_body_bytes: 64 * 1024,
        };
        let response = http::send(&request).map_err(|e| format!("{e:?}"))?;
        Ok(String::from_utf8_lossy(&response.body).into_owned())
    }

    fn run(command: String) -> Result<String, String> {
        let out = process::run(&process::Command {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), command],
            cwd: None,
            stdin: None,
            timeout_ms: Some(20_000),
            env: Vec::new(),
        })
        .map_err(|e| format!("{e:?}"))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

export!(Files);
