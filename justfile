# chitin — task runner. `just --list` shows the recipes.

set shell := ["bash", "-euo", "pipefail", "-c"]

# First-party tool components, built into build/components (the folder the host loads by default).
components := "echo time json fs memory shell markdown http web-fetch html-to-markdown"
# Test fixtures (hostile and special-purpose components), built into build/fixtures.
fixtures := "test-counter test-hostile test-future-contract test-minimal test-conformance test-conformance-tasks test-invoke test-reader test-lib-text test-lib-files test-composed test-composed-b test-http test-specs test-typed test-mixed"
# The native test run: every workspace crate but the components (built for wasm32-wasip2 instead),
# except fs and memory, whose pure logic has native unit tests. One run builds them all with one
# set of dependency features.
native := prepend("--exclude chitin-", replace_regex(components, '\b(fs|memory) ', '')) + " " + prepend("--exclude chitin-", fixtures)
# How recipes build the `chitin` binary. After `just test` it compiles nothing: host/Cargo.toml
# names the features the test build turns on, and `just test` checks that it still does.
chitin_build := "cargo build --quiet --bin chitin"
# The compile cache `chitin manifest embed` compiles into (it runs each component for its specs).
# Empty: the data directory's, so `just run` then starts on warm entries. `just test` names the
# cache its tests share (target/tmp/compile-cache), so they find every component compiled.
embed_cache := ""
embed := '"${CARGO_TARGET_DIR:-target}/debug/chitin"' + (if embed_cache == "" { "" } else { " --cache-dir " + embed_cache }) + " manifest embed"
# The tests' trust store, build/trusted_keys: the development key for the `chitin` namespace,
# and the fixtures' key for their names only (each made in the data directory on first use).
# Written to a file of its own and moved in, so two builds at once never mix their lines.
write_test_trust := 'staged=$(mktemp build/.trusted_keys.XXXXXX) && { "${CARGO_TARGET_DIR:-target}/debug/chitin" key list | grep -q "^fixtures " || "${CARGO_TARGET_DIR:-target}/debug/chitin" key generate fixtures >&2; "${CARGO_TARGET_DIR:-target}/debug/chitin" key dev; echo "$("${CARGO_TARGET_DIR:-target}/debug/chitin" key export fixtures | cut -d" " -f1,2) chitin ' + replace(prepend("chitin/", fixtures), " ", ",") + '"; } > "$staged" && mv "$staged" build/trusted_keys'

# Build every first-party component for wasm32-wasip2, release, size-optimised, and embed its
# manifest (components/NAME/manifest.toml), into build/components; sign them with the development
# key and publish them into the local default registry.
build-components: wasm-target
    cargo build --quiet --profile component --target wasm32-wasip2 {{ prepend("-p chitin-", components) }}
    {{ chitin_build }}
    rm -rf build/components.staging
    mkdir -p build/components build/components.staging
    for c in {{ components }}; do {{ embed }} "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/component/chitin_${c//-/_}.wasm" "components/$c/manifest.toml" -o "build/components.staging/$c.wasm"; done
    # Sign with the local development key (created in the data directory on first use and
    # trusted there for the `chitin` namespace); build/trusted_keys holds its line for tests.
    {{ write_test_trust }}
    for c in {{ components }}; do "${CARGO_TARGET_DIR:-target}/debug/chitin" sign "build/components.staging/$c.wasm" --key dev; done
    # Moved in once signed, each by a rename: a server or a terminal reading the folder meanwhile
    # sees the old file or the new one, never one half written or not yet signed.
    for c in {{ components }}; do mv -f "build/components.staging/$c.wasm" "build/components/$c.wasm"; done
    rmdir build/components.staging
    # Publish them into the local default registry, so a machine installs the built-ins the
    # same way as any other component (`chitin install chitin/echo`). A rebuild replaces the
    # same version. What the build reports goes to stderr: `just run` hands its stdout to an
    # MCP client, which must see nothing but the server's messages there.
    for c in {{ components }}; do "${CARGO_TARGET_DIR:-target}/debug/chitin" publish "build/components/$c.wasm" --registry local --replace >&2; done
    @ls -l build/components >&2

# Build the test fixture components into build/fixtures, with their manifests, signed by a key
# of their own (`fixtures`, made in the data directory on first use) that only the tests' trust
# store, build/trusted_keys, trusts, and only for the fixtures' names: the data directory's own
# trust store never does, so a fixture (a hostile one, or a shell without approval) copied into
# a folder chitin serves is refused as signed by an unknown key.
build-fixtures: wasm-target
    cargo build --quiet --profile component --target wasm32-wasip2 {{ prepend("-p chitin-", fixtures) }}
    {{ chitin_build }}
    mkdir -p build/fixtures
    # A fixture of typed WIT exports has its WIT beside it, whose doc comments describe its tools.
    for c in {{ fixtures }}; do {{ embed }} "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/component/chitin_${c//-/_}.wasm" "components/$c/manifest.toml" $(test -d "components/$c/wit" && echo --wit "components/$c/wit") -o "build/fixtures/$c.wasm"; done
    {{ write_test_trust }}
    for c in {{ fixtures }}; do "${CARGO_TARGET_DIR:-target}/debug/chitin" sign "build/fixtures/$c.wasm" --key fixtures; done

# Build the third-party examples into build/thirdparty/, each with its manifest embedded and
# unsigned (whoever uses one signs it with a third-party key of their own):
# - thirdparty/wordcount-js (acme/wordcount), JavaScript, by plain `jco componentize` (WASI left
#   on) with jco and componentize-js from npm, pinned by its package-lock.json;
# - thirdparty/textstats-py (acme/textstats), Python, by plain `componentize-py componentize`,
#   pinned by its requirements.txt, in a venv under target/;
# - thirdparty/measure-rs (acme/measure), Rust, plain typed WIT exports (no `chitin:tool`), by
#   plain `cargo build --target wasm32-wasip2 --release` with wit-bindgen from crates.io, pinned
#   by its Cargo.lock; outside the workspace, so the workspace test run never builds it.
# Every step is cached: a tool set is installed only when its pin changed, and a component is
# rebuilt only when its sources, the WIT contracts or the pin changed (a stamp holds their hash;
# cargo keeps its own).
build-thirdparty: wasm-target
    {{ chitin_build }}
    mkdir -p build/thirdparty
    # `npm install` with the lock beside it installs exactly the locked tree (`npm ci` would refuse
    # the lock when the registry lacks other platforms' optional binaries); the stamp is the lock.
    js="${CARGO_TARGET_DIR:-target}/thirdparty-js"; if ! cmp -s thirdparty/wordcount-js/package-lock.json "$js/installed.lock"; then mkdir -p "$js" && cp thirdparty/wordcount-js/package.json thirdparty/wordcount-js/package-lock.json "$js/" && npm install --prefix "$js" --no-audit --no-fund --loglevel=error && cp thirdparty/wordcount-js/package-lock.json "$js/installed.lock"; fi
    js="${CARGO_TARGET_DIR:-target}/thirdparty-js"; sum="$(cat thirdparty/wordcount-js/wordcount.js thirdparty/wordcount-js/package-lock.json $(find wit -name '*.wit' | sort) | sha256sum)"; if [ "$sum" != "$(cat "$js/built.sum" 2>/dev/null)" ] || [ ! -e "$js/wordcount-js.wasm" ]; then "$js/node_modules/.bin/jco" componentize "$PWD/thirdparty/wordcount-js/wordcount.js" --wit "$PWD/wit" --world-name tool-component -o "$js/wordcount-js.wasm" && echo "$sum" > "$js/built.sum"; fi
    {{ embed }} "${CARGO_TARGET_DIR:-target}/thirdparty-js/wordcount-js.wasm" thirdparty/wordcount-js/manifest.toml -o build/thirdparty/wordcount-js.wasm
    # componentize-py is one pip wheel (its own CPython inside): a venv, reinstalled when the pin changes.
    py="${CARGO_TARGET_DIR:-target}/thirdparty-py"; if ! cmp -s thirdparty/textstats-py/requirements.txt "$py/installed.txt"; then rm -rf "$py/venv" && mkdir -p "$py" && python3 -m venv "$py/venv" && "$py/venv/bin/pip" install --quiet --disable-pip-version-check -r thirdparty/textstats-py/requirements.txt && cp thirdparty/textstats-py/requirements.txt "$py/installed.txt"; fi
    py="${CARGO_TARGET_DIR:-target}/thirdparty-py"; sum="$(cat thirdparty/textstats-py/app.py thirdparty/textstats-py/requirements.txt $(find wit -name '*.wit' | sort) | sha256sum)"; if [ "$sum" != "$(cat "$py/built.sum" 2>/dev/null)" ] || [ ! -e "$py/textstats-py.wasm" ]; then "$py/venv/bin/componentize-py" -d wit -w tool-component componentize -p thirdparty/textstats-py app -o "$py/textstats-py.wasm" && echo "$sum" > "$py/built.sum"; fi
    {{ embed }} "${CARGO_TARGET_DIR:-target}/thirdparty-py/textstats-py.wasm" thirdparty/textstats-py/manifest.toml -o build/thirdparty/textstats-py.wasm
    # Its own target directory: the workspace's dependency features never mix with its own.
    cargo build --quiet --locked --release --target wasm32-wasip2 --manifest-path thirdparty/measure-rs/Cargo.toml --target-dir "${CARGO_TARGET_DIR:-target}/thirdparty-rs"
    # The built component keeps no doc comments: `--wit` reads them from its WIT sources.
    {{ embed }} "${CARGO_TARGET_DIR:-target}/thirdparty-rs/wasm32-wasip2/release/measure_rs.wasm" thirdparty/measure-rs/manifest.toml --wit thirdparty/measure-rs/wit -o build/thirdparty/measure-rs.wasm
    @ls -l build/thirdparty

# Build what is needed and run chitin's main job: serve the built-in components over MCP on
# stdio (connect an MCP client to it; see the README). The banner on stderr lists the tools.
run: build-components
    {{ chitin_build }}
    exec "${CARGO_TARGET_DIR:-target}"/debug/chitin serve --components build/components

# Run every test: unit, host integration, end-to-end, the guest SDK's own, and MCP clients.
test:
    cargo test --quiet --workspace {{ native }} --no-run
    "{{ just_executable() }}" test-shared-build
    "{{ just_executable() }}" embed_cache="${CARGO_TARGET_DIR:-target}/tmp/compile-cache" test-built

# The tests, once the test build (with the `chitin` binary) is there.
[private]
test-built: build-components build-fixtures build-thirdparty && test-mcp test-conformance test-probe
    cargo test --workspace {{ native }}

# MCP over stdio, with the official MCP Python SDK as an independent client (in a venv under target/).
test-mcp: build-components build-fixtures
    {{ chitin_build }}
    test -x "${CARGO_TARGET_DIR:-target}/mcp-venv/bin/python" || python3 -m venv "${CARGO_TARGET_DIR:-target}/mcp-venv"
    "${CARGO_TARGET_DIR:-target}/mcp-venv/bin/pip" install --quiet --disable-pip-version-check -r tests/mcp/requirements.txt
    "${CARGO_TARGET_DIR:-target}/mcp-venv/bin/python" -m pytest -q -p no:cacheprovider tests/mcp

# The official MCP conformance suite (server scenarios) against `chitin serve --http` with the
# conformance fixture component, twice: the 2025-era suite (0.1.16) and the scenarios spec
# 2026-07-28 requires (0.2.0-alpha.12); Node 22 and the suites come from npm, pinned, under target/.
test-conformance: build-fixtures
    {{ chitin_build }}
    tests/mcp/conformance.sh
    tests/mcp/conformance.sh --requirements 2026-07-28

# Make sure the wasm32-wasip2 target of the pinned toolchain is installed.
[private]
wasm-target:
    @rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

# The performance goals, measured in one release run against their references (std::fs::read,
# reqwest, `sh -c true`, native stdio and HTTP JSON-RPC floors, wasmtime alone), printed as one
# table; under it, parts of four rows' work measured alone.
bench: build-components
    cargo bench -p chitin-host --bench goals

# The detailed benchmarks behind the goals (allocator settings, phases, memory, compose, leak scan).
bench-detail: build-components build-fixtures
    cargo bench -p chitin-host --bench runtime
    cargo bench -p chitin-host --bench process
    cargo bench -p chitin-host --bench fs_memory
    cargo bench -p chitin-host --bench compose
    cargo bench -p chitin-host --bench http
    cargo bench -p chitin-host --bench shared_state

# MCP round trips (stdio and HTTP, p50/p99, calls/s with 8 HTTP clients), printed as a table.
bench-mcp: build-components
    cargo bench -p chitin-host --bench mcp

# Format and lint (the CI gate).
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets {{ native }} -- -D warnings
    cargo clippy --profile component --target wasm32-wasip2 {{ prepend("-p chitin-", components) }} {{ prepend("-p chitin-", fixtures) }} -- -D warnings

# The test-only capability, which exists only with its feature (never in a release build). It
# runs last: building it rebuilds the `chitin` binary with the feature, which the client tests
# above must not run.
[private]
test-probe:
    cargo test --workspace {{ native }} --features chitin-host/test-capability --test probe
    # Put the binary without the probe back (its build is still there; nothing compiles).
    {{ chitin_build }}

# `just run` after `just test` must not compile the tree again: right after the test build, a plain
# `cargo build --bin chitin` must find every unit it needs already built.
[private]
test-shared-build:
    @stale="$(cargo build --bin chitin --message-format=json-render-diagnostics | sed -n 's/^{"reason":"compiler-artifact","package_id":"[^"#]*#\([^"]*\)".*"fresh":false.*/\1/p' | sort -u)"; \
    if [ -n "$stale" ]; then \
        echo "a plain \`cargo build --bin chitin\` (what \`just run\` does) compiled these again after the test build:" >&2; echo "$stale" >&2; \
        echo "a test dependency turns on features of theirs that chitin's own dependencies do not; name them in host/Cargo.toml under \"Features the test build turns on\" (\`cargo tree -e features -i <package>\` shows who turns them on)" >&2; \
        exit 1; \
    fi
